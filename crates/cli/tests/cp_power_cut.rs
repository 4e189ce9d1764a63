//! A power cut right after `longhaul cp` reported success. The receiving root is an ext4
//! file system in an image file on a tmpfs, on a loop device, mounted with `commit=1`
//! (its journal commits metadata every second; delayed allocation keeps unsynced data in
//! the page cache, write-back only starts after `vm.dirty_expire_centisecs`, 30 s here).
//! The power is "cut" twice: right after the copy reported success, and again after a
//! pause that lets the journal commit: each time the image is copied as it is
//! (`cp --sparse=always`), without unmounting or syncing, so the copy holds only what the
//! file system had written to its device. Each copy is then mounted (ext4 replays its
//! journal) and checked: every file longhaul reported complete must be there,
//! bit-identical. Then the same command runs again into the second copy and the tree must
//! end bit-identical (a rerun must not skip a file whose data was lost).
//!
//! Before commits were made durable, the cut showed every file in place with its size and
//! mtime but zero blocks, and the rerun skipped them all (same size and mtime).
//! Root only (mounts, loop devices); skipped with a message otherwise.

#[macro_use]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::mounts::{make_ext4_image, LoopMount, Tmpfs};
use support::*;

/// Files of several chunks (part file + manifest) and of one (created unnamed).
fn build_source(dir: &Path, rng: &mut Rng) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for i in 0..4 {
        let p = dir.join(format!("big{i}.dat"));
        write_random(&p, rng, (3 * MIB + 4096 * (i + 1)) as usize);
        files.push(p);
    }
    for i in 0..24 {
        let p = dir.join(format!("small/s{i:02}"));
        let n = rng.range(1, 96 * 1024) as usize;
        write_random(&p, rng, n);
        files.push(p);
    }
    files
}

/// Why `copy` is not `orig` (missing, size, first differing byte, zero blocks), if it is not.
fn differs(orig: &Path, copy: &Path) -> Option<String> {
    let want = fs::read(orig).unwrap();
    let Ok(got) = fs::read(copy) else {
        return Some("missing".into());
    };
    if got.len() != want.len() {
        return Some(format!("{} bytes, not {}", got.len(), want.len()));
    }
    let first = (0..want.len()).find(|&i| want[i] != got[i])?;
    let zeros = got
        .chunks(4096)
        .filter(|b| b.iter().all(|&x| x == 0))
        .count();
    Some(format!(
        "differs from byte {first} ({zeros} of {} 4 KiB blocks are zeros)",
        got.len().div_ceil(4096)
    ))
}

fn problems(src: &Path, files: &[PathBuf], dst: &Path) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(src).unwrap();
            differs(f, &dst.join(rel)).map(|why| format!("{}: {why}", rel.display()))
        })
        .collect()
}

fn tools_missing() -> Option<&'static str> {
    ["mkfs.ext4", "losetup"].into_iter().find(|t| {
        !Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[test]
fn files_reported_complete_survive_a_power_cut_and_a_rerun_repairs_nothing_silently() {
    let name = "files_reported_complete_survive_a_power_cut_and_a_rerun_repairs_nothing_silently";
    if !is_root() {
        eprintln!("SKIP: {name} needs root (mounts, loop devices)");
        return;
    }
    if let Some(t) = tools_missing() {
        eprintln!("SKIP: {name} needs {t} (apt-get install e2fsprogs mount)");
        return;
    }
    let mut rng = Rng::from_env("power cut");
    let s = Scratch::new("power-cut");
    let home = s.dir("home");
    let src = s.dir("src/set");
    let files = build_source(&src, &mut rng);
    let store = s.dir("store");
    let _tmpfs = Tmpfs::mount(&store, "600M");
    let image = store.join("fs.img");
    let (cut_now, cut_later) = (store.join("cut-now.img"), store.join("cut-later.img"));
    make_ext4_image(&image, "256M");
    let mnt = s.dir("mnt");
    let disk = LoopMount::mount(&image, &mnt, "commit=1");

    let mut server = Server::start(&home, &mnt);
    let command = |server: &Server| {
        let mut c = cp_command(&home);
        c.args(["-r", "--chunk", "1MiB", "--json"])
            .arg(&src)
            .arg(server.remote(""));
        c
    };
    let first = run(&mut command(&server), CP_LIMIT);
    first.assert_ok();
    assert_eq!(first.end_u64("files"), files.len() as u64);
    let cut = |to: &Path| {
        let copied = Command::new("cp")
            .arg("--sparse=always")
            .arg(&image)
            .arg(to)
            .status()
            .is_ok_and(|s| s.success());
        assert!(copied, "copying the image to {}", to.display());
    };
    cut(&cut_now);
    // Let the journal commit what it holds (names, sizes, times), as a real host would
    // in the seconds between a copy and a power cut.
    std::thread::sleep(Duration::from_millis(2500));
    cut(&cut_later);
    server.kill();
    disk.unmount();
    let dst = mnt.join("set");
    let inspect = |image: &Path, when: &str| {
        let disk = LoopMount::mount(image, &mnt, "commit=1");
        let found = problems(&src, &files, &dst);
        eprintln!(
            "a power cut {when}: {} of {} files reported complete are not intact{}",
            found.len(),
            files.len(),
            found.iter().map(|p| format!("\n  {p}")).collect::<String>()
        );
        (disk, found)
    };
    let (disk, right_after) = inspect(&cut_now, "right after the copy");
    disk.unmount();
    let (disk, after_cut) = inspect(&cut_later, "2.5 s after the copy");

    let server = Server::start(&home, &mnt);
    let rerun = run(&mut command(&server), CP_LIMIT);
    let after_rerun = problems(&src, &files, &dst);
    eprintln!(
        "the rerun (exit {:?}, sent {} bytes, took {} bytes as already there): {} files \
         still not intact{}",
        rerun.code(),
        rerun.json_of("end")["sent_bytes"],
        rerun.json_of("end")["resumed_bytes"],
        after_rerun.len(),
        after_rerun
            .iter()
            .map(|p| format!("\n  {p}"))
            .collect::<String>()
    );
    assert!(
        right_after.is_empty() && after_cut.is_empty(),
        "files reported complete were lost in a power cut: right after the copy \
         {right_after:#?}, 2.5 s later {after_cut:#?}"
    );
    rerun.assert_ok();
    assert!(
        after_rerun.is_empty(),
        "the rerun took damaged files as complete: {after_rerun:#?}"
    );
    assert_same_tree(&src, &dst, EXACT);
    drop(server);
    drop(disk);
}
