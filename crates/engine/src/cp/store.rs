//! The receiver's file side: what the receiving session ([`RecvSession`]) asks of the
//! destination, done through the [`ServedRoot`] (every path opened beneath it).
//!
//! A file is written into `.NAME.longhaul-part` with positional writes of the non-zero
//! blocks of each chunk (holes stay holes); a one-chunk file is created unnamed
//! (`O_TMPFILE`) when its chunk arrives and linked into place after its check, so nothing
//! is left behind when a transfer stops. Records of verified chunks go to
//! `.NAME.longhaul-manifest` before their ack. This module holds no protocol decision: it
//! answers the session's events ([`Store::perform`]) and does the data path's writes.
//!
//! Two sessions may aim at one destination (a rerun while the first still runs). A part
//! file is locked (`flock`, exclusive) by the session writing it for as long as it holds
//! it, and its manifest goes with it; a session finding the lock taken fails with
//! [`part_locked`]'s message and never removes or rewrites that part file. Before a
//! rename into place the part name must still be the very file that was verified (same
//! device and inode). Work files and directory modes never go through a symlink, and
//! a part file with another hard link is never written through (a new inode is made).
//!
//! A received symlink is made at its own work name and renamed into place (`links`).
//!
//! Durability: a file goes in place only once its data is on disk. Write-back of every
//! chunk starts as soon as it is written (`sync_file_range`), the commit flushes the file
//! (`fsync`) before its rename or link, and the directories that received new names are
//! flushed before the last commit is answered (with `--sync`, after each rename), so a
//! transfer reported complete survives a power cut, and a file found in place with the
//! source's size and mtime after one holds its data (the rerun's quick check trusts it).

use std::collections::{BTreeSet, HashMap};
use std::fs::{File, FileTimes, Permissions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use longhaul_sys::aligned::AlignedBuf;
use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, ServedRoot};
use longhaul_transfer::session::recv::{CommitJob, DirFix, LookResult, Meta, OldCopy, OpenPlan};
use longhaul_transfer::session::RecvEvent;
use longhaul_transfer::{
    sparse, ChunkHash, DeletePlan, DestEntry, DestKind, DestListing, FileHashes, Removal,
};

use super::chunk_io::hash_range;
use crate::hash_cache::HashCache;

mod hardlinks;
mod links;
mod sync;

use sync::{in_place, keeps_old};

/// Why the store could not do what the receiving session asked: this end's failure,
/// which stops the transfer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file or directory under the root could not be created, looked at or opened.
    #[error("{what} {}: {cause}", path.display())]
    File {
        /// What was being done.
        what: &'static str,
        /// The path below the root.
        path: PathBuf,
        /// The OS error.
        #[source]
        cause: io::Error,
    },
    /// Flushing written chunks and their records to disk failed (`--sync`).
    #[error("syncing a part file: {0}")]
    Sync(#[source] io::Error),
    /// Flushing a directory that received files failed: their names may not survive a
    /// power cut.
    #[error("syncing directory {}: {cause}", path.display())]
    SyncDir {
        /// The directory below the root.
        path: PathBuf,
        /// The OS error.
        #[source]
        cause: io::Error,
    },
    /// A thread panicked holding the table of open files.
    #[error("the receiver's table of open files was poisoned by a panic")]
    Poisoned,
}

/// Why a verified file could not be put in place (reported as that file's failure;
/// the transfer goes on).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The file has no data in the store.
    #[error("the file was never opened")]
    NeverOpened,
    /// The file's data was never created.
    #[error("the part file was never created")]
    NeverCreated,
    /// Flushing the data before the rename failed.
    #[error("syncing: {0}")]
    Sync(#[source] io::Error),
    /// The link or rename failed; `kept` names the part file the verified copy stays in.
    #[error("putting the file in place: {cause}{}", kept_note(kept.as_deref()))]
    Place {
        /// The OS error.
        #[source]
        cause: io::Error,
        /// Where the verified copy is kept, if anywhere.
        kept: Option<PathBuf>,
    },
    /// Flushing the directory after the rename failed.
    #[error("syncing the directory: {0}")]
    SyncDir(#[source] io::Error),
    /// Sync: the chunks kept from the destination's old copy could not be taken from it.
    #[error("taking the unchanged chunks from the old copy: {0}")]
    OldCopy(#[source] io::Error),
    /// The file is in place but some of its metadata could not be set.
    #[error("in place, but {}", .0.join("; "))]
    MetadataUnset(Vec<String>),
}

fn kept_note(kept: Option<&Path>) -> String {
    kept.map(|p| format!(" (the verified copy is kept as {})", p.display()))
        .unwrap_or_default()
}

/// Data files of one-chunk files open now, in this process (every session's): each
/// waits, open, for its file's digest to commit it. Small files arrive faster than their
/// commits on a tree of many (200,000 files filled a 20,000-descriptor limit), so a
/// stream about to open one more waits while [`lazy_open_limit`] are open.
static LAZY_OPEN: AtomicUsize = AtomicUsize::new(0);
/// Longest wait for a descriptor to free before opening anyway (an error then says why).
const LAZY_OPEN_WAIT: Duration = Duration::from_secs(60);

/// Most one-chunk data files open at once: a quarter of the descriptor limit (soft
/// `RLIMIT_NOFILE`, from `/proc/self/limits`), at most 4096, at least 64.
fn lazy_open_limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let soft = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("Max open files"))
                    .and_then(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
            })
            .unwrap_or(1024);
        (soft / 4).clamp(64, 4096)
    })
}

