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
//!   receiver->sender  FileCommitted{file, ok, reason} (digest matched, renamed into place)
//!   both              TransferDone{files, bytes}
//!   (sync -n: no chunks; sender->receiver WouldSend{file, bytes} per file, then TransferDone)
//! ```
//! Paths travel as raw bytes (Linux names need not be UTF-8), bounded here by length
//! only; the receiver must validate them with `longhaul-transfer`'s `parse_peer_path`.
//! A symlink's target is text the receiver stores verbatim (never resolved): bounded by
//! length (1..=[`MAX_PATH_BYTES`]) and free of NUL, nothing else.

use crate::error::ProtoError;
use crate::limits::{MAX_FRAME_BODY, MAX_TEXT};
use crate::message::JumpAsk;
use crate::wire::{invalid, Reader, Writer};
use crate::FRAME_HEADER_LEN;

mod chunk_header;
mod options;

pub use chunk_header::{
    ChunkHeader, CHUNK_FLAG_HOLE, CHUNK_FLAG_SAME, CHUNK_FLAG_WARMUP, MAX_WARMUP_BYTES,
};
pub use options::{transfer_flags, TransferOptions};

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
    pub const LAST: u8 = 0x4f;
}

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
        first_id: u32,
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
        file: u32,
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
        file: u32,
        /// Index of the first chunk.
        first: u32,
        /// Their hashes (at most [`MAX_HASHES_PER_FRAME`]).
        hashes: Vec<[u8; 32]>,
    },
    /// Receiver to sender: do not send `file`.
    SkipFile {
        /// File id.
        file: u32,
        /// Why.
        reason: SkipReason,
    },
    /// Receiver to sender: chunk checked and synced.
    ChunkVerified {
        /// File id.
        file: u32,
        /// Chunk index.
        index: u32,
    },
    /// Receiver to sender: chunk refused; it will be sent again.
    ChunkRejected {
        /// File id.
        file: u32,
        /// Chunk index.
        index: u32,
        /// Why.
        reason: RejectReason,
    },
    /// Sender to receiver: BLAKE3 of the whole source file.
    FileDigest {
        /// File id.
        file: u32,
        /// The digest.
        blake3: [u8; 32],
    },
    /// Receiver to sender: digests compared; if `ok`, the file is in place.
    FileCommitted {
        /// File id.
        file: u32,
        /// Whether the digests matched and the rename succeeded.
        ok: bool,
        /// Why not, when not `ok` (at most [`MAX_REASON_BYTES`]; empty when `ok`).
        reason: String,
    },
    /// Sender to receiver (`sync -n`): the payload bytes a real run would send for
    /// `file` (its chunks whose hash differs from the receiver's copy, or all of it).
    WouldSend {
        /// File id.
        file: u32,
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
            Self::TransferDone { .. } => "TransferDone",
            Self::FilterRules { .. } => "FilterRules",
        }
    }
}

/// Whether the frame at the start of `buf` is a file-transfer frame (decode it with
/// [`decode_transfer_frame`]) or a bench/session one (`decode_frame`); `None` until the
/// type byte has arrived.
pub fn is_transfer_frame(buf: &[u8]) -> Option<bool> {
    buf.get(FRAME_HEADER_LEN)
        .map(|t| (ty::FIRST..=ty::LAST).contains(t))
}

