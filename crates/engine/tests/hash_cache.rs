//! The chunk-hash cache on real files: a record is found while the file is the one it was
//! made of, and missed after a touch, a rewrite in place that restores the mtime, at
//! another chunk size, or when the record is damaged; never written through a symlink;
//! bounded in entries.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use longhaul_engine::cp::chunk_io::hash_all_chunks;
use longhaul_engine::hash_cache::{snapshot, CacheLimits, HashCache, Stored};
use longhaul_transfer::ChunkGrid;

const CHUNK: u64 = 64 * 1024;

fn no_settle() -> CacheLimits {
    CacheLimits {
        settle: Duration::ZERO,
        ..CacheLimits::default()
    }
}

fn write_file(path: &Path, len: usize, seed: u8) -> File {
    let data: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    fs::write(path, data).unwrap();
    File::open(path).unwrap()
}

/// Hashes and stores `file` as a sync would.
fn hash_and_store(cache: &HashCache, file: &File, chunk: u64) -> (Vec<[u8; 32]>, Stored) {
    let before = snapshot(file).unwrap();
    let h = hash_all_chunks(file, &ChunkGrid::new(before.identity.size, chunk), 2).unwrap();
    let s = cache.store(file, chunk, &h, &before).unwrap();
    (h, s)
}

/// The ctime moves on the file system's clock tick: wait past it.
fn next_tick() {
    std::thread::sleep(Duration::from_millis(30));
}

#[test]
fn hit_while_unchanged_miss_after_touch_rewrite_or_other_chunk_size() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = HashCache::at(tmp.path().join("cache"))
        .unwrap()
        .with_limits(no_settle());
    let path = tmp.path().join("data");
    let file = write_file(&path, 5 * CHUNK as usize + 123, 1);
    assert_eq!(cache.lookup(&file, CHUNK), None, "empty cache");
    let (h, stored) = hash_and_store(&cache, &file, CHUNK);
    assert_eq!(stored, Stored::Stored);
    assert_eq!(h.len(), 6);
    assert_eq!(cache.lookup(&file, CHUNK), Some(h.clone()));
    assert_eq!(
        cache.lookup(&File::open(&path).unwrap(), CHUNK),
        Some(h.clone())
    );
    assert_eq!(cache.lookup(&file, CHUNK * 2), None, "another chunk size");

    // touch: a new mtime.
    let mtime = fs::metadata(&path).unwrap().modified().unwrap();
    next_tick();
    file.set_modified(mtime + Duration::from_secs(1)).unwrap();
    assert_eq!(cache.lookup(&file, CHUNK), None, "touched");
    file.set_modified(mtime).unwrap();

    // The same size and mtime again, different bytes: only the ctime tells.
    let (h, _) = hash_and_store(&cache, &file, CHUNK);
    assert_eq!(cache.lookup(&file, CHUNK), Some(h));
    let ctime0 = fs::metadata(&path).unwrap().ctime_nsec();
    next_tick();
    {
        let mut w = OpenOptions::new().write(true).open(&path).unwrap();
        w.write_all(b"changed in place").unwrap();
        w.set_modified(mtime).unwrap();
    }
    let m = fs::metadata(&path).unwrap();
    assert_eq!(m.modified().unwrap(), mtime);
    assert_ne!(m.ctime_nsec(), ctime0, "the rewrite moved the ctime");
    assert_eq!(
        cache.lookup(&file, CHUNK),
        None,
        "rewritten in place, mtime restored"
    );

    // A copy with the same size and mtime is another inode: a miss.
    let (h, _) = hash_and_store(&cache, &file, CHUNK);
    let copy = tmp.path().join("copy");
    fs::copy(&path, &copy).unwrap();
    let copy = File::open(&copy).unwrap();
    copy.set_modified(mtime).unwrap();
    assert_eq!(cache.lookup(&copy, CHUNK), None, "another inode");
    assert_eq!(cache.lookup(&file, CHUNK), Some(h));
}

