//! `longhaul plan`: the figures a path needs, computed by `longhaul-model`.

use std::process::ExitCode;

/// Arguments of `longhaul plan`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `longhaul plan`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("longhaul plan is not built yet")
}
