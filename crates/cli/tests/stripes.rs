//! `longhaul cp longhaul://A1,A2/x longhaul://B1,B2/y`: one copy striped over two pairs of
//! real `longhaul serve` processes on loopback, the two at each end serving the same
//! directory (as data-transfer nodes share a file system). A file and a tree arrive
//! bit-identical, each pair moved part of them, no work file is left, and a rerun sends
//! nothing; a destination host killed mid-copy leaves its share to the other pair in the
//! same command, and a copy whose destinations both died is finished by the rerun, which
//! resumes what each share verified; what a striped copy cannot do is refused in words.

#[macro_use]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

/// `longhaul://ADDR1,ADDR2/path`.
fn striped(servers: &[&Server], path: &str) -> String {
    let hosts: Vec<&str> = servers.iter().map(|s| s.addr.as_str()).collect();
    format!("longhaul://{}/{path}", hosts.join(","))
}

/// A paced striped copy of 48 MiB from `src` to `dst` (about 6 s for each pair's share),
/// returned running about half way.
fn half_way(home: &Path, src: String, dst: String) -> Running {
    let mut c = cp_command(home);
    c.args(["--json", "--rate", "32M", "--chunk", "1MiB"])
        .arg(src)
        .arg(dst);
    let mut copy = spawn_piped(&mut c);
    let halfway = Instant::now() + Duration::from_secs(3);
    while Instant::now() < halfway && !copy.has_exited() {
        std::thread::sleep(Duration::from_millis(50));
    }
    copy
}

/// Two sources on `a`, two destinations on `b`, one HOME (one token).
fn four(s: &Scratch) -> [Server; 4] {
    let home = s.dir("home");
    let (a, b) = (s.dir("a"), s.dir("b"));
    [
        Server::start(&home, &a),
        Server::start(&home, &a),
        Server::start(&home, &b),
        Server::start(&home, &b),
    ]
}