/// One received file's data on disk.
#[derive(Default)]
pub struct DataFile {
    /// The part file (or, in `--checksum-only`, the existing file); a one-chunk file's
    /// is created when its chunk arrives.
    data: OnceLock<File>,
    /// `data` was created without a name (`O_TMPFILE`): it is linked into place.
    unnamed: AtomicBool,
    /// `data` was created on first use and counts in [`LAZY_OPEN`].
    counted: LazyCount,
    create: Mutex<()>,
    /// Held while writing to `data`: ext4 takes the inode lock for every buffered write
    /// and a stream waiting for it spins in the kernel, burning a core; waiting here
    /// sleeps instead.
    write: Mutex<()>,
    manifest: Option<Mutex<File>>,
    /// The manifest again, to sync without taking the append lock.
    manifest_sync: Option<File>,
    /// Records appended since the last sync.
    dirty: AtomicBool,
    /// Sync `--inplace`: `data` is the destination file itself; chunks are written whole
    /// (zeros included: they replace old bytes) and holes punched.
    in_place: bool,
}

impl DataFile {
    fn with(data: Option<File>, manifest: Option<File>) -> Self {
        Self {
            data: data.map(OnceLock::from).unwrap_or_default(),
            manifest_sync: manifest.as_ref().and_then(|m| m.try_clone().ok()),
            manifest: manifest.map(Mutex::new),
            ..Self::default()
        }
    }

    /// The data file, if it exists yet.
    pub fn file(&self) -> io::Result<&File> {
        self.data
            .get()
            .ok_or_else(|| io::Error::other("the part file does not exist yet"))
    }

    /// The data file, creating a one-chunk file's on first use (unnamed where the file
    /// system allows; else as the part file, replacing a stale one).
    fn file_or_create(&self, root: &ServedRoot, part_rel: &Path, size: u64) -> io::Result<&File> {
        if let Some(f) = self.data.get() {
            return Ok(f);
        }
        let _guard = self.create.lock().map_err(|_| poisoned())?;
        if let Some(f) = self.data.get() {
            return Ok(f);
        }
        let until = std::time::Instant::now() + LAZY_OPEN_WAIT;
        while LAZY_OPEN.load(Ordering::SeqCst) >= lazy_open_limit()
            && std::time::Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let dir = part_rel.parent().unwrap_or(Path::new(""));
        let file = match root.create_unnamed(dir, 0o600) {
            Ok(file) => {
                // Locked from the start: it is named with the part name before a rename
                // replaces an existing file, and must then be ours alone.
                lock_part(&file, part_rel)?;
                self.unnamed.store(true, Ordering::Release);
                file
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Unsupported
                        | io::ErrorKind::IsADirectory
                        | io::ErrorKind::InvalidInput
                ) =>
            {
                claim_part(root, part_rel, part_rel)?
            }
            Err(e) => return Err(e),
        };
        if size > 0 {
            file.set_len(size)?;
        }
        self.counted.take();
        Ok(self.data.get_or_init(|| file))
    }
}

/// A data file's place in [`LAZY_OPEN`], given back when the data file goes.
#[derive(Default)]
struct LazyCount(AtomicBool);

