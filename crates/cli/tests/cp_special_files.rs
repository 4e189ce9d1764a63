//! FIFOs (and other special files) where `longhaul cp` writes, with a real `longhaul
//! serve` process: opening a FIFO for reading blocks until a writer comes, so a FIFO at
//! the destination of a push or a pull hung the session forever (issue 17 item 7). Every
//! run here has a short time limit: a hang fails the test instead of blocking CI.

#[macro_use]
mod support;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::*;

/// Far more than a refused copy of a few bytes needs on a loaded 2-core host; far less
/// than the hang it guards against.
const LIMIT: Duration = Duration::from_secs(20);

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().expect("mkfifo runs");
    assert!(st.success(), "mkfifo {}", p.display());
}

fn cp_limited(home: &Path, args: &[&std::ffi::OsStr]) -> CpRun {
    let mut c = cp_command(home);
    c.args(args);
    run(&mut c, LIMIT)
}

fn is_fifo(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_fifo())
}

#[test]
fn a_push_onto_a_fifo_is_refused_at_once() {
    let s = Scratch::new("fifo-push");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.join("f");
    write_file(&src, b"a few bytes", 0o644);
    mkfifo(&root.join("pipe"));
    mkfifo(&root.join("f"));
    let server = Server::start(&home, &root);

    // The destination named is a FIFO.
    let r = cp_limited(&home, &[src.as_os_str(), server.remote("pipe").as_ref()]);
    r.assert_failed();
    assert!(r.stderr.contains("is a FIFO"), "{}", r.describe());
    assert!(is_fifo(&root.join("pipe")), "the FIFO is left alone");

    // The destination is a directory holding a FIFO of the file's name.
    let r = cp_limited(&home, &[src.as_os_str(), server.remote("").as_ref()]);
    r.assert_failed();
    assert!(r.stderr.contains("f is a FIFO"), "{}", r.describe());
    assert!(is_fifo(&root.join("f")), "the FIFO is left alone");
}

#[test]
fn a_pull_onto_a_fifo_is_refused_at_once() {
    let s = Scratch::new("fifo-pull");
    let home = s.dir("home");
    let root = s.dir("root");
    let local = s.dir("local");
    write_file(&root.join("f"), b"a few bytes", 0o644);
    mkfifo(&local.join("pipe"));
    mkfifo(&local.join("f"));
    let server = Server::start(&home, &root);

    let pipe = local.join("pipe");
    let r = cp_limited(&home, &[server.remote("f").as_ref(), pipe.as_os_str()]);
    r.assert_failed();
    assert!(r.stderr.contains("is a FIFO"), "{}", r.describe());
    assert!(is_fifo(&pipe));

    let r = cp_limited(&home, &[server.remote("f").as_ref(), local.as_os_str()]);
    r.assert_failed();
    assert!(r.stderr.contains("f is a FIFO"), "{}", r.describe());
    assert!(is_fifo(&local.join("f")));
}
