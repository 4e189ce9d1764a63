//! `--exclude` / `--include` and `--delete` (rsync's rules) with a real `longhaul serve
//! --root` and `longhaul cp` processes on loopback, push and pull: what arrives is what the
//! rules include; `--delete` removes what the source lacks (files, nested directories,
//! symlinks as links) inside the directories the copy sends, keeps what the rules exclude,
//! and touches nothing outside the destination.

#[macro_use]
mod support;

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use support::*;

/// Every path below `dir` (directories with a trailing `/`), sorted.
fn tree(dir: &Path) -> BTreeSet<String> {
    (list_tree(dir).into_iter())
        .map(|(rel, md)| {
            let rel = String::from_utf8_lossy(&rel).into_owned();
            if md.is_dir() {
                format!("{rel}/")
            } else {
                rel
            }
        })
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The source tree: C sources and objects at two depths, an anchored `build/`, a
/// directory `cache/` and a file named `cache`.
fn make_src(dir: &Path, rng: &mut Rng) {
    for f in [
        "a.c",
        "a.o",
        "notes.txt",
        "sub/b.c",
        "sub/b.o",
        "sub/cache",
        "sub/deep/c.h",
        "sub/build/y.c",
        "build/x.c",
        "cache/f",
    ] {
        write_random(&dir.join(f), rng, 100);
    }
}

const ALL: &[&str] = &[
    "a.c",
    "a.o",
    "notes.txt",
    "sub/",
    "sub/b.c",
    "sub/b.o",
    "sub/cache",
    "sub/deep/",
    "sub/deep/c.h",
    "sub/build/",
    "sub/build/y.c",
    "build/",
    "build/x.c",
    "cache/",
    "cache/f",
];

/// The cases: rules, and what of [`ALL`] is left out.
fn cases() -> Vec<(Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (vec!["--exclude", "*.o"], vec!["a.o", "sub/b.o"]),
        (
            // man rsync: only directories and C sources.
            vec!["--include", "*/", "--include", "*.c", "--exclude", "*"],
            vec![
                "a.o",
                "notes.txt",
                "sub/b.o",
                "sub/cache",
                "sub/deep/c.h",
                "cache/f",
            ],
        ),
        // Anchored at the top of the source: `sub/build` stays.
        (vec!["--exclude", "/build"], vec!["build/", "build/x.c"]),
        // Directories only: the file `sub/cache` stays.
        (vec!["--exclude", "cache/"], vec!["cache/", "cache/f"]),
    ]
}

fn expected(left_out: &[&str]) -> BTreeSet<String> {
    ALL.iter()
        .filter(|p| !left_out.contains(p))
        .map(|p| format!("src/{p}"))
        .chain(std::iter::once("src/".to_string()))
        .collect()
}

#[test]
fn excludes_and_includes_both_ways() {
    let mut rng = Rng::from_env("filter-both");
    let s = Scratch::new("filter-both");
    let home = s.dir("home");
    let root = s.dir("root");
    make_src(&root.join("src"), &mut rng);
    let server = Server::start(&home, &root);
    for (i, (rules, left_out)) in cases().into_iter().enumerate() {
        let want = expected(&left_out);
        // Push the local copy of the tree.
        let local = s.dir(format!("local{i}"));
        make_src(&local.join("src"), &mut rng);
        fs::create_dir_all(root.join(format!("push{i}"))).unwrap();
        let mut c = cp_command(&home);
        c.arg("-r").args(&rules).arg(local.join("src"));
        c.arg(server.remote(&format!("push{i}/")));
        run(&mut c, CP_LIMIT).assert_ok();
        assert_eq!(tree(&root.join(format!("push{i}"))), want, "push {rules:?}");
        // Pull the server's.
        let dest = s.dir(format!("pull{i}"));
        let mut c = cp_command(&home);
        c.arg("-r")
            .args(&rules)
            .arg(server.remote("src"))
            .arg(&dest);
        run(&mut c, CP_LIMIT).assert_ok();
        assert_eq!(tree(&dest), want, "pull {rules:?}");
    }
}

