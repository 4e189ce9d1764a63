//! The other way round through a firewall, far side: when the client cannot reach the far
//! end's port (a site that lets nothing in but ssh), it may still accept connections
//! itself. Then it listens on a port of its own ([`super::reverse`]) and asks the far end,
//! over the ssh channel's stdin, to connect there: one line per connection,
//! `dial PORT TAG` (or `probe PORT TAG` to test the way once), `TAG` 32 hex digits of a
//! one-time random tag. The far end connects to the client's address on the ssh
//! connection (`SSH_CONNECTION`'s first field) at `PORT`, writes the tag's 16 bytes (so
//! the client pairs the connection with the one it asked it for: a stranger reaching the
//! client's port cannot take a stream's place), then hands the connection to its server as
//! if it had accepted it ([`Injector`]): TLS, the token's proof, the chunks' MACs, the
//! buffers and the pacing are those of any connection, on the socket that crosses the
//! path. As root its receive buffer is widened before the connect, as a listener's is, so
//! that its window scale allows the path's window.
//!
//! The lines come from the ssh channel, which only the client holds: nobody else can make
//! the far end connect anywhere. The port is the client's to name; the address is not.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use longhaul_policy::MAX_WINDOW;
use socket2::{Domain, Protocol, Socket, Type};

use crate::daemon::server::Injector;

/// Bytes of a connection's tag.
pub const TAG_LEN: usize = 16;

/// How long the far end tries to reach the client's port.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// Most connections one far end makes back (a session's control connection and up to
/// 256 data streams, with room for retries).
const MAX_DIALS: usize = 300;

/// Longest request line read from stdin.
pub const MAX_LINE: usize = 128;

/// A request on the far end's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Connect to the client's `port`, say `tag`, and carry a session's connection.
    Dial {
        /// The client's port.
        port: u16,
        /// The connection's one-time tag.
        tag: [u8; TAG_LEN],
    },
    /// Connect to the client's `port`, say `tag`, and close: the client tests the way.
    Probe {
        /// The client's port.
        port: u16,
        /// The probe's one-time tag.
        tag: [u8; TAG_LEN],
    },
}

impl Request {
    /// The line the client writes (with its newline).
    pub fn line(&self) -> String {
        let (word, port, tag) = match self {
            Request::Dial { port, tag } => ("dial", port, tag),
            Request::Probe { port, tag } => ("probe", port, tag),
        };
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        format!("{word} {port} {hex}\n")
    }

    /// Reads one line (without its newline); `None` for anything else.
    pub fn parse(line: &str) -> Option<Self> {
        let mut words = line.split_ascii_whitespace();
        let (word, port, hex) = (words.next()?, words.next()?, words.next()?);
        if words.next().is_some() || hex.len() != 2 * TAG_LEN {
            return None;
        }
        let port: u16 = port.parse().ok().filter(|&p| p != 0)?;
        let mut tag = [0u8; TAG_LEN];
        for (i, b) in tag.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        match word {
            "dial" => Some(Request::Dial { port, tag }),
            "probe" => Some(Request::Probe { port, tag }),
            _ => None,
        }
    }
}

/// The far end's side of connections made back to its client.
#[derive(Debug)]
pub struct DialBack {
    /// The client's address on the ssh connection.
    client: Option<IpAddr>,
    /// The far end's server, once bound.
    server: OnceLock<Injector>,
    made: AtomicUsize,
}

impl DialBack {
    /// The client's address from `SSH_CONNECTION` (`client_ip client_port server_ip
    /// server_port`); none when not started by sshd.
    pub fn from_env() -> Arc<Self> {
        let client = std::env::var("SSH_CONNECTION")
            .ok()
            .and_then(|v| v.split_whitespace().next()?.parse().ok());
        Arc::new(Self::to(client))
    }

    /// Connections go back to `client`.
    pub fn to(client: Option<IpAddr>) -> Self {
        Self {
            client,
            server: OnceLock::new(),
            made: AtomicUsize::new(0),
        }
    }

    /// The far end's server is bound: connections made back are served by it.
    pub fn serving(&self, server: Injector) {
        let _ = self.server.set(server);
    }

    /// Does what one stdin line asks, on a thread of its own; other lines are ignored.
    pub fn command(&self, line: &str) {
        let (Some(req), Some(client)) = (Request::parse(line), self.client) else {
            return;
        };
        if self.made.fetch_add(1, Ordering::Relaxed) >= MAX_DIALS {
            return;
        }
        let server = match req {
            Request::Dial { .. } => match self.server.get() {
                Some(s) => Some(s.clone()),
                None => return,
            },
            Request::Probe { .. } => None,
        };
        let _ = std::thread::Builder::new()
            .name("lh-dial-back".into())
            .spawn(move || {
                let _ = carry(client, req, server);
            });
    }
}

/// Connects to the client as `req` asks and says its tag; a `dial`'s connection then goes
/// to `server`.
fn carry(client: IpAddr, req: Request, server: Option<Injector>) -> io::Result<()> {
    let (Request::Dial { port, tag } | Request::Probe { port, tag }) = req;
    let addr = SocketAddr::new(client, port);
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if server.is_some() && longhaul_sys::socket::can_force_buffers() {
        longhaul_sys::socket::set_receive_buffer(&sock, MAX_WINDOW, true)?;
    }
    sock.connect_timeout(&addr.into(), DIAL_TIMEOUT)?;
    let mut back: TcpStream = sock.into();
    back.set_nodelay(true)?;
    back.write_all(&tag)?;
    match server {
        Some(server) => server.inject(back, addr),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{Ipv4Addr, TcpListener};

    #[test]
    fn request_lines_read_back_and_garbage_is_ignored() {
        let tag = [0xa5; TAG_LEN];
        for req in [
            Request::Dial { port: 7000, tag },
            Request::Probe { port: 1, tag },
        ] {
            let line = req.line();
            assert_eq!(Request::parse(line.trim_end()), Some(req));
        }
        for bad in [
            "",
            "dial",
            "dial 0 a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5",
            "dial 70000 a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5",
            "dial 7000 a5a5",
            "dial 7000 zza5a5a5a5a5a5a5a5a5a5a5a5a5a5a5",
            "connect 7000 a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5",
            "dial 7000 a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5 more",
        ] {
            assert_eq!(Request::parse(bad), None, "{bad:?}");
        }
    }

    /// A `probe` reaches the client's port and says its tag (a `dial`'s connection goes
    /// on to the far end's server: the cli tests run that through a real sshd).
    #[test]
    fn a_probe_reaches_the_client_and_says_its_tag() {
        let client = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let back = DialBack::to(Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        let tag = [7; TAG_LEN];
        let port = client.local_addr().unwrap().port();
        back.command(Request::Probe { port, tag }.line().trim_end());
        let (mut conn, _) = client.accept().unwrap();
        let mut said = [0u8; TAG_LEN];
        conn.read_exact(&mut said).unwrap();
        assert_eq!(said, tag);
        // A dial before the server is bound goes nowhere.
        back.command(Request::Dial { port, tag }.line().trim_end());
        client.set_nonblocking(true).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(client.accept().is_err());
    }
}
