//! The file-transfer messages and the types they carry: the request, file-list entries,
//! and the receiver's reasons for skipping a file or refusing a chunk.

use crate::jump_ask::JumpAsk;

use super::{EntryId, TransferOptions};

// Named by doc links only.
#[cfg(doc)]
use super::{
    ChunkHeader, CHUNK_FLAG_SAME, MAX_FILTER_PATTERN_BYTES, MAX_FILTER_RULES, MAX_HASHES_PER_FRAME,
    MAX_PATH_BYTES, MAX_REASON_BYTES,
};
#[cfg(doc)]
use crate::limits::MAX_TEXT;

/// Which way the files go, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDirection {
    /// Client sends files to the server's root.
    Push,
    /// Client fetches files from the server's root.
    Pull,
}

/// What the client asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferParams {
    /// Push or pull.
    pub direction: CopyDirection,
    /// Number of data streams.
    pub streams: u16,
    /// Chunk size the client proposes, bytes.
    pub chunk_size: u64,
    /// Total pacing rate, bit/s (0 = none).
    pub rate_bps: u64,
    /// Socket buffer per stream, bytes (0 = autotune).
    pub window_bytes: u64,
    /// RTT the client measured, microseconds.
    pub rtt_us: u32,
    /// What the flag bits ask for (parsed on decode: unknown bits are refused).
    pub options: TransferOptions,
    /// Congestion control the server uses when it is the sender (a pull); empty: its
    /// own choice.
    pub congestion: String,
    /// The server-side path (below its root): destination of a push, source of a pull.
    pub path: Vec<u8>,
    /// Jump-start (a pull from a path seen before): the client asks the sending server to
    /// set its initial windows toward the client before the data connections and to
    /// start paced at the given rate (see `docs/jump-start.md`). Bounded by
    /// [`JumpAsk::validate`] here and by the server's own view there.
    pub jump: Option<JumpAsk>,
}

/// Kind of a file-list entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file (its chunks follow).
    File,
    /// A directory (created, no data).
    Dir,
    /// A symbolic link (created as a link with [`FileEntry::link_target`], no data; never
    /// followed at either end).
    Symlink,
    /// A hard link (`sync -H`): another name of an earlier [`EntryKind::File`] entry of
    /// the same list, whose entry path is [`FileEntry::link_target`]; no data (size 0).
    HardLink,
}

/// One file or directory the sender will send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Path relative to the transfer's top, `/`-separated bytes.
    pub path: Vec<u8>,
    /// File, directory or symlink.
    pub kind: EntryKind,
    /// Size in bytes (0 for a directory or a symlink).
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime_secs: i64,
    /// Modification time, nanoseconds (< 10^9).
    pub mtime_nanos: u32,
    /// Permission bits (<= 0o7777).
    pub mode: u32,
    /// Source fingerprint (device, inode, ctime) for the resume rule.
    pub fingerprint: u64,
    /// A symlink's target, as `readlink` gave it (1..=[`MAX_PATH_BYTES`] bytes, no NUL);
    /// a hard link's: the entry path of the earlier file it is another name of (same
    /// namespace as [`FileEntry::path`]). Empty for a file or a directory. On the wire
    /// only for a symlink or a hard link.
    pub link_target: Vec<u8>,
}

/// Why the receiver skips a whole file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// A complete, verified copy of this source is already in place.
    AlreadyComplete,
    /// The destination exists and `--no-clobber` is set.
    Exists,
    /// The path was refused (escape attempt, bad name).
    PathRefused,
    /// `--checksum-only`: the destination has no such file.
    Missing,
    /// A striped copy: another pair moves this entry ([`crate::stripe`]).
    OtherShare,
}

/// Why the receiver refused a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// Its hash did not match.
    Checksum,
    /// Writing it failed (disk full, I/O error); the sender may retry elsewhere or stop.
    WriteFailed,
    /// The chunk does not belong to a file being received.
    Unknown,
}

