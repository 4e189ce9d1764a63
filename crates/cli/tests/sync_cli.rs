//! `longhaul sync` end to end: a real `longhaul serve --root` and `longhaul sync`
//! processes on loopback, push and pull. After a first sync, the source is changed in the
//! ways a dataset changes (a chunk rewritten in the middle, the last chunk, a file appended
//! to, one truncated, a sparse file's data, a new file, a mode, a file renamed) and synced
//! again: the destination must be bit-identical with the source's modes and mtimes, and
//! only the changed chunks may have crossed (`sent_bytes`), the rest taken from the old
//! copies (`reused_bytes`). `--checksum` finds a change that kept size and mtime; a file
//! whose every chunk is equal stays the same inode. rsync's placement: `src/` syncs the
//! contents, `src` goes inside the destination, and a second run lands in the same place.
//! kill -9 of either end at random points, then a rerun, gives a bit-identical tree, and
//! the destination file is at every moment the old version or the new one, never a mix
//! (with `--inplace` it may be a mix until the rerun finishes it).

#[macro_use]
mod support;

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::*;

const CHUNK: u64 = MIB;

/// `longhaul sync --json --chunk 1MiB ARGS...` with the test's HOME.
fn sync_cmd(home: &Path, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Command {
    let mut c = longhaul(home);
    c.args(["sync", "--json", "--chunk", "1MiB"]);
    for a in args {
        c.arg(a);
    }
    c
}

fn sync(home: &Path, args: &[&dyn AsRef<std::ffi::OsStr>]) -> CpRun {
    run(&mut sync_cmd(home, args), CP_LIMIT)
}

/// Overwrites `data` at `offset` of the file, keeping its mtime unless `touch`.
fn patch(path: &Path, offset: u64, data: &[u8]) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(data, offset).unwrap();
}

/// An entry's path, size, mode, mtime and inode.
type EntryState = (Vec<u8>, u64, u32, (i64, i64), u64);