/// Appends `msg` as one frame. Refuses (rather than cuts) a message that breaks a bound,
/// so what is encoded always decodes; use [`pack_file_entries`] to split long lists.
pub fn encode_transfer_frame(msg: &TransferMessage, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    validate(msg)?;
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    let mut w = Writer(out);
    match msg {
        TransferMessage::TransferParams(p) => {
            w.u8(ty::TRANSFER_PARAMS);
            w.u8(match p.direction {
                CopyDirection::Push => 0,
                CopyDirection::Pull => 1,
            });
            w.u16(p.streams);
            w.u64(p.chunk_size);
            w.u64(p.rate_bps);
            w.u64(p.window_bytes);
            w.u32(p.rtt_us);
            w.u32(p.options.bits());
            w.text(&p.congestion, crate::limits::MAX_CONGESTION_NAME);
            w.path(&p.path);
            w.jump_ask(p.jump.as_ref());
        }
        TransferMessage::TransferReady {
            chunk_size,
            jump_start_bps,
            jump_note,
        } => {
            w.u8(ty::TRANSFER_READY);
            w.u64(*chunk_size);
            w.u64(*jump_start_bps);
            w.text(jump_note, MAX_TEXT);
        }
        TransferMessage::FileEntries { first_id, entries } => {
            w.u8(ty::FILE_ENTRIES);
            w.u32(*first_id);
            w.u16(entries.len() as u16);
            for e in entries {
                w.path(&e.path);
                w.u8(match e.kind {
                    EntryKind::File => 0,
                    EntryKind::Dir => 1,
                    EntryKind::Symlink => 2,
                    EntryKind::HardLink => 3,
                });
                w.u64(e.size);
                w.u64(e.mtime_secs as u64);
                w.u32(e.mtime_nanos);
                w.u32(e.mode);
                w.u64(e.fingerprint);
                if matches!(e.kind, EntryKind::Symlink | EntryKind::HardLink) {
                    w.path(&e.link_target);
                }
            }
        }
        TransferMessage::FileListEnd {
            files,
            bytes,
            deleted,
        } => {
            w.u8(ty::FILE_LIST_END);
            w.u32(*files);
            w.u64(*bytes);
            w.u32(*deleted);
        }
        TransferMessage::HaveChunks { file, ranges } => {
            w.u8(ty::HAVE_CHUNKS);
            w.u32(*file);
            w.u16(ranges.len() as u16);
            for &(first, count) in ranges {
                w.u32(first);
                w.u32(count);
            }
        }
        TransferMessage::OldChunks {
            file,
            first,
            hashes,
        } => {
            w.u8(ty::OLD_CHUNKS);
            w.u32(*file);
            w.u32(*first);
            w.u16(hashes.len() as u16);
            for h in hashes {
                w.bytes(h);
            }
        }
        TransferMessage::SkipFile { file, reason } => {
            w.u8(ty::SKIP_FILE);
            w.u32(*file);
            w.u8(match reason {
                SkipReason::AlreadyComplete => 0,
                SkipReason::Exists => 1,
                SkipReason::PathRefused => 2,
                SkipReason::Missing => 3,
            });
        }
        TransferMessage::ChunkVerified { file, index } => {
            w.u8(ty::CHUNK_VERIFIED);
            w.u32(*file);
            w.u32(*index);
        }
        TransferMessage::ChunkRejected {
            file,
            index,
            reason,
        } => {
            w.u8(ty::CHUNK_REJECTED);
            w.u32(*file);
            w.u32(*index);
            w.u8(match reason {
                RejectReason::Checksum => 0,
                RejectReason::WriteFailed => 1,
                RejectReason::Unknown => 2,
            });
        }
        TransferMessage::FileDigest { file, blake3 } => {
            w.u8(ty::FILE_DIGEST);
            w.u32(*file);
            w.0.extend_from_slice(blake3);
        }
        TransferMessage::FileCommitted { file, ok, reason } => {
            w.u8(ty::FILE_COMMITTED);
            w.u32(*file);
            w.u8(u8::from(*ok));
            w.text(reason, MAX_REASON_BYTES);
        }
        TransferMessage::WouldSend { file, bytes } => {
            w.u8(ty::WOULD_SEND);
            w.u32(*file);
            w.u64(*bytes);
        }
        TransferMessage::TransferDone { files, bytes } => {
            w.u8(ty::TRANSFER_DONE);
            w.u32(*files);
            w.u64(*bytes);
        }
        TransferMessage::FilterRules { rules } => {
            w.u8(ty::FILTER_RULES);
            w.u16(rules.len() as u16);
            for (include, pattern) in rules {
                w.u8(u8::from(*include));
                w.path(pattern);
            }
        }
    }
    let body = out.len() - start - FRAME_HEADER_LEN;
    if body > MAX_FRAME_BODY {
        out.truncate(start);
        return Err(invalid(
            "frame",
            format!("{body} bytes exceed the frame limit of {MAX_FRAME_BODY}; split the list"),
        ));
    }
    out[start..start + FRAME_HEADER_LEN].copy_from_slice(&(body as u32).to_be_bytes());
    Ok(())
}