/// A file-transfer message on the control connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferMessage {
    /// Client to server: what to copy.
    TransferParams(TransferParams),
    /// Server to client: accepted; the chunk size both ends use, and what the server did
    /// with a jump-start ask.
    TransferReady {
        /// Chunk size in bytes.
        chunk_size: u64,
        /// The jump the server carries out: its total start rate when it sends (a pull),
        /// 0 when it does not jump (see `jump_note`) or receives.
        jump_start_bps: u64,
        /// Why the server did not jump as asked ("" when it did or was not asked), at most
        /// [`MAX_TEXT`] bytes.
        jump_note: String,
    },
    /// Sender to receiver: entries `first_id..first_id + entries.len()`.
    FileEntries {
        /// Id of the first entry.
        first_id: EntryId,
        /// The entries.
        entries: Vec<FileEntry>,
    },
    /// Sender to receiver: the list is complete; receiver to sender: every entry is
    /// answered (and, with `--delete`, the extras are removed).
    FileListEnd {
        /// Number of entries sent.
        files: u32,
        /// Total bytes of all files.
        bytes: u64,
        /// From the receiver: entries it removed for `--delete` (0 from the sender).
        deleted: u32,
    },
    /// Receiver to sender: chunks of `file` already verified (from its resume manifest).
    HaveChunks {
        /// File id.
        file: EntryId,
        /// `(first chunk, count)` runs.
        ranges: Vec<(u32, u32)>,
    },
    /// Receiver to sender (sync): the chunk hashes of the copy the receiver already has
    /// of `file` (a different size or mtime, or `--checksum`), chunks `first..first +
    /// hashes.len()` on the transfer's chunk grid over that copy's own size. A chunk of the
    /// source with the same hash goes as a [`ChunkHeader`] with [`CHUNK_FLAG_SAME`] and no
    /// bytes: the receiver takes it from its copy.
    OldChunks {
        /// File id.
        file: EntryId,
        /// Index of the first chunk.
        first: u32,
        /// Their hashes (at most [`MAX_HASHES_PER_FRAME`]).
        hashes: Vec<[u8; 32]>,
    },
    /// Receiver to sender: do not send `file`.
    SkipFile {
        /// File id.
        file: EntryId,
        /// Why.
        reason: SkipReason,
    },
    /// Receiver to sender: chunk checked and synced.
    ChunkVerified {
        /// File id.
        file: EntryId,
        /// Chunk index.
        index: u32,
    },
    /// Receiver to sender: chunk refused; it will be sent again.
    ChunkRejected {
        /// File id.
        file: EntryId,
        /// Chunk index.
        index: u32,
        /// Why.
        reason: RejectReason,
    },
    /// Sender to receiver: BLAKE3 of the whole source file.
    FileDigest {
        /// File id.
        file: EntryId,
        /// The digest.
        blake3: [u8; 32],
    },
    /// Receiver to sender: digests compared; if `ok`, the file is in place.
    FileCommitted {
        /// File id.
        file: EntryId,
        /// Whether the digests matched and the rename succeeded.
        ok: bool,
        /// Why not, when not `ok` (at most [`MAX_REASON_BYTES`]; empty when `ok`).
        reason: String,
    },
    /// Sender to receiver, instead of [`TransferMessage::FileDigest`], once every chunk of
    /// `file` was read ([`crate::features::SOURCE_CHANGED`]): the source is not what was
    /// listed any more (written, truncated or replaced while it was read), so what was
    /// sent may mix two versions. The receiver commits nothing of it and answers
    /// `FileCommitted` with `ok` false and this reason.
    SourceChanged {
        /// File id.
        file: EntryId,
        /// What changed (at most [`MAX_REASON_BYTES`]).
        reason: String,
    },
    /// Sender to receiver (`sync -n`): the payload bytes a real run would send for
    /// `file` (its chunks whose hash differs from the receiver's copy, or all of it).
    WouldSend {
        /// File id.
        file: EntryId,
        /// Payload bytes.
        bytes: u64,
    },
    /// Client to server, right after `TransferParams` (empty when there are none): the
    /// `--include` (true) and `--exclude` (false) rules in command-line order. A pull's
    /// server lists only what they include; a push's server keeps what they exclude from
    /// `--delete`.
    FilterRules {
        /// `(include, pattern)`, at most [`MAX_FILTER_RULES`], each pattern 1 to
        /// [`MAX_FILTER_PATTERN_BYTES`] bytes; all in one frame.
        rules: Vec<(bool, Vec<u8>)>,
    },
    /// Either end: the transfer is over.
    TransferDone {
        /// Files committed.
        files: u32,
        /// Bytes sent.
        bytes: u64,
    },
}

impl TransferMessage {
    /// A short name of the message kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TransferParams(_) => "TransferParams",
            Self::TransferReady { .. } => "TransferReady",
            Self::FileEntries { .. } => "FileEntries",
            Self::FileListEnd { .. } => "FileListEnd",
            Self::HaveChunks { .. } => "HaveChunks",
            Self::OldChunks { .. } => "OldChunks",
            Self::WouldSend { .. } => "WouldSend",
            Self::SkipFile { .. } => "SkipFile",
            Self::ChunkVerified { .. } => "ChunkVerified",
            Self::ChunkRejected { .. } => "ChunkRejected",
            Self::FileDigest { .. } => "FileDigest",
            Self::FileCommitted { .. } => "FileCommitted",
            Self::SourceChanged { .. } => "SourceChanged",
            Self::TransferDone { .. } => "TransferDone",
            Self::FilterRules { .. } => "FilterRules",
        }
    }
}
