//! The longhaul wire protocol, with no I/O: frame codec, messages, authentication and the
//! control-session state machines for both ends.
//!
//! A bench (and later a file transfer) uses one control TCP connection and N data
//! connections, all opened by the client to the same server port:
//!
//! ```text
//! every TLS connection, as 0.5-RTT data right behind the server's TLS Finished:
//!           S->C ServerHello{version, features, nonce_s, proof_s}   proof_s = HMAC(token, "server"|cert|nonce_s)
//! control:  C->S ClientHello{version, features, nonce_c}             (sent as TLS ends; an older server answers its version)
//!           C->S ClientProof{proof_c}       proof_c = HMAC(token, "client"|exporter|cert|nonce_c|nonce_s)
//!           C->S BenchParams{..} | TransferParams{..}, FilterRules, (push) the file list   -- the same flight
//!           S->C Welcome{session_id}        both derive secret = HMAC(token, "session"|exporter), session_id from it
//!           S->C BenchReady{server's host facts}
//!   data:   C->S DataHello{session_id, stream, mac}   mac = HMAC(secret, "data"|session_id|stream|data exporter),
//!                                                     in the flight of the client's proof
//! control:  S->C Start                          (every data stream attached)
//!           both  Interval{per-stream samples}  (each end's own view, optional)
//!           both  Results{per-stream totals, cpu}
//! ```
//!
//! `cert` is the SHA-256 of the server's certificate, `exporter` the TLS exporter
//! ([`EXPORTER_LABEL`], RFC 8446 section 7.5) of the control connection: the client's
//! proof and every data hello are bound to their TLS connections, so no challenge round
//! trip is needed to stop replays. See docs/startup.md for the round trips.
//!
//! Instead of `BenchParams`, a client may send `HostReportRequest{rate, rtt}` (for
//! `longhaul tune --peer`); the server answers `HostReport{findings as JSON}` and the session
//! ends. Third-party copies add `TicketRequest`, `TicketProof` and `RelayPull` (see
//! [`ticket`]); storage clients `FsRequest` (see [`namespace`]).
//!
//! The token is never sent; the client checks the server's proof before it proves itself.
//! Every length, count and size on the wire is bounded (see [`limits`]).
#![forbid(unsafe_code)]

mod auth;
mod codec;
mod error;
mod jump_ask;
pub mod limits;
mod message;
pub mod namespace;
mod session;
pub mod ssh_ready;
pub mod stripe;
pub mod ticket;
pub mod transfer;
mod wire;
pub use wire::{cut_at_char, is_unsafe_char, printable};

pub use auth::{
    check_token, data_mac, ChannelBinding, ChunkKey, Keyring, Nonce, SessionSecret, Token,
    CHUNK_MAC_LEN, EXPORTER_LABEL, MAC_LEN, MAX_TOKENS, NONCE_LEN,
};
pub use codec::{decode_frame, encode_frame, FRAME_HEADER_LEN};
pub use error::{ErrorCode, ProtoError};
pub use message::{
    validate_report_request, BenchParams, BenchReady, Direction, HostFacts, IntervalReport,
    JumpAsk, JumpOutcome, Message, Results, SendMode, StreamResult, StreamSample,
};
pub use session::{
    Access, ClientEvent, ClientSession, DataAttachments, ServerEvent, ServerSession, Wait,
    ANSWER_WAIT, ATTACH_WAIT, CLIENT_WAIT, SERVER_WAIT,
};
pub use ssh_ready::SshReady;
pub use ticket::{Credential, TicketGrant, TicketId};

/// The protocol version this build speaks (2: chunk headers carry a 32-byte BLAKE3
/// chunk hash instead of xxh3; 3: a transfer request names the sender's congestion
/// control; 4: a transfer request says whether its window is fixed; 5: TLS 1.3 on every
/// connection, chunk headers carry a MAC under the session's key, data without TLS on
/// request; 6: symlink entries, `FilterRules` after every transfer request, `--delete`,
/// and sync's `OldChunks`, `WouldSend` and `CHUNK_FLAG_SAME`; 7: the server's hello is
/// 0.5-RTT data proving the token for its certificate, the client's proof and data hellos
/// are bound to their TLS connections' exporters, the session id is derived, and data
/// connections attach in the flight of the client's proof; jump-start: `BenchParams`'
/// `jump` and `BenchReady`'s `jump_start_bps`/`jump_note`; 8: jump-start for pulls,
/// `TransferParams`' `jump` and `TransferReady`'s `jump_start_bps`/`jump_note`, the same
/// fields as bench's; 9: a server may hold several tokens and proves the others in
/// `ServerProofs` behind its hello, and the session id is derived from the connection,
/// not the token). The hello layouts and the labels of the keys (`longhaul/7 ...`)
/// are unchanged: an older peer is still told both versions.
pub const PROTOCOL_VERSION: u16 = 9;
/// The oldest protocol version this build still accepts (8 derived the session id from
/// the token: its data connections would name another session).
pub const MIN_PROTOCOL_VERSION: u16 = 9;

