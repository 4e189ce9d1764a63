//! Symlinks through `longhaul cp` end to end (a `longhaul serve --root` process and
//! `longhaul cp` processes on loopback, real files): a tree's symlinks (relative in the
//! tree, absolute out of it, dangling) arrive as symlinks with identical targets and
//! mtimes, pushed and pulled; a second run leaves them alone (the same inode) and a
//! changed target replaces them. A symlink on the receiving side that points out of the
//! root is never followed: a link out made by a push stays a link, a later push of a file
//! named through it (`linkdir/x`) is refused, and a tree whose `linkdir` is a directory
//! replaces the link by that directory (rsync's rule), nothing written outside; a link already at a file's destination (pointing out, at a one-chunk
//! or a several-chunk file) is replaced by the file, its target untouched, on a push and
//! on a pull. A link whose destination is a directory fails alone (exit 1). `longhaul
//! sync` copies links the same way, and a second sync leaves them alone.

#[macro_use]
mod support;

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;

use support::*;

const SECRET: &[u8] = b"SECRET-OUTSIDE-THE-ROOT";

/// `dir` with `data` (a file), `in-tree -> data`, `sub/up -> ../data`, `out -> ABSOLUTE
/// outside`, `sub/dangling -> no/such/thing`; each link with its own mtime.
fn tree_with_links(dir: &Path, outside: &Path) {
    write_file(&dir.join("data"), b"payload", 0o644);
    fs::create_dir_all(dir.join("sub")).unwrap();
    symlink("data", dir.join("in-tree")).unwrap();
    symlink("../data", dir.join("sub/up")).unwrap();
    symlink(outside, dir.join("out")).unwrap();
    symlink("no/such/thing", dir.join("sub/dangling")).unwrap();
    for (i, l) in ["in-tree", "sub/up", "out", "sub/dangling"]
        .iter()
        .enumerate()
    {
        let ok = std::process::Command::new("touch")
            .args(["-h", "-d", &format!("@{}.{:09}", 1_400_000_000 + i, 7 * i)])
            .arg(dir.join(l))
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

fn ino(p: &Path) -> u64 {
    fs::symlink_metadata(p).unwrap().ino()
}

#[test]
fn links_are_pushed_and_pulled_as_links_and_left_alone_on_a_rerun() {
    let s = Scratch::new("links");
    let home = s.dir("home");
    let root = s.dir("root");
    let outside = s.dir("outside");
    write_file(&outside.join("secret"), SECRET, 0o644);
    let src = s.join("src/t");
    tree_with_links(&src, &outside.join("secret"));
    let server = Server::start(&home, &root);

    let push = cp!(&home; "-r", "--json", &src, server.remote(""));
    push.assert_ok();
    let (files, _) = assert_same_tree(&src, &root.join("t"), EXACT);
    assert_eq!(files, 5, "one file and four links");
    assert_eq!(push.end_u64("files"), 5, "{}", push.describe());
    assert!(!push.stderr.contains("skipped"), "{}", push.describe());
    // Nothing read through the link out.
    assert_eq!(fs::read(outside.join("secret")).unwrap(), SECRET);

    // A rerun: the links are already there with their targets, left alone.
    let before: Vec<u64> = ["in-tree", "out", "sub/dangling"]
        .iter()
        .map(|l| ino(&root.join("t").join(l)))
        .collect();
    cp!(&home; "-r", &src, server.remote("")).assert_ok();
    let after: Vec<u64> = ["in-tree", "out", "sub/dangling"]
        .iter()
        .map(|l| ino(&root.join("t").join(l)))
        .collect();
    assert_eq!(before, after, "a link with the same target was replaced");

    // A changed target replaces the link.
    fs::remove_file(src.join("sub/dangling")).unwrap();
    symlink("elsewhere", src.join("sub/dangling")).unwrap();
    cp!(&home; "-r", &src, server.remote("")).assert_ok();
    assert_eq!(
        fs::read_link(root.join("t/sub/dangling")).unwrap(),
        Path::new("elsewhere")
    );

    // Pulled back: the same links, the same targets and mtimes.
    let pulled = s.join("pulled");
    cp!(&home; "-r", server.remote("t"), &pulled).assert_ok();
    assert_same_tree(&src, &pulled, EXACT);
    // A single link pulled without -r: the link itself.
    let one = s.join("one");
    cp!(&home; server.remote("t/out"), &one).assert_ok();
    assert_eq!(fs::read_link(&one).unwrap(), outside.join("secret"));
    // No work file left anywhere.
    for dir in [&root, &pulled] {
        let left = work_files(dir);
        assert!(left.is_empty(), "{left:?} in {}", dir.display());
    }
}

#[test]
fn a_link_out_of_the_root_is_never_followed_by_a_later_push() {
    let s = Scratch::new("links-out");
    let home = s.dir("home");
    let root = s.dir("root");
    let outside = s.dir("outside");
    write_file(&outside.join("secret"), SECRET, 0o644);
    let src = s.join("src/t");
    fs::create_dir_all(&src).unwrap();
    symlink(&outside, src.join("linkdir")).unwrap();
    symlink("../../outside", src.join("rel-linkdir")).unwrap();
    let server = Server::start(&home, &root);
    // The push creates links pointing out of the root: stored as text, not followed.
    cp!(&home; "-r", &src, server.remote("")).assert_ok();
    assert_eq!(fs::read_link(root.join("t/linkdir")).unwrap(), outside);
    assert_eq!(
        fs::read_link(root.join("t/rel-linkdir")).unwrap(),
        Path::new("../../outside")
    );
    let before = names_under(&outside);

    // A file pushed to a path through either link: refused, nothing written outside.
    let x = s.join("x");
    write_file(&x, b"must not land outside", 0o644);
    for through in ["t/linkdir/x", "t/rel-linkdir/x", "t/linkdir/secret"] {
        let run = cp!(&home; &x, server.remote(through));
        run.assert_failed();
        assert!(run.stderr.contains("linkdir"), "{}", run.describe());
    }
    assert!(fs::symlink_metadata(root.join("t/linkdir"))
        .unwrap()
        .file_type()
        .is_symlink());
    // A tree whose entries go through the link (a real directory `linkdir` here): the
    // link is replaced by the sender's directory, as rsync does, never written through.
    let tree = s.join("tree/t");
    write_file(&tree.join("linkdir/x"), b"must not land outside", 0o644);
    write_file(&tree.join("linkdir/secret"), b"overwritten!", 0o644);
    cp!(&home; "-r", s.join("tree/t"), server.remote("")).assert_ok();

    assert_eq!(names_under(&outside), before, "written outside the root");
    assert_eq!(fs::read(outside.join("secret")).unwrap(), SECRET);
    assert!(fs::symlink_metadata(root.join("t/linkdir"))
        .unwrap()
        .is_dir());
    assert_eq!(
        fs::read(root.join("t/linkdir/secret")).unwrap(),
        b"overwritten!"
    );
}

/// A link at the destination of a file, pointing at a file outside: the file replaces the
/// link; the outside file keeps its bytes. One-chunk (created unnamed) and several-chunk
/// (part file) files in a tree, pushed to a daemon and pulled to a local directory. A
/// destination named on the command line that is a symlink out of the receiver's root
/// (here a pull's, the local directory) is refused outright, the link left as it is (a
/// push's: `cp_cli.rs`'s escapes).
#[test]
fn a_link_at_a_files_destination_is_replaced_not_written_through() {
    let s = Scratch::new("links-replace");
    let home = s.dir("home");
    let root = s.dir("root");
    let outside = s.dir("outside");
    let local = s.dir("local");
    let names = ["small", "big", "named"];
    for name in names {
        write_file(&outside.join(name), SECRET, 0o644);
    }
    let mut rng = Rng::from_env("links_replace");
    let src = s.join("src/d");
    let small = write_random(&src.join("small"), &mut rng, 1000);
    let big = write_random(&src.join("big"), &mut rng, 3 * MIB as usize + 5);
    let server = Server::start(&home, &root);
    for dir in [root.join("d"), local.join("d")] {
        fs::create_dir_all(&dir).unwrap();
        for name in ["small", "big"] {
            symlink(outside.join(name), dir.join(name)).unwrap();
        }
    }
    symlink(outside.join("named"), local.join("named")).unwrap();
    cp!(&home; "-r", "--chunk", "1MiB", &src, server.remote("")).assert_ok();
    cp!(&home; "-r", "--chunk", "1MiB", server.remote("d"), &local).assert_ok();
    let run = cp!(&home; "--chunk", "1MiB", server.remote("d/big"), local.join("named"));
    run.assert_failed();
    assert!(run.stderr.contains("named"), "{}", run.describe());
    assert!(fs::symlink_metadata(local.join("named"))
        .unwrap()
        .file_type()
        .is_symlink());
    for dir in [root.join("d"), local.join("d")] {
        assert!(fs::symlink_metadata(dir.join("small")).unwrap().is_file());
        assert_eq!(fs::read(dir.join("small")).unwrap(), small);
        assert!(fs::symlink_metadata(dir.join("big")).unwrap().is_file());
        assert_eq!(fs::read(dir.join("big")).unwrap(), big);
    }
    for name in names {
        assert_eq!(fs::read(outside.join(name)).unwrap(), SECRET, "{name}");
    }
}

/// A symlink whose destination is a directory: that entry fails alone, the rest arrives.
#[test]
fn a_link_onto_a_directory_fails_alone() {
    let s = Scratch::new("links-dir");
    let home = s.dir("home");
    let root = s.dir("root");
    fs::create_dir_all(root.join("t/l/inner")).unwrap();
    let src = s.join("src/t");
    write_file(&src.join("a"), b"a", 0o644);
    symlink("a", src.join("l")).unwrap();
    let server = Server::start(&home, &root);
    let run = cp!(&home; "-r", "--json", &src, server.remote(""));
    run.assert_code(1);
    let end = run.json_of("end");
    assert_eq!(end["failed_files"], 1, "{end}");
    assert_eq!(end["files"], 1, "{end}");
    let failures = end["failures"].to_string();
    assert!(
        failures.contains("t/l") && failures.contains("directory"),
        "{failures}"
    );
    assert!(root.join("t/l/inner").is_dir());
    assert_eq!(fs::read(root.join("t/a")).unwrap(), b"a");
    let left = work_files(&root);
    assert!(left.is_empty(), "{left:?}");
}

/// `longhaul sync` pushes and pulls links as links; a second run leaves them alone (the
/// same inodes) and a changed target is replaced.
#[test]
fn sync_copies_links_as_links() {
    let s = Scratch::new("links-sync");
    let home = s.dir("home");
    let root = s.dir("root");
    let outside = s.dir("outside");
    write_file(&outside.join("secret"), SECRET, 0o644);
    let src = s.join("src/t");
    tree_with_links(&src, &outside.join("secret"));
    let server = Server::start(&home, &root);
    let sync = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = longhaul(&home);
        c.arg("sync");
        for a in args {
            c.arg(a);
        }
        run(&mut c, CP_LIMIT)
    };
    sync(&[&src, &server.remote("")]).assert_ok();
    assert_same_tree(&src, &root.join("t"), EXACT);
    let links = ["in-tree", "sub/up", "out", "sub/dangling"];
    let inodes = |dir: &Path| -> Vec<u64> { links.iter().map(|l| ino(&dir.join(l))).collect() };
    let before = inodes(&root.join("t"));
    sync(&[&src, &server.remote("")]).assert_ok();
    assert_eq!(
        inodes(&root.join("t")),
        before,
        "an unchanged link was replaced"
    );
    fs::remove_file(src.join("out")).unwrap();
    symlink("changed", src.join("out")).unwrap();
    sync(&[&src, &server.remote("")]).assert_ok();
    assert_eq!(
        fs::read_link(root.join("t/out")).unwrap(),
        Path::new("changed")
    );
    let local = s.dir("local");
    sync(&[&server.remote("t"), &local]).assert_ok();
    assert_same_tree(&src, &local.join("t"), EXACT);
    assert_eq!(fs::read(outside.join("secret")).unwrap(), SECRET);
}
