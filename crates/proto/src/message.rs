//! The messages of the control and data connections, as plain Rust values.

use crate::auth::{Nonce, MAC_LEN};
use crate::error::{ErrorCode, ProtoError};
pub use crate::jump_ask::JumpAsk;
use crate::limits;
use crate::namespace::{ChecksumKind, FsEntry, FsErrorKind, FsOp, FsStat};
use crate::ticket::{RelayDone, RelayProgress, RelayPull, TicketGrant, TicketId};

/// One protocol message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// First message of a control connection, client to server.
    ClientHello {
        /// Protocol version of the client.
        version: u16,
        /// Feature bits of the client.
        features: u64,
        /// Client's challenge.
        nonce: Nonce,
    },
    /// Server's answer: its own challenge and its proof of the token.
    ServerHello {
        /// Protocol version of the server.
        version: u16,
        /// Feature bits of the server.
        features: u64,
        /// Server's challenge.
        nonce: Nonce,
        /// HMAC over both nonces (see [`crate::Token::server_proof`]).
        proof: [u8; MAC_LEN],
    },
    /// The server's proofs of its other tokens, right behind its hello in the same flight
    /// when it holds several (its hello then carries [`crate::features::MORE_PROOFS`]):
    /// at most [`crate::auth::MAX_TOKENS`] - 1, each as [`ServerHello`]'s `proof`.
    ///
    /// [`ServerHello`]: Message::ServerHello
    ServerProofs {
        /// One proof per further token, in the server's order.
        proofs: Vec<[u8; MAC_LEN]>,
    },
    /// Client's proof of the token, sent only after the server's proof checked out.
    ClientProof {
        /// HMAC over both nonces (see [`crate::Token::client_proof`]).
        proof: [u8; MAC_LEN],
    },
    /// The server accepted the client; data connections name this session.
    Welcome {
        /// Identifier of the session, chosen by the server.
        session_id: u64,
    },
    /// RTT probe.
    Ping {
        /// Sequence number echoed in the pong.
        seq: u32,
    },
    /// Answer to a ping.
    Pong {
        /// Sequence number of the ping.
        seq: u32,
    },
    /// What the client wants to run.
    BenchParams(BenchParams),
    /// The server accepted the parameters and prepared its side.
    BenchReady(BenchReady),
    /// First and only message on a data connection from the client.
    DataHello {
        /// Session the stream belongs to.
        session_id: u64,
        /// Index of the stream, `0..streams`.
        stream: u16,
        /// Proof of the session secret (see [`crate::data_mac`]).
        mac: [u8; MAC_LEN],
    },
    /// Every data stream is attached; the run begins.
    Start,
    /// One end's per-stream samples for one interval.
    Interval(IntervalReport),
    /// One end's totals at the end of the run.
    Results(Results),
    /// Instead of a run: the client asks for the server's own host findings for a path of
    /// this rate and RTT (`longhaul tune --peer`). The session ends after the answer.
    HostReportRequest {
        /// Rate one stream must reach, bit/s, `1..=MAX_REPORT_RATE_BPS`.
        rate_bps: u64,
        /// Round-trip time of the path in microseconds, `1..=MAX_REPORT_RTT_US`.
        rtt_us: u32,
    },
    /// The server's answer to [`Message::HostReportRequest`]: its findings as JSON (the
    /// schema belongs to `longhaul-tune`), at most [`limits::MAX_HOST_REPORT`] bytes.
    HostReport {
        /// The findings, as JSON text.
        findings_json: String,
    },
    /// Server to client: the verdict of the jump-start this server carried out as the
    /// sender (a pull, `bench --reverse`), once its validator decided; only to a client
    /// that announced [`crate::features::JUMP_VERDICT`].
    JumpVerdict {
        /// What the validator decided.
        outcome: JumpOutcome,
    },
    /// Server to client: the rate the sending server's pacer holds (all streams, bit/s),
    /// beside its interval reports (a pull); only to a client that announced
    /// [`crate::features::HELD_RATE`]. A pull's intervals then say it, as a push's do.
    HeldRate {
        /// The held rate, bit/s.
        bps: u64,
    },
    /// Instead of a run, client to source server: a ticket for `path` (wire form, as a
    /// pull's request names it) that another server may pull it with, once, within
    /// `lifetime_secs` (see [`crate::ticket`]).
    TicketRequest {
        /// The path the ticket opens (and what lies below it).
        path: Vec<u8>,
        /// Seconds it stays valid, `1..=MAX_TICKET_LIFETIME_SECS`.
        lifetime_secs: u32,
    },
    /// Source server to client: the ticket; the session ends.
    TicketIssued(TicketGrant),
    /// Instead of [`Message::ClientProof`]: the client proves a ticket the server issued
    /// (`proof` made with the ticket's secret as the token), only to a server announcing
    /// [`crate::features::TICKETS`].
    TicketProof {
        /// Which ticket.
        id: TicketId,
        /// HMAC over both nonces (see [`crate::Token::client_proof`]).
        proof: [u8; MAC_LEN],
    },
    /// Instead of a run, client to destination server: pull from a source server with its
    /// ticket into this server's files.
    RelayPull(Box<RelayPull>),
    /// Destination server to client while a relayed pull runs.
    RelayProgress(RelayProgress),
    /// Destination server to client: the relayed pull's end; the session ends.
    RelayDone(RelayDone),
    /// Instead of a run, client to server: one namespace operation (see
    /// [`crate::namespace`]).
    FsRequest {
        /// What to do.
        op: FsOp,
        /// On which path (wire form).
        path: Vec<u8>,
    },
    /// Server to client: the answer to a stat.
    FsStat(FsStat),
    /// Server to client: some entries of a listing (more frames may follow, then
    /// [`Message::FsDone`]).
    FsEntries(Vec<FsEntry>),
    /// Server to client: the operation is done (a listing's last frame).
    FsDone,
    /// Server to client: a checksum.
    FsChecksum {
        /// Which.
        kind: ChecksumKind,
        /// Its value (32 bytes of BLAKE3, 4 of ADLER32, big-endian).
        value: Vec<u8>,
    },
    /// Server to client: the operation failed (the session ends).
    FsFailed {
        /// Why, as POSIX would say.
        kind: FsErrorKind,
        /// In words.
        message: String,
    },
    /// A fatal error; the sender closes the session after it.
    Error {
        /// What kind of error.
        code: ErrorCode,
        /// Human-readable explanation, with what to do.
        message: String,
    },
}

