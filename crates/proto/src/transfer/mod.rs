//! Messages of a file transfer (`longhaul cp`), additive to the bench protocol: the same
//! frame format (`len: u32 BE | type: u8 | fields`, big-endian, bounded) with type bytes
//! in `0x40..=0x4f`, so a control connection can carry both ([`is_transfer_frame`] tells
//! which decoder to use). Plus the fixed-size [`ChunkHeader`] that precedes each chunk's
//! raw bytes on a data stream (a chunk is up to 1 GiB, far beyond a frame).
//!
//! ```text
//! control (after Welcome):
//!   C->S TransferParams{direction, streams, chunk_size, rate, window, rtt, flags,
//!                       congestion, path, jump?{start, remembered, initcwnd, initrwnd}}
//!   C->S FilterRules{[(include, pattern)]}           (always, right after the request)
//!   S->C TransferReady{chunk_size, jump_start_bps, jump_note}
//!   sender->receiver  FileEntries{first_id, [path, kind, size, mtime, mode, fingerprint,
//!                                (symlink: target)]}*  FileListEnd
//!   receiver->sender  (answers below) FileListEnd{files, bytes, deleted}
//!   receiver->sender  HaveChunks{file, ranges}* | SkipFile{file, reason}   (from resume manifests)
//!                     OldChunks{file, first, hashes}*   (sync: the chunk hashes of the copy it has)
//!   data:  sender->receiver  ChunkHeader + bytes, ...
//!   receiver->sender  ChunkVerified{file, index} | ChunkRejected{file, index, reason}
//!   sender->receiver  FileDigest{file, blake3}      (whole-file digest)
//!                     | SourceChanged{file, reason} (the source changed while it was read)
//!   receiver->sender  FileCommitted{file, ok, reason} (digest matched, renamed into place)
//!   both              TransferDone{files, bytes}
//!   (sync -n: no chunks; sender->receiver WouldSend{file, bytes} per file, then TransferDone)
//! ```
//! Paths travel as raw bytes (Linux names need not be UTF-8), bounded here by length
//! only; the receiver must validate them with `longhaul-transfer`'s `parse_peer_path`.
//! A symlink's target is text the receiver stores verbatim (never resolved): bounded by
//! length (1..=[`MAX_PATH_BYTES`]) and free of NUL, nothing else.
//!
//! The module's parts: the messages ([`TransferMessage`] and the types in it), their
//! frame codec, the bounds every message is checked against, the packing of long lists
//! into frames, and the chunk header and request flags.

use crate::FRAME_HEADER_LEN;

mod chunk_header;
mod codec;
mod entry_id;
mod message;
mod options;
mod pack;
mod validate;

pub use chunk_header::{
    ChunkHeader, CHUNK_FLAG_HASH_AFTER, CHUNK_FLAG_HOLE, CHUNK_FLAG_SAME, CHUNK_FLAG_TRAILER,
    CHUNK_FLAG_WARMUP, MAX_WARMUP_BYTES,
};
pub use codec::{decode_transfer_frame, encode_transfer_frame};
pub use entry_id::EntryId;
pub use message::{
    CopyDirection, EntryKind, FileEntry, RejectReason, SkipReason, TransferMessage, TransferParams,
};
pub use options::{transfer_flags, TransferOptions};
pub use pack::{pack_file_entries, pack_have_chunks, pack_old_chunks};
pub use validate::valid_chunk_size;

/// Longest path in a file entry, in bytes (Linux `PATH_MAX` - 1).
pub const MAX_PATH_BYTES: usize = 4095;
/// Most file entries in one `FileEntries` frame.
pub const MAX_ENTRIES_PER_FRAME: usize = 1024;
/// Most ranges in one `HaveChunks` frame.
pub const MAX_RANGES_PER_FRAME: usize = 4096;
/// Most chunk hashes in one `OldChunks` frame (32 bytes each, within a 64 KiB frame).
pub const MAX_HASHES_PER_FRAME: usize = 2000;
/// Longest reason in a `FileCommitted`, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;
/// Largest file id (files per transfer are bounded by 2^24).
pub const MAX_FILE_ID: u32 = (1 << 24) - 1;
/// Smallest chunk size a peer may ask for.
pub const MIN_CHUNK_BYTES: u64 = 4 * 1024;
/// Largest chunk size a peer may ask for.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;
/// Most rules in a `FilterRules` message.
pub const MAX_FILTER_RULES: usize = 1000;
/// Longest pattern in a `FilterRules` message, in bytes.
pub const MAX_FILTER_PATTERN_BYTES: usize = 4095;

mod ty {
    pub const FIRST: u8 = 0x40;
    pub const TRANSFER_PARAMS: u8 = 0x40;
    pub const TRANSFER_READY: u8 = 0x41;
    pub const FILE_ENTRIES: u8 = 0x42;
    pub const FILE_LIST_END: u8 = 0x43;
    pub const HAVE_CHUNKS: u8 = 0x44;
    pub const SKIP_FILE: u8 = 0x45;
    pub const CHUNK_VERIFIED: u8 = 0x46;
    pub const CHUNK_REJECTED: u8 = 0x47;
    pub const FILE_DIGEST: u8 = 0x48;
    pub const FILE_COMMITTED: u8 = 0x49;
    pub const TRANSFER_DONE: u8 = 0x4a;
    pub const OLD_CHUNKS: u8 = 0x4b;
    pub const WOULD_SEND: u8 = 0x4d;
    pub const FILTER_RULES: u8 = 0x4c;
    pub const SOURCE_CHANGED: u8 = 0x4e;
    pub const LAST: u8 = 0x4f;
}

/// Whether the frame at the start of `buf` is a file-transfer frame (decode it with
/// [`decode_transfer_frame`]) or a bench/session one (`decode_frame`); `None` until the
/// type byte has arrived.
pub fn is_transfer_frame(buf: &[u8]) -> Option<bool> {
    buf.get(FRAME_HEADER_LEN)
        .map(|t| (ty::FIRST..=ty::LAST).contains(t))
}
