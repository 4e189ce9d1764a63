//! `longhaul token`: prints a fresh random token (32 bytes from the OS's random source, as
//! hex: what `longhaul serve` puts in the default token file), or writes it to a new file
//! with mode 0600 (`--out FILE`, never overwriting one).

use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `longhaul token`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write the token to FILE (created with mode 0600; an existing file is left alone
    /// and the command fails) instead of printing it.
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
}

/// Runs `longhaul token`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match &args.out {
        Some(path) => {
            longhaul_engine::token::write_new_token_file(path)?;
            eprintln!(
                "longhaul token: wrote a new token to {} (mode 0600); pass it to both ends \
                 with --token-file",
                path.display()
            );
        }
        None => {
            let hex =
                longhaul_engine::token::fresh_token_hex().context("no random bytes from the OS")?;
            println!("{hex}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
