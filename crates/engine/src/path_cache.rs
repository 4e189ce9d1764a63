//! The per-user path cache for jump-start: one small text file,
//! `$XDG_CACHE_HOME/longhaul/paths` (else `~/.cache/longhaul/paths`), a record per path
//! with the delivered rate the last run held there, its minimum RTT and MSS, when, and how
//! many runs in a row found about that rate.
//!
//! A path is the pair (peer address, this end's local address): the same peer reached
//! from another interface (another local address) may take another route, and a peer's
//! port says nothing about the path. The RTT check in `longhaul_policy::jump_start` catches
//! a route that changed under the same pair.
//!
//! The record, its text and the merge rule are pure (`longhaul_policy::path_record`); the
//! file is handled here as the chunk-hash cache handles its records (`cp/hash_cache.rs`): the
//! directory is made 0700, the file is read with `O_NOFOLLOW` and a bound on its size,
//! written to a new 0600 temp file (`O_CREAT|O_EXCL`, never through a symlink) renamed
//! over it; at most `longhaul_policy::path_record::MAX_ENTRIES` records (the oldest dropped); a line that does not
//! parse is skipped and a file that does not parse at all is treated as empty. Nothing
//! here fails a run: callers ignore the errors, which are returned for tests and logs.

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub use longhaul_policy::path_record::{encode, merge, parse, PathRecord, MAX_FILE_BYTES};

/// The cache file.
#[derive(Debug, Clone)]
pub struct PathCache {
    file: PathBuf,
}

impl PathCache {
    /// The user's cache (`$XDG_CACHE_HOME/longhaul/paths`, else `~/.cache/longhaul/paths`).
    pub fn open_default() -> io::Result<Self> {
        Self::in_dir(crate::cache_dir::cache_base()?)
    }

    /// The cache in `dir` (created 0700; a symlink or non-directory there is refused).
    pub fn in_dir(dir: impl Into<PathBuf>) -> io::Result<Self> {
        let dir = dir.into();
        crate::cache_dir::private_dir(&dir, "path cache")?;
        Ok(Self {
            file: dir.join("paths"),
        })
    }

    /// The file's path.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Every record (none if the file is missing, too large or not ours to trust).
    pub fn load(&self) -> Vec<PathRecord> {
        let Ok(mut f) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&self.file)
        else {
            return Vec::new();
        };
        let Ok(meta) = f.metadata() else {
            return Vec::new();
        };
        if !meta.file_type().is_file() || meta.len() > MAX_FILE_BYTES {
            return Vec::new();
        }
        let mut text = String::new();
        if (&mut f)
            .take(MAX_FILE_BYTES)
            .read_to_string(&mut text)
            .is_err()
        {
            return Vec::new();
        }
        parse(&text)
    }

    /// The record of the path (peer, local), if any.
    pub fn lookup(&self, peer: IpAddr, local: IpAddr) -> Option<PathRecord> {
        self.load()
            .into_iter()
            .find(|r| r.peer == peer && r.local == local)
    }

    /// Stores `record` (see [`merge`]); returns it as stored (with its confirmations).
    pub fn store(&self, record: PathRecord) -> io::Result<PathRecord> {
        let mut records = self.load();
        merge(&mut records, record);
        let stored = records
            .iter()
            .find(|r| r.peer == record.peer && r.local == record.local)
            .copied()
            .unwrap_or(record);
        let dir = self.file.parent().unwrap_or(Path::new("."));
        let temp = dir.join(format!(
            ".tmp-paths-{}-{}",
            std::process::id(),
            now_unix_nanos()
        ));
        crate::cache_dir::replace_private(&temp, &self.file, encode(&records).as_bytes())?;
        Ok(stored)
    }
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn now_unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn store_and_lookup_in_a_private_file() {
        let dir = std::env::temp_dir().join(format!("lh-pathcache-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cache = PathCache::in_dir(&dir).unwrap();
        // A record as the file holds it (the record's own rules are path_record's).
        let r = parse("longhaul-paths 1\n10.0.0.2 10.0.0.1 980000000 436000 4418 5 1\n")[0];
        assert_eq!(cache.store(r).unwrap().confirmations, 1);
        assert_eq!(cache.lookup(r.peer, r.local), Some(r));
        let mode = fs::metadata(cache.file()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A symlink in its place is not followed on read, and replaced on write.
        fs::remove_file(cache.file()).unwrap();
        let target = dir.join("elsewhere");
        fs::write(&target, encode(&[r])).unwrap();
        std::os::unix::fs::symlink(&target, cache.file()).unwrap();
        assert!(cache.load().is_empty());
        cache.store(r).unwrap();
        assert!(!fs::symlink_metadata(cache.file())
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&target).unwrap(), encode(&[r]));
        // A corrupt file is ignored, not fatal.
        fs::write(cache.file(), b"\xff\xfe junk").unwrap();
        assert!(cache.load().is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }
}
