//! `longhaul sync -H` end to end: a real `longhaul serve --root` and `longhaul sync`
//! processes on loopback, push and pull. In the source `a/x`, `b/y` and `c/z` are three
//! names of one file (and `d/w` a file of its own): a dry run makes nothing; with `-H` the
//! destination's three names share one inode with the right bytes, the data crossing
//! once; a second run (with `--delete`) sends nothing and keeps them; a name replaced by a
//! file of its own is linked again; without `-H` each name arrives as its own file.

#[macro_use]
mod support;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use support::*;

const NAMES: [&str; 3] = ["a/x", "b/y", "c/z"];

#[derive(Clone, Copy, Debug)]
enum Dir {
    Push,
    Pull,
}

fn sync(home: &Path, args: &[&dyn AsRef<std::ffi::OsStr>]) -> CpRun {
    let mut c = longhaul(home);
    c.args(["sync", "--json", "--chunk", "1MiB"]);
    for a in args {
        c.arg(a);
    }
    run(&mut c, CP_LIMIT)
}

/// The inodes of the three names at `dst`, after checking their bytes are `data`.
fn inodes(dst: &Path, data: &[u8]) -> Vec<u64> {
    NAMES
        .iter()
        .map(|n| {
            let p = dst.join(n);
            assert!(
                fs::read(&p).unwrap() == data,
                "{} has other bytes",
                p.display()
            );
            fs::symlink_metadata(&p).unwrap().ino()
        })
        .collect()
}

fn hard_links(dir: Dir) {
    let name = format!("sync-hardlinks-{dir:?}");
    let mut rng = Rng::from_env(&name);
    let s = Scratch::new(&name);
    let home = s.dir("home");
    let root = s.dir("root");
    let local = s.dir("local");
    let server = Server::start(&home, &root);
    let (src, dst, plain) = match dir {
        Dir::Push => (local.join("data"), root.join("mirror"), root.join("plain")),
        Dir::Pull => (root.join("data"), local.join("mirror"), local.join("plain")),
    };
    // Three chunks and a bit: the data is worth counting.
    let data = write_random(&src.join("a/x"), &mut rng, (3 * MIB + 100) as usize);
    let other = write_random(&src.join("d/w"), &mut rng, 5000);
    for n in &NAMES[1..] {
        fs::create_dir_all(src.join(n).parent().unwrap()).unwrap();
        fs::hard_link(src.join("a/x"), src.join(n)).unwrap();
    }
    let go = |flags: &[&str], to: &Path, remote: &str| {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = Vec::new();
        for f in flags {
            args.push(f);
        }
        let from = src.join("");
        let far_src = server.remote("data/");
        let far_dst = server.remote(remote);
        match dir {
            Dir::Push => {
                args.push(&from);
                args.push(&far_dst);
                sync(&home, &args)
            }
            Dir::Pull => {
                args.push(&far_src);
                args.push(&to);
                sync(&home, &args)
            }
        }
    };

    let dry = go(&["-n", "-H"], &dst, "mirror");
    dry.assert_ok();
    for n in NAMES {
        assert!(
            !dst.join(n).exists(),
            "the dry run made {n}\n{}",
            dry.describe()
        );
    }

    let first = go(&["-H"], &dst, "mirror");
    first.assert_ok();
    let ino = inodes(&dst, &data);
    assert!(
        ino.iter().all(|&i| i == ino[0]),
        "the three names are not one file: {ino:?}\n{}",
        first.describe()
    );
    assert_eq!(fs::metadata(dst.join("a/x")).unwrap().nlink(), 3);
    assert_eq!(fs::read(dst.join("d/w")).unwrap(), other);
    let sent = first.end_u64("sent_bytes");
    assert!(
        sent < 2 * data.len() as u64,
        "{sent} bytes crossed: the linked data went more than once\n{}",
        first.describe()
    );
    // No work name is left behind.
    for n in ["b/.y.longhaul-link", "c/.z.longhaul-link"] {
        assert!(!dst.join(n).exists(), "{n} left behind");
    }

    let again = go(&["-H", "--delete"], &dst, "mirror");
    again.assert_ok();
    assert_eq!(again.end_u64("sent_bytes"), 0, "{}", again.describe());
    assert_eq!(inodes(&dst, &data), ino, "{}", again.describe());

    // A name that became a file of its own is made a link again.
    fs::remove_file(dst.join("c/z")).unwrap();
    fs::write(dst.join("c/z"), b"stale").unwrap();
    let fix = go(&["-H"], &dst, "mirror");
    fix.assert_ok();
    assert_eq!(inodes(&dst, &data), ino, "{}", fix.describe());

    // Without -H: three files.
    let apart = go(&[], &plain, "plain");
    apart.assert_ok();
    let mut separate = inodes(&plain, &data);
    separate.dedup();
    assert_eq!(separate.len(), 3, "{}", apart.describe());
    drop(server);
}

#[test]
fn a_push_with_hard_links_keeps_them() {
    hard_links(Dir::Push);
}

#[test]
fn a_pull_with_hard_links_keeps_them() {
    hard_links(Dir::Pull);
}
