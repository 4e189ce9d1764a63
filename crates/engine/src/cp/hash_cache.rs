//! The chunk-hash cache on disk: one small file per (file, chunk size) under the user's
//! cache directory, so that a sync does not re-read an unchanged huge file at either end.
//!
//! The record format and its checks are sans-I/O (`longhaul_transfer::hash_cache`); this
//! driver owns the directory (`$XDG_CACHE_HOME/longhaul/chunk-hashes`, else
//! `~/.cache/longhaul/chunk-hashes`, mode 0700), the identity of a file (`fstat` of the
//! open file), writing a record (a new 0600 temp file renamed over the record, never
//! through a symlink) and the bound on the cache's size (oldest records dropped).
//!
//! A record is trusted only while the file's identity (device, inode, size, mtime, ctime)
//! and the chunk size are those it was stored with. Two rules keep a record from ever
//! describing bytes the file does not hold:
//! - [`HashCache::store`] takes a [`Snapshot`] of the file's identity made *before* it was
//!   hashed and stores only if the file still has that identity (a write during the
//!   hashing moves the mtime and ctime);
//! - and only if the file's ctime was older than the snapshot by [`CacheLimits::settle`]
//!   (2 s): a file system stamps times with a coarse clock, so a write in the same tick as
//!   the change before the snapshot would leave the identity unchanged (git's "racily
//!   clean" entries). Such a file is hashed again next time and stored then.
//!
//! Errors here never fail a transfer: callers ignore them (the file is hashed instead);
//! they are returned for tests and logs.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use longhaul_transfer::hash_cache::{cache_key, decode, encode, MAX_RECORD_BYTES};
use longhaul_transfer::{CachedHashes, ChunkGrid, ChunkHash, FileIdentity};

use crate::cache_dir::{cache_base, private_dir, replace_private};
use crate::cp::chunk_io::hash_all_chunks;

/// Bounds of one cache directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// Most bytes of records kept (default 256 MiB: the hashes of 32 TiB at 4 MiB chunks).
    pub max_bytes: u64,
    /// Most records kept (default 100,000).
    pub max_entries: u64,
    /// How much older than the hashing a file's last change must be for its hashes to be
    /// stored (default 2 s; see the module docs).
    pub settle: Duration,
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self {
            max_bytes: 256 << 20,
            max_entries: 100_000,
            settle: Duration::from_secs(2),
        }
    }
}

/// What [`HashCache::store`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// The record is in the cache.
    Stored,
    /// Not stored: the file's identity differs from the one it had before the hashing
    /// (it changed meanwhile), so the hashes may not be of its bytes.
    FileChanged,
    /// Not stored: the file changed less than [`CacheLimits::settle`] before the snapshot
    /// taken before the hashing.
    TooRecent,
}

/// A chunk-hash cache directory.
#[derive(Debug)]
pub struct HashCache {
    dir: PathBuf,
    limits: CacheLimits,
    /// Records and bytes believed to be in the directory: counted by one scan at the first
    /// store, then by what this process adds; a scan trims when a bound is passed.
    usage: Mutex<Option<Usage>>,
    temp_seq: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Usage {
    entries: u64,
    bytes: u64,
}

/// Name prefix of records being written (never read as records).
const TEMP_PREFIX: &str = ".tmp-";
/// Leftover temp files older than this (a process killed mid-store) are removed by a trim.
const STALE_TEMP: Duration = Duration::from_secs(3600);

impl HashCache {
    /// The user's cache: `$XDG_CACHE_HOME/longhaul/chunk-hashes` (an absolute
    /// `XDG_CACHE_HOME`), else `$HOME/.cache/longhaul/chunk-hashes`; created 0700.
    pub fn open_default() -> io::Result<Self> {
        Self::at(default_dir()?)
    }

    /// A cache in `dir` (created 0700 with its parents if missing), default limits. A
    /// symlink or a non-directory at `dir` is refused; an existing directory open to
    /// others is narrowed to 0700 (refused if that is not ours to change).
    pub fn at(dir: impl Into<PathBuf>) -> io::Result<Self> {
        let dir = dir.into();
        private_dir(&dir, "chunk-hash cache")?;
        Ok(Self {
            dir,
            limits: CacheLimits::default(),
            usage: Mutex::new(None),
            temp_seq: AtomicU64::new(0),
        })
    }