/// Every entry's state.
fn snapshot(root: &Path) -> Vec<EntryState> {
    list_tree(root)
        .into_iter()
        .map(|(k, m)| (k, m.len(), m.mode(), mtime_of(&m), m.ino()))
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Dir {
    Push,
    Pull,
}

/// The source tree of the delta test: sizes chosen so the last chunk is partial.
fn make_source(src: &Path, rng: &mut Rng) {
    write_random(&src.join("big"), rng, (24 * CHUNK + 300) as usize);
    write_random(&src.join("grow"), rng, (8 * CHUNK + 100) as usize);
    write_random(&src.join("shrink"), rng, (8 * CHUNK) as usize);
    write_random(&src.join("sub/small"), rng, 5000);
    write_random(&src.join("sub/old-name"), rng, (3 * CHUNK) as usize);
    // A 64 MiB sparse file with two data extents.
    let sparse = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(src.join("sparse"))
        .unwrap();
    sparse.set_len(64 * MIB).unwrap();
    sparse.write_all_at(&rng.bytes(300_000), 5 * MIB).unwrap();
    sparse.write_all_at(&rng.bytes(100_000), 40 * MIB).unwrap();
}

/// Changes the source; returns the bytes that must cross at most (changed chunks plus
/// new files), with 1 MiB chunks.
fn change_source(src: &Path, rng: &mut Rng) -> u64 {
    let mut must_cross = 0;
    // A chunk in the middle (2 bytes straddling chunks 9 and 10: two chunks) and the
    // partial last chunk.
    patch(&src.join("big"), 10 * CHUNK - 1, &[1, 2]);
    patch(&src.join("big"), 24 * CHUNK + 10, &[7]);
    must_cross += 2 * CHUNK + 300;
    // Appended: its old last chunk grows, and two new chunks.
    let g = OpenOptions::new()
        .append(true)
        .open(src.join("grow"))
        .unwrap();
    std::io::Write::write_all(&mut &g, &rng.bytes((2 * CHUNK) as usize)).unwrap();
    must_cross += 3 * CHUNK;
    // Truncated to 5.5 chunks: only the new partial last chunk differs.
    fs::OpenOptions::new()
        .write(true)
        .open(src.join("shrink"))
        .unwrap()
        .set_len(5 * CHUNK + CHUNK / 2)
        .unwrap();
    must_cross += CHUNK / 2;
    // The sparse file's second extent changes.
    patch(&src.join("sparse"), 40 * MIB + 10, &[9; 10]);
    must_cross += CHUNK;
    // A mode only: nothing crosses.
    fs::set_permissions(src.join("sub/small"), fs::Permissions::from_mode(0o600)).unwrap();
    // Renamed (without --delete the old name stays at the destination) and new.
    fs::rename(src.join("sub/old-name"), src.join("sub/new-name")).unwrap();
    must_cross += 3 * CHUNK;
    write_random(&src.join("sub/new"), rng, 70_000);
    must_cross += 70_000;
    must_cross
}

fn delta_both_ways(dir: Dir, inplace: bool) {
    let name = format!("sync-delta-{dir:?}-{inplace}");
    let mut rng = Rng::from_env(&name);
    let s = Scratch::new(&name);
    let home = s.dir("home");
    let root = s.dir("root");
    let local = s.dir("local");
    let server = Server::start(&home, &root);
    // The source and the destination, as paths on this host.
    let (src, dst) = match dir {
        Dir::Push => (local.join("data"), root.join("mirror")),
        Dir::Pull => (root.join("data"), local.join("mirror")),
    };
    fs::create_dir_all(&src).unwrap();
    make_source(&src, &mut rng);
    let mode = if inplace {
        "--inplace"
    } else {
        "--interval=1s"
    };
    let go = |home: &Path| match dir {
        Dir::Push => sync(home, &[&mode, &src.join(""), &server.remote("mirror")]),
        Dir::Pull => sync(home, &[&mode, &server.remote("data/"), &dst]),
    };
    let first = go(&home);
    first.assert_ok();
    assert_same_tree(&src, &dst, EXACT);
    assert_eq!(first.end_u64("reused_bytes"), 0, "{}", first.describe());

    // Nothing changed: nothing crosses, nothing is compared.
    let again = go(&home);
    again.assert_ok();
    assert_eq!(again.end_u64("sent_bytes"), 0, "{}", again.describe());
    assert_eq!(again.end_u64("compared_files"), 0, "{}", again.describe());

    let big_ino = fs::metadata(dst.join("big")).unwrap().ino();
    let must_cross = change_source(&src, &mut rng);
    // A dry run changes nothing and says what the real run then sends.
    let before = snapshot(&dst);
    let dry = match dir {
        Dir::Push => sync(&home, &[&"-n", &src.join(""), &server.remote("mirror")]),
        Dir::Pull => sync(&home, &[&"-n", &server.remote("data/"), &dst]),
    };
    dry.assert_ok();
    assert_eq!(
        snapshot(&dst),
        before,
        "the dry run changed the destination"
    );
    let would: Vec<_> = dry
        .json()
        .into_iter()
        .filter(|v| v["type"] == "would_send")
        .collect();
    assert_eq!(would.len(), 6, "{}", dry.describe());
    let would_send = dry.end_u64("would_send_bytes");
    let delta = go(&home);
    delta.assert_ok();
    assert_eq!(
        delta.end_u64("sent_bytes"),
        would_send,
        "{}",
        delta.describe()
    );
    // The old name stays (no --delete); otherwise the trees are the same.
    assert!(dst.join("sub/old-name").exists());
    fs::remove_file(dst.join("sub/old-name")).unwrap();
    let (secs, nanos) = mtime_of(&fs::metadata(src.join("sub")).unwrap());
    set_mtime(&dst.join("sub"), secs as u64, nanos as u32);
    assert_same_tree(&src, &dst, EXACT);
    let sent = delta.end_u64("sent_bytes");
    assert!(
        sent <= must_cross,
        "{sent} bytes crossed, at most {must_cross} changed\n{}",
        delta.describe()
    );
    assert!(sent > 0, "{}", delta.describe());
    assert_eq!(delta.end_u64("compared_files"), 4, "{}", delta.describe());
    let reused = delta.end_u64("reused_bytes");
    assert!(
        reused >= 22 * CHUNK + 7 * CHUNK + 5 * CHUNK + 62 * MIB,
        "only {reused} bytes taken from the old copies\n{}",
        delta.describe()
    );
    // A changed file is a new inode put in place by rename, or with --inplace the same
    // file updated where it is; holes stay holes.
    assert_eq!(
        fs::metadata(dst.join("big")).unwrap().ino() == big_ino,
        inplace
    );
    assert!(
        allocated_bytes(&dst.join("sparse")) < 8 * MIB,
        "the sparse file was filled in: {} bytes allocated",
        allocated_bytes(&dst.join("sparse"))
    );
    drop(server);
}

#[test]
fn a_push_sends_only_the_changed_chunks() {
    delta_both_ways(Dir::Push, false);
}

#[test]
fn a_push_inplace_writes_only_the_changed_chunks_into_the_file() {
    delta_both_ways(Dir::Push, true);
}

#[test]
fn a_pull_inplace_writes_only_the_changed_chunks_into_the_file() {
    delta_both_ways(Dir::Pull, true);
}

#[test]
fn a_pull_sends_only_the_changed_chunks() {
    delta_both_ways(Dir::Pull, false);
}

#[test]
fn checksum_finds_changes_that_kept_size_and_mtime() {
    let mut rng = Rng::from_env("sync-checksum");
    let s = Scratch::new("sync-checksum");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.dir("src");
    write_random(&src.join("a"), &mut rng, (6 * CHUNK) as usize);
    write_random(&src.join("b"), &mut rng, (4 * CHUNK) as usize);
    let server = Server::start(&home, &root);
    sync(&home, &[&src.join(""), &server.remote("m")]).assert_ok();
    let dst = root.join("m");
    let b_ino = fs::metadata(dst.join("b")).unwrap().ino();
    // A byte of `a` changes, its mtime is put back: the quick check cannot see it.
    let before = fs::metadata(src.join("a")).unwrap();
    // The byte's complement: a fixed value was already there for 1 seed in 256.
    let at = 3 * CHUNK + 5;
    let was = fs::read(src.join("a")).unwrap()[at as usize];
    patch(&src.join("a"), at, &[!was]);
    let (secs, nanos) = mtime_of(&before);
    set_mtime(&src.join("a"), secs as u64, nanos as u32);
    let plain = sync(&home, &[&src.join(""), &server.remote("m")]);
    plain.assert_ok();
    assert_ne!(
        fs::read(src.join("a")).unwrap(),
        fs::read(dst.join("a")).unwrap()
    );
    let checked = sync(&home, &[&"--checksum", &src.join(""), &server.remote("m")]);
    checked.assert_ok();
    assert_same_tree(&src, &dst, EXACT);
    assert_eq!(
        checked.end_u64("sent_bytes"),
        CHUNK,
        "{}",
        checked.describe()
    );
    assert_eq!(
        checked.end_u64("compared_files"),
        2,
        "{}",
        checked.describe()
    );
    // `b` was equal chunk for chunk: the old file stayed.
    assert_eq!(fs::metadata(dst.join("b")).unwrap().ino(), b_ino);
    drop(server);
}

#[test]
fn sync_places_like_rsync_and_a_second_run_lands_in_the_same_place() {
    let mut rng = Rng::from_env("sync-place");
    let s = Scratch::new("sync-place");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.dir("src");
    write_random(&src.join("x"), &mut rng, 1000);
    write_random(&src.join("d/y"), &mut rng, 1000);
    let server = Server::start(&home, &root);
    for _ in 0..2 {
        // `src` goes inside the destination (made if missing).
        sync(&home, &[&src, &server.remote("inside")]).assert_ok();
        // `src/` is its contents.
        sync(&home, &[&src.join(""), &server.remote("contents")]).assert_ok();
    }
    let inside: Vec<_> = fs::read_dir(root.join("inside"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(inside, vec![std::ffi::OsString::from("src")]);
    assert_same_tree(&src, &root.join("inside/src"), EXACT);
    assert_same_tree(&src, &root.join("contents"), EXACT);
    assert!(!root.join("contents/src").exists());
    // A pull, both ways of naming the source.
    let local = s.dir("local");
    for _ in 0..2 {
        sync(&home, &[&server.remote("contents"), &local.join("in")]).assert_ok();
        sync(&home, &[&server.remote("contents/"), &local.join("flat")]).assert_ok();
    }
    assert_same_tree(&src, &local.join("in/contents"), EXACT);
    assert_same_tree(&src, &local.join("flat"), EXACT);
    // Two sources, one with a slash: refused before anything is sent.
    let r = sync(
        &home,
        &[&src.join(""), &src.join("d"), &server.remote("two")],
    );
    r.assert_code(2);
    assert!(!root.join("two").exists());
    drop(server);
}

/// kill -9 of the sender or the receiver while a sync of a changed file runs, at a
/// random point; the destination is then the old or the new version (never a mix), and
/// the rerun ends bit-identical.
#[test]
fn sync_survives_kill_9_of_either_end() {
    let mut rng = Rng::from_env("sync-kill");
    let s = Scratch::new("sync-kill");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.dir("src");
    let dst = root.join("m");
    let mut server = Server::start(&home, &root);
    let size = 48 * CHUNK;
    write_random(&src.join("f"), &mut rng, size as usize);
    sync(&home, &[&src.join(""), &server.remote("m")]).assert_ok();
    for round in 0..8 {
        let old = fs::read(dst.join("f")).unwrap();
        // Rewrite a third of the chunks.
        for c in 0..size / CHUNK {
            if rng.range(0, 3) == 0 {
                patch(
                    &src.join("f"),
                    c * CHUNK + rng.range(0, CHUNK),
                    &rng.bytes(64),
                );
            }
        }
        let new = fs::read(src.join("f")).unwrap();
        // Rounds 4..8 update the file in place: then only the rerun's result is checked.
        let inplace = round >= 4;
        let mode = if inplace { "--inplace" } else { "-P2" };
        let mut cmd = sync_cmd(
            &home,
            &[
                &"--rate",
                &"150M",
                &mode,
                &src.join(""),
                &server.remote("m"),
            ],
        );
        let mut child = spawn_piped(&mut cmd);
        std::thread::sleep(Duration::from_millis(rng.range(50, 900)));
        let kill_server = round % 2 == 1;
        if kill_server {
            server.kill();
        } else {
            child.kill9();
        }
        let _ = child.wait(CP_LIMIT);
        if kill_server {
            server.restart();
        }
        let now = fs::read(dst.join("f")).unwrap();
        assert!(
            inplace || now == old || now == new,
            "round {round}: the destination is neither the old nor the new version"
        );
        let again: &dyn AsRef<std::ffi::OsStr> = if inplace { &"--inplace" } else { &"-P2" };
        sync(&home, &[again, &src.join(""), &server.remote("m")]).assert_ok();
        assert_same_tree(&src, &dst, EXACT);
    }
    drop(server);
}

/// The chunk-hash cache: a settled file compared by a sync has its hashes kept under the
/// user's cache directory (both ends share HOME here), and the next sync of the same
/// files reads them instead of the files; `--checksum` neither trusts nor fills it.
#[test]
fn compared_files_fill_the_hash_cache_and_checksum_bypasses_it() {
    let mut rng = Rng::from_env("sync-cache");
    let s = Scratch::new("sync-cache");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.dir("src");
    write_random(&src.join("f"), &mut rng, (6 * CHUNK) as usize);
    let server = Server::start(&home, &root);
    sync(&home, &[&src.join(""), &server.remote("m")]).assert_ok();
    let cache = home.join(".cache/longhaul/chunk-hashes");
    let records = || fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
    assert_eq!(records(), 0, "a plain copy hashes nothing to keep");
    // Both copies settle (the cache keeps only files unchanged for 2 s), then the source
    // changes its mtime only: both ends hash, and keep what they hashed.
    std::thread::sleep(Duration::from_millis(2100));
    let checked = sync(&home, &[&"--checksum", &src.join(""), &server.remote("m")]);
    checked.assert_ok();
    assert_eq!(records(), 0, "--checksum stored hashes");
    let (secs, nanos) = mtime_of(&fs::metadata(src.join("f")).unwrap());
    set_mtime(&src.join("f"), secs as u64 + 10, nanos as u32);
    std::thread::sleep(Duration::from_millis(2100));
    let r = sync(&home, &[&src.join(""), &server.remote("m")]);
    r.assert_ok();
    assert_eq!(r.end_u64("sent_bytes"), 0, "{}", r.describe());
    assert_eq!(
        records(),
        2,
        "one record per end: {:?}",
        fs::read_dir(&cache).ok()
    );
    assert_same_tree(&src, &root.join("m"), EXACT);
    drop(server);
}

/// A tree that lived: files renamed and deleted, new symlinks (one pointing out of the
/// tree), modes changed, a directory removed. `sync --delete` makes the destination the
/// source's exact image, both ways; its dry run first lists what it would delete and
/// deletes nothing.
fn tree_with_delete(dir: Dir) {
    let name = format!("sync-tree-{dir:?}");
    let mut rng = Rng::from_env(&name);
    let s = Scratch::new(&name);
    let home = s.dir("home");
    let root = s.dir("root");
    let local = s.dir("local");
    let server = Server::start(&home, &root);
    let (src, dst) = match dir {
        Dir::Push => (local.join("data"), root.join("mirror")),
        Dir::Pull => (root.join("data"), local.join("mirror")),
    };
    for i in 0..20 {
        write_random(
            &src.join(format!("d{}/f{i}", i % 4)),
            &mut rng,
            100 + 997 * i,
        );
    }
    write_random(&src.join("gone/x"), &mut rng, 10);
    std::os::unix::fs::symlink("d0/f0", src.join("link")).unwrap();
    let go = |extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = extra.to_vec();
        let (from, to) = match dir {
            Dir::Push => (
                std::ffi::OsString::from(src.join("")),
                server.remote_os(std::ffi::OsStr::new("mirror")),
            ),
            Dir::Pull => (
                std::ffi::OsString::from(server.remote("data/")),
                dst.clone().into_os_string(),
            ),
        };
        args.push(&from);
        args.push(&to);
        sync(&home, &args)
    };
    go(&[&"--delete"]).assert_ok();
    assert_same_tree(&src, &dst, EXACT);

    fs::rename(src.join("d1/f1"), src.join("d2/renamed")).unwrap();
    fs::remove_file(src.join("d3/f3")).unwrap();
    fs::remove_dir_all(src.join("gone")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", src.join("d0/out")).unwrap();
    fs::remove_file(src.join("link")).unwrap();
    std::os::unix::fs::symlink("d2/renamed", src.join("link")).unwrap();
    fs::set_permissions(src.join("d0/f4"), fs::Permissions::from_mode(0o640)).unwrap();
    patch(&src.join("d2/f6"), 10, b"changed");

    let before = snapshot(&dst);
    let dry = go(&[&"-n", &"--delete"]);
    dry.assert_ok();
    assert_eq!(
        snapshot(&dst),
        before,
        "the dry run changed the destination"
    );
    assert_eq!(dry.json_of("end")["would_delete"], 4, "{}", dry.describe());

    go(&[&"--delete"]).assert_ok();
    assert_same_tree(&src, &dst, EXACT);
    assert_eq!(
        fs::read_link(dst.join("d0/out")).unwrap(),
        Path::new("/etc/passwd"),
        "a link out of the tree arrives as a link, never followed"
    );
    drop(server);
}

#[test]
fn a_pushed_tree_with_renames_deletions_links_and_modes_becomes_the_source() {
    tree_with_delete(Dir::Push);
}

#[test]
fn a_pulled_tree_with_renames_deletions_links_and_modes_becomes_the_source() {
    tree_with_delete(Dir::Pull);
}
