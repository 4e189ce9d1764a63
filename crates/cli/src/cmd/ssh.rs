//! The options of ssh start-up shared by `cp` and `bench` (`-e/--rsh`,
//! `--remote-longhaul`, `--port-range`), and `--port-range`'s parser, which
//! `ssh-server` uses too.

use std::sync::Arc;

use longhaul_engine::ssh::launch::{DataPath, Notice, SshOptions};

/// How to start the far end over ssh.
#[derive(clap::Args, Debug, Clone)]
pub struct SshArgs {
    /// The ssh command with its options, split like rsync's -e (quotes allowed), e.g.
    /// -e "ssh -p 2222 -i ~/.ssh/lab -o StrictHostKeyChecking=accept-new". Default: ssh
    /// (so ~/.ssh/config, agents, ProxyJump and keys work as for ssh).
    #[arg(short = 'e', long = "rsh", value_name = "COMMAND")]
    pub rsh: Option<String>,
    /// The longhaul on the far host, run by its shell (like rsync's --rsync-path), e.g.
    /// /opt/longhaul/bin/longhaul or "~/bin/longhaul"; nothing is uploaded then. Default:
    /// this binary's copy in the far user's ~/.cache/longhaul, else `longhaul` on the far
    /// PATH, else (or when that one speaks another protocol) this binary is uploaded over
    /// ssh into that cache first.
    #[arg(long, value_name = "PATH")]
    pub remote_longhaul: Option<String>,
    /// Never upload this binary to the far host (the copy then fails where the far host
    /// has no longhaul of this protocol, saying so).
    #[arg(long)]
    pub no_upload: bool,
    /// Ports the far longhaul may listen on, for a firewall that opens only those (the
    /// client connects to it directly over TCP); default: any free port.
    #[arg(long, value_name = "LO-HI", value_parser = port_range)]
    pub port_range: Option<(u16, u16)>,
    /// Carry every connection through ssh (one ssh connection per stream, `ssh -W`)
    /// instead of connecting to the far longhaul's port; what a copy does by itself when
    /// that port cannot be reached. Slower (an ssh copier's rate), for hosts that let
    /// only ssh through.
    #[arg(long)]
    pub via_ssh: bool,
}

impl SshArgs {
    /// The engine's options, for a session of `streams` data streams (`--streams`).
    pub fn options(&self, streams: Option<u16>) -> SshOptions {
        SshOptions {
            streams,
            rsh: self.rsh.clone(),
            remote_longhaul: self.remote_longhaul.clone(),
            upload: !self.no_upload,
            port_range: self.port_range,
            data_path: if self.via_ssh {
                DataPath::Ssh
            } else {
                DataPath::Auto
            },
            // On stderr in every mode: stdout may be JSON Lines.
            notice: Notice(Some(Arc::new(|t: &str| eprintln!("longhaul: {t}")))),
            ..SshOptions::default()
        }
    }
}

/// `--port-range LO-HI` (or a single port): 1..=65535, LO <= HI.
pub fn port_range(s: &str) -> Result<(u16, u16), String> {
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    let port = |p: &str| match p.trim().parse::<u16>() {
        Ok(0) | Err(_) => Err(format!(
            "{s:?} is not a port range LO-HI of ports 1..=65535 (e.g. 50000-50100)"
        )),
        Ok(n) => Ok(n),
    };
    let (lo, hi) = (port(lo)?, port(hi)?);
    if lo > hi {
        return Err(format!(
            "{s:?}: the range is empty ({lo} > {hi}); write LO-HI"
        ));
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges() {
        assert_eq!(port_range("50000-50100"), Ok((50000, 50100)));
        assert_eq!(port_range("6000"), Ok((6000, 6000)));
        for bad in ["", "0-10", "10-5", "a-b", "1-65536", "-"] {
            assert!(port_range(bad).is_err(), "{bad}");
        }
    }
}
