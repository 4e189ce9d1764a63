//! Symlinks and hard links in the receiver's tree, with a real `longhaul serve` (issue 17
//! item 10): the receiver's work files and directory modes never go through a symlink
//! planted in the root, and a file is always put in place as a new inode, so another hard
//! link to the old one keeps its bytes.

#[macro_use]
mod support;

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

fn mode_of(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn a_symlink_at_the_part_name_is_replaced_not_written_through() {
    let mut rng = Rng::from_env("part-symlink");
    let s = Scratch::new("part-symlink");
    let home = s.dir("home");
    let root = s.dir("root");
    let victim = root.join("victim");
    write_file(&victim, b"keep me", 0o644);
    // Both a one-chunk file and a file of several chunks (with a manifest).
    for (name, size) in [("small", 1000usize), ("big", 3 << 20)] {
        symlink("victim", part_path(&root, name)).unwrap();
        symlink("victim", manifest_path(&root, name)).unwrap();
        let src = s.join(name);
        let data = write_random(&src, &mut rng, size);
        let server = Server::start(&home, &root);
        cp!(&home; "--chunk", "1MiB", &src, server.remote(name)).assert_ok();
        assert_eq!(fs::read(root.join(name)).unwrap(), data);
        assert_eq!(
            fs::read(&victim).unwrap(),
            b"keep me",
            "written through ({name})"
        );
    }
}

#[test]
fn a_hard_linked_destination_is_replaced_and_its_other_link_kept() {
    let s = Scratch::new("hardlink-dst");
    let home = s.dir("home");
    let root = s.dir("root");
    let server = Server::start(&home, &root);
    let mut rng = Rng::from_env("hardlink-dst");
    for (name, size) in [("small", 1000usize), ("big", 3 << 20)] {
        let old = root.join(name);
        write_file(&old, b"the other link's bytes", 0o644);
        let other = root.join(format!("{name}.other"));
        fs::hard_link(&old, &other).unwrap();
        let src = s.join(name);
        let data = write_random(&src, &mut rng, size);
        cp!(&home; "--chunk", "1MiB", &src, server.remote(name)).assert_ok();
        assert_eq!(fs::read(&old).unwrap(), data);
        assert_eq!(fs::read(&other).unwrap(), b"the other link's bytes");
        assert_eq!(fs::metadata(&other).unwrap().nlink(), 1);
    }
}

/// A part file left by an interrupted push, hard-linked elsewhere before the rerun: the
/// rerun must start over in a new inode rather than write the rest into the shared one.
#[test]
fn a_hard_linked_part_file_is_not_resumed_through() {
    let mut rng = Rng::from_env("hardlink-part");
    let s = Scratch::new("hardlink-part");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.join("big");
    let data = write_random(&src, &mut rng, 16 << 20);
    let server = Server::start(&home, &root);
    let manifest = manifest_path(&root, "big");
    let part = part_path(&root, "big");

    let mut c = cp_command(&home);
    c.args(["--chunk", "1MiB", "--rate", "40M"])
        .arg(&src)
        .arg(server.remote("big"));
    let mut first = spawn_piped(&mut c);
    let deadline = Instant::now() + Duration::from_secs(60);
    while manifest_record_count(&manifest) < 2 {
        assert!(Instant::now() < deadline, "no chunk was ever recorded");
        std::thread::sleep(Duration::from_millis(10));
    }
    first.kill9();
    drop(first.wait(CP_LIMIT));
    wait_until_stable(&manifest, Duration::from_millis(500));
    let other = root.join("other");
    fs::hard_link(&part, &other).unwrap();
    let before = fs::read(&other).unwrap();

    cp!(&home; "--chunk", "1MiB", &src, server.remote("big")).assert_ok();
    assert_same_bytes(&src, &root.join("big"));
    assert!(
        fs::read(&other).unwrap() == before,
        "the rerun wrote through the hard-linked part file"
    );
    drop(data);
}

/// A directory of the destination tree that is a symlink to another directory in the
/// root: the transfer did not create it, so its target's mode is left alone.
#[test]
fn a_symlinked_directory_is_not_re_moded_through() {
    let s = Scratch::new("dir-symlink");
    let home = s.dir("home");
    let root = s.dir("root");
    let elsewhere = s.dir("root/elsewhere");
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o700)).unwrap();
    symlink("elsewhere", root.join("tree")).unwrap();
    let tree = s.join("src/tree");
    write_file(&tree.join("f"), b"x", 0o644);
    fs::set_permissions(&tree, fs::Permissions::from_mode(0o777)).unwrap();
    let server = Server::start(&home, &root);
    cp!(&home; "-r", &tree, server.remote("")).assert_ok();
    assert_eq!(mode_of(&elsewhere), 0o700, "chmod went through the symlink");
}