    /// The same cache with other bounds.
    pub fn with_limits(mut self, limits: CacheLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cached chunk hashes of `file` at `chunk_size`, if a record holds them for the
    /// file exactly as it is now (`fstat`); `None` on any miss or error. A hit refreshes
    /// the record's mtime, so the records dropped first are those least used.
    pub fn lookup(&self, file: &File, chunk_size: u64) -> Option<Vec<ChunkHash>> {
        let id = file_identity(&file.metadata().ok()?);
        let path = self.dir.join(cache_key(id.dev, id.ino, chunk_size));
        let mut rec = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .ok()?;
        let meta = rec.metadata().ok()?;
        if !meta.file_type().is_file() || meta.len() > MAX_RECORD_BYTES as u64 {
            return None;
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        // Bounded even if the record grows while it is read.
        (&mut rec)
            .take(MAX_RECORD_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .ok()?;
        let hashes = decode(&bytes, &id, chunk_size)?;
        let _ = rec.set_modified(SystemTime::now());
        Some(hashes)
    }

    /// Records `hashes` (every chunk of `file` at `chunk_size`, in order), computed from the
    /// file after the snapshot `before` ([`snapshot`], taken just before the hashing).
    /// Stored only if the file still has that identity and had not changed for
    /// [`CacheLimits::settle`] before the snapshot; written to a new 0600 temp file in the
    /// cache directory, then renamed over the record.
    pub fn store(
        &self,
        file: &File,
        chunk_size: u64,
        hashes: &[ChunkHash],
        before: &Snapshot,
    ) -> io::Result<Stored> {
        let id = file_identity(&file.metadata()?);
        if id != before.identity {
            return Ok(Stored::FileChanged);
        }
        if !settled(&id, before.taken, self.limits.settle) {
            return Ok(Stored::TooRecent);
        }
        let record = CachedHashes::new(id, chunk_size, hashes.to_vec())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let bytes = encode(&record);
        let name = cache_key(id.dev, id.ino, chunk_size);
        let temp = self.dir.join(format!(
            "{TEMP_PREFIX}{name}-{}-{}",
            std::process::id(),
            self.temp_seq.fetch_add(1, Ordering::Relaxed)
        ));
        replace_private(&temp, &self.dir.join(&name), &bytes)?;
        self.account(bytes.len() as u64, &name)?;
        Ok(Stored::Stored)
    }

    /// The chunk hashes of `file` (`size` bytes as the caller saw it) at `chunk_size`:
    /// from the cache if it holds them, else hashed on `threads` threads and stored.
    /// Returns them and whether they came from the cache. `--checksum` does not call this
    /// (it hashes with [`hash_all_chunks`] and leaves the cache alone).
    pub fn chunk_hashes(
        &self,
        file: &File,
        size: u64,
        chunk_size: u64,
        threads: usize,
    ) -> io::Result<(Vec<ChunkHash>, bool)> {
        if let Some(h) = self.lookup(file, chunk_size) {
            if file_identity(&file.metadata()?).size == size {
                return Ok((h, true));
            }
        }
        let before = snapshot(file)?;
        let hashes = hash_all_chunks(file, &ChunkGrid::new(size, chunk_size), threads)?;
        if before.identity.size == size {
            // A failure to cache costs only a hash next time.
            let _ = self.store(file, chunk_size, &hashes, &before);
        }
        Ok((hashes, false))
    }

    /// Counts a new record (`name`); past a bound, drops the oldest records (by mtime:
    /// stored or last hit; never `name`) until 90 % of both bounds is left.
    fn account(&self, bytes: u64, name: &str) -> io::Result<()> {
        let mut usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        let u = match *usage {
            Some(u) => u,
            None => self.trim(None)?,
        };
        let u = Usage {
            entries: u.entries + 1,
            bytes: u.bytes + bytes,
        };
        *usage = Some(
            if u.entries > self.limits.max_entries || u.bytes > self.limits.max_bytes {
                self.trim(Some(name))?
            } else {
                u
            },
        );
        Ok(())
    }

    /// Scans the directory: counts records, removes stale temp files and, given the name
    /// of the record just stored (kept), the oldest records past 90 % of the bounds.
    /// Returns what is left.
    fn trim(&self, keep: Option<&str>) -> io::Result<Usage> {
        let now = SystemTime::now();
        let mut records = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.file_type().is_file() {
                continue;
            }
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with(TEMP_PREFIX) {
                if now.duration_since(mtime).is_ok_and(|age| age > STALE_TEMP) {
                    let _ = fs::remove_file(entry.path());
                }
                continue;
            }
            if name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                let newest = keep == Some(name);
                records.push((newest, mtime, meta.len(), entry.path()));
            }
        }
        let mut usage = Usage {
            entries: records.len() as u64,
            bytes: records.iter().map(|r| r.2).sum(),
        };
        if keep.is_some() {
            let keep_entries = self.limits.max_entries / 10 * 9;
            let keep_bytes = self.limits.max_bytes / 10 * 9;
            // Oldest first; the record just stored last whatever its time says.
            records.sort_by_key(|r| (r.0, r.1));
            for (_, _, len, path) in records {
                if usage.entries <= keep_entries && usage.bytes <= keep_bytes {
                    break;
                }
                if fs::remove_file(&path).is_ok() {
                    usage.entries -= 1;
                    usage.bytes -= len;
                }
            }
        }
        Ok(usage)
    }
}

/// A file's identity and when it was taken: what [`HashCache::store`] compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// The identity (`fstat` of the open file).
    pub identity: FileIdentity,
    /// When it was taken (this host's clock).
    pub taken: SystemTime,
}

/// The identity of an open file (`fstat`) now: take it just before hashing the file.
pub fn snapshot(file: &File) -> io::Result<Snapshot> {
    let identity = file_identity(&file.metadata()?);
    Ok(Snapshot {
        identity,
        taken: SystemTime::now(),
    })
}

/// The identity in a file's metadata.
pub fn file_identity(m: &Metadata) -> FileIdentity {
    FileIdentity {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_secs: m.mtime(),
        // The kernel reports nanoseconds in 0..10^9.
        mtime_nanos: m.mtime_nsec() as u32,
        ctime_secs: m.ctime(),
        ctime_nanos: m.ctime_nsec() as u32,
    }
}

/// Whether the file last changed at least `settle` before `taken`.
fn settled(id: &FileIdentity, taken: SystemTime, settle: Duration) -> bool {
    let Ok(taken) = taken.duration_since(SystemTime::UNIX_EPOCH) else {
        return false;
    };
    let Ok(ctime_secs) = u64::try_from(id.ctime_secs) else {
        return true; // changed before 1970: long settled
    };
    let ctime = Duration::new(ctime_secs, id.ctime_nanos);
    taken
        .checked_sub(settle)
        .is_some_and(|limit| ctime <= limit)
}

fn default_dir() -> io::Result<PathBuf> {
    Ok(cache_base()?.join("chunk-hashes"))
}
