//! `longhaul cp` over ssh against a real OpenSSH server in a network namespace (root;
//! skipped with a message otherwise): push and pull a file, trees with `-r`, several
//! sources both ways, `..` in a far path, `-e` with quoted options, and the clear error
//! when longhaul is missing on the far host. After each transfer the far process must be
//! gone and no port but sshd's left listening. The grammar's refusals that need no sshd
//! (the old daemon form) run everywhere.

#[macro_use]
mod support;

use std::fs;
use std::time::Duration;

use support::sshd::SshLab;
use support::*;

/// How long the far end may take to go once the client is done.
const GONE: Duration = Duration::from_secs(10);

#[test]
fn push_then_pull_a_file() {
    let Some(lab) = SshLab::start("push_then_pull_a_file") else {
        return;
    };
    let mut rng = Rng::from_env("ssh push pull");
    let s = Scratch::new("ssh-file");
    let (home, far) = (s.dir("home"), s.dir("far"));
    let src = s.join("big.h5");
    let data = write_random(&src, &mut rng, 5 * MIB as usize + 17);
    set_mtime(&src, 1_650_000_000, 7);
    let push = run(
        lab.cp(&home)
            .args(["--chunk", "1MiB", "--json"])
            .arg(&src)
            .arg(lab.remote(&far)),
        CP_LIMIT,
    );
    push.assert_ok();
    assert_eq!(push.end_u64("files"), 1, "{}", push.describe());
    assert_same_bytes(&src, &far.join("big.h5"));
    lab.assert_far_gone(GONE, "after the push");

    let got = s.join("got.h5");
    run(
        lab.cp(&home).arg(lab.remote(&far.join("big.h5"))).arg(&got),
        CP_LIMIT,
    )
    .assert_ok();
    assert_eq!(fs::read(&got).unwrap(), data);
    assert_same_bytes(&src, &got);
    lab.assert_far_gone(GONE, "after the pull");
}

#[test]
fn trees_and_several_sources_both_ways() {
    let Some(lab) = SshLab::start("trees_and_several_sources_both_ways") else {
        return;
    };
    let mut rng = Rng::from_env("ssh trees");
    let s = Scratch::new("ssh-tree");
    let (home, far) = (s.dir("home"), s.dir("far"));
    let tree = s.dir("tree");
    for (i, rel) in ["a", "sub/b", "sub/deeper/c", "empty-dir/.keep"]
        .iter()
        .enumerate()
    {
        let p = tree.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        write_random(&p, &mut rng, 1000 * i + 1);
    }
    // -r push of a tree; the far path climbs with `..` as scp allows.
    let climbing = far.join("x/../incoming");
    fs::create_dir_all(far.join("x")).unwrap();
    fs::create_dir_all(far.join("incoming")).unwrap();
    run(
        lab.cp(&home)
            .arg("-r")
            .arg(&tree)
            .arg(lab.remote(&climbing)),
        CP_LIMIT,
    )
    .assert_ok();
    assert_same_tree(&tree, &far.join("incoming/tree"), EXACT);

    // Several local sources into one far directory.
    let one = write_random(&s.join("one"), &mut rng, 3000);
    let two = write_random(&s.join("two"), &mut rng, 5000);
    run(
        lab.cp(&home)
            .arg(s.join("one"))
            .arg(s.join("two"))
            .arg(lab.remote(&far.join("incoming"))),
        CP_LIMIT,
    )
    .assert_ok();
    assert_eq!(fs::read(far.join("incoming/one")).unwrap(), one);
    assert_eq!(fs::read(far.join("incoming/two")).unwrap(), two);

    // -r pull of the tree and a file at once, into an existing local directory.
    let back = s.dir("back");
    run(
        lab.cp(&home)
            .arg("-r")
            .arg(lab.remote(&far.join("incoming/tree")))
            .arg(lab.remote(&far.join("incoming/one")))
            .arg(&back),
        CP_LIMIT,
    )
    .assert_ok();
    assert_same_tree(&tree, &back.join("tree"), EXACT);
    assert_eq!(fs::read(back.join("one")).unwrap(), one);
    lab.assert_far_gone(GONE, "after the tree copies");
}

