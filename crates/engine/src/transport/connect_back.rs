//! Connections that come back instead of going out: where the far end of an ssh start-up
//! cannot be reached but can reach this host (`ssh::reverse`), its address is registered
//! here with a [`Connector`] that asks the far end for a connection back and returns it.
//! The dialer ([`super::dial`]) looks here before each connect, so the session holds the
//! very sockets that cross the path: their buffers, pacing and `TCP_INFO` are the path's,
//! as on a connection it made itself.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};

/// Makes one connection to the far end by having it connect back.
pub trait Connector: Send + Sync {
    /// A connection to the far end's server, ready for TLS (`receiving`: this end will
    /// receive on it).
    fn connect(&self, receiving: bool) -> io::Result<TcpStream>;
}

type Registered = Vec<(SocketAddr, Arc<dyn Connector>)>;

static REGISTERED: Mutex<Registered> = Mutex::new(Vec::new());

/// Connects to `addr` by `connector` from now on (until [`unregister`]).
pub fn register(addr: SocketAddr, connector: Arc<dyn Connector>) {
    let mut r = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    r.retain(|(a, _)| *a != addr);
    r.push((addr, connector));
}

/// `addr` is dialed as any address again.
pub fn unregister(addr: SocketAddr) {
    let mut r = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    r.retain(|(a, _)| *a != addr);
}

/// Whether `addr` is reached by connections back.
pub fn is_registered(addr: &SocketAddr) -> bool {
    let r = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    r.iter().any(|(a, _)| a == addr)
}

/// The connection to `addr` when it is registered (`None`: connect as usual).
pub fn connect(addr: &SocketAddr, receiving: bool) -> Option<io::Result<TcpStream>> {
    let connector = {
        let r = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
        r.iter().find(|(a, _)| a == addr).map(|(_, c)| c.clone())
    }?;
    Some(connector.connect(receiving))
}
