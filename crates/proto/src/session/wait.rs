//! What a set-up machine waits for from its peer, and for how long ([`Wait`]).
//!
//! Between the control connection's TLS handshake and the first data byte each end waits
//! for the other's next message: the client for the server's hello, its welcome, its
//! `BenchReady`, `Start` or `TransferReady`; the server for the client's hello, its proof,
//! its request and its data connections; a copy's sender for the receiver's answer to
//! its list (from a receiver that keeps the connection alive meanwhile). The machines say
//! which wait they are in
//! (`waiting`), and the wait says how long a driver may block on it and what to call it
//! when it runs out, so a lost message ends in a named timeout, never a hang, and the
//! limits are written once. A wait's clock restarts with every message that arrives (a
//! long tree walk's keepalives hold `TransferReady`'s open).

use std::fmt;
use std::time::Duration;

/// How long a client waits for each of the server's set-up messages (and for its TLS
/// handshake).
pub const CLIENT_WAIT: Duration = Duration::from_secs(15);

/// How long a server waits for each of the client's set-up messages (and for its TLS
/// handshake): a backstop behind the door's pre-authentication deadline.
pub const SERVER_WAIT: Duration = Duration::from_secs(20);

/// How long a server's session waits for its data connections to attach once it has
/// taken the request.
pub const ATTACH_WAIT: Duration = Duration::from_secs(15);

/// How long a sender waits for the next word of a receiver that keeps the connection
/// alive while it answers the list ([`crate::features::ANSWER_KEEPALIVE`]: a keepalive
/// every few seconds), until the answer's end.
pub const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// One wait of a run's set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The client: the server's hello and the proof of our token (right behind the TLS
    /// handshake).
    ServerHello,
    /// The client: the server's welcome (our proof accepted).
    Welcome,
    /// The client: the server's acceptance of bench's parameters.
    BenchReady,
    /// The client: bench's `Start` (every data connection attached at the server).
    Start,
    /// The client: a copy's `TransferReady` (the request checked, a pull's list walked).
    TransferReady,
    /// The server: the client's hello.
    ClientHello,
    /// The server: the client's proof of a token or ticket.
    ClientProof,
    /// The server: the client's request (a bench's parameters, a copy's, a ticket, ...).
    Request,
    /// The server: the session's data connections, `missing` of them not yet attached.
    DataStreams {
        /// Streams without a proved hello.
        missing: u16,
    },
    /// A copy's sender (either end): the receiver's answer to the file list, from a
    /// receiver that keeps the connection alive meanwhile.
    ListAnswer,
}

impl Wait {
    /// How long a driver may wait for it.
    pub fn limit(self) -> Duration {
        match self {
            Self::ServerHello
            | Self::Welcome
            | Self::BenchReady
            | Self::Start
            | Self::TransferReady => CLIENT_WAIT,
            Self::ClientHello | Self::ClientProof | Self::Request => SERVER_WAIT,
            Self::DataStreams { .. } => ATTACH_WAIT,
            Self::ListAnswer => ANSWER_WAIT,
        }
    }

    /// What the end is doing while it waits, for an error ("... timed out while {what}").
    pub fn what(self) -> &'static str {
        match self {
            Self::ServerHello => "authenticating",
            Self::Welcome => "waiting for the server's welcome",
            Self::BenchReady => "waiting for the server to accept the parameters",
            Self::Start => "waiting for the data streams to attach",
            Self::TransferReady => "waiting for the server's answer to the request",
            Self::ClientHello => "waiting for the client's hello",
            Self::ClientProof => "waiting for the client's proof",
            Self::Request => "waiting for the client's request",
            Self::DataStreams { .. } => "waiting for the session's data connections",
            Self::ListAnswer => "waiting for the receiver's answer to the file list",
        }
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at most {} s)", self.what(), self.limit().as_secs())?;
        if let Self::DataStreams { missing } = self {
            write!(f, ", {missing} not attached")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wait_is_bounded_and_named() {
        for w in [
            Wait::ServerHello,
            Wait::Welcome,
            Wait::BenchReady,
            Wait::Start,
            Wait::TransferReady,
            Wait::ClientHello,
            Wait::ClientProof,
            Wait::Request,
            Wait::DataStreams { missing: 3 },
            Wait::ListAnswer,
        ] {
            assert!(w.limit() >= Duration::from_secs(5), "{w}");
            assert!(w.limit() <= Duration::from_secs(60), "{w}");
            assert!(!w.what().is_empty());
        }
        assert_eq!(
            Wait::DataStreams { missing: 3 }.to_string(),
            "waiting for the session's data connections (at most 15 s), 3 not attached"
        );
    }
}
