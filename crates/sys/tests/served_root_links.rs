//! Symlinks made and read below a served root (what `cp` does with a symlink entry), on
//! real files with both resolvers: a link's target is stored and read as text, never
//! followed; a link cannot be made, read or re-timed through a parent that leaves the
//! root; renaming a new link over an old one or over a file replaces the name, not what
//! it pointed at, and a directory is never replaced.

use std::fs;
use std::io;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;

use longhaul_testkit::served::each_resolver;

/// `<tmp>/root` with `sub/`, a secret file beside the root, and `up` -> the parent (out).
fn setup() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(tmp.path().join("secret"), b"outside").unwrap();
    symlink(tmp.path(), root.join("up")).unwrap();
    tmp
}

#[test]
fn links_are_made_and_read_as_text_never_followed() {
    let tmp = setup();
    let secret = tmp.path().join("secret");
    let secret_mtime = fs::metadata(&secret).unwrap().mtime();
    for (n, r) in each_resolver(&tmp.path().join("root"))
        .into_iter()
        .enumerate()
    {
        let out = format!("sub/out{n}");
        let abs = format!("sub/abs{n}");
        let dangling = format!("sub/dangling{n}");
        r.create_symlink(b"../../secret", Path::new(&out)).unwrap();
        r.create_symlink(secret.as_os_str().as_encoded_bytes(), Path::new(&abs))
            .unwrap();
        r.create_symlink(b"nowhere/at/all", Path::new(&dangling))
            .unwrap();
        assert_eq!(r.read_link(Path::new(&out)).unwrap(), b"../../secret");
        assert_eq!(
            r.read_link(Path::new(&abs)).unwrap(),
            secret.as_os_str().as_encoded_bytes()
        );
        assert_eq!(
            r.read_link(Path::new(&dangling)).unwrap(),
            b"nowhere/at/all"
        );
        // Never replaces, not even a dangling link.
        let e = r
            .create_symlink(b"other", Path::new(&dangling))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        // The link's own time, not its target's.
        r.set_link_mtime(Path::new(&out), 1_000_000_000, 5).unwrap();
        let md = fs::symlink_metadata(tmp.path().join("root").join(&out)).unwrap();
        assert!(md.file_type().is_symlink());
        assert_eq!((md.mtime(), md.mtime_nsec()), (1_000_000_000, 5));
        r.set_link_mtime(Path::new(&dangling), 7, 0).unwrap();
        // A regular file or a directory is not a link.
        fs::write(tmp.path().join("root/sub/plain"), b"x").unwrap();
        assert!(r.read_link(Path::new("sub/plain")).is_err());
        assert!(r.read_link(Path::new("sub")).is_err());
        assert!(r.read_link(Path::new("")).is_err());
        // A NUL in a target is refused before any system call.
        assert!(r.create_symlink(b"a\0b", Path::new("sub/nul")).is_err());
    }
    assert_eq!(fs::read(&secret).unwrap(), b"outside");
    assert_eq!(fs::metadata(&secret).unwrap().mtime(), secret_mtime);
}

#[test]
fn no_link_is_made_read_or_timed_through_a_parent_out_of_the_root() {
    let tmp = setup();
    let secret = tmp.path().join("secret");
    let before = fs::symlink_metadata(&secret).unwrap();
    for r in each_resolver(&tmp.path().join("root")) {
        for bad in ["up/planted", "../planted", "/tmp/planted", "up/secret"] {
            assert!(
                r.create_symlink(b"x", Path::new(bad)).is_err(),
                "{bad} via {:?}",
                r.resolver()
            );
        }
        assert!(r.read_link(Path::new("up/secret")).is_err());
        assert!(r.set_link_mtime(Path::new("up/secret"), 1, 0).is_err());
        assert!(r.set_link_mtime(Path::new("../secret"), 1, 0).is_err());
    }
    assert!(!tmp.path().join("planted").exists());
    let after = fs::symlink_metadata(&secret).unwrap();
    assert_eq!(
        (after.mtime(), after.mtime_nsec()),
        (before.mtime(), before.mtime_nsec())
    );
    assert_eq!(fs::read(&secret).unwrap(), b"outside");
}

#[test]
fn a_new_link_renamed_over_replaces_links_and_files_but_not_directories() {
    let tmp = setup();
    let root = tmp.path().join("root");
    for (n, r) in each_resolver(&tmp.path().join("root"))
        .into_iter()
        .enumerate()
    {
        // Over a link that points out: the old link goes, its target stays.
        let old = format!("sub/old{n}");
        symlink(tmp.path().join("secret"), root.join(&old)).unwrap();
        let tmp_link = format!("sub/.old{n}.longhaul-link");
        r.create_symlink(b"new-target", Path::new(&tmp_link))
            .unwrap();
        r.rename(Path::new(&tmp_link), Path::new(&old), true)
            .unwrap();
        assert_eq!(
            fs::read_link(root.join(&old)).unwrap(),
            Path::new("new-target")
        );
        // Over a regular file.
        let file = format!("sub/file{n}");
        fs::write(root.join(&file), b"data").unwrap();
        r.create_symlink(b"t", Path::new(&tmp_link)).unwrap();
        r.rename(Path::new(&tmp_link), Path::new(&file), true)
            .unwrap();
        assert!(fs::symlink_metadata(root.join(&file))
            .unwrap()
            .file_type()
            .is_symlink());
        // Not over a directory (even an empty one).
        let dir = format!("sub/dir{n}");
        fs::create_dir(root.join(&dir)).unwrap();
        r.create_symlink(b"t", Path::new(&tmp_link)).unwrap();
        assert!(r
            .rename(Path::new(&tmp_link), Path::new(&dir), true)
            .is_err());
        assert!(root.join(&dir).is_dir());
        r.remove_file(Path::new(&tmp_link)).unwrap();
    }
    assert_eq!(fs::read(tmp.path().join("secret")).unwrap(), b"outside");
}

/// `hard_link` makes another name of a regular file below the root (both resolvers); it
/// never follows a symlink (a link to a file is refused, not linked through), never goes
/// through a parent that leaves the root, refuses a directory, and never replaces.
#[test]
fn hard_links_are_made_only_to_regular_files_beneath_the_root() {
    let tmp = setup();
    let root = tmp.path().join("root");
    fs::write(root.join("sub/f"), b"data").unwrap();
    symlink("f", root.join("sub/to_f")).unwrap();
    let roots = each_resolver(&tmp.path().join("root"));
    let names = 1 + roots.len() as u64;
    for (n, r) in roots.into_iter().enumerate() {
        let name = format!("sub/g{n}");
        r.hard_link(Path::new("sub/f"), Path::new(&name)).unwrap();
        let (a, b) = (
            fs::metadata(root.join("sub/f")).unwrap(),
            fs::symlink_metadata(root.join(&name)).unwrap(),
        );
        assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()));
        let e = r
            .hard_link(Path::new("sub/f"), Path::new(&name))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        let refused = |target: &str| {
            let made = format!("sub/no{n}");
            let e = r
                .hard_link(Path::new(target), Path::new(&made))
                .unwrap_err();
            assert!(!root.join(&made).exists(), "{target}: linked anyway");
            e
        };
        assert_eq!(refused("sub/to_f").kind(), io::ErrorKind::InvalidInput);
        assert_eq!(refused("sub").kind(), io::ErrorKind::InvalidInput);
        refused("up/secret");
        refused("missing");
    }
    assert_eq!(fs::metadata(root.join("sub/f")).unwrap().nlink(), names);
}
