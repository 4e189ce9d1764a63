//! A `sync --checksum` pull's old copies, hashed while the far end starts.
//!
//! With `--checksum` every file present at both ends is compared chunk by chunk, so the
//! receiver will hash its old copies whatever the list says: certain work, and local. A
//! pull otherwise waits on the far end first (ssh's login, the far process's start, the
//! connection and the list: 2-3 s on a 180 ms path), so this hashes the destination
//! meanwhile ([`HashedAhead::start`], one thread walking and hashing on every core) and
//! the receiving store takes the hashes ([`HashedAhead::take`]) instead of reading the
//! file again.
//!
//! Bounded to the wait it fills: the first [`HashedAhead::take`] (the list is here) stops
//! the walk after the file being hashed, so it never competes with the transfer's own
//! hashing; a file the walk did not reach is hashed by the store as before. At most
//! [`MAX_FILES`] files are looked at.
//!
//! Hashes are matched by the file's identity (device, inode, size, mtime, ctime), not by
//! name: the walk needs no rule about where a pulled tree lands, a name reached through a
//! symlink gives the hashes of the very file the store then opens beneath its root, and a
//! file changed since it was hashed (its ctime moves) is simply hashed again.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use longhaul_transfer::place::is_work_name;
use longhaul_transfer::{ChunkGrid, ChunkHash, FileIdentity};

use super::chunk_io::hash_all_chunks;
use super::old_copy::{hash_threads, identity};

/// Most destination entries the walk looks at.
pub const MAX_FILES: usize = 100_000;

/// Chunk hashes of destination files, made ahead of the list that asks for them.
pub struct HashedAhead {
    chunk_size: u64,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Hashed files by (device, inode): who each was when hashed, and its hashes.
    done: HashMap<(u64, u64), (FileIdentity, Vec<ChunkHash>)>,
    /// The file being hashed now.
    busy: Option<(u64, u64)>,
    /// The walk is to stop (the list is here, or the transfer ended).
    stop: bool,
    /// The walk has ended.
    ended: bool,
    /// Files taken from `done` by the store, and their bytes.
    used: (u64, u64),
}

