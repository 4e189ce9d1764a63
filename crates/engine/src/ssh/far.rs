//! The far end of an ssh start-up, `longhaul ssh-server` (what `rsync --server` is to
//! rsync): started by the client through the user's ssh, with the ssh user's rights.
//!
//! It binds a port (ephemeral, or the first free one of `--port-range`), makes a one-time
//! token, prints the [`SshReady`] line on stdout and serves exactly one bench or cp
//! session with the user's own files ([`ServedFiles::User`]), then exits. It also exits
//! when its stdin ends (the ssh channel closed: the client finished, died or was killed)
//! and when its client has not proved the token within [`super::FAR_CONNECT_TIMEOUT`].
//! Partial files and resume manifests stay where they are, for the next run to resume.
//!
//! Anyone on the far host's network can reach the port. A connection that fails TLS, its
//! hello or the token proof is dropped and ends nothing: neither the far end nor the
//! session under way, and it does not keep the far end waiting past its idle limit. Only
//! the session of the client that proved the one-time token ends it.
//!
//! It listens on one address when it knows the one its client will dial: its own address
//! on the ssh connection (`SSH_CONNECTION`), when the client resolved the host's name to
//! that very address (`--client-dials`, so no proxy, jump host or NAT is in the way).
//! Otherwise it listens on every interface (`[::]`, IPv4 too) and the client tries the
//! announced address, then the host's.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use longhaul_proto::{SshReady, Token, PROTOCOL_VERSION};
use longhaul_sys::served_root::ServedRoot;

use crate::daemon::server::LogFn;
use crate::daemon::transfer::ServedFiles;
use crate::daemon::ServeError;
use crate::daemon::{ServeConfig, Server};
use crate::transport::tls::ServerTls;

use super::dial_back::{DialBack, MAX_LINE};

/// How the far end runs.
#[derive(Debug, Clone)]
pub struct FarConfig {
    /// Ports to listen on, first free one wins (`None`: an ephemeral port).
    pub port_range: Option<(u16, u16)>,
    /// How long to wait for the client to prove the token.
    pub connect_timeout: Duration,
    /// The addresses the client resolved the far host's name to (`ssh-server
    /// --client-dials`); see [`listen_address`].
    pub client_dials: Vec<IpAddr>,
    /// Connections made back to the client when it asks ([`super::dial_back`]): told
    /// where the server listens once it is bound.
    pub dial_back: Arc<DialBack>,
}

/// How the far end ended (it may also end the process itself, see the module docs).
#[derive(Debug)]
pub enum FarOutcome {
    /// The session of the client that proved the token ran to its end.
    Served,
    /// That session failed.
    Failed(ServeError),
    /// No client proved the token in time.
    NoClient,
}

/// Runs the far end: binds, announces itself on `out`, serves its client's one session
/// (or gives up when the client does not come). Watching stdin is the caller's
/// ([`watch_stdin`]), since ending the process is.
pub fn run_far_end(cfg: &FarConfig, out: &mut dyn Write, log: LogFn) -> io::Result<FarOutcome> {
    let mut secret = [0u8; 32];
    getrandom::getrandom(&mut secret).map_err(|e| io::Error::other(e.to_string()))?;
    // A key and certificate for this session only; the client pins the fingerprint it
    // reads from the ssh channel, which only ssh's own authentication protects.
    let tls = ServerTls::ephemeral().map_err(io::Error::other)?;
    let cert = tls.fingerprint().0;
    let ssh_addr = std::env::var("SSH_CONNECTION")
        .ok()
        .and_then(|v| ssh_connection_addr(&v));
    let listen = listen_address(ssh_addr, &cfg.client_dials);
    let ready = |port| SshReady {
        proto: PROTOCOL_VERSION,
        port,
        addr: ssh_addr,
        token: secret,
        cert: Some(cert),
    };
    let token =
        Token::new(ready(1).token_hex().as_bytes()).map_err(|e| io::Error::other(e.to_string()))?;
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .map_or_else(std::env::current_dir, Ok)?;
    let files = ServedFiles::User {
        root: Arc::new(ServedRoot::open_unconfined()?),
        home,
    };
    let server = bind(cfg, listen, token, files, tls, log)?;
    let port = server.local_addr()?.port();
    cfg.dial_back.serving(server.injector());
    out.write_all(ready(port).encode().as_bytes())?;
    out.flush()?;

    // Give up when the client does not come: stop the accept loop unless a client proved
    // the token (strangers who fail it do not count).
    let stop = Arc::new(AtomicBool::new(false));
    let begun = server.sessions_proved();
    let before = begun();
    let idle = Arc::new(AtomicBool::new(false));
    {
        let (stop, idle, limit) = (stop.clone(), idle.clone(), cfg.connect_timeout);
        std::thread::Builder::new()
            .name("lh-far-idle".into())
            .spawn(move || {
                std::thread::sleep(limit);
                if begun() == before {
                    idle.store(true, Ordering::Relaxed);
                    stop.store(true, Ordering::Relaxed);
                }
            })?;
    }
    let outcome = server.serve(Some(stop))?;
    Ok(match outcome {
        _ if idle.load(Ordering::Relaxed) => FarOutcome::NoClient,
        Ok(()) => FarOutcome::Served,
        Err(e) => FarOutcome::Failed(e),
    })
}

