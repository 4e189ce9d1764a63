//! The cp source walk on real temporary trees: the file list (order, kinds, sizes, modes,
//! mtimes, fingerprints) of a local tree and of the same tree below a served root;
//! empty files and directories, 100-level paths, unicode and non-UTF-8 names; symlinks
//! listed as links with their targets (never followed, in a tree or named as a pull's
//! source); sockets and work files skipped with a warning; the refusals (directory without -r,
//! same base name twice, missing source, paths beyond the bounds, `/`, unreadable
//! directories) and no escape from a served root. With `hard_links` (`sync -H`) every walk
//! lists later names of a file as hard links of the first; without it, as files.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use longhaul_engine::cp::walk::{
    walk_local, walk_local_filtered, walk_served, walk_served_filtered, walk_served_root,
    walk_served_root_filtered, SourceFile, WalkError,
};
use longhaul_proto::transfer::EntryKind;
use longhaul_sys::served_root::{Resolver, ServedRoot};
use longhaul_testkit::served::each_resolver;
use longhaul_transfer::{parse_peer_path, source_fingerprint};

/// `<tmp>/root/src`: files of 0 and 5 bytes, an empty directory, a sub-directory listed
/// out of order, unicode and non-UTF-8 names, a setuid-ish mode, an in-tree symlink, a
/// symlink out and a dangling one (listed as links), and things to skip (a socket, a
/// receiver work file). `<tmp>/outside` holds what must never be listed.
fn tree() -> (tempfile::TempDir, UnixListener) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("root/src");
    fs::create_dir_all(src.join("sub")).unwrap();
    fs::create_dir_all(src.join("empty_dir")).unwrap();
    fs::create_dir_all(tmp.path().join("outside/hidden")).unwrap();
    fs::write(tmp.path().join("outside/secret"), b"outside").unwrap();
    fs::write(src.join("empty"), b"").unwrap();
    fs::write(src.join("data"), b"hello").unwrap();
    fs::set_permissions(src.join("data"), fs::Permissions::from_mode(0o4751)).unwrap();
    fs::write(src.join("sub/b"), b"bb").unwrap();
    fs::write(src.join("sub/a"), b"a").unwrap();
    fs::write(src.join("été.txt"), "é".as_bytes()).unwrap();
    fs::write(src.join(OsStr::from_bytes(b"raw\xff\xfe")), b"raw").unwrap();
    fs::write(src.join("sub/.a.longhaul-part"), b"partial").unwrap();
    symlink("data", src.join("link_in")).unwrap();
    symlink(tmp.path().join("outside"), src.join("link_out")).unwrap();
    symlink("nowhere/at/all", src.join("sub/dangling")).unwrap();
    let sock = UnixListener::bind(src.join("sock")).unwrap();
    (tmp, sock)
}

/// The expected entry paths of `tree()` in walk order.
const ORDER: &[&[u8]] = &[
    b"src",
    b"src/data",
    b"src/empty",
    b"src/empty_dir",
    b"src/link_in",
    b"src/link_out",
    b"src/raw\xff\xfe",
    b"src/sub",
    b"src/sub/a",
    b"src/sub/b",
    b"src/sub/dangling",
    "src/été.txt".as_bytes(),
];

fn paths(list: &[SourceFile]) -> Vec<&[u8]> {
    list.iter().map(|f| f.entry.path.as_slice()).collect()
}

