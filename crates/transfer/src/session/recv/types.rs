//! The receiving end's public types: its configuration, the driver's events and answers,
//! what it decided for a chunk, and what it did.

use crate::hash_cache::FileIdentity;
use longhaul_proto::transfer::EntryId;
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

impl RecvConfig {
    /// A copy into the root, an existing directory, in chunks of `chunk_size`: nothing
    /// optional (no `--no-clobber`, `--checksum`, `--sync`, expected list or set-user-ID
    /// bits), umask 022. A caller names only what differs (`..RecvConfig::into_directory(n)`).
    pub fn into_directory(chunk_size: u64) -> Self {
        Self {
            chunk_size,
            target: None,
            target_is_dir: true,
            no_clobber: false,
            checksum_only: false,
            sync: false,
            expect: None,
            keep_setuid: false,
            umask: 0o022,
        }
    }
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
/// `serve --max-bytes` / `--max-files`, or an exported area's; [`RecvSession::with_caps`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListCaps {
    /// Most bytes the list's files may hold together.
    pub max_bytes: Option<u64>,
    /// Most entries (files and directories) the list may name.
    pub max_files: Option<u64>,
    /// Where the caps were set, for the refusal's words.
    pub set_by: CapsSetBy,
}

/// Where a server's caps were set: what a refusal tells the client to ask its operator
/// about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CapsSetBy {
    /// `longhaul serve --max-bytes` / `--max-files` (or the config's top-level keys).
    #[default]
    Flags,
    /// The exported area's own `max_bytes` / `max_files` in the server's config.
    Area,
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
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
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
    /// The destination's target when it is a symlink (read, never followed); `None` when
    /// it is not one. A symlink entry whose destination already holds its target is left
    /// alone (rsync's quick check for links).
    pub link_target: Option<Vec<u8>>,
    /// The destination's device and inode (`lstat`), when something is there: a hard
    /// link entry whose destination already is its target's inode is left alone.
    pub inode: Option<(u64, u64)>,
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
    /// Sync `--inplace`: open the existing destination file (`final_rel`) for writing;
    /// the changed chunks go straight into it (whole, zeros included). No manifest.
    InPlace,
    /// Resume: open the part file and the manifest (truncated to `manifest_len`,
    /// appending after it), and check that every recorded chunk still has its hash in the
    /// part file. Answer [`RecvInput::Opened`] with whether they all do.
    ///
    /// [`RecvInput::Opened`]: super::RecvInput::Opened
    Resume {
        /// Valid bytes of the stored manifest.
        manifest_len: usize,
        /// The recorded chunks and their hashes.
        verify: Vec<(u32, ChunkHash)>,
    },
}

/// How a `longhaul sync` receives ([`RecvSession::with_sync`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncRules {
    /// Compare every file present at both ends, also those whose size and mtime match
    /// (rsync's `--checksum`).
    pub checksum: bool,
    /// The source was named with a trailing slash: its contents go into the destination
    /// directory. Otherwise a directory source goes inside it. Either way the destination
    /// is a directory, created if missing (rsync's placement: a sync run twice lands in
    /// the same place). A single file source keeps cp's rule.
    pub contents: bool,
    /// `--inplace`: a compared file of several chunks gets its changed chunks written
    /// into the destination file itself, which is then cut to the source's size, flushed
    /// and given its mode and mtime (no part file, no rename: for files too large to hold
    /// twice). Until that end the file is a mix of old and new chunks under its old mtime,
    /// so an interrupted run is finished by the next one, which compares it again (the
    /// chunks already written are then equal and not sent).
    pub inplace: bool,
    /// `-n`: change nothing. The list is looked at and the copies hashed (read only); no
    /// directory, part file or mode is made or changed, no chunk is received; the
    /// sender says what each file would send ([`RecvOutcome::would_send`]).
    pub dry_run: bool,
}

/// The driver's answer to [`RecvEvent::HashOld`]: the chunk hashes of the copy at the
/// destination, on the transfer's chunk grid over the copy's own size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OldCopy {
    /// Who the copy was when hashed: its unchanged chunks are taken from it only while it
    /// still is (a copy changed meanwhile would put stale bytes under a digest that no
    /// longer describes them).
    pub identity: FileIdentity,
    /// Its chunk hashes, chunk 0 first.
    pub hashes: Vec<ChunkHash>,
}

/// Chunks of a synced file taken from the copy that was at the destination
/// ([`CommitJob::reuse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reuse {
    /// The old copy (the file's final path).
    pub from: PathBuf,
    /// Who it must still be.
    pub identity: FileIdentity,
    /// `(offset, len)` byte runs to copy from it into the part file (same offsets).
    pub runs: Vec<(u64, u64)>,
    /// Every chunk was the old copy's and the size is the same: the old file stays as it
    /// is (mode and mtime set on it); the part file and manifest, if any, are removed.
    pub keep_old: bool,
    /// `--inplace`: the changed chunks were written into the old copy itself (`runs` is
    /// empty): cut it to `size`, flush it, set its mode and mtime.
    pub in_place: Option<u64>,
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
    pub id: EntryId,
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
    /// Sync: chunks to take from the old copy before the flush (`None`: every chunk was
    /// received).
    pub reuse: Option<Reuse>,
    /// A striped copy's file: the other shares' manifests, removed with this one's. The
    /// part file is shared: when another share has already put it in place (the name
    /// is gone and `final_rel` is the same file), this commit is done too.
    pub other_manifests: Vec<PathBuf>,
}

