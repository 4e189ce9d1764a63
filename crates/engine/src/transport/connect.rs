//! Reaching the server's address: the control connection's SYN sent before anything
//! else of a dial ([`ControlSyn`]: the data connections' threads and a remembered path's
//! route take milliseconds each, and the RTT is this connection's handshake), and each
//! of a name's addresses in turn ([`connect_any`]).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::BenchError;

/// How long one connect may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A control connection's SYN on its way, the handshake not waited for.
pub(super) struct ControlSyn(Socket);

impl ControlSyn {
    /// Sends the SYN to `addr`; `None` when its address is reached through a connection
    /// back (ssh) or the connect failed at once.
    pub(super) fn send(addr: SocketAddr) -> Option<Self> {
        if super::connect_back::is_registered(&addr) {
            return None;
        }
        let sock =
            Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).ok()?;
        sock.set_nonblocking(true).ok()?;
        match sock.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(_) => return None,
        }
        Some(Self(sock))
    }

    /// Waits for the handshake, at most [`CONNECT_TIMEOUT`].
    pub(super) fn finish(self) -> std::io::Result<TcpStream> {
        let Self(sock) = self;
        if !longhaul_sys::socket::wait_writable(&sock, CONNECT_TIMEOUT)? {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        if let Some(e) = sock.take_error()? {
            return Err(e);
        }
        sock.set_nonblocking(false)?;
        Ok(TcpStream::from(sock))
    }
}

/// Connects to the first address that answers (plain TCP: TLS comes after).
pub fn connect_any(addrs: &[SocketAddr]) -> Result<(TcpStream, SocketAddr), BenchError> {
    let mut last = None;
    for a in addrs {
        let made = super::connect_back::connect(a, false)
            .unwrap_or_else(|| TcpStream::connect_timeout(a, CONNECT_TIMEOUT));
        match made {
            Ok(s) => return Ok((s, *a)),
            Err(e) => last = Some((*a, e)),
        }
    }
    let (addr, cause) = last.unwrap_or_else(|| {
        (
            addrs[0],
            std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
        )
    });
    Err(BenchError::Connect { addr, cause })
}