impl Message {
    /// A short name of the message kind, for errors and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::ClientHello { .. } => "ClientHello",
            Message::ServerHello { .. } => "ServerHello",
            Message::ServerProofs { .. } => "ServerProofs",
            Message::ClientProof { .. } => "ClientProof",
            Message::Welcome { .. } => "Welcome",
            Message::Ping { .. } => "Ping",
            Message::Pong { .. } => "Pong",
            Message::BenchParams(_) => "BenchParams",
            Message::BenchReady(_) => "BenchReady",
            Message::DataHello { .. } => "DataHello",
            Message::Start => "Start",
            Message::Interval(_) => "Interval",
            Message::Results(_) => "Results",
            Message::HostReportRequest { .. } => "HostReportRequest",
            Message::HostReport { .. } => "HostReport",
            Message::JumpVerdict { .. } => "JumpVerdict",
            Message::HeldRate { .. } => "HeldRate",
            Message::TicketRequest { .. } => "TicketRequest",
            Message::TicketIssued(_) => "TicketIssued",
            Message::TicketProof { .. } => "TicketProof",
            Message::RelayPull(_) => "RelayPull",
            Message::RelayProgress(_) => "RelayProgress",
            Message::RelayDone(_) => "RelayDone",
            Message::FsRequest { .. } => "FsRequest",
            Message::FsStat(_) => "FsStat",
            Message::FsEntries(_) => "FsEntries",
            Message::FsDone => "FsDone",
            Message::FsChecksum { .. } => "FsChecksum",
            Message::FsFailed { .. } => "FsFailed",
            Message::Error { .. } => "Error",
        }
    }
}

/// What a jump-start's validator decided about the first round trips at the jumped rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JumpOutcome {
    /// The path carried the rate: it is held.
    Confirmed,
    /// A loss: back to a normal start-up.
    RetreatedOnLoss,
    /// A queue built: back to a normal start-up.
    RetreatedOnQueue,
    /// The path delivered too little of the rate: back to a normal start-up.
    RetreatedOnShortfall,
}

impl JumpOutcome {
    /// The byte on the wire.
    pub fn to_wire(self) -> u8 {
        match self {
            Self::Confirmed => 0,
            Self::RetreatedOnLoss => 1,
            Self::RetreatedOnQueue => 2,
            Self::RetreatedOnShortfall => 3,
        }
    }

    /// The outcome a wire byte names (`None`: no outcome this build knows).
    pub fn from_wire(b: u8) -> Option<Self> {
        Some(match b {
            0 => Self::Confirmed,
            1 => Self::RetreatedOnLoss,
            2 => Self::RetreatedOnQueue,
            3 => Self::RetreatedOnShortfall,
            _ => return None,
        })
    }
}

