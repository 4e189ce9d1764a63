//! `longhaul cp longhaul://A/x longhaul://B/y` between two real `longhaul serve` processes
//! over loopback: a file and a tree arrive bit-identical with the invoking host's end line
//! naming both; a rerun sends nothing again; a destination killed mid-copy and started
//! again resumes on the rerun; a read-only destination area and flags a third-party copy
//! does not take are refused with words that say what to do. Over ssh (`cp HOST:x
//! HOST:y`, a real sshd in a namespace, root): both far ends start, the destination's
//! pulls from the source's directly, and neither is left behind; a daemon on one side and
//! an ssh host on the other, both ways.

#[macro_use]
mod support;

use std::time::{Duration, Instant};

use support::sshd::SshLab;
use support::*;

/// Two servers with their own roots (the same HOME, so the same token).
fn two(scratch: &Scratch) -> (Server, Server) {
    let home = scratch.dir("home");
    let a = Server::start(&home, &scratch.dir("a"));
    let b = Server::start(&home, &scratch.dir("b"));
    (a, b)
}

#[test]
fn a_file_and_a_tree_go_from_one_server_to_the_other() {
    let s = Scratch::new("third-party-copy");
    let home = s.dir("home");
    let (a, b) = two(&s);
    let mut rng = Rng::from_env("third_party");
    let big = write_random(&s.join("a/big.bin"), &mut rng, 5 << 20);
    for i in 0..20 {
        write_random(
            &s.join(format!("a/tree/d{}/f{i}", i % 4)),
            &mut rng,
            1000 * i + 1,
        );
    }
    let run = cp!(&home; "--json", a.remote("big.bin"), b.remote("copy.bin"));
    run.assert_ok();
    assert_eq!(std::fs::read(s.join("b/copy.bin")).unwrap(), big);
    let end = run.json_of("end");
    assert_eq!(end["direction"], "third-party", "{end}");
    assert_eq!(end["files"], 1, "{end}");
    assert_eq!(end["sent_bytes"], 5 << 20, "{end}");
    // The source issued one ticket; the destination pulled with it.
    assert!(a
        .log_with("issued a ticket for big.bin")
        .contains("sent big.bin"));
    assert!(b.log_with("pulled from").contains("pulled from"));

    let run = cp!(&home; "-r", a.remote("tree"), b.remote(""));
    run.assert_ok();
    assert!(
        run.stdout.contains("received 20 files"),
        "{}",
        run.describe()
    );
    for i in 0..20 {
        let rel = format!("tree/d{}/f{i}", i % 4);
        assert_eq!(
            std::fs::read(s.join("b").join(&rel)).unwrap(),
            std::fs::read(s.join("a").join(&rel)).unwrap(),
            "{rel}"
        );
    }
    // Again: everything is in place, nothing crosses.
    let again = cp!(&home; "--json", "-r", a.remote("tree"), b.remote(""));
    again.assert_ok();
    assert_eq!(again.end_u64("sent_bytes"), 0, "{}", again.describe());
}

#[test]
fn a_destination_killed_mid_copy_resumes_on_the_rerun() {
    let s = Scratch::new("third-party-resume");
    let home = s.dir("home");
    let (a, mut b) = two(&s);
    let mut rng = Rng::from_env("third_party_resume");
    let data = write_random(&s.join("a/big.bin"), &mut rng, 48 << 20);
    // Paced so that the kill lands mid-copy (about 6 s at 64 Mbit/s).
    let mut c = cp_command(&home);
    c.args(["--json", "--rate", "64M", "--chunk", "1MiB"])
        .arg(a.remote("big.bin"))
        .arg(b.remote("big.bin"));
    let mut first = spawn_piped(&mut c);
    // Kill the destination half way (its part file is allocated whole at once, so
    // its size says nothing): about 3 s of 6.
    let halfway = Instant::now() + Duration::from_secs(3);
    while Instant::now() < halfway && !first.has_exited() {
        std::thread::sleep(Duration::from_millis(50));
    }
    b.restart();
    let killed = first.wait(CP_LIMIT);
    assert_ne!(killed.code(), Some(0), "{}", killed.describe());
    assert!(
        !s.join("b/big.bin").exists(),
        "nothing is presented as complete"
    );
    // The same chunks as the killed run (its resume records are on its chunk grid).
    let rerun = cp!(&home; "--json", "--chunk", "1MiB", a.remote("big.bin"), b.remote("big.bin"));
    rerun.assert_ok();
    assert_eq!(std::fs::read(s.join("b/big.bin")).unwrap(), data);
    let resumed = rerun.end_u64("resumed_bytes");
    assert!(
        resumed >= 4 << 20,
        "resumed {resumed}: {}",
        rerun.describe()
    );
    assert!(
        rerun.end_u64("sent_bytes") + resumed == 48 << 20,
        "{}",
        rerun.describe()
    );
}

#[test]
fn what_a_third_party_copy_does_not_take_is_refused_clearly() {
    let s = Scratch::new("third-party-refusals");
    let home = s.dir("home");
    let (a, b) = two(&s);
    std::fs::write(s.join("a/f"), b"x").unwrap();
    let run = cp!(&home; "-r", "--delete", a.remote("f"), b.remote("g"));
    run.assert_code(2);
    assert!(
        run.stderr
            .contains("--delete is not taken by a third-party copy"),
        "{}",
        run.describe()
    );
    // A missing source: no ticket, and the destination is never asked.
    let run = cp!(&home; a.remote("nope"), b.remote("g"));
    run.assert_code(2);
    assert!(
        run.stderr.contains("no ticket for nope"),
        "{}",
        run.describe()
    );
    assert!(!b.log().contains("pulled from"));
    assert!(!s.join("b/g").exists());
}