/// Work the driver does for the session, answered by a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecvEvent {
    /// Create this directory and its parents (no error if it exists); answer
    /// [`RecvInput::DirsCreated`] with those that did not exist.
    ///
    /// [`RecvInput::DirsCreated`]: super::RecvInput::DirsCreated
    CreateDir {
        /// Path below the root.
        rel: PathBuf,
        /// Mode to create it with.
        mode: u32,
    },
    /// Look at the destination of file `id`; answer [`RecvInput::Looked`].
    ///
    /// [`RecvInput::Looked`]: super::RecvInput::Looked
    Look {
        /// The file's id.
        id: EntryId,
        /// Its final path.
        final_rel: PathBuf,
        /// Its part file, to look at when `manifest_rel` is set.
        part_rel: PathBuf,
        /// Its manifest, to read (bounded by `manifest_limit`) if set.
        manifest_rel: Option<PathBuf>,
        /// Most manifest bytes a manifest of this file can hold.
        manifest_limit: u64,
    },
    /// Open the data of file `id` as planned; answer [`RecvInput::Opened`].
    ///
    /// [`RecvInput::Opened`]: super::RecvInput::Opened
    Open {
        /// The file's id.
        id: EntryId,
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
        /// A striped copy's file of several chunks: the part file is shared with the
        /// other shares' sessions (opened or created at full size without replacing it,
        /// under a shared lock) and the manifest is this share's (under its own lock).
        shared: bool,
    },
    /// A striped copy: this share's chunks of file `id` are all recorded. Read the
    /// other shares' manifests (each at most `limit` bytes) and answer
    /// [`RecvInput::SharesGathered`] with their bytes, in this order.
    ///
    /// [`RecvInput::SharesGathered`]: super::RecvInput::SharesGathered
    GatherShares {
        /// The file's id.
        id: EntryId,
        /// The other shares' manifests.
        manifests: Vec<PathBuf>,
        /// Most bytes a manifest of this file can hold.
        limit: u64,
    },
    /// Hash these chunks of file `id`'s data as they are on disk; answer each with
    /// [`RecvInput::Hashed`].
    ///
    /// [`RecvInput::Hashed`]: super::RecvInput::Hashed
    HashFromFile {
        /// The file's id.
        id: EntryId,
        /// The chunks.
        chunks: Vec<u32>,
    },
    /// Sync: hash the chunks of the regular file at `final_rel` (`size` bytes when looked
    /// at) on the transfer's chunk grid; answer [`RecvInput::OldHashed`].
    ///
    /// [`RecvInput::OldHashed`]: super::RecvInput::OldHashed
    HashOld {
        /// The file's id.
        id: EntryId,
        /// The copy at the destination.
        final_rel: PathBuf,
        /// Its size when looked at.
        size: u64,
        /// The hashes may come from a cache trusted while the file's identity (size,
        /// mtime, inode, ctime) is unchanged; `false` with `--checksum`: read the file.
        trust_cache: bool,
    },
    /// Sync: a file found complete by the quick check whose mode differs from the
    /// source's: set it (through a descriptor, never following a symlink). No answer.
    SetMode {
        /// The file.
        rel: PathBuf,
        /// The mode to set.
        mode: u32,
    },
    /// Put a verified file in place; answer [`RecvInput::Placed`].
    ///
    /// [`RecvInput::Placed`]: super::RecvInput::Placed
    Commit(CommitJob),
    /// The file's chunks disagree with the source as a whole: remove its part file and
    /// manifest so the next run starts it over (only if the part name is still file
    /// `id`'s own data: another session's is never removed).
    Discard {
        /// The file's id.
        id: EntryId,
        /// The part file.
        part_rel: PathBuf,
        /// The manifest.
        manifest_rel: Option<PathBuf>,
        /// A striped copy's: the other shares' manifests, removed too.
        other_manifests: Vec<PathBuf>,
    },
    /// A manifest left without its part file: a commit renames the part file into place
    /// and removes the manifest after, so a kill between the two leaves it (the file in
    /// place is whole). Remove it if the part file is still absent; no answer.
    DropOrphanManifest {
        /// The part file that must not be there.
        part_rel: PathBuf,
        /// The manifest.
        manifest_rel: PathBuf,
    },
    /// Set these directories' modes and times, deepest first; answer
    /// [`RecvInput::DirsFixed`].
    ///
    /// [`RecvInput::DirsFixed`]: super::RecvInput::DirsFixed
    FixDirs(Vec<DirFix>),
    /// Make symlink entry `id`: a link holding `target` at `temp_rel` (in the parent
    /// resolved beneath the root; whatever stale link sits there is removed first), its
    /// own mtime set (never its target's), then renamed over `final_rel`. An existing
    /// symlink or file there is replaced (the name, never what it points at); a directory
    /// is not, and that entry fails alone. The target is stored verbatim, wherever it
    /// points: making a link never follows it. Answer [`RecvInput::SymlinkMade`].
    ///
    /// [`RecvInput::SymlinkMade`]: super::RecvInput::SymlinkMade
    MakeSymlink(LinkJob),
    /// Make hard link entry `id` (`sync -H`), once every file of the list is finished: a
    /// hard link of the regular file at `target_rel` (never following a symlink, never
    /// leaving the root; anything else there is refused) made at `temp_rel` (a stale one
    /// there is removed first), then renamed over `final_rel`. An existing file or link
    /// there is replaced; a directory is not, and that entry fails alone. When `final_rel`
    /// already is `target_rel`'s inode nothing is made. Answer
    /// [`RecvInput::HardLinkMade`].
    ///
    /// [`RecvInput::HardLinkMade`]: super::RecvInput::HardLinkMade
    MakeHardLink(HardLinkJob),
    /// `--delete`: list this destination directory's entries as `lstat` sees them (never
    /// following a symlink below [`DestListing::sent`]); answer
    /// [`RecvInput::DestListed`].
    ///
    /// [`RecvInput::DestListed`]: super::RecvInput::DestListed
    ListDest(DestListing),
    /// `--delete`: remove these, in this order (deepest first): a directory with
    /// `rmdir` (it is empty by then unless something appeared meanwhile: that is its
    /// failure), anything else with `unlink` (a symlink itself, never its target), all
    /// below the root without following a symlink below [`Removal::sent`]; answer
    /// [`RecvInput::Removed`].
    ///
    /// [`RecvInput::Removed`]: super::RecvInput::Removed
    Remove(Vec<Removal>),
}

