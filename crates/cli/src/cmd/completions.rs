//! `longhaul completions SHELL`: the shell's completion script for longhaul, generated from
//! the CLI's own definition (so it never lags a flag), on stdout. Install it where the shell
//! looks, e.g. `longhaul completions bash > /etc/bash_completion.d/longhaul`.

use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `longhaul completions`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// Runs `longhaul completions` for the CLI `cli`.
pub fn run(args: Args, cli: clap::Command) -> anyhow::Result<ExitCode> {
    let mut cli = visible(&cli);
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "longhaul", &mut script);
    let script = String::from_utf8(script).context("the completion script is not UTF-8")?;
    // A closed stdout (`| head`) is the reader's choice, not an error.
    super::common::emit_text(&script).context("writing the completion script")?;
    Ok(ExitCode::SUCCESS)
}

/// `cli` without its hidden commands (the far end of ssh runs): some shells' generators
/// offer every subcommand, hidden or not.
fn visible(cli: &clap::Command) -> clap::Command {
    let mut out =
        clap::Command::new("longhaul").subcommand_required(cli.is_subcommand_required_set());
    if let Some(about) = cli.get_about() {
        out = out.about(about.clone());
    }
    if cli.get_version().is_some() {
        out = out.version(env!("CARGO_PKG_VERSION"));
    }
    out.subcommands(cli.get_subcommands().filter(|c| !c.is_hide_set()).cloned())
}