#[test]
fn a_file_and_a_tree_striped_over_two_pairs() {
    let s = Scratch::new("striped-copy");
    let home = s.dir("home");
    let [a1, a2, b1, b2] = four(&s);
    let mut rng = Rng::from_env("stripes");
    let big = write_random(&s.join("a/big.bin"), &mut rng, 9 << 20);
    for i in 0..30 {
        write_random(
            &s.join(format!("a/tree/d{}/f{i}", i % 3)),
            &mut rng,
            700 * i + 1,
        );
    }
    write_random(&s.join("a/tree/mid.bin"), &mut rng, (3 << 20) + 5);
    std::fs::write(s.join("a/tree/empty"), b"").unwrap();

    let run = cp!(&home; "--json", "--chunk", "1MiB",
        striped(&[&a1, &a2], "big.bin"), striped(&[&b1, &b2], "copy.bin"));
    run.assert_ok();
    assert_eq!(std::fs::read(s.join("b/copy.bin")).unwrap(), big);
    let end = run.json_of("end");
    assert_eq!(end["direction"], "striped", "{end}");
    assert_eq!(end["sent_bytes"], 9 << 20, "each chunk once: {end}");
    let pairs = end["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 2, "{end}");
    for p in pairs {
        assert!(
            p["sent_bytes"].as_u64().unwrap() >= 4 << 20,
            "each pair its share: {end}"
        );
    }
    let left = work_files(&s.join("b"));
    assert!(left.is_empty(), "{left:?}");

    let run = cp!(&home; "--json", "-r", "--chunk", "1MiB",
        striped(&[&a1, &a2], "tree"), striped(&[&b1, &b2], ""));
    run.assert_ok();
    let mut names = vec!["tree/mid.bin".to_string(), "tree/empty".to_string()];
    names.extend((0..30).map(|i| format!("tree/d{}/f{i}", i % 3)));
    for rel in &names {
        assert_eq!(
            std::fs::read(s.join("b").join(rel)).unwrap(),
            std::fs::read(s.join("a").join(rel)).unwrap(),
            "{rel}"
        );
    }
    let end = run.json_of("end");
    assert_eq!(end["files"], 32, "each file put in place once: {end}");
    let left = work_files(&s.join("b"));
    assert!(left.is_empty(), "{left:?}");
    // Each destination wrote some of the small files whole, and left the others to its peer.
    assert!(b1.log().contains("pulled from") && b2.log().contains("pulled from"));

    let again = cp!(&home; "--json", "-r", "--chunk", "1MiB",
        striped(&[&a1, &a2], "tree"), striped(&[&b1, &b2], ""));
    again.assert_ok();
    assert_eq!(again.end_u64("sent_bytes"), 0, "{}", again.describe());

    // Into a new name: every pair makes the tree that name (the pair that comes second
    // must not find the first's directory and put the tree inside it).
    let run = cp!(&home; "-r", "--chunk", "1MiB",
        striped(&[&a1, &a2], "tree"), striped(&[&b1, &b2], "renamed"));
    run.assert_ok();
    for rel in &names {
        let renamed = rel.replacen("tree/", "renamed/", 1);
        assert!(
            s.join("b").join(&renamed).is_file(),
            "{renamed}: {}",
            run.describe()
        );
    }
    assert!(!s.join("b/renamed/tree").exists(), "{}", run.describe());
}

#[test]
fn a_destination_killed_mid_copy_leaves_its_share_to_the_other_pair() {
    let s = Scratch::new("striped-takeover");
    let home = s.dir("home");
    let [a1, a2, b1, mut b2] = four(&s);
    let mut rng = Rng::from_env("stripes_takeover");
    let data = write_random(&s.join("a/big.bin"), &mut rng, 48 << 20);
    let first = half_way(
        &home,
        striped(&[&a1, &a2], "big.bin"),
        striped(&[&b1, &b2], "big.bin"),
    );
    b2.kill();
    let out = first.wait(CP_LIMIT);
    out.assert_ok();
    assert_eq!(std::fs::read(s.join("b/big.bin")).unwrap(), data);
    assert!(
        out.stdout.contains("its share goes to pair 1"),
        "{}",
        out.describe()
    );
    let end = out.json_of("end");
    let pairs = end["pairs"].as_array().unwrap();
    assert_eq!(
        pairs[1]["destination"], pairs[0]["destination"],
        "share 2 ran on pair 1: {end}"
    );
    // What share 2 verified before the kill was not sent again.
    assert!(pairs[1]["resumed_bytes"].as_u64().unwrap() > 0, "{end}");
    let left = work_files(&s.join("b"));
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_copy_whose_destinations_died_is_finished_by_the_rerun() {
    let s = Scratch::new("striped-rerun");
    let home = s.dir("home");
    let [a1, a2, mut b1, mut b2] = four(&s);
    let mut rng = Rng::from_env("stripes_rerun");
    let data = write_random(&s.join("a/big.bin"), &mut rng, 48 << 20);
    let first = half_way(
        &home,
        striped(&[&a1, &a2], "big.bin"),
        striped(&[&b1, &b2], "big.bin"),
    );
    b1.restart();
    b2.restart();
    let killed = first.wait(CP_LIMIT);
    assert_ne!(killed.code(), Some(0), "{}", killed.describe());
    assert!(
        !s.join("b/big.bin").exists(),
        "nothing is presented as complete"
    );
    let rerun = cp!(&home; "--json", "--chunk", "1MiB",
        striped(&[&a1, &a2], "big.bin"), striped(&[&b1, &b2], "big.bin"));
    rerun.assert_ok();
    assert_eq!(std::fs::read(s.join("b/big.bin")).unwrap(), data);
    let end = rerun.json_of("end");
    let resumed: u64 = end["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["resumed_bytes"].as_u64().unwrap())
        .sum();
    // Each share resumed what it had verified of its own chunks.
    assert!(resumed >= 4 << 20, "{end}");
    let left = work_files(&s.join("b"));
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn what_a_striped_copy_cannot_do_is_refused_clearly() {
    let s = Scratch::new("striped-refusals");
    let home = s.dir("home");
    let [a1, a2, b1, _b2] = four(&s);
    std::fs::write(s.join("a/f"), b"x").unwrap();
    let run = cp!(&home; striped(&[&a1, &a2], "f"), b1.remote("g"));
    run.assert_code(2);
    assert!(
        run.stderr.contains("several hosts at both ends"),
        "{}",
        run.describe()
    );
    let run = cp!(&home; striped(&[&a1, &a2], "f"), striped(&[&b1], "g").replace("/g", ",/g"));
    run.assert_code(2);
    assert!(run.stderr.contains("2 to 64 hosts"), "{}", run.describe());
    let three = format!("longhaul://{},{},{}/g", b1.addr, b1.addr, b1.addr);
    let run = cp!(&home; striped(&[&a1, &a2], "f"), three);
    run.assert_code(2);
    assert!(
        run.stderr
            .contains("2 source hosts and 3 destination hosts"),
        "{}",
        run.describe()
    );
    let run = cp!(&home; "-r", "--delete", striped(&[&a1, &a2], "f"), striped(&[&b1, &b1], "g"));
    run.assert_code(2);
    assert!(
        run.stderr.contains("--delete is not taken"),
        "{}",
        run.describe()
    );
    assert!(!s.join("b/g").exists());
}
