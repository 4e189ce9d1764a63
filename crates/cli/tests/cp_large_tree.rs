//! Item 9: a pull of a large tree (200,000 entries of 0-1 bytes, on tmpfs) from
//! `longhaul serve` finishes and is bit-identical. Before, the receiving end kept every
//! one-chunk file's data open until its commit and small files arrive faster than they
//! commit: the pull died with "Too many open files" after ~20,000 (the descriptor limit
//! here); the server also walks the whole tree before it answers, and now tells the
//! client it is still at work while it does.

mod support;

use std::fs;
use std::time::{Duration, Instant};

use support::{cp_command, run, Rng, Scratch, Server};

const DIRS: usize = 200;
const FILES_PER_DIR: usize = 1000;

#[test]
fn a_200000_entry_tree_is_pulled_whole() {
    let mut rng = Rng::from_env("cp_large_tree");
    let home = Scratch::new("tree-home");
    let root = Scratch::in_memory("tree-root");
    let dest = Scratch::in_memory("tree-dest");
    let t0 = Instant::now();
    for d in 0..DIRS {
        let dir = root.dir(format!("t/d{d:03}"));
        for f in 0..FILES_PER_DIR {
            // Every other file empty, the others one byte.
            let body: &[u8] = if f % 2 == 1 { &[(f % 251) as u8] } else { &[] };
            fs::write(dir.join(format!("f{f:04}")), body).unwrap();
        }
    }
    eprintln!(
        "made {} files in {:.1} s",
        DIRS * FILES_PER_DIR,
        t0.elapsed().as_secs_f64()
    );
    let server = Server::start(&home.0, &root.0);
    let t1 = Instant::now();
    let pull = run(
        cp_command(&home.0)
            .args(["-r", "--no-progress", "--json"])
            .arg(server.remote("t"))
            .arg(&dest.0),
        Duration::from_secs(120),
    );
    eprintln!("pulled in {:.1} s", t1.elapsed().as_secs_f64());
    pull.assert_ok();
    assert_eq!(pull.end_u64("files"), (DIRS * FILES_PER_DIR) as u64);

    // Counts, then a sample of contents.
    let mut files = 0;
    for d in fs::read_dir(dest.join("t")).unwrap() {
        files += fs::read_dir(d.unwrap().path()).unwrap().count();
    }
    assert_eq!(
        files,
        DIRS * FILES_PER_DIR,
        "every file is there, nothing else"
    );
    for _ in 0..500 {
        let (d, f) = (
            rng.range(0, DIRS as u64 - 1) as usize,
            rng.range(0, FILES_PER_DIR as u64 - 1) as usize,
        );
        let rel = format!("t/d{d:03}/f{f:04}");
        assert_eq!(
            fs::read(dest.join(&rel)).unwrap(),
            fs::read(root.join(&rel)).unwrap(),
            "{rel}"
        );
    }
}