/// A symlink to make ([`RecvEvent::MakeSymlink`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkJob {
    /// The entry's id in the list.
    pub id: EntryId,
    /// Its final path below the root.
    pub final_rel: PathBuf,
    /// Where the link is made before the rename (`.NAME.longhaul-link`).
    pub temp_rel: PathBuf,
    /// The link's target, as the sender read it (1..=4095 bytes, no NUL).
    pub target: Vec<u8>,
    /// The link's own modification time (seconds, nanoseconds).
    pub mtime: (i64, u32),
    /// Flush the directory right after the rename (`--sync`).
    pub sync: bool,
}

/// A hard link to make ([`RecvEvent::MakeHardLink`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardLinkJob {
    /// The entry's id in the list.
    pub id: EntryId,
    /// Its final path below the root.
    pub final_rel: PathBuf,
    /// Where the link is made before the rename (`.NAME.longhaul-link`).
    pub temp_rel: PathBuf,
    /// The final path of the file it is another name of (placed from an earlier entry
    /// of the list, already finished).
    pub target_rel: PathBuf,
    /// Flush the directory right after the rename (`--sync`).
    pub sync: bool,
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
    /// Sync: bytes taken from the destination's old copies instead of received.
    pub reused_bytes: u64,
    /// Sync: files whose copy at the destination was compared chunk by chunk.
    pub files_compared: u64,
    /// Files found complete at the destination by the quick check (same size and
    /// mtime): nothing was sent (counted in `files_ok` too).
    pub files_unchanged: u64,
    /// Bytes of those files (counted in `resumed_bytes` too).
    pub unchanged_bytes: u64,
    /// `sync -n`: what a real run would send, file by file (paths as placed here).
    pub would_send: Vec<crate::session::WouldSend>,
    /// `sync -n --delete`: what a real run would remove (`deleted` counts them).
    pub would_delete: Vec<PathBuf>,
    /// Entries removed for `--delete`.
    pub deleted: u64,
    /// A striped copy: entries another pair moves whole (one-chunk files, symlinks).
    pub files_to_other_shares: u64,
    /// A striped copy: files whose chunks of this share are in place and whose commit
    /// is left to the share that finishes last.
    pub files_left_to_shares: u64,
}

/// What the driver does with a chunk it has read and hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// Write it, then [`RecvSession::chunk_written`].
    Write,
    /// Already verified: nothing to write (the ack is queued).
    Duplicate,
    /// Sync: taken from the old copy at the commit; nothing to write now (the ack is
    /// queued).
    Reused,
    /// The hash did not match: dropped (`ChunkRejected` is queued).
    Rejected,
}

/// A chunk header the session accepted: how to read and where it goes.
pub struct ChunkPlan {
    /// The file's id.
    pub id: EntryId,
    /// The file's part file (for messages).
    pub name: PathBuf,
    /// Payload bytes to read (0 for a hole).
    pub payload: u64,
    /// The chunk is all zeros (no payload follows).
    pub hole: bool,
    /// Sync: the chunk is the old copy's (no payload follows): answer
    /// [`RecvSession::chunk_reused`] instead of hashing and writing.
    pub same: bool,
    /// The hasher to feed the payload (or `update_zeros` for a hole).
    pub hasher: ChunkHasher,
    /// The data file does not exist yet: create it (a one-chunk file) as the part file
    /// below, of `size` bytes.
    pub lazy: Option<(PathBuf, u64)>,
}