/// Starts a thread that reads stdin to its end (the ssh channel closing), then calls
/// `on_end` (which ends the process). Each line on the way is a request to connect back
/// to the client ([`super::dial_back`]); anything else is ignored, as is a line longer
/// than [`super::dial_back::MAX_LINE`].
pub fn watch_stdin(
    dial_back: Arc<DialBack>,
    on_end: impl FnOnce() + Send + 'static,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("lh-far-stdin".into())
        .spawn(move || {
            let mut stdin = io::stdin().lock();
            let mut buf = [0u8; 512];
            let mut line: Vec<u8> = Vec::new();
            let mut overlong = false;
            while let Ok(n @ 1..) = stdin.read(&mut buf) {
                for &b in &buf[..n] {
                    if b != b'\n' {
                        overlong |= line.len() >= MAX_LINE;
                        if !overlong {
                            line.push(b);
                        }
                        continue;
                    }
                    if !overlong {
                        dial_back.command(&String::from_utf8_lossy(&line));
                    }
                    line.clear();
                    overlong = false;
                }
            }
            on_end();
        })
        .map(drop)
}

/// Where to listen: this host's address on the ssh connection when the client will dial
/// exactly that (it resolved the host's name to it: no proxy, jump host or NAT between),
/// else every interface (`[::]`, IPv4 too).
pub fn listen_address(ssh_addr: Option<IpAddr>, client_dials: &[IpAddr]) -> IpAddr {
    match ssh_addr {
        Some(ip) if !ip.is_unspecified() && client_dials.contains(&ip) => ip,
        _ => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// Binds `ip` on an ephemeral port or the first free one of the range.
fn bind(
    cfg: &FarConfig,
    ip: IpAddr,
    token: Token,
    files: ServedFiles,
    tls: ServerTls,
    log: LogFn,
) -> io::Result<Server> {
    let config = |port| ServeConfig {
        listen: SocketAddr::new(ip, port),
        keyring: token.clone().into(),
        once: true,
        rx_rate_bps: None,
        files: files.clone(),
        tls: tls.clone(),
        // The user's own files with the user's rights; special bits dropped as a
        // daemon drops them (cp --keep-setuid keeps them on pulls).
        keep_setuid: false,
        caps: Default::default(),
        relay_from: Default::default(),
    };
    let Some((lo, hi)) = cfg.port_range else {
        return Server::bind(config(0), log);
    };
    let mut last = None;
    for port in lo..=hi {
        match Server::bind(config(port), log.clone()) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "every port of --port-range {lo}-{hi} is in use on this host ({}); give a wider range",
            last.map_or_else(|| "empty range".to_string(), |e| e.to_string())
        ),
    ))
}

/// This host's address on the ssh connection: the third field of `SSH_CONNECTION`
/// (`client_ip client_port server_ip server_port`).
fn ssh_connection_addr(v: &str) -> Option<IpAddr> {
    let ip = v.split_whitespace().nth(2)?;
    // A link-local IPv6 address may carry a scope (`fe80::1%eth0`) useless to the client;
    // `sshd -i` on a pipe says `UNKNOWN`.
    ip.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listens_on_the_ssh_address_only_when_the_client_dials_it() {
        let any = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
        let ssh = ssh_connection_addr("10.0.0.1 51234 10.0.0.2 22");
        assert_eq!(ssh, Some("10.0.0.2".parse().unwrap()));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // The client resolved the host to the address ssh reached: that one alone.
        assert_eq!(listen_address(ssh, &[ip("10.0.0.2")]), ip("10.0.0.2"));
        assert_eq!(
            listen_address(ssh, &[ip("2001:db8::2"), ip("10.0.0.2")]),
            ip("10.0.0.2")
        );
        // It dials another address (NAT, a jump host), or did not say: everywhere.
        assert_eq!(listen_address(ssh, &[ip("192.0.2.7")]), any);
        assert_eq!(listen_address(ssh, &[]), any);
        // No address known (not started by sshd, or `sshd -i` on a pipe).
        assert_eq!(listen_address(None, &[ip("10.0.0.2")]), any);
        assert_eq!(ssh_connection_addr("UNKNOWN 65535 UNKNOWN 65535"), None);
        assert_eq!(ssh_connection_addr("fe80::1%eth0 5 fe80::2%eth0 22"), None);
        assert_eq!(ssh_connection_addr(""), None);
    }
}
