//! `longhaul cp` onto a full disk: a 32 MiB tmpfs receives a 64 MiB file (as the served
//! root for a push, as the local destination for a pull). The copy must fail with an
//! error that says the disk is full, present no file under the final name and keep the
//! part file; once the tmpfs is grown, the same command completes bit-identical and sends
//! only the chunks not yet verified (bound as in `cp_resume.rs`: unverified bytes plus
//! (2 x streams + 2) chunks). Root only (mounts); skipped with a message otherwise.

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::*;

const SIZE: u64 = 64 * MIB;
const CHUNK: u64 = MIB;
const STREAMS: u64 = 4;
const SLACK_CHUNKS: u64 = 2 * STREAMS + 2;

/// A tmpfs mounted on a directory, unmounted on drop (lazily if still busy).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot mount a {size} tmpfs on {}", dir.display());
        Self(dir.to_path_buf())
    }

    fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "cannot grow the tmpfs on {} to {size}",
            self.0.display()
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let done = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !done {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

fn says_disk_full(stderr: &str) -> bool {
    let e = stderr.to_lowercase();
    ["no space", "disk full", "disk is full", "enospc"]
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
    let tmpfs = Tmpfs::mount(full_dir, "32M");
    let src = if push {
        s.join("src/big")
    } else {
        s.dir("served").join("big")
    };
    write_random(&src, &mut rng, SIZE as usize);
    // Declared after the tmpfs: killed before it is unmounted.
    let server = Server::start(&home, if push { &root } else { src.parent().unwrap() });
    let command = |json: bool| {
        let mut c = cp_command(&home);
        c.args(["--chunk", "1MiB", "-P", "4"]);
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

    let first = run(&mut command(true), Duration::from_secs(120));
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
    // Again while still full, without --json: the same error on stderr.
    let again = run(&mut command(false), Duration::from_secs(120));
    again.assert_code(2);
    assert!(says_disk_full(&again.stderr), "{}", again.describe());
    assert!(!dst.exists());
    let manifest = manifest_path(full_dir, "big");
    wait_until_stable(&manifest, Duration::from_millis(300));
    let verified = manifest_verified(&manifest).len() as u64;

    tmpfs.resize("128M");
    let rerun = run(&mut command(true), Duration::from_secs(120));
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
