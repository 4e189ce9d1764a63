//! `longhaul tune --apply` and `--revert` for real, inside a network namespace this test
//! creates, with the drop-in and state files in a temp dir: the per-namespace sysctls
//! (net.ipv4.tcp_*) change there and come back exactly; the host's are never touched.
//! Root only; skipped with a message otherwise.

mod support;

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

use support::{is_root, Scratch, BIN as LONGHAUL};

/// A network namespace deleted on drop, also when the test panics.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("lhtune-{tag}-{}", std::process::id());
        let status = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap();
        assert!(status.success(), "ip netns add {name}");
        Netns(name)
    }

    /// Runs a command inside the namespace.
    fn exec(&self, args: &[&str], env: &[(&str, &PathBuf)]) -> Output {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.0]).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    fn sysctl(&self, name: &str) -> String {
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        let out = self.exec(&["cat", &path], &[]);
        assert!(out.status.success(), "reading {name} in {}", self.0);
        normalise(&String::from_utf8_lossy(&out.stdout))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Host values of the global sysctls, put back on drop if anything changed them.
struct HostGlobals(Vec<(&'static str, String)>);

const GLOBALS: [&str; 4] = [
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
];

impl HostGlobals {
    fn save() -> HostGlobals {
        HostGlobals(GLOBALS.iter().map(|&n| (n, host_sysctl(n))).collect())
    }
}

impl Drop for HostGlobals {
    fn drop(&mut self) {
        for (name, value) in &self.0 {
            if &host_sysctl(name) != value {
                let path = format!("/proc/sys/{}", name.replace('.', "/"));
                let _ = fs::write(path, value);
            }
        }
    }
}

fn host_sysctl(name: &str) -> String {
    normalise(&fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/"))).unwrap())
}

fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

const PER_NS: [&str; 4] = [
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_mtu_probing",
];

#[test]
fn apply_then_revert_in_a_namespace_restores_every_value() {
    if !is_root() {
        eprintln!("SKIPPED apply_then_revert_in_a_namespace_restores_every_value: needs root");
        return;
    }
    let host_globals = HostGlobals::save();
    let host_per_ns: Vec<String> = PER_NS.iter().map(|n| host_sysctl(n)).collect();
    let ns = Netns::new("apply");
    let dir = Scratch::new("tune-apply");
    let dropin = dir.0.join("sysctl.d/90-longhaul.conf");
    let state = dir.0.join("state/tune-previous.json");
    let env = [
        ("LONGHAUL_TUNE_DROPIN", &dropin),
        ("LONGHAUL_TUNE_STATE", &state),
    ];

    // Make the namespace "stock" in the ways the test checks, whatever the host has.
    let set = |name: &str, value: &str| {
        let out = ns.exec(&["sysctl", "-qw", &format!("{name}={value}")], &[]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    set("net.ipv4.tcp_wmem", "4096 16384 4194304");
    set("net.ipv4.tcp_rmem", "4096 131072 6291456");
    set("net.ipv4.tcp_no_metrics_save", "0");
    set("net.ipv4.tcp_mtu_probing", "0");
    let before: Vec<String> = PER_NS.iter().map(|n| ns.sysctl(n)).collect();

    let out = ns.exec(
        &[
            LONGHAUL, "tune", "--rate", "1G", "--rtt", "180ms", "--apply", "--json",
        ],
        &env,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "apply failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every line is a JSON object with a type.
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["type"].is_string(), "{line}");
    }
    assert_eq!(ns.sysctl("net.ipv4.tcp_wmem"), "4096 16384 45000000");
    assert_eq!(ns.sysctl("net.ipv4.tcp_rmem"), "4096 131072 45000000");
    assert_eq!(ns.sysctl("net.ipv4.tcp_no_metrics_save"), "1");
    assert_eq!(ns.sysctl("net.ipv4.tcp_mtu_probing"), "1");
    let text = fs::read_to_string(&dropin).unwrap();
    assert!(
        text.contains("net.ipv4.tcp_wmem = 4096 16384 45000000"),
        "{text}"
    );
    assert!(state.exists());
    // After --apply nothing critical is left in this namespace.
    assert!(!stdout.contains("\"severity\":\"critical\""), "{stdout}");

    // A second --apply keeps the original values as the ones to revert to.
    let again = ns.exec(
        &[
            LONGHAUL, "tune", "--rate", "2G", "--rtt", "180ms", "--apply",
        ],
        &env,
    );
    assert!(again.status.code().is_some_and(|c| c <= 1));
    assert_eq!(ns.sysctl("net.ipv4.tcp_wmem"), "4096 16384 90000000");

    let out = ns.exec(&[LONGHAUL, "tune", "--revert"], &env);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after: Vec<String> = PER_NS.iter().map(|n| ns.sysctl(n)).collect();
    assert_eq!(after, before);
    assert!(!dropin.exists() && !state.exists());

    // The host's own values never moved.
    let host_after: Vec<String> = PER_NS.iter().map(|n| host_sysctl(n)).collect();
    assert_eq!(host_after, host_per_ns);
    for (name, value) in &host_globals.0 {
        assert_eq!(&host_sysctl(name), value, "{name} changed on the host");
    }

    // Nothing left to revert: an error (exit 2) that says so.
    let out = ns.exec(&[LONGHAUL, "tune", "--revert"], &env);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to revert"));
}

#[test]
fn revert_restores_a_dropin_that_existed_before() {
    if !is_root() {
        eprintln!("SKIPPED revert_restores_a_dropin_that_existed_before: needs root");
        return;
    }
    let _host_globals = HostGlobals::save();
    let ns = Netns::new("keep");
    let dir = Scratch::new("tune-keep");
    fs::create_dir_all(&dir.0).unwrap();
    let dropin = dir.0.join("90-longhaul.conf");
    let state = dir.0.join("tune-previous.json");
    fs::write(&dropin, "# an older file\nnet.ipv4.tcp_sack = 1\n").unwrap();
    let env = [
        ("LONGHAUL_TUNE_DROPIN", &dropin),
        ("LONGHAUL_TUNE_STATE", &state),
    ];
    let out = ns.exec(
        &[
            LONGHAUL, "tune", "--rate", "10G", "--rtt", "200ms", "--apply",
        ],
        &env,
    );
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(fs::read_to_string(&dropin)
        .unwrap()
        .contains("longhaul tune --apply"));
    let out = ns.exec(&[LONGHAUL, "tune", "--revert"], &env);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        fs::read_to_string(&dropin).unwrap(),
        "# an older file\nnet.ipv4.tcp_sack = 1\n"
    );
}

#[test]
fn not_root_prints_the_commands_and_changes_nothing() {
    if !is_root() {
        eprintln!(
            "SKIPPED not_root_prints_the_commands_and_changes_nothing: needs root to drop it"
        );
        return;
    }
    let has_setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    if !has_setpriv {
        eprintln!("SKIPPED not_root_prints_the_commands_and_changes_nothing: no setpriv");
        return;
    }
    let ns = Netns::new("user");
    let dir = Scratch::new("tune-user");
    let dropin = dir.0.join("90-longhaul.conf");
    let state = dir.0.join("tune-previous.json");
    let env = [
        ("LONGHAUL_TUNE_DROPIN", &dropin),
        ("LONGHAUL_TUNE_STATE", &state),
    ];
    let wmem = ns.sysctl("net.ipv4.tcp_wmem");
    let args = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        LONGHAUL,
        "tune",
        "--rate",
        "1G",
        "--rtt",
        "180ms",
        "--apply",
    ];
    let out = ns.exec(&args, &env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.is_empty() && !out.stderr.is_empty() {
        // The binary may not be reachable by uid 65534 (a private target dir).
        eprintln!(
            "SKIPPED not_root_prints_the_commands_and_changes_nothing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("not root"), "{stdout}");
    assert!(stdout.contains("sysctl -p"), "{stdout}");
    assert!(stdout.contains("net.ipv4.tcp_wmem = 4096"), "{stdout}");
    assert_eq!(ns.sysctl("net.ipv4.tcp_wmem"), wmem);
    assert!(!dropin.exists() && !state.exists());
}
