//! `longhaul man`: manual pages (roff, section 1) for longhaul and each of its commands,
//! generated from the CLI's own definition: `longhaul.1` on stdout, or with `--out DIR`
//! one file per command (`longhaul.1`, `longhaul-cp.1`, ...) for a package or
//! `/usr/local/share/man/man1`. Read one at once with `longhaul man | man -l -`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `longhaul man`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write a page per command into DIR (created if missing; pages there are replaced)
    /// instead of printing longhaul.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Runs `longhaul man` for the CLI `cli`.
pub fn run(args: Args, cli: clap::Command) -> anyhow::Result<ExitCode> {
    match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(cli, dir)
                .with_context(|| format!("writing the manual pages into {}", dir.display()))?;
            eprintln!(
                "longhaul man: wrote the manual pages into {}",
                dir.display()
            );
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cli)
                .render(&mut page)
                .context("rendering longhaul.1")?;
            let page = String::from_utf8(page).context("longhaul.1 is not UTF-8")?;
            // A closed stdout (`| head`) is the reader's choice, not an error.
            super::common::emit_text(&page).context("writing longhaul.1")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
