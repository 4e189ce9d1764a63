//! The receiving end's public types: its configuration, the driver's events and answers,
//! what it decided for a chunk, and what it did.

use std::path::PathBuf;

use crate::delete::{DestListing, Removal};
use crate::integrity::{ChunkHash, ChunkHasher};
use crate::manifest::HEADER_LEN;
use crate::path::SafeRelPath;

#[cfg(doc)]
use super::RecvSession;

/// How the receiving end runs.
#[derive(Debug, Clone)]
pub struct RecvConfig {
    /// Chunk size both ends agreed on.
    pub chunk_size: u64,
    /// The destination below the root (`None`: the root itself).
    pub target: Option<SafeRelPath>,
    /// Whether the destination is an existing directory (the driver looked).
    pub target_is_dir: bool,
    /// Never replace an existing file.
    pub no_clobber: bool,
    /// Only compare digests.
    pub checksum_only: bool,
    /// `--sync`: also flush each directory right after a rename, and written chunks with
    /// their resume records as the transfer goes (so an interrupted transfer keeps its
    /// progress through a power cut). A file's data is flushed before its rename either
    /// way.
    pub sync: bool,
    /// What the list may hold when this end asked for it (a pull: the sender may name
    /// nothing else); `None` for a push, whose list is the client's own.
    pub expect: Option<ExpectedList>,
    /// Keep set-user-ID, set-group-ID and sticky bits of received entries (see
    /// [`crate::mode::received_mode`]); only for a peer trusted as much as this host's user.
    pub keep_setuid: bool,
    /// The receiving process's file-creation mask: taken from every mode set on a
    /// received file and on a directory this transfer created (as `cp -p` run by the
    /// receiving user keeps modes).
    pub umask: u32,
}

/// The room on the destination's file system, measured by the driver before the list
/// arrives ([`RecvSession::with_room`]): a transfer that cannot fit is refused before any
/// data is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room {
    /// Free bytes an unprivileged user may use.
    pub free_bytes: u64,
    /// Free inodes (`None`: the file system has no fixed number).
    pub free_inodes: Option<u64>,
    /// The destination, as the message names it.
    pub on: String,
}

/// Caps on what one transfer's list may ask this end to write (a daemon's
/// `serve --max-bytes` / `--max-files`, [`RecvSession::with_caps`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListCaps {
    /// Most bytes the list's files may hold together.
    pub max_bytes: Option<u64>,
    /// Most entries (files and directories) the list may name.
    pub max_files: Option<u64>,
}

/// The entries a pull asked for (scp's CVE-2019-6111 lesson: a server answering
/// `cp host:big.h5 ~` must not be able to write `~/.bashrc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedList {
    /// The requested source's base name: every entry's first component. `None` when the
    /// served root itself was requested: then every entry shares one first component
    /// (the root's name, which only the server knows).
    pub top: Option<Vec<u8>>,
    /// `-r` was given: directories and what is inside them are allowed; without it the
    /// list is one file named `top`.
    pub recursive: bool,
}

/// A destination entry's metadata, as the driver found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// A regular file.
    pub is_file: bool,
    /// A directory.
    pub is_dir: bool,
    /// Size in bytes.
    pub len: u64,
    /// Modification time, seconds.
    pub mtime_secs: i64,
    /// Modification time, nanoseconds.
    pub mtime_nanos: i64,
    /// What it is when it is neither a regular file, a directory nor a symlink (e.g.
    /// "a FIFO"): longhaul neither writes into nor replaces such a thing.
    pub special: Option<&'static str>,
}

/// What the driver found for a [`RecvEvent::Look`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookResult {
    /// The destination file (`None`: nothing there).
    pub existing: Option<Meta>,
    /// The part file, if asked for and there.
    pub part: Option<Meta>,
    /// The stored manifest's bytes (at most the event's `manifest_limit` + 1), if asked
    /// for and there.
    pub manifest: Option<Vec<u8>>,
}

/// How the driver opens a file's data for [`RecvEvent::Open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenPlan {
    /// A one-chunk file: create it (unnamed where the file system allows, else as the
    /// part file) when its chunk arrives; nothing now.
    Lazy,
    /// `--checksum-only`: open the existing destination for reading.
    Existing,
    /// Start over: replace any part file with a new one of the file's size, and write
    /// this manifest header to a new manifest (files of several chunks).
    Fresh {
        /// The header, for files of several chunks.
        manifest_header: Option<[u8; HEADER_LEN]>,
    },
    /// Resume: open the part file and the manifest (truncated to `manifest_len`,
    /// appending after it), and check that every recorded chunk still has its hash in the
    /// part file. Answer [`RecvSession::opened`] with whether they all do.
    Resume {
        /// Valid bytes of the stored manifest.
        manifest_len: usize,
        /// The recorded chunks and their hashes.
        verify: Vec<(u32, ChunkHash)>,
    },
}

/// A directory whose mode and mtime are set once its contents are in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirFix {
    /// Path below the root.
    pub rel: PathBuf,
    /// Depth (deepest first).
    pub depth: usize,
    /// Permission bits; `None` for a directory that existed before the transfer (its
    /// mode is left as it is).
    pub mode: Option<u32>,
    /// Modification time, seconds and nanoseconds.
    pub mtime: (i64, u32),
}

