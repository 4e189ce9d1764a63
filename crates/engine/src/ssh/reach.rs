//! How a session's connections reach the far end once it is ready: its TCP port directly
//! when that answers, else through ssh ([`super::relay`]), with the streams' ssh logins
//! overlapped with the wait wherever that can be done without logging in for nothing.
//!
//! - `--via-ssh`: the logins started with the far start; they are told the port.
//! - Otherwise the port is tried (the far end's announced address, then the host's, 3 s
//!   each). A connect answers in a round trip, so one that has not answered after
//!   [`PREPARE_AFTER`] probably never will (a firewall that drops): the streams' logins
//!   start then, while the try runs out. If it answers after all, they are ended unused.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use super::launch::Notice;
use super::relay::SshRelay;
use super::reverse::{FarStdin, ReverseRelay};
use super::SshError;

/// Per-address limit of the reachability check: a SYN and its first retransmission (at
/// 1 s) get their answers on a path of up to 2 s round trip. A firewall that drops costs
/// this before the copy goes through ssh instead.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the check may go unanswered before the streams' ssh logins start beside it
/// (a round trip answers a connect on any path but a geostationary satellite's).
pub const PREPARE_AFTER: Duration = Duration::from_secs(1);

/// What the streams' ssh connections need: the ssh command, its `-p`, the destination,
/// the far command, and how many to log in ahead.
pub(super) struct RelaySpec<'a> {
    pub rsh: &'a [String],
    pub port: Option<u16>,
    pub destination: &'a str,
    pub far_longhaul: &'a str,
    pub count: usize,
}

impl RelaySpec<'_> {
    /// A relay whose first `count` logins start now ([`SshRelay::logins_ahead`]).
    pub(super) fn logins_ahead(&self, count: usize) -> Result<SshRelay, SshError> {
        SshRelay::logins_ahead(
            self.rsh,
            self.port,
            self.destination,
            self.far_longhaul,
            count,
        )
        .map_err(relay_io)
    }
}

fn relay_io(cause: std::io::Error) -> SshError {
    SshError::Io {
        what: "starting the relay through ssh",
        cause,
    }
}

/// What a connection back needs: the far end's stdin and `--port-range`.
pub(super) type WayBack<'a> = (&'a FarStdin, Option<(u16, u16)>);

/// How the session's connections reach the far end.
pub(super) enum Detour {
    /// Its port, directly.
    Direct,
    /// Through ssh ([`super::relay`]).
    Ssh(SshRelay),
    /// Back from the far end to a port here ([`super::reverse`]).
    Back(ReverseRelay),
}