#[test]
fn local_tree_lists_files_and_dirs_in_order() {
    let (tmp, _sock) = tree();
    let src = tmp.path().join("root/src");
    let mut warnings = Vec::new();
    let list = walk_local(std::slice::from_ref(&src), true, &mut |w| warnings.push(w)).unwrap();
    assert_eq!(paths(&list), ORDER);

    for f in &list {
        let md = fs::symlink_metadata(&f.origin).unwrap();
        let rel = &f.entry.path[4.min(f.entry.path.len())..];
        let want_origin = if f.entry.path == b"src" {
            src.clone()
        } else {
            src.join(OsStr::from_bytes(rel))
        };
        assert_eq!(f.origin, want_origin);
        let kind = if md.is_dir() {
            EntryKind::Dir
        } else if md.is_symlink() {
            EntryKind::Symlink
        } else {
            EntryKind::File
        };
        assert_eq!(f.entry.kind, kind, "{:?}", f.origin);
        assert_eq!(f.entry.size, if md.is_file() { md.len() } else { 0 });
        if kind == EntryKind::Symlink {
            // Its target as text, never followed; mode 0o777 as a link's.
            let target = fs::read_link(&f.origin).unwrap();
            assert_eq!(f.entry.link_target, target.as_os_str().as_bytes());
            assert_eq!(f.entry.mode, 0o777);
        } else {
            assert!(f.entry.link_target.is_empty());
            assert_eq!(f.entry.mode, md.mode() & 0o7777);
        }
        assert_eq!(f.entry.mtime_secs, md.mtime());
        assert_eq!(i64::from(f.entry.mtime_nanos), md.mtime_nsec());
        let fp = source_fingerprint(md.dev(), md.ino(), md.ctime(), md.ctime_nsec() as u32);
        assert_eq!(f.entry.fingerprint, fp);
        assert!(parse_peer_path(&f.entry.path).is_ok());
    }
    let data = list.iter().find(|f| f.entry.path == b"src/data").unwrap();
    assert_eq!((data.entry.size, data.entry.mode), (5, 0o4751));
    let empty = list.iter().find(|f| f.entry.path == b"src/empty").unwrap();
    assert_eq!((empty.entry.kind, empty.entry.size), (EntryKind::File, 0));

    let link = |p: &[u8]| {
        list.iter()
            .find(|f| f.entry.path == p)
            .unwrap()
            .entry
            .clone()
    };
    assert_eq!(link(b"src/link_in").link_target, b"data");
    let out = tmp.path().join("outside");
    assert_eq!(
        link(b"src/link_out").link_target,
        out.as_os_str().as_bytes()
    );
    assert_eq!(link(b"src/sub/dangling").link_target, b"nowhere/at/all");

    assert_eq!(warnings.len(), 2, "{warnings:?}");
    let count = |prefix: &str| warnings.iter().filter(|w| w.starts_with(prefix)).count();
    assert_eq!(count("skipped symlink"), 0, "{warnings:?}");
    assert_eq!(count("skipped socket"), 1, "{warnings:?}");
    assert_eq!(count("skipped /"), 1, "the work file: {warnings:?}");
    let all = warnings.join("\n");
    for name in ["sock", ".a.longhaul-part"] {
        assert!(all.contains(name), "{name} not named in {all}");
    }
    assert!(all.contains("longhaul cp copies regular files, directories and symlinks"));
}

#[test]
fn source_names() {
    let (tmp, _sock) = tree();
    let src = tmp.path().join("root/src");
    let nop = &mut |_| {};
    // Trailing slash and `.`: the directory's own name.
    let slash = PathBuf::from(format!("{}/", src.display()));
    assert_eq!(paths(&walk_local(&[slash], true, nop).unwrap()), ORDER);
    let dot = src.join("sub/..");
    assert_eq!(walk_local(&[dot], true, nop).unwrap()[0].entry.path, b"src");
    let dot = src.join(".");
    assert_eq!(walk_local(&[dot], true, nop).unwrap()[0].entry.path, b"src");
    // A single file, and a symlink named on the command line (followed, keeps its name).
    let one = walk_local(&[src.join("sub/a")], false, nop).unwrap();
    assert_eq!(paths(&one), [b"a"]);
    assert_eq!(one[0].origin, src.join("sub/a"));
    let link = walk_local(&[src.join("link_in")], false, nop).unwrap();
    assert_eq!(paths(&link), [b"link_in"]);
    assert_eq!(
        (link[0].entry.kind, link[0].entry.size),
        (EntryKind::File, 5)
    );
    // Several sources: each under its own name, in the order given.
    let two = walk_local(&[src.join("sub"), src.join("data")], true, nop).unwrap();
    assert_eq!(
        paths(&two),
        [&b"sub"[..], b"sub/a", b"sub/b", b"sub/dangling", b"data"]
    );
}

#[test]
fn refusals_name_the_path_and_say_what_to_do() {
    let (tmp, _sock) = tree();
    let src = tmp.path().join("root/src");
    let nop = &mut |_| {};
    let e = walk_local(std::slice::from_ref(&src), false, nop).unwrap_err();
    assert!(matches!(e, WalkError::IsDirectory { .. }), "{e:?}");
    assert!(e.to_string().contains(&*src.to_string_lossy()) && e.to_string().contains("use -r"));

    fs::create_dir_all(tmp.path().join("other/sub")).unwrap();
    let e = walk_local(&[src.join("sub"), tmp.path().join("other/sub")], true, nop).unwrap_err();
    assert!(matches!(e, WalkError::DuplicateName { .. }), "{e:?}");
    assert!(e.to_string().contains("other/sub"), "{e}");

    let missing = tmp.path().join("nope");
    let e = walk_local(std::slice::from_ref(&missing), true, nop).unwrap_err();
    assert!(matches!(e, WalkError::Missing { .. }), "{e:?}");
    assert!(e.to_string().contains(&*missing.to_string_lossy()), "{e}");

    symlink("nowhere", tmp.path().join("dangling")).unwrap();
    let e = walk_local(&[tmp.path().join("dangling")], true, nop).unwrap_err();
    assert!(matches!(e, WalkError::BrokenSymlink { .. }), "{e:?}");

    let e = walk_local(&[PathBuf::from("/")], true, nop).unwrap_err();
    assert!(matches!(e, WalkError::NoName { .. }), "{e:?}");
}

