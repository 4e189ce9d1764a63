//! `longhaul clean DIR` and `serve --clean-stale AGE`: stale work files (part files and
//! manifests of abandoned transfers) older than the age are removed; younger ones, files
//! another process holds an flock on, other files, and anything behind a symlink are
//! left alone; `-n` removes nothing.

#[macro_use]
mod support;

use std::fs::{self, File};
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use support::*;

const DAY: u64 = 86_400;

fn aged(path: &Path, days: u64) {
    write_file(path, b"some verified chunks", 0o600);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    set_mtime(path, now - days * DAY, 0);
}

#[test]
fn clean_removes_only_old_unlocked_work_files_below_the_directory() {
    let s = Scratch::new("clean");
    let home = s.dir("home");
    let root = s.dir("root");
    let outside = s.dir("outside");
    aged(&root.join("a/.x.h5.longhaul-part"), 10);
    aged(&root.join("a/.x.h5.longhaul-manifest"), 10);
    aged(&root.join("a/b/.deep.longhaul-part"), 8);
    aged(&root.join("b/.young.longhaul-part"), 2);
    aged(&root.join(".busy.longhaul-part"), 30);
    aged(&root.join("a/data.h5"), 30);
    aged(&root.join("a/x.longhaul-part"), 30); // no leading dot: not a work file
    aged(&outside.join(".far.longhaul-part"), 30);
    symlink(&outside, root.join("link")).unwrap();
    let busy = File::open(root.join(".busy.longhaul-part")).unwrap();
    assert!(longhaul_sys::file_io::try_lock_exclusive(&busy).unwrap());

    let dry = run(
        longhaul(&home)
            .args(["clean", "-n", "--older-than", "7d"])
            .arg(&root),
        CP_LIMIT,
    );
    dry.assert_ok();
    assert!(
        dry.stdout.contains("would remove 3 stale work files"),
        "{}",
        dry.describe()
    );
    assert!(
        root.join("a/.x.h5.longhaul-part").exists(),
        "-n removed a file"
    );

    let done = run(
        longhaul(&home)
            .args(["clean", "--older-than", "7d"])
            .arg(&root),
        CP_LIMIT,
    );
    done.assert_ok();
    eprintln!("{}", done.stdout);
    assert!(
        done.stdout.contains("removed 3 stale work files")
            && done
                .stdout
                .contains("busy.longhaul-part: in use by another process"),
        "{}",
        done.describe()
    );
    let left = names_under(&root);
    for gone in [
        "a/.x.h5.longhaul-part",
        "a/.x.h5.longhaul-manifest",
        "a/b/.deep.longhaul-part",
    ] {
        assert!(
            !left.contains(&gone.to_string()),
            "{gone} is still there: {left:?}"
        );
    }
    for kept in [
        "b/.young.longhaul-part",
        ".busy.longhaul-part",
        "a/data.h5",
        "a/x.longhaul-part",
    ] {
        assert!(
            left.contains(&kept.to_string()),
            "{kept} was removed: {left:?}"
        );
    }
    assert!(
        outside.join(".far.longhaul-part").exists(),
        "followed a symlink"
    );
    drop(busy);

    // The daemon's start-up clean.
    aged(&root.join("b/.old.longhaul-manifest"), 9);
    let server = Server::start_with(&home, &root, &["--clean-stale", "7d"]);
    assert!(
        !root.join("b/.old.longhaul-manifest").exists(),
        "{}",
        server.log()
    );
    assert!(
        !root.join(".busy.longhaul-part").exists(),
        "{}",
        server.log()
    );
    assert!(root.join("b/.young.longhaul-part").exists());
    assert!(
        server.log().contains("removed 2 stale work files"),
        "{}",
        server.log()
    );
    fs::remove_dir_all(&outside).unwrap();
}
