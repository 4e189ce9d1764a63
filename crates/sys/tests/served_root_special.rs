//! Special files and symlinks where longhaul opens files (issue 17 items 7 and 10), with
//! real FIFOs: an open for reading never blocks and names what it found, and the
//! receiver's writes never go through a symlink in the last component. A hang fails the
//! test (each open runs on a thread with a deadline) instead of blocking CI.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, Resolver, ServedRoot};

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success(), "mkfifo {}", p.display());
}

/// Runs `open` on a thread; panics if it has not returned within 10 s (after opening
/// `fifo` for writing, which releases a reader blocked on it).
fn within_deadline(
    fifo: PathBuf,
    open: impl FnOnce() -> std::io::Result<fs::File> + Send + 'static,
) -> std::io::Error {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(open().map(drop));
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => panic!("a FIFO was opened as a file"),
        Ok(Err(e)) => e,
        Err(_) => {
            // Unblock the reader so the test process can end.
            let _ = fs::OpenOptions::new().write(true).open(&fifo);
            panic!("opening {} blocked for 10 s", fifo.display());
        }
    }
}

#[test]
fn a_fifo_below_the_root_is_refused_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    mkfifo(&tmp.path().join("pipe"));
    for resolver in [
        Resolver::NoSymlinks,
        Resolver::Openat2,
        Resolver::Unconfined,
    ] {
        for access in [Access::Read, Access::ReadOwn] {
            let dir = tmp.path().to_path_buf();
            let e = within_deadline(tmp.path().join("pipe"), move || {
                ServedRoot::open_with(&dir, resolver)?.open_file(Path::new("pipe"), access)
            });
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().contains("pipe"), "{e}");
            assert!(
                e.to_string().contains("is a FIFO, not a regular file"),
                "{e}"
            );
        }
    }
}

#[test]
fn a_local_fifo_source_is_refused_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let pipe = tmp.path().join("pipe");
    mkfifo(&pipe);
    let p = pipe.clone();
    let e = within_deadline(pipe, move || file_io::open_regular(&p));
    assert!(
        e.to_string().contains("is a FIFO, not a regular file"),
        "{e}"
    );
    // A regular file opens, and reads like one.
    fs::write(tmp.path().join("f"), b"bytes").unwrap();
    let mut f = file_io::open_regular(&tmp.path().join("f")).unwrap();
    let mut s = String::new();
    std::io::Read::read_to_string(&mut f, &mut s).unwrap();
    assert_eq!(s, "bytes");
}

#[test]
fn writes_and_own_reads_never_follow_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("victim"), b"keep").unwrap();
    symlink("victim", tmp.path().join(".f.longhaul-part")).unwrap();
    let part = Path::new(".f.longhaul-part");
    for resolver in [
        Resolver::NoSymlinks,
        Resolver::Openat2,
        Resolver::Unconfined,
    ] {
        let root = ServedRoot::open_with(tmp.path(), resolver).unwrap();
        for access in [
            Access::ReadOwn,
            Access::ReadWriteCreate { mode: 0o600 },
            Access::CreateNew { mode: 0o600 },
        ] {
            assert!(
                root.open_file(part, access).is_err(),
                "{resolver:?} {access:?} followed the symlink"
            );
        }
        assert_eq!(fs::read(tmp.path().join("victim")).unwrap(), b"keep");
    }
}
