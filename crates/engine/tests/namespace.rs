//! Namespace operations against a real server in this process over loopback TLS, as the
//! gfal2 plugin asks them: stat, a listing longer than one frame, mkdir with and without
//! parents, unlink, rmdir, both checksums; and the refusals a storage client maps to
//! errnos: a missing path, a non-empty directory, paths out of the root, a symlink that
//! leads out of it.

mod support;

use longhaul_engine::cp::remote_fs::RemoteFs;
use longhaul_proto::namespace::{ChecksumKind, FsErrorKind, FsKind};
use longhaul_transfer::adler32::Adler32;
use support::{token, TestServer};

fn fill(root: &std::path::Path) {
    std::fs::create_dir_all(root.join("dir/many")).unwrap();
    std::fs::write(root.join("dir/file"), vec![7u8; 1_000_003]).unwrap();
    for i in 0..450 {
        std::fs::write(root.join(format!("dir/many/f{i:03}")), i.to_string()).unwrap();
    }
    std::os::unix::fs::symlink("/etc/passwd", root.join("dir/out")).unwrap();
}

fn fs(s: &TestServer) -> RemoteFs {
    RemoteFs {
        target: s.addr.to_string(),
        token: token(),
        security: s.security(),
    }
}

#[test]
fn stat_and_listing() {
    let s = TestServer::start(fill);
    let fs = fs(&s);
    let st = fs.stat(b"dir/file").unwrap();
    assert_eq!((st.kind, st.size), (FsKind::File, 1_000_003));
    assert_eq!(fs.stat(b"dir").unwrap().kind, FsKind::Dir);
    assert_eq!(fs.stat(b"").unwrap().kind, FsKind::Dir, "the root");
    assert_eq!(fs.stat(b"dir/out").unwrap().kind, FsKind::Symlink);
    assert_eq!(fs.stat(b"nope").unwrap_err().kind, FsErrorKind::NotFound);
    let mut names: Vec<String> = fs
        .list(b"dir/many")
        .unwrap()
        .into_iter()
        .map(|e| String::from_utf8(e.name).unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 450, "three frames' worth");
    assert_eq!(names[0], "f000");
    assert_eq!(names[449], "f449");
    assert_eq!(
        fs.list(b"dir/file").unwrap_err().kind,
        FsErrorKind::NotADirectory
    );
}

#[test]
fn make_and_remove() {
    let s = TestServer::start(fill);
    let fs = fs(&s);
    let root = s.root_path();
    fs.mkdir(b"new", 0o750, false).unwrap();
    assert!(root.join("new").is_dir());
    assert_eq!(
        fs.mkdir(b"new", 0o750, false).unwrap_err().kind,
        FsErrorKind::Exists
    );
    assert_eq!(
        fs.mkdir(b"a/b/c", 0o755, false).unwrap_err().kind,
        FsErrorKind::NotFound
    );
    fs.mkdir(b"a/b/c", 0o755, true).unwrap();
    fs.mkdir(b"a/b/c", 0o755, true).unwrap();
    assert!(root.join("a/b/c").is_dir());
    assert_eq!(fs.rmdir(b"a").unwrap_err().kind, FsErrorKind::NotEmpty);
    fs.rmdir(b"a/b/c").unwrap();
    assert!(!root.join("a/b/c").exists());
    assert_eq!(
        fs.unlink(b"dir").unwrap_err().kind,
        FsErrorKind::IsADirectory
    );
    fs.unlink(b"dir/file").unwrap();
    assert!(!root.join("dir/file").exists());
    // The link goes, its target stays.
    fs.unlink(b"dir/out").unwrap();
    assert!(std::path::Path::new("/etc/passwd").exists());
    assert_eq!(
        fs.unlink(b"dir/file").unwrap_err().kind,
        FsErrorKind::NotFound
    );
}

#[test]
fn checksums_are_the_files() {
    let s = TestServer::start(fill);
    let fs = fs(&s);
    let bytes = std::fs::read(s.root_path().join("dir/file")).unwrap();
    assert_eq!(
        fs.checksum(b"dir/file", ChecksumKind::Blake3).unwrap(),
        blake3::hash(&bytes).as_bytes().to_vec()
    );
    let mut a = Adler32::default();
    a.update(&bytes);
    assert_eq!(
        fs.checksum(b"dir/file", ChecksumKind::Adler32).unwrap(),
        a.value().to_be_bytes().to_vec()
    );
    let e = fs.checksum(b"dir", ChecksumKind::Adler32).unwrap_err();
    assert_eq!(e.kind, FsErrorKind::IsADirectory, "{e}");
}

#[test]
fn nothing_outside_the_root() {
    let s = TestServer::start(fill);
    let fs = fs(&s);
    for path in [&b"../x"[..], b"/etc/passwd", b"dir/../../x"] {
        let e = fs.stat(path).unwrap_err();
        assert_eq!(
            e.kind,
            FsErrorKind::Denied,
            "{}: {e}",
            String::from_utf8_lossy(path)
        );
        let e = fs.mkdir(path, 0o755, true).unwrap_err();
        assert_eq!(e.kind, FsErrorKind::Denied, "{e}");
    }
    // Through the symlink to /etc/passwd: refused, never read.
    let e = fs.checksum(b"dir/out", ChecksumKind::Adler32).unwrap_err();
    assert_eq!(e.kind, FsErrorKind::Denied, "{e}");
    let e = fs.list(b"dir/out").unwrap_err();
    assert_ne!(e.kind, FsErrorKind::Other, "{e}");
    let e = fs.rmdir(b"").unwrap_err();
    assert_eq!(e.kind, FsErrorKind::Denied, "{e}");
    // The server's own place for the root is not told.
    let root = s.root_path().display().to_string();
    for e in [
        fs.stat(b"a/b").unwrap_err(),
        fs.mkdir(b"q/r", 0o755, false).unwrap_err(),
        fs.checksum(b"dir/out", ChecksumKind::Blake3).unwrap_err(),
    ] {
        assert!(!e.message.contains(&root), "{e}");
    }
}