#[test]
fn damaged_records_miss_and_a_symlink_is_replaced_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    let cache = HashCache::at(&dir).unwrap().with_limits(no_settle());
    let file = write_file(&tmp.path().join("data"), 3 * CHUNK as usize, 2);
    let (h, _) = hash_and_store(&cache, &file, CHUNK);
    let records: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        records.len(),
        1,
        "one record, no temp file left: {records:?}"
    );
    let record = &records[0];
    let meta = fs::metadata(record).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let good = fs::read(record).unwrap();
    for at in [0, 9, 80, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        fs::write(record, &bad).unwrap();
        assert_eq!(cache.lookup(&file, CHUNK), None, "flipped byte {at}");
    }
    fs::write(record, &good[..good.len() - 1]).unwrap();
    assert_eq!(cache.lookup(&file, CHUNK), None, "truncated");
    fs::write(record, b"").unwrap();
    assert_eq!(cache.lookup(&file, CHUNK), None, "empty");
    fs::write(record, &good).unwrap();
    assert_eq!(cache.lookup(&file, CHUNK), Some(h.clone()));

    // A symlink at the record's name: lookup does not follow it, store replaces it.
    let victim = tmp.path().join("victim");
    fs::write(&victim, &good).unwrap();
    fs::remove_file(record).unwrap();
    std::os::unix::fs::symlink(&victim, record).unwrap();
    assert_eq!(
        cache.lookup(&file, CHUNK),
        None,
        "a symlinked record is not read"
    );
    hash_and_store(&cache, &file, CHUNK);
    assert!(!fs::symlink_metadata(record)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read(&victim).unwrap(), good);
    assert_eq!(cache.lookup(&file, CHUNK), Some(h));

    // A symlink as the cache directory is refused.
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    assert!(HashCache::at(&link).is_err());
}

#[test]
fn only_hashes_of_a_settled_unchanged_file_are_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = HashCache::at(tmp.path().join("cache")).unwrap();
    let path = tmp.path().join("data");
    let file = write_file(&path, 2 * CHUNK as usize, 3);
    // Just written: a write in the same clock tick would not show in its times.
    assert_eq!(hash_and_store(&cache, &file, CHUNK).1, Stored::TooRecent);
    let old = SystemTime::now() - Duration::from_secs(3600);
    // Changed after its identity was taken: refused.
    let cache = cache.with_limits(no_settle());
    let before = snapshot(&file).unwrap();
    let h = hash_all_chunks(&file, &ChunkGrid::new(before.identity.size, CHUNK), 1).unwrap();
    next_tick();
    file.set_modified(old).unwrap();
    assert_eq!(
        cache.store(&file, CHUNK, &h, &before).unwrap(),
        Stored::FileChanged
    );
    assert_eq!(cache.lookup(&file, CHUNK), None);
    // Hashes that do not fit the file are an error, not a record.
    let before = snapshot(&file).unwrap();
    assert!(cache.store(&file, CHUNK, &h[..1], &before).is_err());
    let size = before.identity.size;
    // chunk_hashes: hashed once, then from the cache.
    let (a, cached) = cache.chunk_hashes(&file, size, CHUNK, 2).unwrap();
    assert!(!cached);
    assert_eq!(a, h);
    let (b, cached) = cache.chunk_hashes(&file, size, CHUNK, 2).unwrap();
    assert!(cached);
    assert_eq!(b, h);
}

#[test]
fn the_oldest_records_go_past_the_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    let limits = CacheLimits {
        max_entries: 10,
        ..no_settle()
    };
    let cache = HashCache::at(&dir).unwrap().with_limits(limits);
    let mut files = Vec::new();
    for i in 0..25u8 {
        let f = write_file(&tmp.path().join(format!("f{i}")), 1000, i);
        assert_eq!(hash_and_store(&cache, &f, 4096).1, Stored::Stored);
        files.push(f);
    }
    let n = fs::read_dir(&dir).unwrap().count();
    assert!((1..=10).contains(&n), "{n} records kept");
    assert!(
        cache.lookup(&files[24], 4096).is_some(),
        "the newest record is kept"
    );
    // A fresh handle (another process) counts what is there before adding.
    let again = HashCache::at(&dir).unwrap().with_limits(limits);
    for f in &files[..12] {
        hash_and_store(&again, f, 4096);
    }
    assert!(fs::read_dir(&dir).unwrap().count() <= 10);
}