/// Extras at a destination that holds `dst/src` from an earlier copy, and things outside
/// it that must survive: a file beside the destination and a directory a symlink inside
/// points to.
fn plant_extras(dst: &Path, outside: &Path) {
    write_file(&dst.join("src/extra.txt"), b"x", 0o644);
    write_file(&dst.join("src/olddir/f"), b"x", 0o644);
    write_file(&dst.join("src/olddir/nested/deep.txt"), b"x", 0o644);
    write_file(&dst.join("src/sub/extra2"), b"x", 0o644);
    write_file(&dst.join("src/keep.o"), b"excluded: kept", 0o644);
    write_file(&dst.join("src/olddir2/kept.o"), b"excluded: kept", 0o644);
    write_file(&dst.join("beside.txt"), b"not in a sent directory", 0o644);
    write_file(&outside.join("precious"), b"outside", 0o644);
    symlink(outside, dst.join("src/link_out")).unwrap();
    symlink(outside.join("precious"), dst.join("src/sub/link_file")).unwrap();
}

/// What `--delete --exclude '*.o'` must leave: the source's tree (its `.o` files from the
/// first copy stay, excluded), the excluded extras and the directory holding one.
fn check_after_delete(dst: &Path, outside: &Path, src: &Path) {
    let mut want = expected(&[]);
    for p in [
        "src/keep.o",
        "src/olddir2/",
        "src/olddir2/kept.o",
        "beside.txt",
    ] {
        want.insert(p.to_string());
    }
    assert_eq!(tree(dst), want);
    assert_eq!(fs::read(outside.join("precious")).unwrap(), b"outside");
    assert_eq!(tree(outside), set(&["precious"]));
    // The directories' times are the source's: set after the deletions.
    for d in ["", "sub"] {
        let (a, b) = (
            fs::metadata(src.join(d)).unwrap(),
            fs::metadata(dst.join("src").join(d)).unwrap(),
        );
        assert_eq!(mtime_of(&a), mtime_of(&b), "mtime of src/{d}");
    }
}

#[test]
fn delete_removes_extras_and_keeps_excluded_push() {
    let mut rng = Rng::from_env("delete-push");
    let s = Scratch::new("delete-push");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.join("src");
    make_src(&src, &mut rng);
    let outside = s.dir("outside");
    let server = Server::start(&home, &root);
    let dst = s.dir("root/dst");
    cp!(&home; "-r", &src, server.remote("dst/")).assert_ok();
    plant_extras(&dst, &outside);
    let r = cp!(&home; "-r", "--delete", "--exclude", "*.o", "--json", &src, server.remote("dst/"));
    r.assert_ok();
    assert_eq!(r.end_u64("deleted_files"), 8, "{}", r.describe());
    check_after_delete(&dst, &outside, &src);
    // Text: the sender says how many went.
    write_file(&dst.join("src/again"), b"x", 0o644);
    let r = cp!(&home; "-r", "--delete", "--exclude", "*.o", &src, server.remote("dst/"));
    r.assert_ok();
    assert!(r.stdout.contains("deleted 1"), "{}", r.describe());
    check_after_delete(&dst, &outside, &src);
}

#[test]
fn delete_removes_extras_and_keeps_excluded_pull() {
    let mut rng = Rng::from_env("delete-pull");
    let s = Scratch::new("delete-pull");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = root.join("src");
    make_src(&src, &mut rng);
    let outside = s.dir("outside");
    let server = Server::start(&home, &root);
    let dst = s.dir("dst");
    cp!(&home; "-r", server.remote("src"), &dst).assert_ok();
    plant_extras(&dst, &outside);
    let r = cp!(&home; "-r", "--delete", "--exclude", "*.o", "--json", server.remote("src"), &dst);
    r.assert_ok();
    assert_eq!(r.end_u64("deleted_files"), 8, "{}", r.describe());
    check_after_delete(&dst, &outside, &src);
    // Nothing to send and nothing to delete: still fine.
    let r = cp!(&home; "-r", "--delete", "--exclude", "*.o", "--json", server.remote("src"), &dst);
    r.assert_ok();
    assert_eq!(r.end_u64("deleted_files"), 0, "{}", r.describe());
}

#[test]
fn delete_without_r_and_bad_patterns_are_refused() {
    let s = Scratch::new("delete-no-r");
    let home = s.dir("home");
    let root = s.dir("root");
    write_file(&s.join("f"), b"x", 0o644);
    let server = Server::start(&home, &root);
    let r = cp!(&home; "--delete", s.join("f"), server.remote("f"));
    r.assert_code(2);
    assert!(r.stderr.contains("--delete needs -r"), "{}", r.describe());
    let r = cp!(&home; "-r", "--exclude", "[abc", s.join("f"), server.remote("f"));
    r.assert_code(2);
    assert!(r.stderr.contains("filter rule 1"), "{}", r.describe());
    assert!(!root.join("f").exists());
}