/// Checks the path of a [`Message::HostReportRequest`] against [`crate::limits`].
pub fn validate_report_request(rate_bps: u64, rtt_us: u32) -> Result<(), ProtoError> {
    if rate_bps == 0 || rate_bps > limits::MAX_REPORT_RATE_BPS {
        return Err(ProtoError::InvalidField {
            field: "rate",
            why: format!(
                "{rate_bps} bit/s is outside 1..={} bit/s",
                limits::MAX_REPORT_RATE_BPS
            ),
        });
    }
    if rtt_us == 0 || rtt_us > limits::MAX_REPORT_RTT_US {
        return Err(ProtoError::InvalidField {
            field: "rtt",
            why: format!(
                "{rtt_us} us is outside 1..={} us",
                limits::MAX_REPORT_RTT_US
            ),
        });
    }
    Ok(())
}

/// Which end writes on the data connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The client sends, the server receives (the default).
    ClientToServer,
    /// The server sends, the client receives (`--reverse`).
    ServerToClient,
}

/// How the sending end hands bytes to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// `write(2)` from a user buffer (one copy into the kernel).
    Write,
    /// `sendfile(2)` from an in-memory file (page references, no copy on send).
    Sendfile,
    /// `send(2)` with `MSG_ZEROCOPY` (pinned user pages, completion notifications).
    MsgZerocopy,
}

/// Parameters of a bench run, as the client asks for them.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchParams {
    /// Number of parallel data streams, `1..=MAX_STREAMS`.
    pub streams: u16,
    /// Duration of a timed run in milliseconds (0 when `bytes` is set).
    pub duration_ms: u64,
    /// Total bytes to move (0 for a timed run).
    pub bytes: u64,
    /// Which end sends.
    pub direction: Direction,
    /// Congestion control for the sending sockets ("" = the sender's default).
    pub congestion: String,
    /// Total pacing rate in bit/s (0 = no pacing limit); each stream gets `rate / streams`.
    pub rate_bps: u64,
    /// Socket buffer per stream in bytes (setsockopt value) the path needs at both ends.
    pub window_bytes: u64,
    /// Whether the user fixed `window_bytes` (`--window SIZE`): set it even where kernel
    /// autotuning would do; otherwise each end may keep autotuning when it covers the need.
    pub window_fixed: bool,
    /// Receiver-side pacing: total rate the receiver's window is clamped to (0 = off).
    pub rx_rate_bps: u64,
    /// Throttle of the receiving application, bit/s (0 = read as fast as possible); a
    /// test knob that makes a receiver slow on purpose.
    pub read_rate_bps: u64,
    /// Round-trip time the client measured, in microseconds.
    pub rtt_us: u32,
    /// Reporting interval in milliseconds.
    pub interval_ms: u32,
    /// How the sender hands data to the kernel.
    pub send_mode: SendMode,
    /// Jump-start: the client remembers this path and asks the server to set its initial
    /// windows toward the client before the data connections (and, when the server sends,
    /// to start paced at the given rate). The server bounds it by its own view.
    pub jump: Option<JumpAsk>,
}

impl BenchParams {
    /// Checks every field against [`crate::limits`]; the error names the field and the fix.
    pub fn validate(&self) -> Result<(), ProtoError> {
        let bad = |field: &'static str, why: String| Err(ProtoError::InvalidField { field, why });
        if self.streams == 0 || self.streams > limits::MAX_STREAMS {
            return bad(
                "streams",
                format!("{} is outside 1..={}", self.streams, limits::MAX_STREAMS),
            );
        }
        match (self.duration_ms, self.bytes) {
            (0, 0) => return bad("duration", "give either a time or a byte count".into()),
            (d, 0) if d > limits::MAX_DURATION_MS => {
                return bad("duration", format!("{d} ms is longer than one day"))
            }
            (0, b) if b > limits::MAX_BENCH_BYTES => {
                return bad("bytes", format!("{b} is more than 1 PB"))
            }
            (0, _) | (_, 0) => {}
            _ => return bad("duration", "give a time or a byte count, not both".into()),
        }
        if !limits::is_congestion_name(&self.congestion) {
            return bad(
                "congestion",
                format!("{:?} is not a congestion-control name", self.congestion),
            );
        }
        if self.window_bytes > limits::MAX_WINDOW_BYTES {
            return bad(
                "window",
                format!(
                    "{} bytes exceeds the {} byte limit",
                    self.window_bytes,
                    limits::MAX_WINDOW_BYTES
                ),
            );
        }
        if self.interval_ms < limits::MIN_INTERVAL_MS {
            return bad(
                "interval",
                format!(
                    "{} ms is shorter than {} ms",
                    self.interval_ms,
                    limits::MIN_INTERVAL_MS
                ),
            );
        }
        self.jump.as_ref().map_or(Ok(()), JumpAsk::validate)
    }
}

