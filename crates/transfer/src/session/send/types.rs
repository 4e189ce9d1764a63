//! The sending end's public types: its configuration, the driver's events, a free
//! stream's next work, and what it did (with `sync -n`'s per-file report).

use crate::scheduler::WorkUnit;
use longhaul_proto::transfer::EntryId;

#[cfg(doc)]
use super::SendSession;

/// How the sending end runs.
#[derive(Debug, Clone, Copy)]
pub struct SendConfig {
    /// Chunk size both ends agreed on.
    pub chunk_size: u64,
    /// Only compare digests: no chunk is sent.
    pub checksum_only: bool,
    /// Data streams the driver runs.
    pub streams: u16,
}

/// Work the driver does for the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendEvent {
    /// Hash these chunks of the source file of entry `entry` as they are on disk (chunks
    /// the receiver already has, or every chunk in `--checksum-only`) and answer each with
    /// [`SendInput::Hashed`](super::SendInput::Hashed).
    HashFromFile {
        /// The entry (index in the file list).
        entry: EntryId,
        /// The chunk indices.
        chunks: Vec<u32>,
    },
    /// Every chunk of entry `entry` was read ([`SendSession::check_sources`]): check that
    /// its source is still what the list says (size, mtime, device, inode and ctime) and
    /// answer with [`SendInput::SourceChecked`](super::SendInput::SourceChecked).
    CheckSource {
        /// The entry (index in the file list).
        entry: EntryId,
    },
}

/// What a free data stream does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// Send these chunks (a chunk, or several small files).
    Send(WorkUnit),
    /// Nothing to send now (the list is not answered yet, or chunks in flight may still
    /// fail): wait for the session to change.
    Wait,
    /// Every chunk is verified: close the stream.
    Finished,
}

/// What the sender did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendOutcome {
    /// Files committed by the receiver (digest matched), or equal in `--checksum-only`.
    pub files_ok: u64,
    /// Files skipped by the receiver (`--no-clobber`).
    pub files_skipped: u64,
    /// A striped copy: entries the receiver left to another pair (`SkipReason::OtherShare`).
    pub files_to_other_shares: u64,
    /// Files that failed, with why.
    pub failed: Vec<String>,
    /// Chunk payload bytes put on the wire in this run.
    pub sent_bytes: u64,
    /// Bytes verified in an earlier run and not sent again.
    pub resumed_bytes: u64,
    /// Chunks the receiver refused (and that were sent again).
    pub rejected_chunks: u64,
    /// Sync: bytes of chunks the receiver's old copy already held (sent as a header only).
    pub reused_bytes: u64,
    /// Sync: files the receiver had an old copy of (`OldChunks`).
    pub files_compared: u64,
    /// Files the receiver found complete by the quick check (same size and mtime;
    /// counted in `files_ok` too).
    pub files_unchanged: u64,
    /// Bytes of those files (counted in `resumed_bytes` too).
    pub unchanged_bytes: u64,
    /// `sync -n`: what a real run would send, file by file.
    pub would_send: Vec<WouldSend>,
    /// Entries the receiver removed for `--delete` (its `FileListEnd` says).
    pub deleted: u64,
}

/// `sync -n`: what a real run would send for one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WouldSend {
    /// The entry's path (as listed, from the source's base name).
    pub path: Vec<u8>,
    /// The file's size.
    pub size: u64,
    /// Payload bytes that would cross.
    pub bytes: u64,
    /// The destination has a copy, compared chunk by chunk (else the file is new there).
    pub compared: bool,
}