impl HashedAhead {
    /// Starts hashing, on the grid of `chunk_size`, the regular files at or under `at`
    /// (where the pulled source lands).
    pub fn start(at: &Path, chunk_size: u64) -> Arc<Self> {
        let ahead = Arc::new(Self {
            chunk_size,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let worker = ahead.clone();
        let at = at.to_path_buf();
        std::thread::spawn(move || {
            worker.walk(at);
            worker.lock().ended = true;
            worker.changed.notify_all();
        });
        ahead
    }

    /// The hashes made ahead for the file open as `f`, whose identity is `now`, on the
    /// grid of `chunk_size` (`None`: not made, made on another grid, or the file changed
    /// since). Waits while that very file is being hashed. The first call stops the walk
    /// after its current file.
    pub fn take(&self, now: &FileIdentity, chunk_size: u64) -> Option<Vec<ChunkHash>> {
        let key = (now.dev, now.ino);
        let mut st = self.lock();
        st.stop = true;
        while st.busy == Some(key) {
            st = self.wait(st);
        }
        if chunk_size != self.chunk_size {
            return None;
        }
        let (was, hashes) = st.done.remove(&key)?;
        if was != *now {
            return None;
        }
        st.used.0 += 1;
        st.used.1 += now.size;
        Some(hashes)
    }

    /// Stops the walk after the file it is hashing: the list has been answered, or the
    /// transfer ended without one (the walk's thread holds the hashes alive until then).
    pub fn stop(&self) {
        self.lock().stop = true;
    }

    /// Files hashed ahead so far (taken or not), and how many of them the store took,
    /// with their bytes.
    pub fn counts(&self) -> HashedCounts {
        let st = self.lock();
        HashedCounts {
            hashed: st.done.len() as u64 + st.used.0,
            used_files: st.used.0,
            used_bytes: st.used.1,
        }
    }

    /// Waits until the walk has ended (tests).
    pub fn wait_ended(&self) {
        let mut st = self.lock();
        while !st.ended {
            st = self.wait(st);
        }
    }

    /// Waits for the state to change (a file hashed, the walk ended).
    fn wait<'a>(&self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(st)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Walks `at` breadth first (never following a symlink), hashing each regular file,
    /// until told to stop or [`MAX_FILES`] entries were seen.
    fn walk(&self, at: PathBuf) {
        let mut queue = VecDeque::from([at]);
        let mut seen = 0usize;
        while let Some(path) = queue.pop_front() {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                let Ok(entries) = std::fs::read_dir(&path) else {
                    continue;
                };
                for e in entries.flatten() {
                    seen += 1;
                    if seen > MAX_FILES {
                        return;
                    }
                    queue.push_back(e.path());
                }
            } else if meta.is_file() && !self.hash_one(&path) {
                return;
            }
        }
    }

    /// Hashes the file at `path` unless it is hashed already; false once told to stop.
    fn hash_one(&self, path: &Path) -> bool {
        // A part file or manifest of an earlier run is never an old copy.
        if path.file_name().is_some_and(|n| is_work_name(n.as_bytes())) {
            return true;
        }
        let Ok(f) = File::open(path) else {
            return true;
        };
        let Ok(before) = identity(&f) else {
            return true;
        };
        let key = (before.dev, before.ino);
        {
            let mut st = self.lock();
            if st.stop {
                return false;
            }
            if st.done.contains_key(&key) {
                return true;
            }
            st.busy = Some(key);
        }
        let grid = ChunkGrid::new(before.size, self.chunk_size);
        let hashes = hash_all_chunks(&f, &grid, hash_threads());
        // Written to while being read: its hashes describe no version of it.
        let unchanged = identity(&f).is_ok_and(|after| after == before);
        let mut st = self.lock();
        st.busy = None;
        if let (Ok(h), true) = (hashes, unchanged) {
            st.done.insert(key, (before, h));
        }
        self.changed.notify_all();
        !st.stop
    }
}

/// What hashing ahead did ([`HashedAhead::counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashedCounts {
    /// Files hashed ahead.
    pub hashed: u64,
    /// Of them, files whose hashes the store took.
    pub used_files: u64,
    /// Their bytes.
    pub used_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        p
    }

    fn id(p: &Path) -> FileIdentity {
        identity(&File::open(p).unwrap()).unwrap()
    }

    #[test]
    fn hashes_match_a_fresh_hash_and_are_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let a = file(dir.path(), "sub/a", &vec![7u8; 300_000]);
        let b = file(dir.path(), "b", b"small");
        let ahead = HashedAhead::start(dir.path(), 1 << 16);
        ahead.wait_ended();
        assert_eq!(ahead.counts().hashed, 2);
        let grid = ChunkGrid::new(300_000, 1 << 16);
        let fresh = hash_all_chunks(&File::open(&a).unwrap(), &grid, 2).unwrap();
        assert_eq!(ahead.take(&id(&a), 1 << 16), Some(fresh));
        // Taken: a second ask hashes again.
        assert_eq!(ahead.take(&id(&a), 1 << 16), None);
        // Another grid than the one hashed on is no answer.
        assert_eq!(ahead.take(&id(&b), 1 << 15), None);
        let c = ahead.counts();
        assert_eq!((c.used_files, c.used_bytes), (1, 300_000));
    }

    #[test]
    fn a_file_changed_after_its_hash_is_not_answered() {
        let dir = tempfile::tempdir().unwrap();
        let a = file(dir.path(), "a", &[1u8; 5000]);
        let ahead = HashedAhead::start(dir.path(), 1 << 16);
        ahead.wait_ended();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&a)
            .unwrap()
            .write_all(b"changed")
            .unwrap();
        assert_eq!(ahead.take(&id(&a), 1 << 16), None);
    }

    #[test]
    fn part_files_are_not_hashed_and_symlinks_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        file(outside.path(), "big", &[3u8; 1000]);
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        file(dir.path(), ".x.longhaul-part", b"part");
        let ahead = HashedAhead::start(dir.path(), 1 << 16);
        ahead.wait_ended();
        assert_eq!(ahead.counts().hashed, 0);
    }

    #[test]
    fn the_first_take_stops_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..100 {
            file(dir.path(), &format!("f{i}"), &vec![i as u8; 1 << 20]);
        }
        let ahead = HashedAhead::start(dir.path(), 1 << 16);
        let absent = FileIdentity {
            dev: 0,
            ino: 0,
            size: 0,
            mtime_secs: 0,
            mtime_nanos: 0,
            ctime_secs: 0,
            ctime_nanos: 0,
        };
        assert_eq!(ahead.take(&absent, 1 << 16), None);
        let at_stop = ahead.counts().hashed;
        ahead.wait_ended();
        // At most the file being hashed when told finishes.
        assert!(ahead.counts().hashed <= at_stop + 1);
    }
}
