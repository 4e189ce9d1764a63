//! Through the firewall (issue 31, item 2): the far host lets only ssh in (an nft rule in
//! its namespace drops every other TCP port from outside). A copy over ssh finds the far
//! longhaul's port unreachable, says so with the fix, and carries every connection through
//! ssh instead (`ssh host longhaul ssh-bridge ADDR:PORT`, one per stream): a push and a pull arrive byte for byte,
//! `--json` says `data_via: ssh`, and no far process, far listener or ssh is left behind.
//! `--via-ssh` goes that way without trying the port, for bench as for cp. Behind a
//! stateful firewall (new connections from outside reach ssh alone, the far host's own
//! connections get their answers) the far end connects back to the client instead, over
//! the path, and the copy says so.

#[macro_use]
mod support;

use std::time::Duration;

use support::sshd::SshLab;
use support::*;

const GONE: Duration = Duration::from_secs(10);

/// ssh processes carrying this lab's streams (`... ssh-bridge ...`) still running here.
fn tunnels_left(lab: &SshLab) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
            args.contains(&&b"-W"[..]) && args.iter().any(|a| a.ends_with(lab.addr.as_bytes()))
        })
        .collect()
}

/// A lab whose far host is behind `firewall` (`None`: skipped), with a scratch HOME,
/// a far directory and a 3 MiB source file.
struct Firewalled {
    lab: SshLab,
    s: Scratch,
    home: std::path::PathBuf,
    far: std::path::PathBuf,
    src: std::path::PathBuf,
}

fn firewalled(name: &str, firewall: fn(&SshLab) -> Option<()>) -> Option<Firewalled> {
    let lab = SshLab::start(name)?;
    firewall(&lab)?;
    let mut rng = Rng::from_env(name);
    let s = Scratch::new(name);
    let (home, far) = (s.dir("home"), s.dir("far"));
    let src = s.join("data.bin");
    write_random(&src, &mut rng, 3 * MIB as usize + 5);
    Some(Firewalled {
        lab,
        s,
        home,
        far,
        src,
    })
}

#[test]
fn a_firewalled_far_port_is_crossed_through_ssh() {
    let Some(Firewalled {
        lab,
        s,
        home,
        far,
        src,
    }) = firewalled(
        "a_firewalled_far_port_is_crossed_through_ssh",
        SshLab::firewall_all_but_ssh,
    )
    else {
        return;
    };
    let push = run(
        lab.cp(&home)
            .args(["--streams", "4", "--json"])
            .arg(&src)
            .arg(lab.remote(&far)),
        Duration::from_secs(120),
    );
    push.assert_ok();
    assert_same_bytes(&src, &far.join("data.bin"));
    assert!(
        push.stderr
            .contains("carrying every connection through ssh")
            && push.stderr.contains("--port-range"),
        "{}",
        push.describe()
    );
    assert_eq!(
        push.json_of("far_start")["data_via"],
        "ssh",
        "{}",
        push.describe()
    );
    lab.assert_far_gone(GONE, "after the push");
    assert!(
        tunnels_left(&lab).is_empty(),
        "ssh bridges left: {:?}",
        tunnels_left(&lab)
    );

    // A pull, through ssh from the start.
    let got = s.join("got.bin");
    let pull = run(
        lab.cp(&home)
            .args(["--via-ssh", "--streams", "3"])
            .arg(lab.remote(&far.join("data.bin")))
            .arg(&got),
        Duration::from_secs(120),
    );
    pull.assert_ok();
    assert_same_bytes(&src, &got);
    assert!(
        pull.stdout.contains("carried through ssh"),
        "{}",
        pull.describe()
    );
    assert!(!pull.stderr.contains("cannot reach"), "{}", pull.describe());
    lab.assert_far_gone(GONE, "after the pull");
    assert!(
        tunnels_left(&lab).is_empty(),
        "ssh bridges left: {:?}",
        tunnels_left(&lab)
    );

    // bench too, with fewer streams than logins made ahead (the unused ones end unused).
    let bench = run(
        lab.bench(&home)
            .args(["--via-ssh", "-t", "2", "--streams", "2"])
            .arg(format!("root@{}", lab.addr)),
        Duration::from_secs(120),
    );
    bench.assert_ok();
    assert!(
        bench
            .stdout
            .contains("Limited by: the ssh connections carrying the streams"),
        "{}",
        bench.describe()
    );
    lab.assert_far_gone(GONE, "after the bench");
    assert!(
        tunnels_left(&lab).is_empty(),
        "ssh bridges left: {:?}",
        tunnels_left(&lab)
    );
}

#[test]
fn behind_a_stateful_firewall_the_far_end_connects_back() {
    let Some(Firewalled {
        lab,
        s,
        home,
        far,
        src,
    }) = firewalled(
        "behind_a_stateful_firewall_the_far_end_connects_back",
        SshLab::firewall_new_inbound_but_ssh,
    )
    else {
        return;
    };
    let push = run(
        lab.cp(&home)
            .args(["--streams", "4", "--json", "--port-range", "46100-46109"])
            .arg(&src)
            .arg(lab.remote(&far)),
        Duration::from_secs(120),
    );
    push.assert_ok();
    assert_same_bytes(&src, &far.join("data.bin"));
    let start = push.json_of("far_start");
    assert_eq!(start["data_via"], "connect-back", "{}", push.describe());
    assert!(
        matches!(start["connect_back_port"].as_u64(), Some(46100..=46109)),
        "the port here is of --port-range: {}",
        push.describe()
    );
    assert!(
        push.stderr.contains("connects back to this host's port"),
        "{}",
        push.describe()
    );
    assert!(tunnels_left(&lab).is_empty(), "no ssh carries the data");
    lab.assert_far_gone(GONE, "after the push");

    let got = s.join("got.bin");
    let pull = run(
        lab.cp(&home)
            .args(["--streams", "3"])
            .arg(lab.remote(&far.join("data.bin")))
            .arg(&got),
        Duration::from_secs(120),
    );
    pull.assert_ok();
    assert_same_bytes(&src, &got);
    assert!(
        pull.stdout
            .contains("the far end connected back to this host's port"),
        "{}",
        pull.describe()
    );
    lab.assert_far_gone(GONE, "after the pull");
}