#[test]
fn deep_and_long_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let nop = &mut |_| {};
    // 100 levels: fine, one entry per level plus the file at the bottom.
    let mut deep = tmp.path().join("deep");
    for _ in 0..100 {
        deep.push("d");
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("f"), b"bottom").unwrap();
    let list = walk_local(&[tmp.path().join("deep")], true, nop).unwrap();
    assert_eq!(list.len(), 102);
    let last = list.last().unwrap();
    assert_eq!(parse_peer_path(&last.entry.path).unwrap().depth(), 102);
    assert_eq!(last.entry.size, 6);

    // 256 components is the bound: `too_deep` + 256 levels breaks it, and the error names
    // the first path beyond it.
    let mut over = tmp.path().join("too_deep");
    for _ in 0..256 {
        over.push("d");
    }
    fs::create_dir_all(&over).unwrap();
    let e = walk_local(&[tmp.path().join("too_deep")], true, nop).unwrap_err();
    assert!(
        matches!(e, WalkError::PathBounds { ref path, .. } if *path == over),
        "{e:?}"
    );

    // 4095 bytes is the bound: 255-byte names break it at the 16th level. Made with
    // mkdirat (the full path is longer than the kernel takes in one string).
    let name = "n".repeat(255);
    let long = tmp.path().join("long");
    fs::create_dir(&long).unwrap();
    let maker = ServedRoot::open_with(&long, Resolver::NoSymlinks).unwrap();
    maker
        .create_dirs(Path::new(&vec![name.as_str(); 17].join("/")), 0o755)
        .unwrap();
    let e = walk_local(std::slice::from_ref(&long), true, nop).unwrap_err();
    assert!(matches!(e, WalkError::PathBounds { .. }), "{e:?}");
    assert!(e.to_string().contains("4095"), "{e}");
}

