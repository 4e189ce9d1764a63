//! Set-user-ID and set-group-ID bits across `longhaul cp`, with a real `longhaul serve`
//! process and real files: a 4755 copy of `true` pushed (or pulled) arrives 0755, so a
//! token holder cannot place a setuid program on a server running as root (nor a server
//! on a client pulling as root); `serve --keep-setuid` keeps the bits of pushes and
//! `cp --keep-setuid` those of a pull. As root the arrived file is owned by root, which
//! is the case that matters; as another user the bits are checked all the same.

#[macro_use]
mod support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use support::*;

/// The permission bits of `p` (with the special bits).
fn mode_of(p: &Path) -> u32 {
    fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .mode()
        & 0o7777
}

/// A 4755 copy of `true` (any executable would do; this one is harmless) and a 2755
/// directory holding a 2755 copy, under `src`.
fn setuid_sources(src: &Path) -> Vec<u8> {
    let bytes = fs::read("/usr/bin/true")
        .or_else(|_| fs::read("/bin/true"))
        .expect("an executable `true` in /usr/bin or /bin");
    write_file(&src.join("tool"), &bytes, 0o4755);
    write_file(&src.join("tree/tool"), &bytes, 0o2755);
    fs::set_permissions(src.join("tree"), fs::Permissions::from_mode(0o2755)).unwrap();
    assert_eq!(mode_of(&src.join("tool")), 0o4755, "the source is setuid");
    bytes
}

/// `longhaul serve` on loopback serving `root`, with `extra` arguments.
fn server(home: &Path, root: &Path, extra: &[&str]) -> Server {
    let root = root.to_str().expect("scratch paths are UTF-8");
    let mut args = vec!["--listen", "127.0.0.1", "--port", "0", "--root", root];
    args.extend_from_slice(extra);
    Server::start_args(&[], home, &args)
}

#[test]
fn a_pushed_setuid_file_arrives_without_the_bit_unless_the_server_keeps_it() {
    let s = Scratch::new("setuid-push");
    let home = s.dir("home");
    let src = s.dir("src");
    let bytes = setuid_sources(&src);

    let plain_root = s.dir("plain");
    let plain = server(&home, &plain_root, &[]);
    cp!(&home; src.join("tool"), plain.remote("")).assert_ok();
    assert_eq!(fs::read(plain_root.join("tool")).unwrap(), bytes);
    assert_eq!(mode_of(&plain_root.join("tool")), 0o755, "setuid dropped");
    cp!(&home; "-r", src.join("tree"), plain.remote("")).assert_ok();
    assert_eq!(
        mode_of(&plain_root.join("tree")),
        0o755,
        "setgid dir dropped"
    );
    assert_eq!(
        mode_of(&plain_root.join("tree/tool")),
        0o755,
        "setgid dropped"
    );
    // --keep-setuid on the client of a push changes nothing, and says so.
    let r = cp!(&home; "--keep-setuid", src.join("tool"), plain.remote("again"));
    r.assert_ok();
    assert!(r.stderr.contains("pulls only"), "{}", r.describe());
    assert_eq!(mode_of(&plain_root.join("again")), 0o755);

    let kept_root = s.dir("kept");
    let kept = server(&home, &kept_root, &["--keep-setuid"]);
    cp!(&home; src.join("tool"), kept.remote("")).assert_ok();
    assert_eq!(mode_of(&kept_root.join("tool")), 0o4755, "setuid kept");
    cp!(&home; "-r", src.join("tree"), kept.remote("")).assert_ok();
    assert_eq!(mode_of(&kept_root.join("tree")), 0o2755);
    assert_eq!(mode_of(&kept_root.join("tree/tool")), 0o2755);
    if is_root() {
        assert_eq!(fs::metadata(kept_root.join("tool")).unwrap().uid(), 0);
    }
}

#[test]
fn a_pulled_setuid_file_arrives_without_the_bit_unless_the_client_keeps_it() {
    let s = Scratch::new("setuid-pull");
    let home = s.dir("home");
    let root = s.dir("root");
    setuid_sources(&root);
    // Even a server that keeps the bits of pushes does not decide for a pulling client.
    let srv = server(&home, &root, &["--keep-setuid"]);

    let plain = s.dir("plain");
    cp!(&home; srv.remote("tool"), &plain).assert_ok();
    assert_eq!(mode_of(&plain.join("tool")), 0o755, "setuid dropped");
    cp!(&home; "-r", srv.remote("tree"), &plain).assert_ok();
    assert_eq!(mode_of(&plain.join("tree")), 0o755);
    assert_eq!(mode_of(&plain.join("tree/tool")), 0o755);

    let kept = s.dir("kept");
    cp!(&home; "--keep-setuid", srv.remote("tool"), &kept).assert_ok();
    assert_eq!(mode_of(&kept.join("tool")), 0o4755, "setuid kept");
    cp!(&home; "-r", "--keep-setuid", srv.remote("tree"), &kept).assert_ok();
    assert_eq!(mode_of(&kept.join("tree")), 0o2755);
    assert_eq!(mode_of(&kept.join("tree/tool")), 0o2755);
}
