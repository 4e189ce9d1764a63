//! Why a session on `longhaul serve` failed (a bench run, a transfer, a host report).
//! The text is the server's log line and, with `serve --once`, its last word; where the
//! client was told something, the variant carries those words.

use std::io;
use std::net::SocketAddr;

use longhaul_proto::ProtoError;

use crate::cp::CpError;
use crate::transport::attach::AttachError;

/// Why a session on the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The request was refused; `reason` is what the client was told.
    #[error("{reason}")]
    Refused {
        /// The words sent to the client.
        reason: String,
    },
    /// Every session slot was taken; the client was told to try again later.
    #[error("busy")]
    Busy,
    /// The client sent nothing within the control connection's timeout.
    #[error("the client stopped answering")]
    ClientSilent,
    /// The client closed the control connection before the session was under way.
    #[error("the client closed the control connection")]
    ClientClosed,
    /// The client closed the control connection while the run went on.
    #[error("the client closed the control connection mid-run")]
    ClientGone,
    /// The client stopped the run, for the reason it gave.
    #[error("the client stopped the run: {reason}")]
    ClientStopped {
        /// The client's words.
        reason: String,
    },
    /// The client broke the protocol.
    #[error(transparent)]
    Protocol(#[from] ProtoError),
    /// The client sent a message that has no place where it came.
    #[error("{0}")]
    Unexpected(&'static str),
    /// The client sent a transfer message during a bench run.
    #[error("the client sent {kind} during a bench run")]
    TransferMessageInBench {
        /// The message's kind.
        kind: &'static str,
    },
    /// The session's data streams could not be attached (none expected, or not all
    /// arrived in time: the text says how many and what to check).
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// A local operation failed.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        #[source]
        cause: io::Error,
    },
    /// The session's secret could not be drawn from the OS.
    #[error("drawing the session nonce: {0}")]
    Random(getrandom::Error),
    /// One of the run's data streams failed.
    #[error("data stream {stream} failed: {cause}")]
    DataStream {
        /// The stream's index.
        stream: u16,
        /// What went wrong on it.
        cause: String,
    },
    /// The run's watchdog stopped it (no progress, or past its time limit).
    #[error("{reason}; aborted")]
    Watchdog {
        /// The watchdog's verdict.
        reason: String,
    },
    /// This host's settings could not be read for a host report (`tune --peer`).
    #[error("the server could not read its host settings: {0}")]
    HostFacts(#[source] io::Error),
    /// A transfer (`longhaul cp`) failed once under way.
    #[error(transparent)]
    Transfer(#[from] CpError),
    /// The session failed after the handshake; `peer` is the client's address.
    #[error("{cause} (peer {peer})")]
    WithPeer {
        /// The client's address.
        peer: SocketAddr,
        /// What failed.
        #[source]
        cause: Box<ServeError>,
    },
}

impl ServeError {
    /// An I/O error while doing `what`.
    pub fn io(what: &'static str) -> impl FnOnce(io::Error) -> Self {
        move |cause| ServeError::Io { what, cause }
    }

    /// This error, naming the client's address.
    pub fn with_peer(self, peer: SocketAddr) -> Self {
        ServeError::WithPeer {
            peer,
            cause: Box::new(self),
        }
    }
}
