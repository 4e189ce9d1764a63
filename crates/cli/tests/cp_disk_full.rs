//! `longhaul cp` onto a full disk, a tmpfs as the served root for a push and as the local
//! destination for a pull.
//!
//! - Too small from the start (32 MiB for a 64 MiB file): the receiver refuses the list
//!   before any data is sent, with both figures; nothing is written; once the tmpfs is
//!   grown the same command completes.
//! - Filled during the transfer (96 MiB, filled by another file once the first chunks
//!   are recorded, at a paced rate so that this happens mid-way): the copy must fail
//!   with an error that says the disk is full, present no file under the final name and
//!   keep the part file; a rerun while still full is refused early; once the tmpfs is
//!   grown, the same command completes bit-identical and sends only the chunks not yet
//!   verified (bound as in `cp_resume.rs`: unverified bytes plus (2 x streams + 2)
//!   chunks).
//!
//! Root only (mounts); skipped with a message otherwise.

#[macro_use]
mod support;

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use support::mounts::Tmpfs;
use support::*;

const SIZE: u64 = 64 * MIB;
const CHUNK: u64 = MIB;
const STREAMS: u64 = 4;
const SLACK_CHUNKS: u64 = 2 * STREAMS + 2;

fn says_disk_full(stderr: &str) -> bool {
    let e = stderr.to_lowercase();
    [
        "no space",
        "not enough space",
        "disk full",
        "disk is full",
        "enospc",
    ]
    .iter()
    .any(|w| e.contains(w))
}

