//! One received file's data on disk ([`DataFile`]) and the data path's work on it: the
//! file opened as the session plans it ([`OpenPlan`]: fresh, resumed, in place, existing,
//! or created when its one chunk arrives), verified chunks written, manifest records
//! appended, what was written flushed (`--sync`), and chunks hashed again as they are on
//! disk. One-chunk files open at once are counted ([`LAZY_OPEN`]) and bounded, so a tree
//! of many small files does not run out of descriptors.

use longhaul_proto::transfer::EntryId;
use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use longhaul_sys::served_root::{Access, ServedRoot};
use longhaul_sys::{direct_io, file_io};
use longhaul_transfer::session::recv::OpenPlan;
use longhaul_transfer::{sparse, ChunkGrid, ChunkHash};

use super::part::{claim_part, lock_part, remove_if_there, resume_part};
use super::{poisoned, Store, StoreError};
use crate::cp::chunk_io::hash_chunks;

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

/// `LONGHAUL_WRITES=buffered`: every write goes through the page cache (read once per
/// process).
fn writes_buffered() -> bool {
    static BUFFERED: OnceLock<bool> = OnceLock::new();
    *BUFFERED.get_or_init(|| std::env::var_os("LONGHAUL_WRITES").is_some_and(|v| v == "buffered"))
}

/// One received file's data on disk.
#[derive(Default)]
pub struct DataFile {
    /// The part file (or, in `--checksum-only`, the existing file); a one-chunk file's
    /// is created when its chunk arrives.
    pub(super) data: OnceLock<File>,
    /// `data` was created without a name (`O_TMPFILE`): it is linked into place.
    pub(super) unnamed: AtomicBool,
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
    /// `data` opened again for writes that bypass the page cache ([`direct_io`]), made
    /// at the first chunk; `None` on a file system not suited to them.
    direct: OnceLock<Option<File>>,
    /// A direct write was refused: the rest go buffered.
    direct_refused: AtomicBool,
}

impl DataFile {
    pub(super) fn with(data: Option<File>, manifest: Option<File>) -> Self {
        Self {
            data: data.map(OnceLock::from).unwrap_or_default(),
            manifest_sync: manifest.as_ref().and_then(|m| m.try_clone().ok()),
            manifest: manifest.map(Mutex::new),
            ..Self::default()
        }
    }

    /// `data` opened for direct writes, once (`None`: not a file system for them, or
    /// `LONGHAUL_WRITES=buffered` asks for the page cache).
    fn direct(&self, data: &File) -> Option<&File> {
        self.direct
            .get_or_init(|| {
                (!writes_buffered())
                    .then(|| direct_io::reopen_direct(data).ok())
                    .flatten()
            })
            .as_ref()
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

impl Store {
    pub(super) fn open(
        &self,
        id: EntryId,
        (final_rel, part_rel, manifest_rel): (&Path, &Path, Option<&Path>),
        size: u64,
        plan: OpenPlan,
        shared: bool,
    ) -> io::Result<bool> {
        let root = &self.root;
        let (data, intact) = match plan {
            plan if shared => {
                let names = (final_rel, part_rel, manifest_rel);
                let intact = |part: &File, verify| {
                    recorded_chunks_intact(part, size, verify, self.chunk_size)
                };
                match super::stripe::open_shared(root, names, size, plan, intact)? {
                    Some(data) => (data, true),
                    None => return Ok(false),
                }
            }
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
            // A part file's chunks bypass the page cache (a one-chunk file's, created
            // on use, do not: they are small, and many).
            let direct = lazy
                .is_none()
                .then(|| f.direct(data))
                .flatten()
                .filter(|_| !f.direct_refused.load(Ordering::Relaxed));
            for r in sparse::data_ranges(buf, 4096) {
                let (bytes, at) = (&buf[r.clone()], offset + r.start as u64);
                match direct {
                    Some(d) => {
                        let w = direct_io::write_all_at_direct(data, d, bytes, at)?;
                        if w.refused {
                            f.direct_refused.store(true, Ordering::Relaxed);
                        }
                    }
                    None => file_io::write_all_at(data, bytes, at)?,
                }
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
        id: EntryId,
        grid: &ChunkGrid,
        chunks: &[u32],
    ) -> io::Result<Vec<(u32, ChunkHash)>> {
        let f = self
            .data(id)
            .ok_or_else(|| io::Error::other(format!("file {id} has no data")))?;
        hash_chunks(f.file()?, grid, chunks, 1)
    }
}

pub(super) fn recorded_chunks_intact(
    part: &File,
    size: u64,
    verify: Vec<(u32, ChunkHash)>,
    chunk_size: u64,
) -> io::Result<bool> {
    // One at a time: the first chunk that differs ends the check (the part file is
    // started over), without reading the rest of a large file.
    let grid = ChunkGrid::new(size, chunk_size);
    for (index, hash) in verify {
        if hash_chunks(part, &grid, &[index], 1)? != [(index, hash)] {
            return Ok(false);
        }
    }
    Ok(true)
}