#[test]
fn missing_far_longhaul_says_so() {
    let Some(lab) = SshLab::start("missing_far_longhaul_says_so") else {
        return;
    };
    let s = Scratch::new("ssh-missing");
    let home = s.dir("home");
    write_file(&s.join("f"), b"data", 0o644);
    let mut c = cp_command(&home);
    c.args([
        "-e",
        &lab.rsh(),
        "--remote-longhaul",
        "/nonexistent/longhaul",
    ])
    .arg(s.join("f"))
    .arg(lab.remote(&s.join("far")));
    let r = run(&mut c, Duration::from_secs(60));
    r.assert_code(2);
    assert!(
        r.stderr.contains("longhaul is not installed on root@")
            && r.stderr.contains("/nonexistent/longhaul")
            && r.stderr.contains("--remote-longhaul PATH"),
        "{}",
        r.describe()
    );
}

#[test]
fn ssh_failing_shows_what_ssh_said() {
    let Some(lab) = SshLab::start("ssh_failing_shows_what_ssh_said") else {
        return;
    };
    let s = Scratch::new("ssh-fail");
    let home = s.dir("home");
    write_file(&s.join("f"), b"data", 0o644);
    // A port nothing listens on: ssh itself fails (exit 255).
    let rsh = lab.rsh().replace("-p 2222", "-p 2223");
    let mut c = cp_command(&home);
    c.args(["-e", &rsh, "--remote-longhaul", BIN])
        .arg(s.join("f"))
        .arg(lab.remote(&s.join("far")));
    let r = run(&mut c, Duration::from_secs(60));
    r.assert_code(2);
    assert!(
        r.stderr.contains("ssh to root@") && r.stderr.contains("refused"),
        "{}",
        r.describe()
    );
}

#[test]
fn the_old_daemon_form_is_refused_with_both_ways_out() {
    let s = Scratch::new("old-form");
    let home = s.dir("home");
    write_file(&s.join("f"), b"data", 0o644);
    let r = cp!(&home; s.join("f"), "far.example:5290:incoming");
    r.assert_code(2);
    assert!(
        r.stderr.contains("longhaul://far.example:5290/incoming")
            && r.stderr.contains("far.example:./5290:incoming"),
        "{}",
        r.describe()
    );
}