/// A verified file to put in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitJob {
    /// The file's id in the list.
    pub id: u32,
    /// Its final path below the root.
    pub final_rel: PathBuf,
    /// Its part file.
    pub part_rel: PathBuf,
    /// Its manifest (files of several chunks), removed after the commit.
    pub manifest_rel: Option<PathBuf>,
    /// Permission bits to set.
    pub mode: u32,
    /// Modification time to set (seconds, nanoseconds).
    pub mtime: (i64, u32),
    /// Replace an existing file (not `--no-clobber`).
    pub replace: bool,
    /// Flush the directory right after the rename (`--sync`); the data is flushed before
    /// it in any case, and the directory before the last commit is answered.
    pub sync: bool,
}

/// Work the driver does for the session, answered by a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecvEvent {
    /// Create this directory and its parents (no error if it exists); answer
    /// [`RecvSession::dirs_created`] with those that did not exist.
    CreateDir {
        /// Path below the root.
        rel: PathBuf,
        /// Mode to create it with.
        mode: u32,
    },
    /// Look at the destination of file `id`; answer [`RecvSession::looked`].
    Look {
        /// The file's id.
        id: u32,
        /// Its final path.
        final_rel: PathBuf,
        /// Its part file, to look at when `manifest_rel` is set.
        part_rel: PathBuf,
        /// Its manifest, to read (bounded by `manifest_limit`) if set.
        manifest_rel: Option<PathBuf>,
        /// Most manifest bytes a manifest of this file can hold.
        manifest_limit: u64,
    },
    /// Open the data of file `id` as planned; answer [`RecvSession::opened`].
    Open {
        /// The file's id.
        id: u32,
        /// Its final path (read in `--checksum-only`).
        final_rel: PathBuf,
        /// Its part file.
        part_rel: PathBuf,
        /// Its manifest.
        manifest_rel: Option<PathBuf>,
        /// Size of the file.
        size: u64,
        /// How.
        plan: OpenPlan,
    },
    /// Hash these chunks of file `id`'s data as they are on disk; answer each with
    /// [`RecvSession::hashed`].
    HashFromFile {
        /// The file's id.
        id: u32,
        /// The chunks.
        chunks: Vec<u32>,
    },
    /// Put a verified file in place; answer [`RecvSession::placed`].
    Commit(CommitJob),
    /// The file's chunks disagree with the source as a whole: remove its part file and
    /// manifest so the next run starts it over (only if the part name is still file
    /// `id`'s own data: another session's is never removed).
    Discard {
        /// The file's id.
        id: u32,
        /// The part file.
        part_rel: PathBuf,
        /// The manifest.
        manifest_rel: Option<PathBuf>,
    },
    /// Set these directories' modes and times, deepest first; answer
    /// [`RecvSession::dirs_fixed`].
    FixDirs(Vec<DirFix>),
    /// `--delete`: list this destination directory's entries as `lstat` sees them (never
    /// following a symlink below [`DestListing::sent`]); answer
    /// [`RecvSession::dest_listed`].
    ListDest(DestListing),
    /// `--delete`: remove these, in this order (deepest first): a directory with
    /// `rmdir` (it is empty by then unless something appeared meanwhile: that is its
    /// failure), anything else with `unlink` (a symlink itself, never its target), all
    /// below the root without following a symlink below [`Removal::sent`]; answer
    /// [`RecvSession::removed`].
    Remove(Vec<Removal>),
}

/// What the receiver did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecvOutcome {
    /// Files put in place (or equal, in `--checksum-only`), or found complete.
    pub files_ok: u64,
    /// Files not written because they exist (`--no-clobber`).
    pub files_skipped: u64,
    /// Files that failed, with why.
    pub failed: Vec<String>,
    /// Chunk payload bytes received in this run.
    pub received_bytes: u64,
    /// Bytes found verified from an earlier run.
    pub resumed_bytes: u64,
    /// Bytes of the files in this transfer.
    pub total_bytes: u64,
    /// Entries removed for `--delete`.
    pub deleted: u64,
}

/// What the driver does with a chunk it has read and hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// Write it, then [`RecvSession::chunk_written`].
    Write,
    /// Already verified: nothing to write (the ack is queued).
    Duplicate,
    /// The hash did not match: dropped (`ChunkRejected` is queued).
    Rejected,
}

/// A chunk header the session accepted: how to read and where it goes.
pub struct ChunkPlan {
    /// The file's id.
    pub id: u32,
    /// The file's part file (for messages).
    pub name: PathBuf,
    /// Payload bytes to read (0 for a hole).
    pub payload: u64,
    /// The chunk is all zeros (no payload follows).
    pub hole: bool,
    /// The hasher to feed the payload (or `update_zeros` for a hole).
    pub hasher: ChunkHasher,
    /// The data file does not exist yet: create it (a one-chunk file) as the part file
    /// below, of `size` bytes.
    pub lazy: Option<(PathBuf, u64)>,
}
