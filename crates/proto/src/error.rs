//! Protocol errors: what a malformed or hostile peer can cause, and the codes sent on the wire.

/// Everything that can go wrong while decoding or running a session.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ProtoError {
    /// A frame announced a body larger than [`crate::limits::MAX_FRAME_BODY`].
    #[error("frame of {len} bytes exceeds the limit of {max} bytes (not a longhaul peer, or a newer one?)")]
    FrameTooLarge {
        /// Announced body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A frame body ended before all its fields.
    #[error("truncated {what} in a frame (malformed message from the peer)")]
    Truncated {
        /// The field being read.
        what: &'static str,
    },
    /// A frame carried bytes after its last field.
    #[error("{extra} unexpected trailing bytes after a {kind} message")]
    TrailingBytes {
        /// Message kind.
        kind: &'static str,
        /// Number of extra bytes.
        extra: usize,
    },
    /// Unknown message type byte.
    #[error("unknown message type 0x{0:02x} (not a longhaul peer, or an incompatible version)")]
    UnknownType(u8),
    /// A field held a value outside its allowed range.
    #[error("invalid {field}: {why}")]
    InvalidField {
        /// Field name.
        field: &'static str,
        /// What was wrong.
        why: String,
    },
    /// A message arrived that the session does not expect in its current state.
    #[error("unexpected {got} message while {state}")]
    Unexpected {
        /// Kind of the message received.
        got: &'static str,
        /// State of the session.
        state: &'static str,
    },
    /// The two ends share no protocol version.
    #[error("protocol version mismatch: this end speaks {ours_min}..={ours_max}, the peer speaks {theirs}; install the same longhaul release on both hosts")]
    VersionMismatch {
        /// Oldest version we accept.
        ours_min: u16,
        /// Our version.
        ours_max: u16,
        /// Peer's version.
        theirs: u16,
    },
    /// The peer could not prove knowledge of the shared token.
    #[error("authentication failed: the peer does not hold the same token; copy the token file (default ~/.config/longhaul/token) to both hosts, or set LONGHAUL_TOKEN or --token-file to the same secret on both ends")]
    AuthFailed,
    /// The peer reported an error and ended the session.
    #[error("peer reported: {message}")]
    Peer {
        /// Error code sent by the peer.
        code: ErrorCode,
        /// The peer's message.
        message: String,
    },
}

/// Error codes carried by [`crate::Message::Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    /// Malformed or unexpected message.
    Protocol = 1,
    /// Version mismatch.
    Version = 2,
    /// Authentication failed.
    Auth = 3,
    /// Parameters out of range or not supported by this host.
    Params = 4,
    /// The server is at its limit of concurrent sessions.
    Busy = 5,
    /// A local failure on the reporting end (socket, thread, ...).
    Internal = 6,
    /// The run was aborted (signal, peer vanished).
    Aborted = 7,
}

impl ErrorCode {
    /// Decodes a wire value; unknown codes map to [`ErrorCode::Internal`].
    pub fn from_wire(v: u16) -> Self {
        match v {
            1 => Self::Protocol,
            2 => Self::Version,
            3 => Self::Auth,
            4 => Self::Params,
            5 => Self::Busy,
            7 => Self::Aborted,
            _ => Self::Internal,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Self::Protocol => "protocol error",
            Self::Version => "version mismatch",
            Self::Auth => "authentication failed",
            Self::Params => "bad parameters",
            Self::Busy => "server busy",
            Self::Internal => "internal error",
            Self::Aborted => "aborted",
        };
        f.write_str(s)
    }
}