impl LazyCount {
    fn take(&self) {
        if !self.0.swap(true, Ordering::SeqCst) {
            LAZY_OPEN.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Drop for LazyCount {
    fn drop(&mut self) {
        if self.0.load(Ordering::SeqCst) {
            LAZY_OPEN.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The destination of one transfer: the root and every file's data.
pub struct Store {
    root: Arc<ServedRoot>,
    files: Mutex<HashMap<u32, Arc<DataFile>>>,
    chunk_size: u64,
    /// Directories (and their ancestors) that received a name since they were last
    /// flushed: flushed together before the last commit is answered.
    unsynced_dirs: Mutex<BTreeSet<PathBuf>>,
    /// Sync: chunk hashes of destination files kept across runs ([`Store::with_hash_cache`]).
    hash_cache: Option<HashCache>,
}

/// What answering an event needs from the session: the answer to give it.
#[derive(Debug)]
pub enum Answer {
    /// Nothing to answer.
    None,
    /// [`longhaul_transfer::session::RecvSession::looked`].
    Looked(u32, LookResult),
    /// [`longhaul_transfer::session::RecvSession::opened`].
    Opened(u32, bool),
    /// [`longhaul_transfer::session::RecvSession::placed`].
    Placed(u32, Result<(), String>),
    /// [`longhaul_transfer::session::RecvSession::symlink_made`].
    LinkMade(u32, Result<(), String>),
    /// [`longhaul_transfer::session::RecvSession::hardlink_made`].
    HardLinkMade(u32, Result<(), String>),
    /// [`longhaul_transfer::session::RecvSession::dirs_fixed`].
    DirsFixed,
    /// [`longhaul_transfer::session::RecvSession::dirs_created`].
    DirsCreated(Vec<PathBuf>),
    /// Hash these chunks (on the hashing thread) and answer `hashed`.
    Hash(u32, Vec<u32>),
    /// [`longhaul_transfer::session::RecvSession::old_hashed`].
    OldHashed(u32, Result<OldCopy, String>),
    /// [`longhaul_transfer::session::RecvSession::dest_listed`].
    Listed(DestListing, Result<Vec<DestEntry>, String>),
    /// [`longhaul_transfer::session::RecvSession::removed`].
    Removed(Vec<(Removal, Result<(), String>)>),
}

impl Store {
    /// A store writing beneath `root` in chunks of `chunk_size` (whether a commit syncs
    /// is each [`CommitJob`]'s `sync`, from the session).
    pub fn new(root: Arc<ServedRoot>, chunk_size: u64) -> Self {
        Self {
            root,
            files: Mutex::new(HashMap::new()),
            chunk_size,
            unsynced_dirs: Mutex::new(BTreeSet::new()),
            hash_cache: None,
        }
    }

    /// Sync: old copies' chunk hashes are looked up in (and stored to) `cache`, so an
    /// unchanged huge file is not read again by the next sync.
    pub fn with_hash_cache(mut self, cache: Option<HashCache>) -> Self {
        self.hash_cache = cache;
        self
    }

    /// The root.
    pub fn root(&self) -> &ServedRoot {
        &self.root
    }

    /// File `id`'s data.
    pub fn data(&self, id: u32) -> Option<Arc<DataFile>> {
        self.files.lock().ok()?.get(&id).cloned()
    }

    /// Does what an event asks; an error is this end's failure (the transfer stops).
    pub fn perform(&self, ev: RecvEvent) -> Result<Answer, StoreError> {
        let failed = |what, path: &Path| {
            let path = path.to_path_buf();
            move |cause| StoreError::File { what, path, cause }
        };
        match ev {
            RecvEvent::CreateDir { rel, mode } => {
                let made = self
                    .root
                    .create_dirs(&rel, mode)
                    .map_err(failed("creating directory", &rel))?;
                Ok(Answer::DirsCreated(made))
            }
            RecvEvent::Look {
                id,
                final_rel,
                part_rel,
                manifest_rel,
                manifest_limit,
            } => {
                let look = self
                    .look(
                        &final_rel,
                        &part_rel,
                        manifest_rel.as_deref(),
                        manifest_limit,
                    )
                    .map_err(failed("looking at", &final_rel))?;
                Ok(Answer::Looked(id, look))
            }
            RecvEvent::Open {
                id,
                final_rel,
                part_rel,
                manifest_rel,
                size,
                plan,
            } => {
                let intact = self
                    .open(
                        id,
                        &final_rel,
                        &part_rel,
                        manifest_rel.as_deref(),
                        size,
                        plan,
                    )
                    .map_err(failed("preparing", &part_rel))?;
                Ok(Answer::Opened(id, intact))
            }
            RecvEvent::HashFromFile { id, chunks } => Ok(Answer::Hash(id, chunks)),
            RecvEvent::HashOld {
                id,
                final_rel,
                trust_cache,
                ..
            } => {
                let cache = self.hash_cache.as_ref().filter(|_| trust_cache);
                let old = super::old_copy::hash_old(&self.root, &final_rel, self.chunk_size, cache)
                    .map_err(|e| e.to_string());
                Ok(Answer::OldHashed(id, old))
            }
            RecvEvent::SetMode { rel, mode } => {
                // Best effort, as rsync: the data is right; a mode that cannot be set
                // stays as it was and is set again by the next run.
                if let Ok(f) = self.root.open_file(&rel, Access::ReadOwn) {
                    let _ = f.set_permissions(Permissions::from_mode(mode));
                }
                Ok(Answer::None)
            }
            RecvEvent::Commit(job) => Ok(Answer::Placed(job.id, self.commit_placed(&job))),
            RecvEvent::MakeSymlink(job) => Ok(Answer::LinkMade(job.id, self.make_symlink(&job))),
            RecvEvent::MakeHardLink(job) => {
                Ok(Answer::HardLinkMade(job.id, self.make_hard_link(&job)))
            }
            RecvEvent::Discard {
                id,
                part_rel,
                manifest_rel,
            } => {
                self.remove_own_work_files(id, &part_rel, manifest_rel.as_deref());
                Ok(Answer::None)
            }
            RecvEvent::DropOrphanManifest {
                part_rel,
                manifest_rel,
            } => {
                // Best effort: a leftover costs nothing but a name (`longhaul clean`).
                if matches!(meta_of(&self.root, &part_rel), Ok(None)) {
                    let _ = self.root.remove_file(&manifest_rel);
                }
                Ok(Answer::None)
            }
            RecvEvent::ListDest(listing) => {
                let found = list_dest(&self.root, &listing);
                Ok(Answer::Listed(listing, found))
            }
            RecvEvent::Remove(removals) => {
                let results = removals
                    .into_iter()
                    .map(|r| {
                        let done = remove_extra(&self.root, &r);
                        (r, done)
                    })
                    .collect();
                Ok(Answer::Removed(results))
            }
            RecvEvent::FixDirs(mut dirs) => {
                fix_dirs(&self.root, &mut dirs);
                // The commits' names are durable before the sender hears of the last.
                self.sync_dirs()?;
                Ok(Answer::DirsFixed)
            }
        }
    }

    fn look(
        &self,
        final_rel: &Path,
        part_rel: &Path,
        manifest_rel: Option<&Path>,
        manifest_limit: u64,
    ) -> io::Result<LookResult> {
        let (existing, inode) = match meta_and_inode(&self.root, final_rel)? {
            Some((m, inode)) => (Some(m), Some(inode)),
            None => (None, None),
        };
        // A symlink's target, for the quick check of a symlink entry (read, not followed).
        let link_target = match existing {
            Some(m) if !m.is_file && !m.is_dir && m.special.is_none() => {
                match self.root.read_link(final_rel) {
                    Ok(t) => Some(t),
                    // Replaced since the look by something else: as good as not a link.
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
                        ) =>
                    {
                        None
                    }
                    Err(e) => return Err(e),
                }
            }
            _ => None,
        };
        let (part, manifest) = match manifest_rel {
            Some(m) => (
                meta_of(&self.root, part_rel)?,
                read_bounded(&self.root, m, manifest_limit)?,
            ),
            None => (None, None),
        };
        Ok(LookResult {
            existing,
            part,
            manifest,
            link_target,
            inode,
        })
    }

    fn open(
        &self,
        id: u32,
        final_rel: &Path,
        part_rel: &Path,
        manifest_rel: Option<&Path>,
        size: u64,
        plan: OpenPlan,
    ) -> io::Result<bool> {
        let root = &self.root;
        let (data, intact) = match plan {
            OpenPlan::Lazy => (DataFile::default(), true),
            OpenPlan::Existing => (
                DataFile::with(Some(root.open_file(final_rel, Access::Read)?), None),
                true,
            ),
            OpenPlan::Resume {
                manifest_len,
                verify,
            } => {
                let Some(part) = resume_part(root, part_rel, final_rel)? else {
                    // Shared with another name (a hard link) or gone: start over.
                    return Ok(false);
                };
                // Trust a record only if its chunk still hashes the same (a power cut can
                // keep a record whose data never reached the disk).
                if !recorded_chunks_intact(&part, size, verify, self.chunk_size)? {
                    return Ok(false);
                }
                let mrel =
                    manifest_rel.ok_or_else(|| io::Error::other("resume without manifest"))?;
                let mut m = root.open_file(mrel, Access::ReadWriteCreate { mode: 0o600 })?;
                m.set_len(manifest_len as u64)?;
                m.seek(SeekFrom::End(0))?;
                (DataFile::with(Some(part), Some(m)), true)
            }
            OpenPlan::InPlace => {
                let file = root.open_file(final_rel, Access::ReadWriteCreate { mode: 0o600 })?;
                lock_part(&file, final_rel)?;
                let data = DataFile {
                    in_place: true,
                    ..DataFile::with(Some(file), None)
                };
                (data, true)
            }
            OpenPlan::Fresh { manifest_header } => {
                let part = claim_part(root, part_rel, final_rel)?;
                part.set_len(size)?;
                let manifest = match (manifest_rel, manifest_header) {
                    (Some(mrel), Some(header)) => {
                        remove_if_there(root, mrel)?;
                        let mut m = root.open_file(mrel, Access::CreateNew { mode: 0o600 })?;
                        m.write_all(&header)?;
                        file_io::sync_data(&m)?;
                        Some(m)
                    }
                    _ => None,
                };
                (DataFile::with(Some(part), manifest), true)
            }
        };
        if intact {
            self.files
                .lock()
                .map_err(|_| poisoned())?
                .insert(id, Arc::new(data));
        }
        Ok(intact)
    }

    /// Writes a verified chunk's non-zero blocks (creating a one-chunk file's data first
    /// when `lazy` names its part file and size).
    pub fn write_chunk(
        &self,
        f: &DataFile,
        lazy: Option<&(PathBuf, u64)>,
        offset: u64,
        hole: bool,
        buf: &[u8],
    ) -> io::Result<()> {
        let data = match lazy {
            Some((part, size)) => f.file_or_create(&self.root, part, *size)?,
            None => f.file()?,
        };
        if f.in_place {
            // Over old bytes: zeros must be written (or punched), not skipped.
            let _w = f.write.lock().map_err(|_| poisoned())?;
            if hole {
                file_io::punch_hole(data, offset, buf.len() as u64)?;
            } else {
                file_io::write_all_at(data, buf, offset)?;
                let _ = file_io::start_write_back(data, offset, buf.len() as u64);
            }
            return Ok(());
        }
        if !hole {
            let _w = f.write.lock().map_err(|_| poisoned())?;
            for r in sparse::data_ranges(buf, 4096) {
                file_io::write_all_at(data, &buf[r.clone()], offset + r.start as u64)?;
            }
            // Start write-back now, so the commit's flush finds little left to write. A
            // failure here changes nothing: the commit's fsync reports write-back errors.
            let _ = file_io::start_write_back(data, offset, buf.len() as u64);
        }
        Ok(())
    }

    /// Appends a chunk's manifest record. Written records survive the process being
    /// killed (they are in the page cache like the data); with `--sync`, [`Store::sync_dirty`]
    /// makes them durable every few seconds.
    pub fn append_record(&self, f: &DataFile, record: &[u8]) -> io::Result<()> {
        if let Some(m) = &f.manifest {
            m.lock().map_err(|_| poisoned())?.write_all(record)?;
            f.dirty.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Syncs the part files and manifests written since the last call (data first).
    pub fn sync_dirty(&self) -> Result<(), StoreError> {
        let files: Vec<Arc<DataFile>> = match self.files.lock() {
            Ok(f) => f.values().cloned().collect(),
            Err(_) => return Err(StoreError::Poisoned),
        };
        for f in files {
            if !f.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            f.file()
                .and_then(file_io::sync_data)
                .and_then(|()| match &f.manifest_sync {
                    Some(m) => file_io::sync_data(m),
                    None => Ok(()),
                })
                .map_err(StoreError::Sync)?;
        }
        Ok(())
    }

    /// Hashes chunks of file `id`'s data as it is on disk.
    pub fn hash_chunks(
        &self,
        id: u32,
        hashes: &FileHashes,
        chunks: &[u32],
        buf: &mut AlignedBuf,
    ) -> io::Result<Vec<(u32, ChunkHash)>> {
        let f = self
            .data(id)
            .ok_or_else(|| io::Error::other(format!("file {id} has no data")))?;
        let file = f.file()?;
        let mut out = Vec::with_capacity(chunks.len());
        for &i in chunks {
            let (off, len) = hashes.chunk_range(i);
            out.push((i, hash_range(file, hashes.hasher(i), off, len, buf)?));
        }
        Ok(out)
    }

    /// Puts a verified file in place (see [`RecvEvent::Commit`]): mode and mtime, a flush
    /// of the file (always: a file in place with the source's size and mtime is taken as
    /// complete by a rerun, so its data must be on disk first), then a link (unnamed) or a
    /// rename (part file), the directory flushed now with `--sync` or else with the last
    /// commit ([`Store::sync_dirs`]); the manifest goes last. The answer for
    /// [`RecvSession::placed`](longhaul_transfer::session::RecvSession::placed).
    pub fn commit_placed(&self, job: &CommitJob) -> Result<(), String> {
        self.commit(job).map_err(|e| e.to_string())
    }

    /// Puts several verified files in place with one flush of their file system
    /// (`syncfs`) instead of one `fsync` each: for a tree of small files each fsync is a
    /// journal commit of its own, which cost about half the copy's time. Answers in the
    /// order of `jobs`.
    pub fn commit_batch(&self, jobs: &[CommitJob]) -> Vec<Result<(), String>> {
        if jobs.len() == 1 {
            return vec![self.commit_placed(&jobs[0])];
        }
        let prepared: Vec<_> = jobs
            .iter()
            .map(|j| (!keeps_old(j) && !in_place(j)).then(|| self.prepare(j)))
            .collect();
        let flushed = self.root.sync_fs();
        jobs.iter()
            .zip(prepared)
            .map(|(job, prepared)| {
                let Some(prepared) = prepared else {
                    return self.commit(job);
                };
                let (f, unset) = prepared?;
                let data = f.data.get().ok_or(CommitError::NeverCreated)?;
                flushed
                    .as_ref()
                    .map_err(|e| CommitError::Sync(io::Error::new(e.kind(), e.to_string())))?;
                self.place(job, &f, data, unset)
            })
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
    }

    /// Mode and mtime set on the verified file: what could not be set, reported at the end.
    fn prepare(&self, job: &CommitJob) -> Result<(Arc<DataFile>, Vec<String>), CommitError> {
        let f = self.data(job.id).ok_or(CommitError::NeverOpened)?;
        let data = f.data.get().ok_or(CommitError::NeverCreated)?;
        if let Some(reuse) = &job.reuse {
            super::old_copy::copy_reused(&self.root, reuse, data).map_err(CommitError::OldCopy)?;
        }
        // A mode or mtime that cannot be set does not stop the file going in place, but
        // it is reported (the file then fails rsync's quick check on a rerun).
        let unset = set_mode_and_mtime(data, job);
        Ok((f, unset))
    }

    /// Flushes the file's data (the rename must not be durable before the data), then
    /// names it; the manifest goes last.
    fn commit(&self, job: &CommitJob) -> Result<(), CommitError> {
        if keeps_old(job) {
            return self.keep_old(job);
        }
        if let Some(size) = job.reuse.as_ref().and_then(|r| r.in_place) {
            return self.commit_in_place(job, size);
        }
        let (f, unset) = self.prepare(job)?;
        let data = f.data.get().ok_or(CommitError::NeverCreated)?;
        file_io::sync_all(data).map_err(CommitError::Sync)?;
        self.place(job, &f, data, unset)
    }

    /// Names a verified file whose data is on disk: a link (unnamed) or a rename (part
    /// file), then the bookkeeping.
    fn place(
        &self,
        job: &CommitJob,
        f: &DataFile,
        data: &File,
        unset: Vec<String>,
    ) -> Result<(), CommitError> {
        if f.unnamed.load(Ordering::Acquire) {
            self.link_into_place(job, data)
                .map_err(|cause| CommitError::Place { cause, kept: None })?;
        } else {
            // The name must still be the file that was verified: whatever else is there
            // now (another process's doing) is not put in place as verified.
            if !same_file(&self.root, &job.part_rel, data)
                .map_err(|cause| CommitError::Place { cause, kept: None })?
            {
                return Err(CommitError::Place {
                    cause: replaced(&job.part_rel),
                    kept: None,
                });
            }
            self.root
                .rename(&job.part_rel, &job.final_rel, job.replace)
                .map_err(|cause| CommitError::Place {
                    cause,
                    kept: Some(job.part_rel.clone()),
                })?;
        }
        // The new name itself must survive a power cut too.
        let dir = job.final_rel.parent().unwrap_or(Path::new(""));
        if job.sync {
            self.root.sync_dir(dir).map_err(CommitError::SyncDir)?;
        }
        self.note_new_name(dir);
        if let Some(m) = &job.manifest_rel {
            let _ = self.root.remove_file(m);
        }
        // The data stays open for nothing now.
        self.forget(job.id);
        unset_result(unset)
    }

    /// Removes file `id`'s part file and manifest, only if the part name is still our
    /// own (locked) data: another session's is never touched.
    fn remove_own_work_files(&self, id: u32, part_rel: &Path, manifest_rel: Option<&Path>) {
        let ours = self.data(id).and_then(|d| {
            let f = d.data.get()?;
            same_file(&self.root, part_rel, f).ok()
        });
        if ours == Some(true) {
            let _ = self.root.remove_file(part_rel);
            if let Some(m) = manifest_rel {
                let _ = self.root.remove_file(m);
            }
        }
    }

    /// File `id` is done with: its data is closed.
    fn forget(&self, id: u32) {
        if let Ok(mut files) = self.files.lock() {
            files.remove(&id);
        }
    }

    /// Names a verified unnamed file: one `linkat` where the name is free; replacing an
    /// existing file goes through the part name and a rename, so the old file is replaced
    /// atomically.
    fn link_into_place(&self, job: &CommitJob, data: &File) -> io::Result<()> {
        let root = &self.root;
        match root.link_unnamed(data, &job.final_rel) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && job.replace => {
                let part = &job.part_rel;
                for _ in 0..CLAIM_ATTEMPTS {
                    match root.link_unnamed(data, part) {
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                            clear_stale_part(root, part, &job.final_rel)?;
                            continue;
                        }
                        other => other?,
                    }
                    // `data` is locked: no other longhaul session touches the name now.
                    if !same_file(root, part, data)? {
                        return Err(replaced(part));
                    }
                    return root.rename(part, &job.final_rel, true);
                }
                Err(kept_changing(part))
            }
            other => other,
        }
    }

    /// Notes that directory `dir` received a new name, to flush it (and its ancestors: a
    /// directory made by this transfer is a new name in its parent; flushing one already
    /// flushed costs a system call, no disk write) before the last commit is answered.
    fn note_new_name(&self, dir: &Path) {
        if let Ok(mut dirs) = self.unsynced_dirs.lock() {
            dirs.extend(dir.ancestors().map(Path::to_path_buf));
        }
    }

    /// Sets directories' modes and times after a failure (normally the last commit does),
    /// and flushes the directories that received files (best effort: the transfer failed
    /// already).
    pub fn fix_dirs(&self, mut dirs: Vec<DirFix>) {
        fix_dirs(&self.root, &mut dirs);
        let _ = self.sync_dirs();
    }

    /// Flushes every directory that received a name since the last call (deepest first),
    /// so that the files committed in them survive a power cut.
    pub fn sync_dirs(&self) -> Result<(), StoreError> {
        let dirs = std::mem::take(
            &mut *self
                .unsynced_dirs
                .lock()
                .map_err(|_| StoreError::Poisoned)?,
        );
        for dir in dirs.into_iter().rev() {
            self.root
                .sync_dir(&dir)
                .map_err(|cause| StoreError::SyncDir { path: dir, cause })?;
        }
        Ok(())
    }
}

/// `--delete`: the entries of a destination directory as `lstat` sees them (see
/// [`ServedRoot::read_dir_below`]: nothing below the sent directory is followed).
pub fn list_dest(root: &ServedRoot, listing: &DestListing) -> Result<Vec<DestEntry>, String> {
    use std::os::unix::ffi::OsStringExt;
    let entries = root
        .read_dir_below(
            &listing.sent,
            &listing.below,
            longhaul_transfer::delete::MAX_DEST_ENTRIES,
        )
        .map_err(|e| e.to_string())?;
    Ok(entries
        .into_iter()
        .map(|e| {
            let ft = e.metadata.file_type();
            let kind = if ft.is_dir() {
                DestKind::Dir
            } else if ft.is_symlink() {
                DestKind::Symlink
            } else if ft.is_file() {
                DestKind::File
            } else {
                DestKind::Other
            };
            DestEntry {
                name: e.name.into_vec(),
                kind,
            }
        })
        .collect())
}

/// `--delete`: removes one extra (a directory only if empty; a symlink as a link).
pub fn remove_extra(root: &ServedRoot, r: &Removal) -> Result<(), String> {
    match root.remove_below(&r.sent, &r.below, r.kind == DestKind::Dir) {
        // Gone already: what was asked.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other.map_err(|e| e.to_string()),
    }
}

/// `--delete -n` (a dry run): drives `plan`'s listings through the root and returns what
/// would be removed, deepest first, removing nothing.
pub fn plan_deletions(root: &ServedRoot, plan: &mut DeletePlan) -> Vec<Removal> {
    plan.start();
    while let Some(l) = plan.next_listing() {
        let found = list_dest(root, &l);
        plan.listed(&l, found);
    }
    plan.removals()
}

/// Sets directories' modes and mtimes, deepest first (writing into a directory changes
/// its mtime).
fn fix_dirs(root: &ServedRoot, dirs: &mut [DirFix]) {
    dirs.sort_by_key(|d| std::cmp::Reverse(d.depth));
    for d in dirs.iter() {
        // Through a descriptor of the directory itself, never through a symlink.
        if let Ok(f) = root.open_directory(&d.rel) {
            let _ = f.set_times(FileTimes::new().set_modified(mtime_of(d.mtime)));
            if let Some(mode) = d.mode {
                let _ = f.set_permissions(Permissions::from_mode(mode));
            }
        }
    }
}

/// Sets the job's mode and mtime on `f`; what could not be set, for the report (a
/// mode or mtime that cannot be set does not stop the file going in place, but the file
/// then fails rsync's quick check on a rerun).
fn set_mode_and_mtime(f: &File, job: &CommitJob) -> Vec<String> {
    let mut unset = Vec::new();
    if let Err(e) = f.set_permissions(Permissions::from_mode(job.mode)) {
        unset.push(format!("its mode {:o} could not be set: {e}", job.mode));
    }
    if let Err(e) = f.set_times(FileTimes::new().set_modified(mtime_of(job.mtime))) {
        unset.push(format!("its mtime could not be set: {e}"));
    }
    unset
}

/// A commit whose file is in place: an error naming what could not be set, if anything.
fn unset_result(unset: Vec<String>) -> Result<(), CommitError> {
    if unset.is_empty() {
        Ok(())
    } else {
        Err(CommitError::MetadataUnset(unset))
    }
}

/// A time from the wire (times before 1970 are clamped to it).
fn mtime_of((secs, nanos): (i64, u32)) -> SystemTime {
    UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos.min(999_999_999))
}

fn meta_of(root: &ServedRoot, rel: &Path) -> io::Result<Option<Meta>> {
    Ok(meta_and_inode(root, rel)?.map(|(m, _)| m))
}

/// [`meta_of`] and the entry's (device, inode).
fn meta_and_inode(root: &ServedRoot, rel: &Path) -> io::Result<Option<(Meta, (u64, u64))>> {
    match root.metadata(rel) {
        Ok(m) => {
            let ft = m.file_type();
            let ordinary = ft.is_file() || ft.is_dir() || ft.is_symlink();
            let inode = (m.dev(), m.ino());
            Ok(Some((
                Meta {
                    is_file: m.is_file(),
                    is_dir: m.is_dir(),
                    len: m.len(),
                    mtime_secs: m.mtime(),
                    mtime_nanos: m.mtime_nsec(),
                    mode: m.mode() & 0o7777,
                    special: (!ordinary).then(|| file_io::kind_name(ft)),
                },
                inode,
            )))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A work file's bytes, at most `limit` + 1 (the caller treats more as foreign); `None`
/// when it is missing or not a regular file (a symlink is not followed: it is foreign).
fn read_bounded(root: &ServedRoot, rel: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    match root.metadata(rel) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let f = match root.open_file(rel, Access::ReadOwn) {
        Ok(f) => f,
        // Gone or replaced since the look: as good as missing.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    f.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        // Too long to be ours: start over.
        return Ok(None);
    }
    Ok(Some(bytes))
}

fn recorded_chunks_intact(
    part: &File,
    size: u64,
    verify: Vec<(u32, ChunkHash)>,
    chunk_size: u64,
) -> io::Result<bool> {
    let hashes = FileHashes::new(size, chunk_size);
    let mut buf = AlignedBuf::new();
    for (index, hash) in verify {
        let (off, len) = hashes.chunk_range(index);
        if hash_range(part, hashes.hasher(index), off, len, &mut buf)? != hash {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Rounds of claiming a part name before giving up (each lost only to another session
/// or process changing the name at that very moment).
const CLAIM_ATTEMPTS: usize = 8;

/// A new, empty part file at `rel`, locked by this session. Whatever held the name is
/// removed first: a stale part file only once its lock is ours (another session's is
/// never touched: [`part_locked`]), a symlink or special file at once (never followed).
fn claim_part(root: &ServedRoot, rel: &Path, shown: &Path) -> io::Result<File> {
    for _ in 0..CLAIM_ATTEMPTS {
        match root.open_file(rel, Access::CreateNew { mode: 0o600 }) {
            Ok(f) => {
                lock_part(&f, shown)?;
                // Else another session took and renamed it between the create and the
                // lock: try again.
                if same_file(root, rel, &f)? {
                    return Ok(f);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                clear_stale_part(root, rel, shown)?
            }
            Err(e) => return Err(e),
        }
    }
    Err(kept_changing(rel))
}

/// Removes what holds the part name `rel` unless it is a part file another session has
/// locked (then the error is [`part_locked`]'s). Nothing there is not an error.
fn clear_stale_part(root: &ServedRoot, rel: &Path, shown: &Path) -> io::Result<()> {
    let m = match root.metadata(rel) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    // Held only until the removal: nobody else claims the name meanwhile.
    let _locked = if m.is_file() {
        let f = match root.open_file(rel, Access::ReadOwn) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        lock_part(&f, shown)?;
        if !same_file(root, rel, &f)? {
            // Renamed away by the session that held it: the caller looks again.
            return Ok(());
        }
        Some(f)
    } else {
        None
    };
    remove_if_there(root, rel)
}

/// The existing part file `rel`, locked by this session, to resume into; `None` when it
/// cannot be resumed in place: gone, or with another hard link (writing would change
/// that other name's bytes too).
fn resume_part(root: &ServedRoot, rel: &Path, shown: &Path) -> io::Result<Option<File>> {
    let f = match root.open_file(rel, Access::ReadWriteCreate { mode: 0o600 }) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    lock_part(&f, shown)?;
    if !same_file(root, rel, &f)? || f.metadata()?.nlink() != 1 {
        return Ok(None);
    }
    Ok(Some(f))
}

/// How long a session waits for another one's lock on a part file. A rerun right after
/// the first run was stopped (Ctrl-C, a kill) often arrives before the server's session
/// for that run has noticed its client is gone and let go: moments, not seconds.
const PART_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Takes the part file's lock for this session, waiting up to [`PART_LOCK_WAIT`] for a
/// session that is ending, or fails with [`part_locked`] (`shown`: the file being
/// written, for the message).
fn lock_part(f: &File, shown: &Path) -> io::Result<()> {
    let began = std::time::Instant::now();
    loop {
        if file_io::try_lock_exclusive(f)? {
            return Ok(());
        }
        if began.elapsed() >= PART_LOCK_WAIT {
            return Err(part_locked(shown));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Another session holds the part file of `name`.
fn part_locked(name: &Path) -> io::Error {
    io::Error::other(format!(
        "another longhaul transfer is writing {} right now (its part file stayed locked \
             for {} s); wait for it to finish or stop it",
        name.display(),
        PART_LOCK_WAIT.as_secs()
    ))
}

/// Whether `rel` (not followed if a symlink) is the file `f` is open on: same device and
/// inode. Missing is `false`.
fn same_file(root: &ServedRoot, rel: &Path, f: &File) -> io::Result<bool> {
    let at = match root.metadata(rel) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let ours = f.metadata()?;
    Ok(at.dev() == ours.dev() && at.ino() == ours.ino())
}

fn replaced(rel: &Path) -> io::Error {
    io::Error::other(format!(
        "{} is no longer the file that was written and verified (another process replaced \
         it); nothing was put in place: run the copy again",
        rel.display()
    ))
}

fn kept_changing(rel: &Path) -> io::Error {
    io::Error::other(format!(
        "{} kept changing while this transfer tried to claim it ({CLAIM_ATTEMPTS} times); \
         is another program writing there?",
        rel.display()
    ))
}

fn remove_if_there(root: &ServedRoot, rel: &Path) -> io::Result<()> {
    match root.remove_file(rel) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn poisoned() -> io::Error {
    io::Error::other("receiver state poisoned by a panicked thread")
}
