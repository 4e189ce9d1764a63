//! The other way round through a firewall, far side: when the client cannot reach the far
//! end's port (a site that lets nothing in but ssh), it may still accept connections
//! itself. Then it listens on a port of its own ([`super::reverse`]) and asks the far end,
//! over the ssh channel's stdin, to connect there: one line per connection,
//! `dial PORT TAG` (or `probe PORT TAG` to test the way once), `TAG` 32 hex digits of a
//! one-time random tag. The far end connects to the client's address on the ssh
//! connection (`SSH_CONNECTION`'s first field) at `PORT`, writes the tag's 16 bytes (so
//! the client pairs the connection with the one it asked it for: a stranger reaching the
//! client's port cannot take a stream's place), then joins the connection to its own
//! listening port on this host, as [`super::bridge`] joins an ssh channel. TLS, the
//! token's proof and the chunks' MACs run end to end inside, as over a direct connection.
//!
//! The lines come from the ssh channel, which only the client holds: nobody else can make
//! the far end connect anywhere. The port is the client's to name; the address is not.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::bridge::pump;

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
    /// Where this far end's server listens, once bound.
    local: OnceLock<SocketAddr>,
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
            local: OnceLock::new(),
            made: AtomicUsize::new(0),
        }
    }

    /// The far end's server listens at `addr` (every interface: reached on the loopback).
    pub fn serving(&self, addr: SocketAddr) {
        let ip = match addr.ip() {
            ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            ip => ip,
        };
        let _ = self.local.set(SocketAddr::new(ip, addr.port()));
    }

    /// Does what one stdin line asks, on a thread of its own; other lines are ignored.
    pub fn command(&self, line: &str) {
        let (Some(req), Some(client)) = (Request::parse(line), self.client) else {
            return;
        };
        if self.made.fetch_add(1, Ordering::Relaxed) >= MAX_DIALS {
            return;
        }
        let local = match req {
            Request::Dial { .. } => match self.local.get() {
                Some(&l) => Some(l),
                None => return,
            },
            Request::Probe { .. } => None,
        };
        let _ = std::thread::Builder::new()
            .name("lh-dial-back".into())
            .spawn(move || {
                let _ = carry(client, req, local);
            });
    }
}

/// Connects to the client as `req` asks and, for a `dial`, joins that connection to
/// `local` until both directions have ended.
fn carry(client: IpAddr, req: Request, local: Option<SocketAddr>) -> io::Result<()> {
    let (Request::Dial { port, tag } | Request::Probe { port, tag }) = req;
    let mut back = TcpStream::connect_timeout(&SocketAddr::new(client, port), DIAL_TIMEOUT)?;
    let _ = back.set_nodelay(true);
    back.write_all(&tag)?;
    let Some(local) = local else {
        return Ok(());
    };
    let here = TcpStream::connect_timeout(&local, DIAL_TIMEOUT)?;
    let _ = here.set_nodelay(true);
    join(back, here)
}

/// Carries bytes both ways between `a` and `b`, each direction ended on its own.
pub(super) fn join(a: TcpStream, b: TcpStream) -> io::Result<()> {
    let (mut a_in, mut a_out) = (a.try_clone()?, a);
    let (mut b_in, mut b_out) = (b.try_clone()?, b);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = pump(&mut a_in, &mut b_out);
            let _ = b_out.shutdown(Shutdown::Write);
        });
        let _ = pump(&mut b_in, &mut a_out);
        let _ = a_out.shutdown(Shutdown::Write);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

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

    /// A `dial` reaches the client's port, says its tag, and carries bytes both ways to
    /// the far end's own port (an echo server here).
    #[test]
    fn a_dial_back_says_its_tag_and_carries_bytes_to_the_far_port() {
        let client = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let far = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let far_addr = far.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut c, _) = far.accept().unwrap();
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf).unwrap();
            c.write_all(&buf).unwrap();
        });
        let back = DialBack::to(Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        back.serving(far_addr);
        let tag = [7; TAG_LEN];
        let port = client.local_addr().unwrap().port();
        back.command(Request::Dial { port, tag }.line().trim_end());
        let (mut conn, _) = client.accept().unwrap();
        let mut said = [0u8; TAG_LEN];
        conn.read_exact(&mut said).unwrap();
        assert_eq!(said, tag);
        conn.write_all(b"hello").unwrap();
        let mut echo = [0u8; 5];
        conn.read_exact(&mut echo).unwrap();
        assert_eq!(&echo, b"hello");
    }
}
