//! Namespace operations on a daemon's files, for storage clients such as the gfal2 plugin
//! (FTS3 and Rucio stat, list, make and remove directories, delete files and ask for
//! checksums before and after a copy): one request per session, instead of parameters.
//!
//! ```text
//!   C->S FsRequest{op, path}                         (after the proof, as TransferParams)
//!   S->C FsStat{..} | FsEntries{..}* FsDone | FsDone | FsChecksum{..} | FsFailed{..}
//! ```
//!
//! The path is a request's wire path (below the root, or an area's name first); a
//! listing comes in frames of at most [`MAX_FS_ENTRIES_PER_FRAME`] entries.

use crate::error::ProtoError;
use crate::limits::MAX_TEXT;
use crate::ticket::{get_path, put_path};
use crate::wire::{invalid, Reader, Writer};

/// Most entries in one [`crate::Message::FsEntries`] frame (each at most 255 bytes of name
/// and 26 of stat: within a 64 KiB frame).
pub const MAX_FS_ENTRIES_PER_FRAME: usize = 200;
/// Longest name of a listed entry (Linux's NAME_MAX).
pub const MAX_NAME_BYTES: usize = 255;
/// Most entries a listing holds in all: a directory with more is refused, naming the count.
pub const MAX_FS_LISTING: usize = 1_000_000;

/// What a checksum request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumKind {
    /// BLAKE3 of the whole file (the digest cp checks), 32 bytes.
    Blake3,
    /// ADLER32 (what FTS3 compares by default), 4 bytes.
    Adler32,
}

/// One namespace operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsOp {
    /// The entry's kind, size, mode and mtime (symlinks not followed).
    Stat,
    /// A directory's entries.
    List,
    /// Make a directory (`parents`: and any missing above it, as `mkdir -p`).
    Mkdir {
        /// Permission bits (<= 0o7777).
        mode: u32,
        /// Make missing parents too; an existing directory is then no error.
        parents: bool,
    },
    /// Remove a file or symlink.
    Unlink,
    /// Remove an empty directory.
    Rmdir,
    /// A checksum of a file's bytes.
    Checksum(ChecksumKind),
}

impl FsOp {
    /// Whether the operation changes the files (refused in a read-only area).
    pub fn writes(self) -> bool {
        matches!(self, FsOp::Mkdir { .. } | FsOp::Unlink | FsOp::Rmdir)
    }
}

/// Kind of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else (a FIFO, a socket, a device).
    Other,
}

/// An entry's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStat {
    /// Its kind.
    pub kind: FsKind,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits (<= 0o7777).
    pub mode: u32,
    /// Modification time, seconds since the epoch.
    pub mtime_secs: i64,
    /// Modification time, nanoseconds (< 10^9).
    pub mtime_nanos: u32,
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsEntry {
    /// Its name in the directory (1..=255 bytes, no `/` or NUL).
    pub name: Vec<u8>,
    /// Its metadata.
    pub stat: FsStat,
}

/// Why an operation failed, as POSIX would say (a storage client maps it to an errno).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsErrorKind {
    /// No such file or directory (ENOENT).
    NotFound,
    /// It exists already (EEXIST).
    Exists,
    /// The directory is not empty (ENOTEMPTY).
    NotEmpty,
    /// A directory was needed (ENOTDIR).
    NotADirectory,
    /// A file was needed (EISDIR).
    IsADirectory,
    /// Not allowed (EACCES): a read-only area, permissions, a path outside the root.
    Denied,
    /// Anything else (EIO).
    Other,
}

impl FsErrorKind {
    fn to_wire(self) -> u8 {
        self as u8
    }

    fn from_wire(b: u8) -> Result<Self, ProtoError> {
        Ok(match b {
            0 => Self::NotFound,
            1 => Self::Exists,
            2 => Self::NotEmpty,
            3 => Self::NotADirectory,
            4 => Self::IsADirectory,
            5 => Self::Denied,
            6 => Self::Other,
            v => return Err(invalid("fs error kind", format!("unknown value {v}"))),
        })
    }
}

pub(crate) fn put_op(w: &mut Writer<'_>, op: FsOp, path: &[u8]) {
    match op {
        FsOp::Stat => w.u8(0),
        FsOp::List => w.u8(1),
        FsOp::Mkdir { mode, parents } => {
            w.u8(2);
            w.u32(mode & 0o7777);
            w.u8(u8::from(parents));
        }
        FsOp::Unlink => w.u8(3),
        FsOp::Rmdir => w.u8(4),
        FsOp::Checksum(ChecksumKind::Blake3) => w.u8(5),
        FsOp::Checksum(ChecksumKind::Adler32) => w.u8(6),
    }
    put_path(w, path);
}