#[test]
fn a_destination_pulls_only_from_where_its_site_allows() {
    let s = Scratch::new("third-party-relay-from");
    let home = s.dir("home");
    let a = Server::start(&home, &s.dir("a"));
    std::fs::write(s.join("a/f"), b"some bytes").unwrap();
    for (setting, refused) in [
        ("none", Some("only from nowhere")),
        ("10.0.0.0/8,2001:db8::/32", Some("and 127.0.0.1:")),
        ("127.0.0.0/8", None),
    ] {
        let b = Server::start_with(&home, &s.dir("b"), &["--relay-from", setting]);
        let run = cp!(&home; a.remote("f"), b.remote("g"));
        match refused {
            Some(words) => {
                run.assert_code(2);
                assert!(run.stderr.contains(words), "{setting}: {}", run.describe());
                assert!(
                    run.stderr.contains("serve --relay-from"),
                    "{}",
                    run.describe()
                );
                assert!(!s.join("b/g").exists());
            }
            None => {
                run.assert_ok();
                assert_eq!(std::fs::read(s.join("b/g")).unwrap(), b"some bytes");
            }
        }
    }
}

#[test]
fn a_relayed_pull_fits_the_destinations_memory_budget() {
    let s = Scratch::new("third-party-memory");
    let home = s.dir("home");
    let a = Server::start(&home, &s.dir("a"));
    let mut rng = Rng::from_env("third_party_memory");
    let data = write_random(&s.join("a/f"), &mut rng, 5 << 20);
    let b = Server::start_with(&home, &s.dir("b"), &["--memory", "200MiB"]);
    // 64 streams' buffers do not fit: refused before the request reaches A.
    let run = cp!(&home; "-P", "64", a.remote("f"), b.remote("g"));
    run.assert_code(2);
    assert!(run.stderr.contains("on this server"), "{}", run.describe());
    assert!(!a.log().contains("sent f"), "{}", a.log());
    // Left to choose (2 streams on loopback), it fits.
    let run = cp!(&home; a.remote("f"), b.remote("g"));
    run.assert_ok();
    assert_eq!(std::fs::read(s.join("b/g")).unwrap(), data);
    assert!(
        b.log_with("pulled from").contains("reserved"),
        "{}",
        b.log()
    );
}

#[test]
fn between_two_ssh_hosts() {
    let Some(lab) = SshLab::start("third_party_ssh") else {
        return;
    };
    let s = Scratch::new("third-party-ssh");
    let (home, far) = (s.dir("home"), s.dir("far"));
    let mut rng = Rng::from_env("third_party_ssh");
    for i in 0..5 {
        write_random(&far.join(format!("src/d{i}/f")), &mut rng, 300_000 * i + 1);
    }
    std::fs::create_dir_all(far.join("dst")).unwrap();
    // Both ends are the lab's host here: the destination's far end dials the source's
    // port on it, as it would another host's.
    let run = run(
        lab.cp(&home)
            .args(["--json", "-r"])
            .arg(lab.remote(&far.join("src")))
            .arg(lab.remote(&far.join("dst"))),
        CP_LIMIT,
    );
    run.assert_ok();
    assert_eq!(run.end_u64("files"), 5, "{}", run.describe());
    assert_eq!(run.json_of("end")["direction"], "third-party");
    for i in 0..5 {
        let rel = format!("d{i}/f");
        assert_eq!(
            std::fs::read(far.join("dst/src").join(&rel)).unwrap(),
            std::fs::read(far.join("src").join(&rel)).unwrap(),
            "{rel}"
        );
    }
    lab.assert_far_gone(Duration::from_secs(10), "after the third-party copy");
}

#[test]
fn between_a_daemon_and_an_ssh_host_either_way() {
    let Some(lab) = SshLab::start("third_party_mixed") else {
        return;
    };
    let s = Scratch::new("third-party-mixed");
    let (home, far) = (s.dir("home"), s.dir("far"));
    // The daemon listens where the far host reaches this one.
    let daemon = Server::start_on(&home, &s.dir("d"), &lab.near);
    let mut rng = Rng::from_env("third_party_mixed");
    let data = write_random(&s.join("d/from-daemon"), &mut rng, 2 << 20);
    // Daemon to ssh host: the far end started over ssh pulls from the daemon.
    let there = run(
        lab.cp(&home)
            .arg("--json")
            .arg(daemon.remote("from-daemon"))
            .arg(lab.remote(&far.join("got"))),
        CP_LIMIT,
    );
    there.assert_ok();
    assert_eq!(there.json_of("end")["direction"], "third-party");
    assert_eq!(std::fs::read(far.join("got")).unwrap(), data);
    lab.assert_far_gone(Duration::from_secs(10), "after daemon -> ssh");
    // Ssh host to daemon: the daemon pulls from the far end started over ssh.
    let back = run(
        lab.cp(&home)
            .arg("--json")
            .arg(lab.remote(&far.join("got")))
            .arg(daemon.remote("back")),
        CP_LIMIT,
    );
    back.assert_ok();
    assert_eq!(std::fs::read(s.join("d/back")).unwrap(), data);
    lab.assert_far_gone(Duration::from_secs(10), "after ssh -> daemon");
}