fn disk_full_then_grow(push: bool) {
    let what = if push { "push" } else { "pull" };
    let mut rng = Rng::from_env(&format!("disk full, {what}"));
    let s = Scratch::new(&format!("diskfull-{what}"));
    let home = s.dir("home");
    let root = s.dir("root");
    let local = s.dir("local");
    let full_dir = if push { &root } else { &local };
    let tmpfs = Tmpfs::mount(full_dir, "96M");
    let src = if push {
        s.join("src/big")
    } else {
        s.dir("served").join("big")
    };
    write_random(&src, &mut rng, SIZE as usize);
    // Declared after the tmpfs: killed before it is unmounted.
    let server = Server::start(&home, if push { &root } else { src.parent().unwrap() });
    let command = |json: bool, rate: Option<&str>| {
        let mut c = cp_command(&home);
        c.args(["--chunk", "1MiB", "-P", "4"]);
        if let Some(r) = rate {
            c.args(["--rate", r]);
        }
        if json {
            c.arg("--json");
        }
        if push {
            c.arg(&src).arg(server.remote("big"));
        } else {
            c.arg(server.remote("big")).arg(local.join("big"));
        }
        c
    };

    // Paced (64 MiB take about 2.7 s) so that the disk fills mid-way: another file takes
    // all the room once the first chunks are recorded, after the receiver's early check.
    let running = spawn_piped(&mut command(true, Some("200M")));
    let manifest = manifest_path(full_dir, "big");
    let deadline = Instant::now() + Duration::from_secs(60);
    while manifest_record_count(&manifest) < 2 {
        assert!(Instant::now() < deadline, "no chunk recorded within 60 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    fill(&full_dir.join("filler"));
    let first = running.wait(Duration::from_secs(120));
    first.assert_code(2);
    // With --json the error is a {"type":"error"} line on stdout.
    let error = first.json_of("error")["error"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        says_disk_full(&error),
        "the error does not say the disk is full\n{}\nserver log:\n{}",
        first.describe(),
        server.log()
    );
    eprintln!("{what} onto a full disk: {error}");
    let dst = full_dir.join("big");
    assert!(
        !dst.exists(),
        "a file under the final name\n{}",
        first.describe()
    );
    assert!(
        part_path(full_dir, "big").exists(),
        "the part file was not kept: {:?}",
        names_under(full_dir)
    );
    // Again while still full, without --json: refused before any data, on stderr.
    wait_until_stable(&manifest, Duration::from_millis(300));
    let again = run(&mut command(false, None), Duration::from_secs(120));
    again.assert_failed();
    assert!(
        again.stderr.contains("not enough space"),
        "{}",
        again.describe()
    );
    assert!(!dst.exists());
    let verified = manifest_verified(&manifest).len() as u64;

    tmpfs.resize("200M");
    let rerun = run(&mut command(true, None), Duration::from_secs(120));
    assert_eq!(
        rerun.code(),
        Some(0),
        "rerun after growing the disk\n{}\nserver log:\n{}",
        rerun.describe(),
        server.log()
    );
    assert_same_bytes(&src, &dst);
    assert!(!part_path(full_dir, "big").exists() && !manifest.exists());
    let sent = rerun.end_u64("sent_bytes");
    let resumed = rerun.end_u64("resumed_bytes");
    let unverified = SIZE - verified * CHUNK;
    eprintln!(
        "{what}: {verified} chunks verified before the disk filled; the rerun sent {sent} \
         bytes for {unverified} unverified (bound {}), resumed {resumed}",
        unverified + SLACK_CHUNKS * CHUNK
    );
    assert_eq!(resumed, verified * CHUNK, "{}", rerun.describe());
    assert!(
        sent <= unverified + SLACK_CHUNKS * CHUNK,
        "the rerun sent {sent} bytes for {unverified} unverified\n{}",
        rerun.describe()
    );
    drop(server);
}

/// Writes `path` until the file system is full.
fn fill(path: &Path) {
    let mut f = File::create(path).unwrap();
    let block = vec![0x5a_u8; MIB as usize];
    loop {
        match f.write_all(&block) {
            Ok(()) => {}
            // ENOSPC (ErrorKind::StorageFull is newer than the MSRV).
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    let _ = f.sync_all();
}

/// A 64 MiB file onto a 32 MiB tmpfs: refused before any data, with both figures and
/// nothing written; after growing the tmpfs the same command completes.
fn too_small_from_the_start(push: bool) {
    let what = if push { "push" } else { "pull" };
    let mut rng = Rng::from_env(&format!("too small, {what}"));
    let s = Scratch::new(&format!("toosmall-{what}"));
    let home = s.dir("home");
    let root = s.dir("root");
    let local = s.dir("local");
    let full_dir = if push { &root } else { &local };
    let tmpfs = Tmpfs::mount(full_dir, "32M");
    let src = if push {
        s.join("src/big")
    } else {
        s.dir("served").join("big")
    };
    write_random(&src, &mut rng, SIZE as usize);
    let server = Server::start(&home, if push { &root } else { src.parent().unwrap() });
    let command = || {
        let mut c = cp_command(&home);
        c.args(["--chunk", "1MiB", "--json"]);
        if push {
            c.arg(&src).arg(server.remote("big"));
        } else {
            c.arg(server.remote("big")).arg(local.join("big"));
        }
        c
    };
    let first = run(&mut command(), Duration::from_secs(120));
    first.assert_failed();
    let error = first.json_of("error")["error"]
        .as_str()
        .unwrap_or("")
        .to_string();
    eprintln!("{what} onto a 32 MiB tmpfs: {error}");
    let shown = if push {
        "the server's root".to_string()
    } else {
        local.display().to_string()
    };
    assert!(
        error.contains(&format!(
            "not enough space on {shown}: the transfer needs 67.1 MB, 3"
        )) && error.contains("MB free; free some space and run the same command again"),
        "{}\nserver log:\n{}",
        first.describe(),
        server.log()
    );
    assert!(
        names_under(full_dir).is_empty(),
        "something was written: {:?}",
        names_under(full_dir)
    );
    tmpfs.resize("128M");
    let rerun = run(&mut command(), Duration::from_secs(120));
    rerun.assert_ok();
    assert_same_bytes(&src, &full_dir.join("big"));
    drop(server);
}

#[test]
fn push_onto_a_too_small_disk_is_refused_before_any_data() {
    if !is_root() {
        eprintln!("SKIP: push_onto_a_too_small_disk_is_refused_before_any_data needs root (mounts a tmpfs)");
        return;
    }
    too_small_from_the_start(true);
}

#[test]
fn pull_onto_a_too_small_disk_is_refused_before_any_data() {
    if !is_root() {
        eprintln!("SKIP: pull_onto_a_too_small_disk_is_refused_before_any_data needs root (mounts a tmpfs)");
        return;
    }
    too_small_from_the_start(false);
}

#[test]
fn push_onto_a_full_disk_fails_clearly_and_resumes_after_growing_it() {
    if !is_root() {
        eprintln!("SKIP: push_onto_a_full_disk_fails_clearly_and_resumes_after_growing_it needs root (mounts a tmpfs)");
        return;
    }
    disk_full_then_grow(true);
}

#[test]
fn pull_onto_a_full_disk_fails_clearly_and_resumes_after_growing_it() {
    if !is_root() {
        eprintln!("SKIP: pull_onto_a_full_disk_fails_clearly_and_resumes_after_growing_it needs root (mounts a tmpfs)");
        return;
    }
    disk_full_then_grow(false);
}

/// `serve --max-files` / `--max-bytes`: a push over either cap is refused before any data,
/// the message naming the cap; one within both goes through. No root needed.
#[test]
fn serve_caps_refuse_a_push_over_them_before_any_data() {
    let mut rng = Rng::from_env("serve caps");
    let s = Scratch::new("serve-caps");
    let home = s.dir("home");
    let root = s.dir("root");
    let tree = s.dir("src/tree");
    for i in 0..4 {
        write_random(&tree.join(format!("f{i}")), &mut rng, 100_000);
    }
    let server = Server::start_with(&home, &root, &["--max-files", "4", "--max-bytes", "1MB"]);
    // Five entries (the directory and four files).
    let many = cp!(&home; "-r", &tree, server.remote(""));
    many.assert_failed();
    assert!(
        many.stderr.contains("more than 4 files and directories")
            && many.stderr.contains("longhaul serve --max-files 4"),
        "{}",
        many.describe()
    );
    // Four entries holding 1.1 MB.
    fs::remove_file(tree.join("f3")).unwrap();
    write_random(&tree.join("f2"), &mut rng, 900_000);
    let big = cp!(&home; "-r", &tree, server.remote(""));
    big.assert_failed();
    assert!(
        big.stderr.contains("more than 1.0 MB")
            && big.stderr.contains("--max-bytes 1000000")
            && !big.stderr.contains("to resume"),
        "{}",
        big.describe()
    );
    assert!(names_under(&root).is_empty(), "{:?}", names_under(&root));
    // Four entries holding 300 kB.
    write_random(&tree.join("f2"), &mut rng, 100_000);
    cp!(&home; "-r", &tree, server.remote("")).assert_ok();
    assert_same_tree(&tree, &root.join("tree"), EXACT);
}
