//! `longhaul demo` end to end, as root: a short run prints both runs side by side, writes
//! the HTML report and leaves no namespace behind; `--json` over the IPv6 scenario prints
//! every object; SIGTERM mid-run removes the namespaces and kills iperf3; without root it
//! explains itself and exits 2. Root-only parts skip with a message otherwise.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{is_root, Scratch};

fn root() -> bool {
    if is_root() {
        return true;
    }
    eprintln!("SKIPPED: needs root (namespaces and TUN devices)");
    false
}

fn ns_exists(ns: &str) -> bool {
    std::path::Path::new("/run/netns").join(ns).exists()
}

/// Every namespace a demo with process id `pid` makes.
fn demo_namespaces(pid: u32) -> Vec<String> {
    ["", "p"]
        .iter()
        .flat_map(|p| ["a", "b"].map(|e| format!("lh-demo{pid}{p}-{e}")))
        .collect()
}

/// Kills the demo (if still running) and removes its namespaces when dropped.
struct DemoGuard {
    child: Option<std::process::Child>,
    pid: u32,
}

impl Drop for DemoGuard {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in demo_namespaces(self.pid) {
            if ns_exists(&ns) {
                let _ = Command::new("ip").args(["netns", "del", &ns]).status();
            }
        }
    }
}

fn spawn_demo(args: &[&str]) -> DemoGuard {
    let child = Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .arg("demo")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run longhaul demo");
    DemoGuard {
        pid: child.id(),
        child: Some(child),
    }
}

fn finish(g: &mut DemoGuard) -> (Option<i32>, String, String) {
    let out = g
        .child
        .take()
        .expect("running")
        .wait_with_output()
        .expect("wait for longhaul demo");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A path named `name` in a fresh scratch directory, removed with the returned guard.
fn tmp(name: &str) -> (Scratch, std::path::PathBuf) {
    let dir = Scratch::new("demo");
    let path = dir.join(name);
    (dir, path)
}

#[test]
fn short_demo_prints_both_runs_writes_the_report_and_cleans_up() {
    if !root() {
        return;
    }
    let (_dir, html) = tmp("report.html");
    let _ = std::fs::remove_file(&html);
    let mut g = spawn_demo(&["--seconds", "3", "--html", html.to_str().unwrap()]);
    let (code, out, err) = finish(&mut g);
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    for want in [
        "longhaul demo: sunet2004",
        "this host carries ~",
        "scaled down from 4.311 Gbit/s to ",
        "stock TCP",
        "longhaul bench",
        "% of the bottleneck",
        "retransmits",
        "bit-meters/s",
        "124.935 Pb·m/s",
        "removed: lh-demo",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
    let page = std::fs::read_to_string(&html).expect("the report was written");
    assert!(page.contains("longhaul demo: sunet2004"), "title");
    assert!(page.contains("Stock TCP and longhaul on the emulated path"));
    assert!(page.contains("<svg"), "charts");
    for ns in demo_namespaces(g.pid) {
        assert!(!ns_exists(&ns), "{ns} left behind");
    }
    let _ = std::fs::remove_file(&html);
}

#[test]
fn json_over_the_ipv6_scenario_prints_every_object() {
    if !root() {
        return;
    }
    let (_dir, html) = tmp("v6.html");
    let mut g = spawn_demo(&[
        "--scenario",
        "tokyo2006",
        "--seconds",
        "2",
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    let (code, out, err) = finish(&mut g);
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let objs: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let types: Vec<&str> = objs.iter().filter_map(|o| o["type"].as_str()).collect();
    assert_eq!(
        types,
        ["scenario", "probe", "path", "run", "run", "summary"],
        "{out}"
    );
    assert_eq!(objs[0]["ip"], "IPv6");
    assert_eq!(objs[0]["rtt_ms"], 500.0);
    assert_eq!(objs[3]["which"], "stock");
    assert_eq!(objs[4]["which"], "longhaul");
    assert!(objs[4]["bits_per_second"].as_f64().unwrap() > 0.0, "{out}");
    let s = &objs[5];
    let rate = s["longhaul_bits_per_second"].as_f64().unwrap();
    let bm = s["longhaul_bit_meters_per_second"].as_f64().unwrap();
    assert!((bm - rate * 30_000_000.0).abs() <= bm * 1e-9, "{s}");
    assert!(std::fs::metadata(&html).is_ok());
    for ns in demo_namespaces(g.pid) {
        assert!(!ns_exists(&ns), "{ns} left behind");
    }
    let _ = std::fs::remove_file(&html);
}

#[test]
fn sigterm_mid_run_removes_the_namespaces_and_kills_iperf3() {
    if !root() {
        return;
    }
    let (_dir, html) = tmp("killed.html");
    let mut g = spawn_demo(&["--seconds", "60", "--html", html.to_str().unwrap()]);
    let ns_b = format!("lh-demo{}-b", g.pid);
    // Wait until a process runs inside end b (the stock run's iperf3 server).
    let deadline = Instant::now() + Duration::from_secs(90);
    let pids: Vec<u32> = loop {
        let out = Command::new("ip")
            .args(["netns", "pids", &ns_b])
            .output()
            .expect("ip netns pids");
        let pids: Vec<u32> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if !pids.is_empty() {
            break pids;
        }
        assert!(Instant::now() < deadline, "no process ever ran in {ns_b}");
        std::thread::sleep(Duration::from_millis(100));
    };
    longhaul_sys::process::terminate(g.pid).expect("SIGTERM");
    let (code, out, err) = finish(&mut g);
    assert_eq!(code, Some(130), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("stopped by signal"), "{err}");
    for ns in demo_namespaces(g.pid) {
        assert!(!ns_exists(&ns), "{ns} left behind");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for pid in pids {
        while longhaul_sys::process::process_alive(pid) {
            assert!(
                Instant::now() < deadline,
                "process {pid} of {ns_b} survived"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(
        std::fs::metadata(&html).is_err(),
        "no report from a stopped run"
    );
}

#[test]
fn without_root_it_explains_and_exits_2() {
    let has_setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    let mut cmd = if is_root() {
        if !has_setpriv {
            eprintln!("SKIPPED: running as root and setpriv (util-linux) is missing");
            return;
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_longhaul"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_longhaul"))
    };
    let out = cmd
        .args(["demo", "--html", "/nonexistent/x.html"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    if is_root() && err.contains("Permission denied") {
        eprintln!("SKIPPED: the binary is not readable by an unprivileged user: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("needs root"), "{err}");
    assert!(err.contains("436 ms"), "{err}");
    assert!(err.contains("sudo longhaul demo"), "{err}");
}

#[test]
fn an_unwritable_report_fails_before_any_run() {
    if !root() {
        return;
    }
    let mut g = spawn_demo(&["--html", "/nonexistent-dir/report.html"]);
    let (code, out, err) = finish(&mut g);
    assert_eq!(code, Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("--html"), "{err}");
    assert!(!out.contains("probing"), "{out}");
    for ns in demo_namespaces(g.pid) {
        assert!(!ns_exists(&ns), "{ns} made");
    }
}

#[test]
fn unknown_scenario_lists_the_known_ones() {
    let out = Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args(["demo", "--scenario", "apollo11"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("sunet2004") && err.contains("tokyo2006"),
        "{err}"
    );
}
