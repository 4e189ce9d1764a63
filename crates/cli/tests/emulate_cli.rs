//! `longhaul emulate` as a user runs it: argument errors, `up --daemon`, `exec`, `addr`,
//! `stats`, `--log` with `log-report`, `down`, and `down` after a crashed run. The root-only
//! parts skip with a message otherwise; every emulator made is taken down by a guard.

mod support;

use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

use support::{is_root, Scratch};

fn lh(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args(args)
        .output()
        .expect("run longhaul")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn ns_exists(ns: &str) -> bool {
    std::path::Path::new("/run/netns").join(ns).exists()
}

/// Takes emulator `name` down when dropped.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = lh(&["emulate", "down", &self.0]);
    }
}

fn root() -> bool {
    if is_root() {
        return true;
    }
    eprintln!("SKIPPED: needs root (namespaces and TUN devices)");
    false
}

#[test]
fn bad_input_is_one_clear_error_and_makes_nothing() {
    let name = format!("c{}bad", std::process::id());
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "0"], "rate"),
        (&["--rtt", "200"], "missing unit"),
        (&["--rtt", "2h"], "delay"),
        (&["--loss", "1.5"], "loss"),
        (&["--loss", "ge:0.1"], "ge:"),
        (
            &["--rate", "1G", "--buffer", "1000B", "--mtu", "9000"],
            "at least one MTU",
        ),
        (&["--mtu", "70000"], "MTU"),
        (&["--reorder", "150"], "percentage"),
        (&["--buffer", "1bdp"], "no rate"),
    ];
    for (args, want) in cases {
        let mut all = vec!["emulate", "up", name.as_str()];
        all.extend_from_slice(args);
        let out = lh(&all);
        let msg = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {msg}");
        assert!(
            msg.contains(want),
            "{args:?}: error should mention {want:?}: {msg}"
        );
        assert_eq!(
            msg.trim().lines().count(),
            1,
            "{args:?}: one line expected: {msg}"
        );
    }
    assert!(!ns_exists(&format!("lh-{name}-a")));
    let out = lh(&["emulate", "up", "bad/name"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("bad emulator name"), "{}", text(&out));
}

