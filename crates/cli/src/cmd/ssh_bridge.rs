//! `longhaul ssh-bridge ADDR:PORT` (hidden): run by ssh on the far host for each
//! connection a copy carries through ssh (when the far longhaul's port cannot be reached
//! directly); joins its stdin and stdout to a TCP connection to that port. Not for people
//! to run.

use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `longhaul ssh-bridge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The far longhaul's address and port, as this host reaches it; `-`: write one `+`
    /// (the login is done), then the first line of stdin says it.
    pub target: String,
}

/// Runs `longhaul ssh-bridge`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The descriptors themselves: std's stdout is line-buffered, and would hold a
    // message's tail that holds no newline until more came (a session's last answer).
    let raw = |fd: std::os::fd::BorrowedFd<'_>| -> anyhow::Result<std::fs::File> {
        Ok(std::fs::File::from(
            fd.try_clone_to_owned()
                .context("duplicating stdin or stdout")?,
        ))
    };
    let mut input = raw(std::io::stdin().as_fd())?;
    let mut output = raw(std::io::stdout().as_fd())?;
    let target: SocketAddr = if args.target == "-" {
        // The relay counts this ssh's login done when it reads this.
        output
            .write_all(&[longhaul_engine::ssh::relay::BRIDGE_UP])
            .context("longhaul ssh-bridge: saying it is up")?;
        longhaul_engine::ssh::bridge::read_target(&mut input)
            .context("longhaul ssh-bridge: reading the target from stdin")?
    } else {
        args.target
            .parse()
            .with_context(|| format!("longhaul ssh-bridge {:?}: not an ADDR:PORT", args.target))?
    };
    longhaul_engine::ssh::bridge::bridge(target, input, output)
        .with_context(|| format!("longhaul ssh-bridge {target}"))?;
    Ok(ExitCode::SUCCESS)
}