pub(crate) fn get_op(r: &mut Reader<'_>) -> Result<(FsOp, Vec<u8>), ProtoError> {
    let op = match r.u8("fs op")? {
        0 => FsOp::Stat,
        1 => FsOp::List,
        2 => {
            let mode = r.u32("mode")?;
            if mode > 0o7777 {
                return Err(invalid("mode", format!("{mode:o} is above 7777")));
            }
            FsOp::Mkdir {
                mode,
                parents: r.bool("parents")?,
            }
        }
        3 => FsOp::Unlink,
        4 => FsOp::Rmdir,
        5 => FsOp::Checksum(ChecksumKind::Blake3),
        6 => FsOp::Checksum(ChecksumKind::Adler32),
        v => return Err(invalid("fs op", format!("unknown value {v}"))),
    };
    Ok((op, get_path(r, "fs path")?))
}

pub(crate) fn put_stat(w: &mut Writer<'_>, s: &FsStat) {
    w.u8(match s.kind {
        FsKind::File => 0,
        FsKind::Dir => 1,
        FsKind::Symlink => 2,
        FsKind::Other => 3,
    });
    w.u64(s.size);
    w.u32(s.mode & 0o7777);
    w.u64(s.mtime_secs as u64);
    w.u32(s.mtime_nanos.min(999_999_999));
}

pub(crate) fn get_stat(r: &mut Reader<'_>) -> Result<FsStat, ProtoError> {
    let kind = match r.u8("kind")? {
        0 => FsKind::File,
        1 => FsKind::Dir,
        2 => FsKind::Symlink,
        3 => FsKind::Other,
        v => return Err(invalid("kind", format!("unknown value {v}"))),
    };
    let s = FsStat {
        kind,
        size: r.u64("size")?,
        mode: r.u32("mode")?,
        mtime_secs: r.u64("mtime")? as i64,
        mtime_nanos: r.u32("mtime nanos")?,
    };
    if s.mode > 0o7777 || s.mtime_nanos >= 1_000_000_000 {
        return Err(invalid("stat", "mode or nanoseconds out of range".into()));
    }
    Ok(s)
}

pub(crate) fn put_entries(w: &mut Writer<'_>, entries: &[FsEntry]) {
    let n = entries.len().min(MAX_FS_ENTRIES_PER_FRAME);
    w.u16(n as u16);
    for e in &entries[..n] {
        let name = &e.name[..e.name.len().min(MAX_NAME_BYTES)];
        w.u8(name.len() as u8);
        w.bytes(name);
        put_stat(w, &e.stat);
    }
}

pub(crate) fn get_entries(r: &mut Reader<'_>) -> Result<Vec<FsEntry>, ProtoError> {
    let n = r.count("entries", MAX_FS_ENTRIES_PER_FRAME)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = usize::from(r.u8("name length")?);
        let name = r.take(len, "name")?.to_vec();
        if name.is_empty()
            || name.contains(&b'/')
            || name.contains(&0)
            || name == b"."
            || name == b".."
        {
            return Err(invalid(
                "entry name",
                "empty, `.`, `..`, or holds `/` or NUL".into(),
            ));
        }
        out.push(FsEntry {
            name,
            stat: get_stat(r)?,
        });
    }
    Ok(out)
}

pub(crate) fn put_checksum(w: &mut Writer<'_>, kind: ChecksumKind, value: &[u8]) {
    match kind {
        ChecksumKind::Blake3 => w.u8(5),
        ChecksumKind::Adler32 => w.u8(6),
    }
    w.u8(value.len().min(64) as u8);
    w.bytes(&value[..value.len().min(64)]);
}

pub(crate) fn get_checksum(r: &mut Reader<'_>) -> Result<(ChecksumKind, Vec<u8>), ProtoError> {
    let (kind, len) = match r.u8("checksum kind")? {
        5 => (ChecksumKind::Blake3, 32),
        6 => (ChecksumKind::Adler32, 4),
        v => return Err(invalid("checksum kind", format!("unknown value {v}"))),
    };
    let n = usize::from(r.u8("checksum length")?);
    if n != len {
        return Err(invalid("checksum", format!("{n} bytes, not {len}")));
    }
    Ok((kind, r.take(n, "checksum")?.to_vec()))
}

pub(crate) fn put_failed(w: &mut Writer<'_>, kind: FsErrorKind, message: &str) {
    w.u8(kind.to_wire());
    w.text(message, MAX_TEXT);
}

pub(crate) fn get_failed(r: &mut Reader<'_>) -> Result<(FsErrorKind, String), ProtoError> {
    Ok((
        FsErrorKind::from_wire(r.u8("fs error kind")?)?,
        r.text("fs error", MAX_TEXT)?,
    ))
}
