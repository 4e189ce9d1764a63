//! A `sync --checksum` pull with its old copies hashed ahead (`cp::hash_ahead`), against
//! a real server on loopback: the receiver takes the hashes made ahead instead of reading
//! the old copies again, the changed chunks alone cross, and an old copy changed after
//! it was hashed ahead is hashed again (never compared by stale hashes).

mod support;

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use longhaul_engine::cp::client::{run_cp, CpJob};
use longhaul_engine::cp::hash_ahead::HashedAhead;
use longhaul_engine::cp::Progress;
use longhaul_transfer::session::recv::SyncRules;
use support::{cp_config, token, TestServer};

const CHUNK: u64 = 64 * 1024;
const SIZE: usize = 8 * CHUNK as usize + 1000;

fn content(seed: u8) -> Vec<u8> {
    (0..SIZE)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

fn fill(root: &Path) {
    fs::create_dir(root.join("tree")).unwrap();
    fs::write(root.join("tree/a"), content(1)).unwrap();
    fs::write(root.join("tree/b"), content(2)).unwrap();
}

/// The destination's old copies: the sources with one chunk changed in each.
fn old_copies(dest: &Path) {
    for (name, seed) in [("a", 1), ("b", 2)] {
        let mut bytes = content(seed);
        bytes[3 * CHUNK as usize] ^= 0xff;
        fs::write(dest.join(name), bytes).unwrap();
    }
}

fn sync_pull(s: &TestServer, dest: &Path, ahead: &Arc<HashedAhead>) -> (u64, u64) {
    let mut cfg = cp_config(
        &s.target(),
        token().into(),
        "tree/",
        CpJob::Pull {
            dest: dest.to_path_buf(),
        },
    );
    cfg.chunk_size = Some(CHUNK);
    cfg.delta = Some(SyncRules {
        checksum: true,
        contents: true,
        inplace: false,
        dry_run: false,
    });
    cfg.hashed_ahead = Some(ahead.clone());
    let r = run_cp(cfg, Arc::new(Progress::default()), &mut |_| {}).unwrap();
    assert!(r.failed.is_empty(), "{r:?}");
    assert_eq!(r.files_compared, 2, "{r:?}");
    for (name, seed) in [("a", 1), ("b", 2)] {
        let got = fs::read(dest.join(name)).unwrap();
        assert!(got == content(seed), "{name} is not the source's copy");
    }
    (r.reused_bytes, r.moved_bytes)
}

/// A server holding the sources, a destination holding their old copies, and those
/// copies hashed ahead (the walk ended).
fn hashed_ahead() -> (TestServer, tempfile::TempDir, Arc<HashedAhead>) {
    let s = TestServer::start(fill);
    let dest = tempfile::tempdir().unwrap();
    old_copies(dest.path());
    let ahead = HashedAhead::start(dest.path(), CHUNK);
    ahead.wait_ended();
    (s, dest, ahead)
}

#[test]
fn hashes_made_ahead_are_taken_and_only_changed_chunks_cross() {
    let (s, dest, ahead) = hashed_ahead();
    let (reused, moved) = sync_pull(&s, dest.path(), &ahead);
    let c = ahead.counts();
    assert_eq!(
        (c.hashed, c.used_files, c.used_bytes),
        (2, 2, 2 * SIZE as u64)
    );
    assert_eq!(reused, 2 * (SIZE as u64 - CHUNK));
    assert!(moved < 3 * CHUNK, "only the two changed chunks: {moved}");
}

#[test]
fn an_old_copy_changed_after_its_hash_ahead_is_hashed_again() {
    let (s, dest, ahead) = hashed_ahead();
    // Past the file system's clock tick, so the ctime moves.
    std::thread::sleep(Duration::from_millis(30));
    // The same size and mtime, another chunk changed: only the ctime tells.
    let path = dest.path().join("b");
    let mtime = fs::metadata(&path).unwrap().modified().unwrap();
    let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(5 * CHUNK)).unwrap();
    f.write_all(b"changed after hashing").unwrap();
    f.set_modified(mtime).unwrap();
    drop(f);
    let (reused, _) = sync_pull(&s, dest.path(), &ahead);
    let c = ahead.counts();
    assert_eq!((c.used_files, c.used_bytes), (1, SIZE as u64));
    // b's changed chunks were both found: hashed again, not by the stale hashes (which
    // would have taken chunk 5 from the old copy and failed the digest).
    assert_eq!(reused, 2 * SIZE as u64 - 3 * CHUNK);
}
