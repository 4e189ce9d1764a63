//! cp's session, both ends, as sans-I/O state machines (the pattern of `quinn-proto` and
//! `longhaul_proto::session`): control messages and chunk events in, control messages
//! ([`SendSession::poll_transmit`]) and work for the driver out; time is passed in.
//!
//! - [`send`]: the sending end — the file list, the receiver's answers, the chunk
//!   scheduler, the chunk hashes merged into each file's digest, acks and commits.
//! - [`recv`]: the receiving end — every admission decision for the file list (placement,
//!   the quick check, `--no-clobber`, `--checksum-only`, resume or start over), chunk
//!   checks, manifest records, the digest gate before a file is put in place, and the
//!   order of the last commit after the directories' times.
//!
//! A session never touches a file, a socket or a clock. Where it needs the world (what
//! is at the destination, a part file to prepare, chunks to hash from disk, a file to put
//! in place) it asks with an event and the driver answers with an input
//! ([`RecvInput`] to [`RecvSession::handle`]; the sending side's answers are calls). The drivers in
//! `longhaul-engine` (threads and sockets) and the deterministic simulation (virtual time
//! over `longhaul-linkem`) run the same sessions.

mod error;
pub mod recv;
pub mod send;

pub use error::{LocalFailure, PeerMisbehaved, Refusal, SessionError};

pub use recv::{
    CapsSetBy, CommitJob, DirFix, ExpectedList, HardLinkJob, LinkJob, ListCaps, LookResult, Meta,
    OpenPlan, Placed, RecvConfig, RecvEvent, RecvInput, RecvOutcome, RecvSession, Room,
};
pub use send::{SendConfig, SendEvent, SendInput, SendOutcome, SendSession, Work, WouldSend};

/// Counters a progress display reads (bytes verified or found in place, of the total).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Bytes verified by the receiver in this run or found complete from an earlier one.
    pub done_bytes: u64,
    /// Bytes of every file of the transfer.
    pub total_bytes: u64,
    /// Files finished (committed, failed or equal).
    pub files_done: u64,
    /// Files to move.
    pub files_total: u64,
    /// The file list is settled: the totals are final.
    pub listed: bool,
}

/// A path from the wire, for messages.
pub fn show(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}