/// Decodes one transfer frame from the start of `buf`: `Ok(None)` until it is complete,
/// else the message and the bytes it used. Never allocates more than the frame holds.
pub fn decode_transfer_frame(buf: &[u8]) -> Result<Option<(TransferMessage, usize)>, ProtoError> {
    let Some(header) = buf.get(..FRAME_HEADER_LEN) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len > MAX_FRAME_BODY {
        return Err(ProtoError::FrameTooLarge {
            len,
            max: MAX_FRAME_BODY,
        });
    }
    let Some(body) = buf.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len) else {
        return Ok(None);
    };
    let mut r = Reader(body);
    let msg = match r.u8("message type")? {
        ty::TRANSFER_PARAMS => TransferMessage::TransferParams(TransferParams {
            direction: match r.u8("direction")? {
                0 => CopyDirection::Push,
                1 => CopyDirection::Pull,
                v => {
                    return Err(invalid(
                        "direction",
                        format!("{v} is not push (0) or pull (1)"),
                    ))
                }
            },
            streams: r.u16("streams")?,
            chunk_size: r.u64("chunk size")?,
            rate_bps: r.u64("rate")?,
            window_bytes: r.u64("window")?,
            rtt_us: r.u32("rtt")?,
            options: TransferOptions::from_bits(r.u32("flags")?)?,
            congestion: r.text("congestion", crate::limits::MAX_CONGESTION_NAME)?,
            path: r.path()?,
            jump: r.jump_ask()?,
        }),
        ty::TRANSFER_READY => TransferMessage::TransferReady {
            chunk_size: r.u64("chunk size")?,
            jump_start_bps: r.u64("jump start rate")?,
            jump_note: r.text("jump note", MAX_TEXT)?,
        },
        ty::FILE_ENTRIES => {
            let first_id = r.u32("first id")?;
            let n = r.count("entries", MAX_ENTRIES_PER_FRAME)?;
            let mut entries = Vec::with_capacity(n.min(body.len() / 34));
            for _ in 0..n {
                let path = r.path()?;
                let kind = match r.u8("entry kind")? {
                    0 => EntryKind::File,
                    1 => EntryKind::Dir,
                    2 => EntryKind::Symlink,
                    3 => EntryKind::HardLink,
                    v => {
                        return Err(invalid(
                            "entry kind",
                            format!("{v} is not file (0), dir (1), symlink (2) or hard link (3)"),
                        ))
                    }
                };
                entries.push(FileEntry {
                    path,
                    kind,
                    size: r.u64("size")?,
                    mtime_secs: r.u64("mtime")? as i64,
                    mtime_nanos: r.u32("mtime nanos")?,
                    mode: r.u32("mode")?,
                    fingerprint: r.u64("fingerprint")?,
                    link_target: if matches!(kind, EntryKind::Symlink | EntryKind::HardLink) {
                        r.link_target()?
                    } else {
                        Vec::new()
                    },
                });
            }
            TransferMessage::FileEntries { first_id, entries }
        }
        ty::FILE_LIST_END => TransferMessage::FileListEnd {
            files: r.u32("files")?,
            bytes: r.u64("bytes")?,
            deleted: r.u32("deleted")?,
        },
        ty::HAVE_CHUNKS => {
            let file = r.u32("file")?;
            let n = r.count("ranges", MAX_RANGES_PER_FRAME)?;
            let mut ranges = Vec::with_capacity(n.min(body.len() / 8));
            for _ in 0..n {
                ranges.push((r.u32("range start")?, r.u32("range count")?));
            }
            TransferMessage::HaveChunks { file, ranges }
        }
        ty::OLD_CHUNKS => {
            let file = r.u32("file")?;
            let first = r.u32("first chunk")?;
            let n = r.count("hashes", MAX_HASHES_PER_FRAME)?;
            let mut hashes = Vec::with_capacity(n.min(body.len() / 32));
            for _ in 0..n {
                hashes.push(r.array("chunk hash")?);
            }
            if first.checked_add(n as u32).is_none() {
                return Err(invalid("first chunk", format!("{first} + {n} overflows")));
            }
            TransferMessage::OldChunks {
                file,
                first,
                hashes,
            }
        }
        ty::SKIP_FILE => TransferMessage::SkipFile {
            file: r.u32("file")?,
            reason: match r.u8("skip reason")? {
                0 => SkipReason::AlreadyComplete,
                1 => SkipReason::Exists,
                2 => SkipReason::PathRefused,
                3 => SkipReason::Missing,
                v => return Err(invalid("skip reason", format!("{v} is unknown"))),
            },
        },
        ty::CHUNK_VERIFIED => TransferMessage::ChunkVerified {
            file: r.u32("file")?,
            index: r.u32("chunk index")?,
        },
        ty::CHUNK_REJECTED => TransferMessage::ChunkRejected {
            file: r.u32("file")?,
            index: r.u32("chunk index")?,
            reason: match r.u8("reject reason")? {
                0 => RejectReason::Checksum,
                1 => RejectReason::WriteFailed,
                2 => RejectReason::Unknown,
                v => return Err(invalid("reject reason", format!("{v} is unknown"))),
            },
        },
        ty::FILE_DIGEST => TransferMessage::FileDigest {
            file: r.u32("file")?,
            blake3: r.array("blake3 digest")?,
        },
        ty::FILE_COMMITTED => TransferMessage::FileCommitted {
            file: r.u32("file")?,
            ok: match r.u8("ok")? {
                0 => false,
                1 => true,
                v => return Err(invalid("ok", format!("{v} is not a boolean"))),
            },
            reason: r.text("reason", MAX_REASON_BYTES)?,
        },
        ty::WOULD_SEND => TransferMessage::WouldSend {
            file: r.u32("file")?,
            bytes: r.u64("bytes")?,
        },
        ty::TRANSFER_DONE => TransferMessage::TransferDone {
            files: r.u32("files")?,
            bytes: r.u64("bytes")?,
        },
        ty::FILTER_RULES => {
            let n = r.count("filter rules", MAX_FILTER_RULES)?;
            let mut rules = Vec::with_capacity(n.min(body.len() / 4));
            for _ in 0..n {
                let include = match r.u8("rule kind")? {
                    0 => false,
                    1 => true,
                    v => {
                        return Err(invalid(
                            "rule kind",
                            format!("{v} is not exclude (0) or include (1)"),
                        ))
                    }
                };
                rules.push((include, r.path()?));
            }
            TransferMessage::FilterRules { rules }
        }
        t => return Err(ProtoError::UnknownType(t)),
    };
    if !r.0.is_empty() {
        return Err(ProtoError::TrailingBytes {
            kind: msg.kind(),
            extra: r.0.len(),
        });
    }
    validate(&msg)?;
    Ok(Some((msg, FRAME_HEADER_LEN + len)))
}

