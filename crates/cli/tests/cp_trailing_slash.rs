//! A trailing `/` on a `longhaul cp` path, as cp, scp and rsync read it: `dir/` names a
//! directory to copy into (or, as a pull's source, from), and one that is missing or a
//! file is refused with cp's "Not a directory" and nothing written. A real
//! `longhaul serve --root` process and `longhaul cp` processes on loopback, both ways.

#[macro_use]
mod support;

use std::fs;
use std::path::Path;

use support::*;

fn read(p: &Path) -> Vec<u8> {
    fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Panics unless `run` stopped with exit 2 and cp's "Not a directory" naming `name`.
fn not_a_directory(run: &CpRun, name: &str) {
    run.assert_code(2);
    assert!(
        run.stderr.contains("Not a directory") && run.stderr.contains(&format!("{name}/")),
        "{}",
        run.describe()
    );
}

#[test]
fn a_push_to_dir_slash_goes_into_the_directory_or_is_refused() {
    let mut rng = Rng::from_env("slash-push");
    let s = Scratch::new("slash-push");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.dir("src");
    let f = write_random(&src.join("f.txt"), &mut rng, 5000);
    write_random(&src.join("tree/a"), &mut rng, 10);
    fs::create_dir_all(root.join("dir/sub")).unwrap();
    write_file(&root.join("plain"), b"keep me", 0o644);
    let server = Server::start(&home, &root);

    cp!(&home; src.join("f.txt"), server.remote("dir/")).assert_ok();
    assert_eq!(read(&root.join("dir/f.txt")), f);
    cp!(&home; src.join("f.txt"), server.remote("./dir//sub/.")).assert_ok();
    assert_eq!(read(&root.join("dir/sub/f.txt")), f);
    cp!(&home; "-r", src.join("tree"), server.remote("dir/")).assert_ok();
    assert_eq!(read(&root.join("dir/tree/a")).len(), 10);
    // The root itself, spelled with a slash.
    cp!(&home; src.join("f.txt"), server.remote("./")).assert_ok();
    assert_eq!(read(&root.join("f.txt")), f);

    // Missing, or a file: refused, nothing created or replaced.
    let r = cp!(&home; src.join("f.txt"), server.remote("nodir/"));
    not_a_directory(&r, "nodir");
    assert!(!root.join("nodir").exists(), "{}", r.describe());
    let r = cp!(&home; src.join("f.txt"), server.remote("plain/"));
    not_a_directory(&r, "plain");
    assert_eq!(read(&root.join("plain")), b"keep me");
    let r = cp!(&home; "-r", src.join("tree"), server.remote("dir/nodir/"));
    not_a_directory(&r, "dir/nodir");
    assert!(!root.join("dir/nodir").exists(), "{}", r.describe());
}

#[test]
fn a_pull_into_dir_slash_goes_into_the_directory_or_is_refused() {
    let mut rng = Rng::from_env("slash-pull");
    let s = Scratch::new("slash-pull");
    let home = s.dir("home");
    let root = s.dir("root");
    let f = write_random(&root.join("f.txt"), &mut rng, 5000);
    write_random(&root.join("tree/a"), &mut rng, 10);
    let server = Server::start(&home, &root);
    let local = s.dir("local");

    let mut into = local.clone().into_os_string();
    into.push("/");
    cp!(&home; server.remote("f.txt"), &into).assert_ok();
    assert_eq!(read(&local.join("f.txt")), f);

    // A local destination that is missing or a file.
    let mut missing = s.join("nodir").into_os_string();
    missing.push("/");
    let r = cp!(&home; server.remote("f.txt"), &missing);
    not_a_directory(&r, "nodir");
    assert!(!s.join("nodir").exists(), "{}", r.describe());
    write_file(&s.join("plain"), b"keep me", 0o644);
    let mut file = s.join("plain").into_os_string();
    file.push("/.");
    let r = cp!(&home; server.remote("f.txt"), &file);
    not_a_directory(&r, "plain");
    assert_eq!(read(&s.join("plain")), b"keep me");

    // A source written `tree/` is the directory itself (cp's reading, not rsync's).
    cp!(&home; "-r", server.remote("tree/"), &local).assert_ok();
    assert_eq!(read(&local.join("tree/a")).len(), 10);
    // ...and must be one.
    let r = cp!(&home; server.remote("f.txt/"), &local);
    not_a_directory(&r, "f.txt");
    // A missing one is reported as missing, as any source.
    let r = cp!(&home; server.remote("nothing/"), &local);
    r.assert_code(2);
    assert!(r.stderr.contains("nothing"), "{}", r.describe());
    assert!(!r.stderr.contains("Not a directory"), "{}", r.describe());
}
