//! `longhaul ssh-server` (hidden): the far end that `cp` and `bench` start over ssh, as
//! `rsync --server` is for rsync. Not for people to run: it prints one ready line on
//! stdout, serves its client's one session with the ssh user's own files and exits — also
//! when its stdin ends (the ssh connection closed) or when its client has not proved the
//! token within 60 s. Connections that fail the proof end nothing.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use longhaul_engine::ssh::dial_back::DialBack;
use longhaul_engine::ssh::far::{run_far_end, watch_stdin, FarConfig, FarOutcome};
use longhaul_engine::ssh::FAR_CONNECT_TIMEOUT;

use super::ssh::port_range;

/// Arguments of `longhaul ssh-server`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Listen on the first free port of LO-HI instead of an ephemeral port.
    #[arg(long, value_name = "LO-HI", value_parser = port_range)]
    pub port_range: Option<(u16, u16)>,
    /// The addresses the client resolved this host's name to: when this host's address
    /// on the ssh connection is one of them, listen on that address alone.
    #[arg(long, value_name = "ADDR,...", value_delimiter = ',')]
    pub client_dials: Vec<std::net::IpAddr>,
}

/// Runs `longhaul ssh-server`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The ssh channel is the lifeline: when it closes, stop at once. What a session wrote
    // stays as it is (partial files and resume records), for the next run to resume.
    let dial_back = DialBack::from_env();
    watch_stdin(dial_back.clone(), || std::process::exit(3)).context("watching stdin")?;
    // Session log lines would reach the user's terminal through ssh; the client reports
    // what happened, so only failures are said here.
    let log: longhaul_engine::daemon::server::LogFn = Arc::new(|_line: &str| {});
    let cfg = FarConfig {
        port_range: args.port_range,
        connect_timeout: FAR_CONNECT_TIMEOUT,
        client_dials: args.client_dials,
        dial_back,
    };
    let outcome = run_far_end(&cfg, &mut std::io::stdout(), log).context("longhaul ssh-server")?;
    Ok(match outcome {
        FarOutcome::Served => ExitCode::SUCCESS,
        FarOutcome::Failed(e) => {
            eprintln!("longhaul ssh-server: the session failed: {e}");
            ExitCode::from(1)
        }
        FarOutcome::NoClient => {
            eprintln!(
                "longhaul ssh-server: no client proved the session's token within {} s; exiting",
                FAR_CONNECT_TIMEOUT.as_secs()
            );
            ExitCode::from(1)
        }
    })
}