/// Splits a file list into `FileEntries` frames that each fit the frame limit, ids
/// starting at `first_id`. Fails only if an entry breaks a bound by itself.
pub fn pack_file_entries(
    entries: &[FileEntry],
    first_id: u32,
) -> Result<Vec<TransferMessage>, ProtoError> {
    const FIXED: usize = 1 + 4 + 2; // type, first id, count
    let mut out = Vec::new();
    let mut batch: Vec<FileEntry> = Vec::new();
    let mut batch_first = first_id;
    let mut size = FIXED;
    for (i, e) in entries.iter().enumerate() {
        let id = first_id
            .checked_add(i as u32)
            .filter(|&id| id <= MAX_FILE_ID)
            .ok_or_else(|| invalid("file id", format!("more than {} files", MAX_FILE_ID + 1)))?;
        validate_entry(e)?;
        let need = entry_wire_len(e);
        if !batch.is_empty()
            && (size + need > MAX_FRAME_BODY || batch.len() == MAX_ENTRIES_PER_FRAME)
        {
            out.push(TransferMessage::FileEntries {
                first_id: batch_first,
                entries: std::mem::take(&mut batch),
            });
            batch_first = id;
            size = FIXED;
        }
        size += need;
        batch.push(e.clone());
    }
    if !batch.is_empty() {
        out.push(TransferMessage::FileEntries {
            first_id: batch_first,
            entries: batch,
        });
    }
    Ok(out)
}

/// Splits the chunk hashes of a receiver's copy of one file into `OldChunks` frames of
/// at most [`MAX_HASHES_PER_FRAME`] hashes each (none for no hashes).
pub fn pack_old_chunks(file: u32, hashes: &[[u8; 32]]) -> Vec<TransferMessage> {
    hashes
        .chunks(MAX_HASHES_PER_FRAME)
        .enumerate()
        .map(|(i, c)| TransferMessage::OldChunks {
            file,
            first: (i * MAX_HASHES_PER_FRAME) as u32,
            hashes: c.to_vec(),
        })
        .collect()
}