/// Where the client dials (`ADDR:PORT`), and the detour when that is not the far end's
/// port itself. The far end listens on `announced` (its side of the ssh connection, if it
/// said) at `port`; `host` as the user named it and `resolved` as it resolved here;
/// `back` the far end's stdin and `--port-range` for a connection back; `ahead` the
/// logins of `--via-ssh`.
///
/// Unless `--via-ssh`: the port is tried; once it has gone [`PREPARE_AFTER`] without an
/// answer, the far end is also asked to connect back once to a port here (a probe) while
/// the try runs out. The port wins when it answers; else the way back when the probe
/// came; else ssh. So the fallbacks add no wait of their own on a firewall that drops.
pub(super) fn choose(
    (announced, port): (Option<IpAddr>, u16),
    (host, resolved): (&str, std::io::Result<Vec<SocketAddr>>),
    (spec, back): (&RelaySpec<'_>, WayBack<'_>),
    ahead: Option<SshRelay>,
    notice: &Notice,
) -> Result<(String, Detour), SshError> {
    let far = SocketAddr::new(announced.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)), port);
    let through = |mut relay: SshRelay, why: String| {
        relay.aim(far).map_err(relay_io)?;
        notice.say(&why);
        Ok((relay.addr().to_string(), Detour::Ssh(relay)))
    };
    if let Some(relay) = ahead {
        return through(
            relay,
            format!(
                "--via-ssh: carrying every connection through ssh to {}, one ssh connection \
                 per stream",
                spec.destination
            ),
        );
    }
    let (tx, rx) = mpsc::channel();
    let checked = (host.to_string(), tx);
    std::thread::Builder::new()
        .name("lh-ssh-reach".into())
        .spawn(move || {
            let _ = checked.1.send(reach(announced, port, &checked.0, resolved));
        })
        .map_err(|cause| SshError::Io {
            what: "checking the far port",
            cause,
        })?;
    // The way back, asked for once the port has not answered for a second (as the
    // streams' logins): its answer is in by the time the port's try runs out, and a port
    // that answers costs no probe (nor a listening port here).
    let (stdin, range) = back;
    let start_back = || {
        let (back_tx, back_rx) = mpsc::channel();
        let stdin = stdin.clone();
        let _ = std::thread::Builder::new()
            .name("lh-ssh-back".into())
            .spawn(move || {
                let relay = ReverseRelay::open(range, stdin)
                    .ok()
                    .filter(|r| r.probe(BACK_WAIT));
                let _ = back_tx.send(relay);
            });
        back_rx
    };
    let (answer, spares, back_rx) = match rx.recv_timeout(PREPARE_AFTER) {
        Ok(answer) => (answer, None, None),
        Err(_) => {
            let back_rx = start_back();
            let spares = spec.logins_ahead(spec.count)?;
            let answer = rx.recv().map_err(|_| SshError::Io {
                what: "checking the far port",
                cause: std::io::Error::other("the check ended without an answer"),
            })?;
            (answer, Some(spares), Some(back_rx))
        }
    };
    match answer {
        // The spares and the way back, if any, are dropped: their ssh ended unused.
        Ok(target) => Ok((target, Detour::Direct)),
        Err(SshError::Unreachable { host, port, tried }) => {
            // A port refused at once (no firewall's silence) asks for the way back now.
            let back_rx = back_rx.unwrap_or_else(start_back);
            if let Ok(Some(back)) = back_rx.recv_timeout(BACK_WAIT) {
                back.enable().map_err(|cause| SshError::Io {
                    what: "taking connections back from the far end",
                    cause,
                })?;
                notice.say(&format!(
                    "cannot reach the far longhaul's TCP port {port} on {host} ({tried}): \
                     the far end connects back to this host's port {} instead, over the \
                     path. To connect the usual way open TCP port {port} on {host}, or \
                     name ports that are open there with --port-range LO-HI",
                    back.public_port()
                ));
                return Ok((back.addr().to_string(), Detour::Back(back)));
            }
            let relay = match spares {
                Some(relay) => relay,
                None => spec.logins_ahead(0)?,
            };
            through(
                relay,
                format!(
                    "cannot reach the far longhaul's TCP port {port} on {host} ({tried}), nor \
                     could it connect back to this host: carrying every connection through \
                     ssh instead, one ssh connection per stream, at an ssh copier's rate \
                     rather than the path's. For the full rate open TCP port {port} on \
                     {host} (or a port here, --port-range LO-HI, for it to connect back to)"
                ),
            )
        }
        Err(e) => Err(e),
    }
}

/// How long the far end's connection back may take to arrive (its own try, and a round
/// trip or two of the path).
const BACK_WAIT: Duration = Duration::from_secs(4);

/// The first address that accepts a TCP connection on the far end's port: the address it
/// announced (its side of the ssh connection), then `host` as resolved here (`resolved`).
fn reach(
    announced: Option<IpAddr>,
    port: u16,
    host: &str,
    resolved: std::io::Result<Vec<SocketAddr>>,
) -> Result<String, SshError> {
    let mut candidates: Vec<SocketAddr> = Vec::new();
    if let Some(ip) = announced.filter(|ip| !ip.is_unspecified()) {
        candidates.push(SocketAddr::new(ip, port));
    }
    let mut tried = Vec::new();
    match resolved {
        Ok(addrs) => candidates.extend(addrs.iter().map(|a| SocketAddr::new(a.ip(), port))),
        Err(e) => tried.push(format!("{host}: {e}")),
    }
    candidates.dedup();
    for addr in candidates {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(_) => return Ok(addr.to_string()),
            Err(e) => tried.push(format!("{addr}: {e}")),
        }
    }
    Err(SshError::Unreachable {
        host: host.into(),
        port,
        tried: tried.join("; "),
    })
}