/// The far longhaul starts (ssh works) but no network path reaches its port (the far host
/// is reached only through ssh's ProxyCommand): the copy says so, naming the port (from
/// `--port-range`), the host and the fix, and carries its connections through ssh instead;
/// the data arrives and the far process does not stay behind.
#[test]
fn an_unreachable_far_port_is_named_with_the_fix_and_crossed_through_ssh() {
    let Some(lab) = SshLab::start_isolated(
        "an_unreachable_far_port_is_named_with_the_fix_and_crossed_through_ssh",
    ) else {
        return;
    };
    let s = Scratch::new("ssh-unreachable");
    let home = s.dir("home");
    write_file(&s.join("f"), b"data", 0o644);
    let r = run(
        lab.cp(&home)
            .args(["--port-range", "45000-45009"])
            .arg(s.join("f"))
            .arg(lab.remote(&s.join("far"))),
        Duration::from_secs(90),
    );
    r.assert_ok();
    assert_eq!(fs::read(s.join("far")).unwrap(), b"data");
    let port = r
        .stderr
        .split("TCP port ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|p| p.parse::<u16>().ok());
    assert!(
        matches!(port, Some(45000..=45009))
            && r.stderr.contains(&format!("on {}", lab.addr))
            && r.stderr.contains("--port-range")
            && r.stderr.contains("carrying every connection through ssh"),
        "{}",
        r.describe()
    );
    lab.assert_far_gone(GONE, "after the unreachable port");
}

/// `-e` wrapped around the lab's ssh: when the far end's ready line comes, a stranger
/// (another HOME, a wrong token) tries its port before the line goes on to the client,
/// and the line is kept for the test.
const STRANGER_RSH: &str = r#"#!/bin/sh
"$@" | while IFS= read -r line; do
    case "$line" in
    LONGHAUL-READY*)
        printf '%s\n' "$line" > "$LH_READY"
        port=${line#* port=}
        port=${port%% *}
        HOME="$LH_STRANGER_HOME" "$LH_BIN" cp --token-file "$LH_WRONG" \
            --known-servers "$LH_STRANGER_HOME/ks" "longhaul://$LH_FAR:$port/x" \
            "$LH_STRANGER_HOME/got" > "$LH_STRANGER_HOME/before.log" 2>&1 < /dev/null
        ;;
    esac
    printf '%s\n' "$line"
done
"#;

/// Anyone on the far host's network reaches the far end's port; one holding a wrong
/// token, once before the client connects and once during its pull, ends neither the far
/// end nor the pull. The far end listens on its ssh address only (the address the client
/// dials), and is gone after.
#[test]
fn a_wrong_token_before_and_during_a_pull_ends_neither() {
    let Some(lab) = SshLab::start("a_wrong_token_before_and_during_a_pull_ends_neither") else {
        return;
    };
    let mut rng = Rng::from_env("ssh stranger");
    let s = Scratch::new("ssh-stranger");
    let (home, far, dst, stranger) = (s.dir("home"), s.dir("far"), s.dir("dst"), s.dir("x"));
    let src = far.join("big.bin");
    write_random(&src, &mut rng, 48 * MIB as usize);
    let wrong = s.join("wrong.token");
    write_file(
        &wrong,
        b"ac99386bbf3307384a956d9d6b0423071365926772d357f54cc0021fe6bf84c7",
        0o600,
    );
    let script = s.join("stranger-rsh");
    write_file(&script, STRANGER_RSH.as_bytes(), 0o755);
    let ready = s.join("ready.line");
    let rsh = format!("'{}' {}", script.display(), lab.rsh());
    let mut pull = spawn_piped(
        cp_command(&home)
            .args(["-e", &rsh, "--remote-longhaul", BIN])
            // Slow enough that the stranger comes while it runs.
            .args(["--rate", "160M"])
            .env("LH_READY", &ready)
            .env("LH_STRANGER_HOME", &stranger)
            .env("LH_BIN", BIN)
            .env("LH_WRONG", &wrong)
            .env("LH_FAR", &lab.addr)
            .arg(lab.remote(&src))
            .arg(dst.join("got.bin")),
    );
    // The pull is under way once its destination has a (part) file.
    let deadline = std::time::Instant::now() + CP_LIMIT;
    while fs::read_dir(&dst).unwrap().next().is_none()
        && !pull.has_exited()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let before = fs::read_to_string(stranger.join("before.log")).unwrap_or_default();
    assert!(
        before.contains("authentication failed"),
        "the stranger before the client: {before}"
    );
    assert!(
        !pull.has_exited(),
        "the pull ended before the stranger's second try:\n{}\nsshd log:\n{}",
        pull.wait(GONE).describe(),
        lab.log()
    );
    let line = fs::read_to_string(&ready).unwrap();
    let port = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("port="))
        .unwrap();
    let listeners = lab.other_listeners();
    assert!(
        !listeners.is_empty()
            && listeners
                .iter()
                .all(|l| l.contains(&format!(" {}:{port} ", lab.addr))),
        "the far end listens elsewhere than its ssh address {}: {listeners:?}",
        lab.addr
    );
    let during = run(
        longhaul(&stranger)
            .args(["cp", "--token-file"])
            .arg(&wrong)
            .arg("--known-servers")
            .arg(stranger.join("ks"))
            .arg(format!("longhaul://{}:{port}/x", lab.addr))
            .arg(stranger.join("got")),
        CP_LIMIT,
    );
    during.assert_failed();
    assert!(
        during.stderr.contains("authentication failed"),
        "{}",
        during.describe()
    );
    let done = pull.wait(CP_LIMIT);
    done.assert_ok();
    assert_same_bytes(&src, &dst.join("got.bin"));
    assert!(!stranger.join("got").exists());
    lab.assert_far_gone(GONE, "after the pull");
}