#[test]
fn daemon_exec_addr_stats_log_and_down() {
    if !root() {
        return;
    }
    let name = format!("c{}up", std::process::id());
    let scratch = Scratch::new("emulate-log");
    let log = scratch.join(format!("{name}.log"));
    let log_s = log.to_str().unwrap();
    let _guard = Down(name.clone());
    let out = lh(&[
        "emulate", "up", &name, "--rtt", "2ms", "--rate", "100M", "--log", log_s, "--daemon",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("ready "),
        "{}",
        text(&out)
    );
    let again = lh(&["emulate", "up", &name]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again).contains("already up"), "{}", text(&again));

    let addr = lh(&["emulate", "addr", &name, "b"]);
    assert_eq!(String::from_utf8_lossy(&addr.stdout).trim(), "10.99.0.2");
    let addr6 = lh(&["emulate", "addr", &name, "a", "--ipv6"]);
    assert_eq!(
        String::from_utf8_lossy(&addr6.stdout).trim(),
        "fd00:6c68::1"
    );
    // 50 datagrams from a to b through the path (b answers with ICMP port unreachable).
    let send = "for i in $(seq 50); do echo x > /dev/udp/10.99.0.2/9 || true; done";
    let ex = lh(&["emulate", "exec", &name, "a", "--", "bash", "-c", send]);
    assert!(ex.status.success(), "{}", text(&ex));
    let code = lh(&["emulate", "exec", &name, "b", "--", "bash", "-c", "exit 3"]);
    assert_eq!(
        code.status.code(),
        Some(3),
        "exec passes the exit code through"
    );
    std::thread::sleep(std::time::Duration::from_millis(600)); // stats file: every 250 ms
    let stats = lh(&["emulate", "stats", &name, "--json"]);
    assert!(stats.status.success(), "{}", text(&stats));
    let v: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("stats JSON");
    assert_eq!(v["type"], "stats");
    let segs = v["stats"]["a_to_b"]["link"]["segments_out"]
        .as_u64()
        .unwrap();
    assert!(
        segs >= 50,
        "a->b delivered {segs} segments, sent 50 datagrams"
    );

    let down = lh(&["emulate", "down", &name]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(!ns_exists(&format!("lh-{name}-a")) && !ns_exists(&format!("lh-{name}-b")));
    let report = lh(&["emulate", "log-report", log_s]);
    assert!(report.status.success(), "{}", text(&report));
    let r = text(&report);
    assert!(
        r.contains("direction ab") && r.contains("0.25 ms bins"),
        "{r}"
    );
    let _ = std::fs::remove_file(&log);
}

/// The exit status of `child` if it ends within `limit`; otherwise kills it and says None.
fn ended_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn down_stops_processes_left_in_the_namespaces() {
    if !root() {
        return;
    }
    let name = format!("c{}pr", std::process::id());
    let _guard = Down(name.clone());
    let out = lh(&["emulate", "up", &name, "--rtt", "1ms", "--daemon"]);
    assert!(out.status.success(), "{}", text(&out));
    // A server left running in b (as `ip netns exec` leaves it), and one that ignores
    // SIGTERM in a.
    let mut polite = Command::new("ip")
        .args(["netns", "exec", &format!("lh-{name}-b"), "sleep", "300"])
        .spawn()
        .unwrap();
    let mut stubborn = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("lh-{name}-a"),
            "bash",
            "-c",
            "trap '' TERM; sleep 300",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let down = lh(&["emulate", "down", &name]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(
        text(&down).contains("processes in its namespaces"),
        "{}",
        text(&down)
    );
    // Both are gone now; if not, fail (and kill them) rather than wait 300 s.
    let a = ended_within(&mut polite, Duration::from_secs(5));
    let b = ended_within(&mut stubborn, Duration::from_secs(5));
    assert!(
        a.is_some_and(|s| !s.success()) && b.is_some_and(|s| !s.success()),
        "processes left in the namespaces should have been stopped: {a:?} {b:?}"
    );
    assert!(!ns_exists(&format!("lh-{name}-a")) && !ns_exists(&format!("lh-{name}-b")));
}

#[test]
fn down_cleans_up_after_a_crash() {
    if !root() {
        return;
    }
    let name = format!("c{}crash", std::process::id());
    let _guard = Down(name.clone());
    let out = lh(&["emulate", "up", &name, "--daemon"]);
    assert!(out.status.success(), "{}", text(&out));
    let pid_file = format!("/run/longhaul/emulate-{name}.pid");
    let recorded = std::fs::read_to_string(&pid_file).unwrap();
    let (pid, start) = recorded.trim().split_once(' ').expect("PID START");
    let kill = Command::new("kill").args(["-9", pid]).status().unwrap();
    assert!(kill.success());
    let pid: u32 = pid.parse().unwrap();
    for _ in 0..200 {
        if !longhaul_sys::process::process_alive(pid) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        ns_exists(&format!("lh-{name}-a")),
        "the crash should have left the namespaces"
    );
    let stats = lh(&["emulate", "stats", &name]);
    assert_eq!(
        stats.status.code(),
        Some(2),
        "stats of a dead emulator must fail: {}",
        text(&stats)
    );
    // The dead emulator's pid now belongs to another process (made so here: the file
    // names a live bystander with the dead emulator's start time). `down` must leave
    // it alone.
    let mut bystander = Command::new("sleep").arg("30").spawn().unwrap();
    std::fs::write(&pid_file, format!("{} {start}\n", bystander.id())).unwrap();
    let up = lh(&["emulate", "up", &name]);
    assert_eq!(up.status.code(), Some(2));
    assert!(text(&up).contains("emulate down"), "{}", text(&up));
    let down = lh(&["emulate", "down", &name]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(text(&down).contains("removed namespace"), "{}", text(&down));
    let spared = bystander.try_wait().unwrap().is_none();
    let _ = bystander.kill();
    let _ = bystander.wait();
    assert!(
        spared,
        "down signalled a process that reused the emulator's pid"
    );
    assert!(!ns_exists(&format!("lh-{name}-a")) && !ns_exists(&format!("lh-{name}-b")));
    assert!(!std::path::Path::new(&format!("/run/longhaul/emulate-{name}.pid")).exists());
}