/// Feature bits announced in the hello messages.
pub mod features {
    /// Memory-to-memory bench runs.
    pub const BENCH: u64 = 1 << 0;
    /// Periodic interval reports from the peer.
    pub const INTERVALS: u64 = 1 << 1;
    /// Data connections without TLS (`--encryption off`), asked for by the client; the
    /// control connection is TLS regardless and file chunks carry a MAC.
    pub const PLAIN_DATA: u64 = 1 << 2;
    /// Interval reports (`Interval`) from the sending server of a file transfer (a pull)
    /// on the control connection: the bytes its streams delivered, which the receiving
    /// client counts its rates from.
    pub const TRANSFER_INTERVALS: u64 = 1 << 3;
    /// The sending server's jump-start verdict (`JumpVerdict`) on the control connection,
    /// once its validator has decided (a pull, `bench --reverse`): the client's report
    /// says it instead of pointing to the server's log.
    pub const JUMP_VERDICT: u64 = 1 << 4;
    /// A file transfer's receiver takes one warm-up run of bytes at the head of each data
    /// stream ([`crate::transfer::CHUNK_FLAG_WARMUP`]): the sender fills the stream's
    /// initial window with it during the round trip it waits for the answer to its file
    /// list, so the first chunks leave with the window that round trip's acks grew. The
    /// client announces it; a pushing client sends runs when the server has it.
    pub const WARMUP: u64 = 1 << 5;
    /// A pulling client may answer the file list ahead
    /// ([`crate::transfer::transfer_flags::ANSWERED_AHEAD`]) and the sending server then
    /// sends chunks without waiting for the answers: a pull's data a round trip sooner.
    /// The server announces it; a client asks only a server that has it.
    pub const ANSWER_AHEAD: u64 = 1 << 6;
    /// The sending server of a pull tells the rate its pacer holds (`HeldRate`) beside
    /// its interval reports ([`TRANSFER_INTERVALS`]). The client announces it.
    pub const HELD_RATE: u64 = 1 << 7;
    /// Set in a server's hello (never a client's) when [`crate::Message::ServerProofs`]
    /// follows it: the server holds several tokens, and a client whose token the hello's
    /// proof is not for waits for the others before it fails.
    pub const MORE_PROOFS: u64 = 1 << 8;
    /// Tickets and third-party copies ([`crate::ticket`]): the server issues tickets,
    /// takes [`crate::Message::TicketProof`] and runs relayed pulls. A server announces
    /// it; a client proves a ticket only to a server that has it.
    pub const TICKETS: u64 = 1 << 9;
    /// Namespace operations ([`crate::namespace`]): stat, list, mkdir, unlink, rmdir and
    /// checksums on the served files. A server announces it.
    pub const NAMESPACE: u64 = 1 << 10;
    /// Striped copies ([`crate::stripe`]): as a source, the server takes a receiver's
    /// `SkipFile` for another pair's entry; as a destination, it runs a relayed pull of one
    /// share. A client asks only servers that have it.
    pub const STRIPES: u64 = 1 << 11;
    /// A chunk's hash may follow its bytes on an encrypted data stream
    /// ([`crate::transfer::CHUNK_FLAG_HASH_AFTER`], then a [`crate::transfer::CHUNK_FLAG_TRAILER`]
    /// header): the sender hashes each record's bytes as it seals them and reads the file
    /// once, not once to hash and once to send. The receiver announces it; a sender uses
    /// it only towards one that did.
    pub const HASH_AFTER: u64 = 1 << 12;
    /// A sender checks each source file once it has read all of it, and tells the
    /// receiver when it changed meanwhile ([`crate::transfer::TransferMessage::SourceChanged`]):
    /// the receiver commits nothing of it. The receiver announces it; a sender checks only
    /// towards one that did (an older receiver would take the message for a protocol
    /// error).
    pub const SOURCE_CHANGED: u64 = 1 << 13;
    /// A receiver keeps the control connection alive while it answers the file list: an
    /// unsolicited `Pong` whenever it has sent nothing for a few seconds, until its
    /// answer's end (its own old copies may take minutes to hash). A sender towards one
    /// that announced it gives up when that receiver says nothing for
    /// [`crate::Wait::ListAnswer`]'s limit before the end of its answer; towards an older
    /// one it waits as long as the connection lives.
    pub const ANSWER_KEEPALIVE: u64 = 1 << 14;
    /// Everything this build implements.
    pub const ALL: u64 = BENCH
        | NAMESPACE
        | STRIPES
        | TICKETS
        | INTERVALS
        | PLAIN_DATA
        | TRANSFER_INTERVALS
        | JUMP_VERDICT
        | WARMUP
        | ANSWER_AHEAD
        | HELD_RATE
        | HASH_AFTER
        | SOURCE_CHANGED
        | ANSWER_KEEPALIVE;
    /// What a client announces unless asked for more.
    pub const DEFAULT: u64 = BENCH
        | INTERVALS
        | TRANSFER_INTERVALS
        | JUMP_VERDICT
        | WARMUP
        | ANSWER_AHEAD
        | HELD_RATE
        | TICKETS
        | NAMESPACE
        | STRIPES
        | HASH_AFTER
        | SOURCE_CHANGED
        | ANSWER_KEEPALIVE;
}