#[test]
fn unreadable_directory_is_an_error() {
    if running_as_root() {
        eprintln!("SKIP unreadable_directory_is_an_error: root reads every directory");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let locked = tmp.path().join("top/locked");
    fs::create_dir_all(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let e = walk_local(&[tmp.path().join("top")], true, &mut |_| {}).unwrap_err();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(
        matches!(e, WalkError::ListDir { ref path, .. } if *path == locked),
        "{e:?}"
    );
    assert!(e.to_string().contains("check its permissions"), "{e}");
}

/// Whether this process runs as root, read from /proc (no `unsafe` outside `sys`).
fn running_as_root() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0")
}

#[test]
fn served_walk_matches_the_local_one() {
    let (tmp, _sock) = tree();
    let src = tmp.path().join("root/src");
    let local = walk_local(&[src], true, &mut |_| {}).unwrap();
    for root in each_resolver(&tmp.path().join("root")) {
        let mut warnings = Vec::new();
        let served = walk_served(&root, &parse_peer_path(b"src").unwrap(), true, &mut |w| {
            warnings.push(w)
        })
        .unwrap();
        assert_eq!(served.len(), local.len());
        for (s, l) in served.iter().zip(&local) {
            assert_eq!(s.entry, l.entry, "{:?}", root.resolver());
            // Origins are relative to the root and open through it.
            assert_eq!(tmp.path().join("root").join(&s.origin), l.origin);
        }
        assert_eq!(warnings.len(), 2, "{warnings:?}");

        let one = walk_served(
            &root,
            &parse_peer_path(b"src/sub/b").unwrap(),
            false,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(paths(&one), [b"b"]);
        assert_eq!(one[0].origin, Path::new("src/sub/b"));
        let e = walk_served(
            &root,
            &parse_peer_path(b"src/sub").unwrap(),
            false,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("use -r"), "{e}");
        let e =
            walk_served(&root, &parse_peer_path(b"nope").unwrap(), true, &mut |_| {}).unwrap_err();
        assert!(matches!(e, WalkError::Missing { .. }), "{e:?}");

        let whole = walk_served_root(&root, true, &mut |_| {}).unwrap();
        assert_eq!(whole[0].entry.path, b"root");
        assert_eq!(whole[0].origin, Path::new(""));
        assert_eq!(whole[1].entry.path, b"root/src");
        assert_eq!(whole[1].origin, Path::new("src"));
        assert_eq!(whole.len(), local.len() + 1);
    }
}

#[test]
fn served_walk_never_leaves_the_root() {
    let (tmp, _sock) = tree();
    let root_dir = tmp.path().join("root");
    symlink(tmp.path().join("outside"), root_dir.join("out")).unwrap();
    symlink("../outside/secret", root_dir.join("secret_link")).unwrap();
    for root in each_resolver(&tmp.path().join("root")) {
        // A symlink out, named as the source (with or without -r) or met in the tree:
        // one symlink entry with its target as text, never followed.
        let out = tmp.path().join("outside");
        for (link, target) in [
            (&b"out"[..], out.as_os_str().as_bytes()),
            (b"secret_link", b"../outside/secret"),
            (b"src/link_out", out.as_os_str().as_bytes()),
        ] {
            for recursive in [true, false] {
                let mut warnings = Vec::new();
                let list = walk_served(
                    &root,
                    &parse_peer_path(link).unwrap(),
                    recursive,
                    &mut |w| warnings.push(w),
                )
                .unwrap();
                assert_eq!(list.len(), 1, "{list:?}");
                let e = &list[0].entry;
                assert_eq!(e.kind, EntryKind::Symlink);
                assert_eq!(e.link_target, target);
                assert_eq!((e.size, e.mode), (0, 0o777));
                assert!(warnings.is_empty(), "{warnings:?}");
            }
        }
        // Through a symlink out: refused by the resolver.
        for bad in [&b"out/hidden"[..], b"src/link_out/secret"] {
            let e =
                walk_served(&root, &parse_peer_path(bad).unwrap(), true, &mut |_| {}).unwrap_err();
            assert!(
                matches!(e, WalkError::Stat { .. }),
                "{:?}: {e:?}",
                root.resolver()
            );
        }
        // Nothing below a link is listed: the links themselves are the only entries
        // that name what is outside.
        let whole = walk_served_root(&root, true, &mut |_| {}).unwrap();
        for f in &whole {
            let p = String::from_utf8_lossy(&f.entry.path);
            assert!(!p.contains("hidden"), "{p}");
            if p.contains("secret") || p.ends_with("/out") || p.contains("link_out") {
                assert_eq!(f.entry.kind, EntryKind::Symlink, "{p}");
            }
        }
    }
    // `..` and absolute paths cannot even be named.
    assert!(parse_peer_path(b"../outside").is_err());
    assert!(parse_peer_path(b"/etc").is_err());
}

/// `src/a/x`, `src/b/y` and `src/c/z` are one file, `src/d` another with one name: with
/// `hard_links` every walk lists `b/y` and `c/z` as hard links naming `src/a/x` (size 0);
/// without it all are files.
#[test]
fn hard_links_are_listed_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("root/src");
    for d in ["a", "b", "c"] {
        fs::create_dir_all(src.join(d)).unwrap();
    }
    fs::write(src.join("a/x"), b"shared").unwrap();
    fs::write(src.join("d"), b"alone").unwrap();
    fs::hard_link(src.join("a/x"), src.join("b/y")).unwrap();
    fs::hard_link(src.join("a/x"), src.join("c/z")).unwrap();
    let kinds = |list: &[SourceFile]| -> Vec<(String, EntryKind, u64, String)> {
        list.iter()
            .filter(|s| s.entry.kind != EntryKind::Dir)
            .map(|s| {
                let e = &s.entry;
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                (text(&e.path), e.kind, e.size, text(&e.link_target))
            })
            .collect()
    };
    let file = |p: &str, size| (p.to_string(), EntryKind::File, size, String::new());
    let link = |p: &str| (p.to_string(), EntryKind::HardLink, 0, "src/a/x".to_string());
    let kept = [
        file("src/a/x", 6),
        link("src/b/y"),
        link("src/c/z"),
        file("src/d", 5),
    ];
    let apart = [
        file("src/a/x", 6),
        file("src/b/y", 6),
        file("src/c/z", 6),
        file("src/d", 5),
    ];
    let none = Default::default();
    let nop = &mut |_| {};
    let srcs = std::slice::from_ref(&src);
    assert_eq!(
        kinds(&walk_local_filtered(srcs, true, &none, true, nop).unwrap()),
        kept
    );
    assert_eq!(kinds(&walk_local(srcs, true, nop).unwrap()), apart);
    for root in each_resolver(&tmp.path().join("root")) {
        let p = parse_peer_path(b"src").unwrap();
        let served = walk_served_filtered(&root, &p, true, &none, true, nop).unwrap();
        assert_eq!(kinds(&served), kept, "{:?}", root.resolver());
        let plain = walk_served(&root, &p, true, nop).unwrap();
        assert_eq!(kinds(&plain), apart);
    }
    // The whole root: entry paths start with the root's name.
    let root = ServedRoot::open(&src).unwrap();
    let whole = walk_served_root_filtered(&root, true, &none, true, nop).unwrap();
    let link_targets: Vec<_> = whole
        .iter()
        .filter(|s| s.entry.kind == EntryKind::HardLink)
        .map(|s| s.entry.link_target.clone())
        .collect();
    assert_eq!(link_targets, [b"src/a/x".to_vec(), b"src/a/x".to_vec()]);
}
