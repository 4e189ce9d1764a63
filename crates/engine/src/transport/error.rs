//! Why a client's session could not be set up or run ([`BenchError`], named for the
//! first client that had one): resolving, connecting, TLS, the handshake, the data
//! connections.

use std::net::SocketAddr;

use longhaul_proto::ProtoError;

/// Why setting up a session failed (a bench run's, a copy's, any client's): resolving,
/// connecting, TLS, the handshake, the data connections; and a bench run's own failures.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// TLS could not be set up, or the server's certificate is not the one trusted.
    #[error("{0}")]
    Tls(#[from] super::tls::TlsError),
    /// The target could not be parsed or resolved.
    #[error("cannot resolve {target:?}: {why}; give HOST, HOST:PORT or [IPv6]:PORT")]
    Resolve {
        /// What was given.
        target: String,
        /// Why.
        why: String,
    },
    /// The control connection failed.
    #[error(
        "cannot connect to {addr}: {cause}; is `longhaul serve` running there and the port open?"
    )]
    Connect {
        /// Address tried.
        addr: SocketAddr,
        /// Cause.
        cause: std::io::Error,
    },
    /// The protocol failed (authentication, version, parameters, malformed input).
    #[error(transparent)]
    Proto(#[from] ProtoError),
    /// The peer went away or a socket failed.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        cause: std::io::Error,
    },
    /// The peer stopped answering.
    #[error("the server stopped answering while {0}; check that it is still running")]
    Timeout(&'static str),
    /// The run was refused locally.
    #[error("{0}")]
    Refused(String),
    /// On first contact the server did not prove the token (or stopped answering before
    /// it did): its certificate was not pinned.
    #[error("{cause}; nothing was pinned: the certificate {} that {} presented is not pinned in {}, since a server is pinned only once it has proved the token", .first.seen, .first.server, .first.file.display())]
    NotPinned {
        /// The server and the certificate it presented.
        first: super::tls::FirstContact,
        /// Why it failed.
        cause: Box<BenchError>,
    },
}