/// Splits the verified runs of one file into `HaveChunks` frames of at most
/// [`MAX_RANGES_PER_FRAME`] runs each (none for no runs).
pub fn pack_have_chunks(file: u32, runs: &[(u32, u32)]) -> Vec<TransferMessage> {
    runs.chunks(MAX_RANGES_PER_FRAME)
        .map(|c| TransferMessage::HaveChunks {
            file,
            ranges: c.to_vec(),
        })
        .collect()
}

fn entry_wire_len(e: &FileEntry) -> usize {
    let target = match e.kind {
        EntryKind::Symlink | EntryKind::HardLink => 2 + e.link_target.len(),
        EntryKind::File | EntryKind::Dir => 0,
    };
    2 + e.path.len() + 1 + 8 + 8 + 4 + 4 + 8 + target
}

fn validate(msg: &TransferMessage) -> Result<(), ProtoError> {
    let file_id = |file: u32| {
        if file > MAX_FILE_ID {
            Err(invalid("file id", format!("{file} exceeds {MAX_FILE_ID}")))
        } else {
            Ok(())
        }
    };
    let chunk = |c: u64| {
        if valid_chunk_size(c) {
            Ok(())
        } else {
            Err(invalid(
                "chunk size",
                format!("{c} bytes is not a power of two in 4 KiB..=1 GiB"),
            ))
        }
    };
    match msg {
        TransferMessage::TransferParams(p) => {
            if p.streams == 0 || p.streams > crate::limits::MAX_STREAMS {
                return Err(invalid(
                    "streams",
                    format!(
                        "{} is outside 1..={}",
                        p.streams,
                        crate::limits::MAX_STREAMS
                    ),
                ));
            }
            if !crate::limits::is_congestion_name(&p.congestion) {
                return Err(invalid(
                    "congestion",
                    format!("{:?} is not a congestion-control name", p.congestion),
                ));
            }
            chunk(p.chunk_size)?;
            path_len(&p.path)?;
            p.jump.as_ref().map_or(Ok(()), JumpAsk::validate)
        }
        TransferMessage::TransferReady {
            chunk_size,
            jump_note,
            ..
        } => {
            if jump_note.len() > MAX_TEXT {
                return Err(invalid(
                    "jump note",
                    format!("{} bytes exceed {MAX_TEXT}", jump_note.len()),
                ));
            }
            chunk(*chunk_size)
        }
        TransferMessage::FileEntries { first_id, entries } => {
            if entries.len() > MAX_ENTRIES_PER_FRAME {
                return Err(invalid(
                    "entries",
                    format!("{} exceed {MAX_ENTRIES_PER_FRAME} per frame", entries.len()),
                ));
            }
            let last = u64::from(*first_id) + entries.len() as u64;
            if last > u64::from(MAX_FILE_ID) + 1 {
                return Err(invalid(
                    "file id",
                    format!("{first_id} + {} exceeds {MAX_FILE_ID}", entries.len()),
                ));
            }
            entries.iter().try_for_each(validate_entry)
        }
        TransferMessage::HaveChunks { file, ranges } => {
            file_id(*file)?;
            if ranges.len() > MAX_RANGES_PER_FRAME {
                return Err(invalid(
                    "ranges",
                    format!("{} exceed {MAX_RANGES_PER_FRAME} per frame", ranges.len()),
                ));
            }
            if ranges
                .iter()
                .any(|&(a, n)| n == 0 || a.checked_add(n).is_none())
            {
                return Err(invalid("ranges", "a range is empty or overflows".into()));
            }
            Ok(())
        }
        TransferMessage::OldChunks {
            file,
            first,
            hashes,
        } => {
            file_id(*file)?;
            if hashes.len() > MAX_HASHES_PER_FRAME
                || first.checked_add(hashes.len() as u32).is_none()
            {
                return Err(invalid(
                    "hashes",
                    format!(
                        "{} from chunk {first}: more than {MAX_HASHES_PER_FRAME} per frame or past the last chunk id",
                        hashes.len()
                    ),
                ));
            }
            Ok(())
        }
        TransferMessage::SkipFile { file, .. }
        | TransferMessage::WouldSend { file, .. }
        | TransferMessage::ChunkVerified { file, .. }
        | TransferMessage::ChunkRejected { file, .. }
        | TransferMessage::FileDigest { file, .. } => file_id(*file),
        TransferMessage::FileCommitted { file, reason, .. } => {
            if reason.len() > MAX_REASON_BYTES {
                return Err(invalid(
                    "reason",
                    format!("{} bytes exceed {MAX_REASON_BYTES}", reason.len()),
                ));
            }
            file_id(*file)
        }
        TransferMessage::FilterRules { rules } => {
            if rules.len() > MAX_FILTER_RULES {
                return Err(invalid(
                    "filter rules",
                    format!("{} exceed {MAX_FILTER_RULES}", rules.len()),
                ));
            }
            rules.iter().try_for_each(|(_, p)| path_len(p))
        }
        TransferMessage::FileListEnd { files, .. }
        | TransferMessage::TransferDone { files, .. } => {
            if *files > MAX_FILE_ID + 1 {
                return Err(invalid(
                    "files",
                    format!("{files} exceeds {}", MAX_FILE_ID + 1),
                ));
            }
            Ok(())
        }
    }
}