/// Facts about one host's network stack that limit what a run can reach.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostFacts {
    /// net.core.wmem_max.
    pub wmem_max: u64,
    /// net.core.rmem_max.
    pub rmem_max: u64,
    /// Third field of net.ipv4.tcp_wmem (autotuning ceiling).
    pub tcp_wmem_max: u64,
    /// Third field of net.ipv4.tcp_rmem (autotuning ceiling).
    pub tcp_rmem_max: u64,
    /// Whether this end may exceed the caps (CAP_NET_ADMIN: SO_SNDBUFFORCE/SO_RCVBUFFORCE).
    pub can_force_buffers: bool,
    /// net.ipv4.tcp_congestion_control.
    pub default_congestion: String,
}

/// The server's answer to [`BenchParams`].
#[derive(Debug, Clone, PartialEq)]
pub struct BenchReady {
    /// The server's host facts.
    pub facts: HostFacts,
    /// Receive buffer the server set per stream (0 = kernel autotuning).
    pub rcvbuf_bytes: u64,
    /// Send buffer the server set per stream (0 = kernel autotuning).
    pub sndbuf_bytes: u64,
    /// Receiver-side pacing in force on the server, total bit/s (0 = off).
    pub rx_rate_bps: u64,
    /// The jump-start the server carries out: total start rate when it sends, else the
    /// initial window it set (0 = none; see `jump_note`).
    pub jump_start_bps: u64,
    /// Why the server did not jump as asked ("" when it did or was not asked).
    pub jump_note: String,
}

/// One stream's figures over one interval, from the reporting end's TCP_INFO.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamSample {
    /// Stream index.
    pub stream: u16,
    /// Bytes moved in the interval (acknowledged for a sender, read for a receiver).
    pub bytes: u64,
    /// Congestion window in bytes (cwnd x MSS).
    pub cwnd_bytes: u64,
    /// Smoothed RTT in microseconds.
    pub srtt_us: u32,
    /// Segments retransmitted in the interval.
    pub retransmits: u32,
    /// Kernel's most recent delivery-rate sample, bit/s.
    pub delivery_rate_bps: u64,
    /// Kernel's pacing rate, bit/s.
    pub pacing_rate_bps: u64,
    /// Microseconds with data in flight in the interval.
    pub busy_us: u64,
    /// Microseconds limited by the receiver's window.
    pub rwnd_limited_us: u64,
    /// Microseconds limited by the send buffer.
    pub sndbuf_limited_us: u64,
}

/// One end's samples for one interval.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IntervalReport {
    /// Interval start, milliseconds since the run started.
    pub start_ms: u64,
    /// Interval end, milliseconds since the run started.
    pub end_ms: u64,
    /// One sample per stream.
    pub streams: Vec<StreamSample>,
}

/// One stream's totals at the end of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamResult {
    /// Stream index.
    pub stream: u16,
    /// Bytes written (sender) or read (receiver).
    pub bytes: u64,
    /// Microseconds from the start to the stream's last byte.
    pub elapsed_us: u64,
    /// Segments retransmitted over the run.
    pub retransmits: u64,
    /// Microseconds with data in flight.
    pub busy_us: u64,
    /// Microseconds limited by the receiver's window.
    pub rwnd_limited_us: u64,
    /// Microseconds limited by the send buffer.
    pub sndbuf_limited_us: u64,
    /// Smallest RTT seen, microseconds.
    pub min_rtt_us: u32,
    /// Final smoothed RTT, microseconds.
    pub srtt_us: u32,
    /// Final congestion window in bytes.
    pub cwnd_bytes: u64,
    /// CPU time of the stream's thread, microseconds.
    pub cpu_us: u64,
}

/// One end's totals at the end of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Results {
    /// Wall-clock duration at this end, microseconds.
    pub wall_us: u64,
    /// CPU time in user mode spent on the run at this end, microseconds.
    pub cpu_user_us: u64,
    /// CPU time in kernel mode spent on the run at this end, microseconds.
    pub cpu_system_us: u64,
    /// Per-stream totals.
    pub streams: Vec<StreamResult>,
}
