//! A source file written while `longhaul cp` reads it (a growing log, an editor saving in
//! place): every chunk's hash is of the bytes as they were read, so the chunks all verify,
//! yet the copy may mix two versions. The sender checks each source once it has read all
//! of it (size, mtime, device, inode, ctime against the file list) and tells the receiver
//! (`SourceChanged`): nothing of that file is committed, the other files are, the run
//! exits non-zero naming the file, and a rerun copies the file as it is now. Push and pull,
//! with a real `longhaul serve`.

#[macro_use]
mod support;

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

const SIZE: usize = 16 << 20;

/// Writes 4 KiB at the start of `path` in place (its size stays).
fn scribble(path: &Path) {
    let mut f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(&[0x5a; 4096]).unwrap();
    f.sync_all().unwrap();
}

/// Runs `cp SRC DST` paced so that it reads `big` for seconds, writes into `big` once
/// its copy holds verified chunks (`manifest` has records), and returns the run.
fn copy_while_written(home: &Path, src: &str, dst: &str, big: &Path, manifest: &Path) -> CpRun {
    // 16 MiB at 24 Mbit/s: about 5.6 s of reading.
    let mut c = cp_command(home);
    c.args([
        "-r", "--chunk", "1MiB", "-P", "2", "--rate", "24M", src, dst,
    ]);
    let running = spawn_piped(&mut c);
    let deadline = Instant::now() + Duration::from_secs(60);
    while manifest_record_count(manifest) < 2 {
        assert!(Instant::now() < deadline, "the copy never started writing");
        std::thread::sleep(Duration::from_millis(10));
    }
    scribble(big);
    running.wait(CP_LIMIT)
}

/// The run failed on `big` alone, saying why, and left nothing of it in place.
fn assert_changed_and_not_committed(run: &CpRun, placed_big: &Path, placed_small: &Path) {
    assert_ne!(run.code(), Some(0), "{}", run.describe());
    assert!(
        run.stderr.contains("changed while it was read") && run.stderr.contains("big"),
        "{}",
        run.describe()
    );
    assert!(
        !placed_big.exists(),
        "a copy of a source written while it was read was committed\n{}",
        run.describe()
    );
    assert!(placed_small.exists(), "{}", run.describe());
}

#[test]
fn a_push_of_a_file_written_while_read_commits_nothing_of_it_and_a_rerun_copies_it() {
    let mut rng = Rng::from_env("source-changed-push");
    let s = Scratch::new("source-changed-push");
    let (home, root) = (s.dir("home"), s.dir("root"));
    let src = s.dir("src");
    write_random(&src.join("big"), &mut rng, SIZE);
    let small = write_random(&src.join("small"), &mut rng, 4096);
    let server = Server::start(&home, &root);
    // An existing destination directory: both runs place `src` in it.
    fs::create_dir(root.join("tree")).unwrap();
    let dst = root.join("tree/src");
    let run = copy_while_written(
        &home,
        src.to_str().unwrap(),
        &server.remote("tree"),
        &src.join("big"),
        &manifest_path(&dst, "big"),
    );
    assert_changed_and_not_committed(&run, &dst.join("big"), &dst.join("small"));
    assert_eq!(fs::read(dst.join("small")).unwrap(), small);

    let again = cp!(&home; "-r", &src, server.remote("tree"));
    assert_eq!(again.code(), Some(0), "{}", again.describe());
    let copied = fs::read(dst.join("big")).unwrap_or_default();
    assert!(
        copied == fs::read(src.join("big")).unwrap(),
        "{}",
        again.describe()
    );
}

#[test]
fn a_pull_of_a_file_written_while_read_commits_nothing_of_it_and_a_rerun_copies_it() {
    let mut rng = Rng::from_env("source-changed-pull");
    let s = Scratch::new("source-changed-pull");
    let (home, root) = (s.dir("home"), s.dir("root"));
    let served = root.join("tree");
    fs::create_dir_all(&served).unwrap();
    write_random(&served.join("big"), &mut rng, SIZE);
    let small = write_random(&served.join("small"), &mut rng, 4096);
    let server = Server::start(&home, &root);
    // An existing destination directory: both runs place `tree` in it.
    let into = s.dir("pulled");
    let dst = into.join("tree");
    let run = copy_while_written(
        &home,
        &server.remote("tree"),
        into.to_str().unwrap(),
        &served.join("big"),
        &manifest_path(&dst, "big"),
    );
    assert_changed_and_not_committed(&run, &dst.join("big"), &dst.join("small"));
    assert_eq!(fs::read(dst.join("small")).unwrap(), small);

    let again = cp!(&home; "-r", server.remote("tree"), &into);
    assert_eq!(again.code(), Some(0), "{}", again.describe());
    let copied = fs::read(dst.join("big")).unwrap_or_default();
    assert!(
        copied == fs::read(served.join("big")).unwrap(),
        "{}",
        again.describe()
    );
}