fn validate_entry(e: &FileEntry) -> Result<(), ProtoError> {
    path_len(&e.path)?;
    if e.mtime_nanos >= 1_000_000_000 {
        return Err(invalid(
            "mtime nanos",
            format!("{} is not below 10^9", e.mtime_nanos),
        ));
    }
    if e.mode > 0o7777 {
        return Err(invalid(
            "mode",
            format!("{:#o} has bits beyond 0o7777", e.mode),
        ));
    }
    match e.kind {
        EntryKind::File => {}
        EntryKind::Dir if e.size != 0 => {
            return Err(invalid("size", format!("a directory with size {}", e.size)));
        }
        EntryKind::Dir => {}
        EntryKind::Symlink | EntryKind::HardLink if e.size != 0 => {
            let what = if e.kind == EntryKind::Symlink {
                "symlink"
            } else {
                "hard link"
            };
            return Err(invalid("size", format!("a {what} with size {}", e.size)));
        }
        EntryKind::Symlink | EntryKind::HardLink => {
            path_len(&e.link_target).map_err(|_| {
                invalid(
                    "link target",
                    format!(
                        "{} bytes is outside 1..={MAX_PATH_BYTES}",
                        e.link_target.len()
                    ),
                )
            })?;
            if e.link_target.contains(&0) {
                return Err(invalid("link target", "it contains a NUL byte".into()));
            }
        }
    }
    if matches!(e.kind, EntryKind::File | EntryKind::Dir) && !e.link_target.is_empty() {
        return Err(invalid(
            "link target",
            format!("a {:?} entry with a link target", e.kind),
        ));
    }
    Ok(())
}

fn path_len(p: &[u8]) -> Result<(), ProtoError> {
    if p.is_empty() || p.len() > MAX_PATH_BYTES {
        return Err(invalid(
            "path",
            format!("{} bytes is outside 1..={MAX_PATH_BYTES}", p.len()),
        ));
    }
    Ok(())
}

/// Whether `c` can be a chunk size: a power of two (so every chunk is a whole subtree of
/// the file's BLAKE3 tree) within [`MIN_CHUNK_BYTES`]..=[`MAX_CHUNK_BYTES`].
pub fn valid_chunk_size(c: u64) -> bool {
    (MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&c) && c.is_power_of_two()
}

impl Writer<'_> {
    fn path(&mut self, p: &[u8]) {
        self.u16(p.len() as u16);
        self.0.extend_from_slice(p);
    }
}

impl Reader<'_> {
    fn path(&mut self) -> Result<Vec<u8>, ProtoError> {
        let n = self.u16("path length")? as usize;
        if n == 0 || n > MAX_PATH_BYTES {
            return Err(invalid(
                "path",
                format!("{n} bytes is outside 1..={MAX_PATH_BYTES}"),
            ));
        }
        Ok(self.take(n, "path")?.to_vec())
    }

    fn link_target(&mut self) -> Result<Vec<u8>, ProtoError> {
        let n = self.u16("link target length")? as usize;
        if n == 0 || n > MAX_PATH_BYTES {
            return Err(invalid(
                "link target",
                format!("{n} bytes is outside 1..={MAX_PATH_BYTES}"),
            ));
        }
        Ok(self.take(n, "link target")?.to_vec())
    }
}
