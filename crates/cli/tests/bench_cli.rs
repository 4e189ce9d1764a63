//! The `longhaul` binary end to end: `serve` and `bench` as separate processes, the JSON
//! Lines schema, the default per-user token, a server killed mid-run, and a run between two
//! network namespaces joined by a veth pair (root only; skipped with a message otherwise).
//! bench's data goes unencrypted unless `--encryption on` asks (the server's log says which
//! it accepted), and its `end` says so with what TLS would allow per core here.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{
    is_root, json_lines, json_of, longhaul_via as command, EmulatedPath, Proc, Scratch, Server,
};

/// Starts `longhaul serve ARGS` through `prefix` and waits for its "listening on ADDR" line
/// (no sleeping); returns it and ADDR.
fn serve(prefix: &[&str], home: &Scratch, args: &[&str]) -> (Server, String) {
    let server = Server::start_args(prefix, &home.0, args);
    let addr = server.addr.clone();
    (server, addr)
}

#[test]
fn json_schema_and_default_token_between_two_processes() {
    let home = Scratch::new("json");
    let (_server, addr) = serve(&[], &home, &["--listen", "127.0.0.1", "--port", "0"]);
    let port = addr.rsplit(':').next().unwrap().to_string();
    let out = command(&[], &home.0)
        .args([
            "bench",
            &format!("127.0.0.1:{port}"),
            "-t",
            "1.2s",
            "-i",
            "0.4s",
            "-P",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let objs = json_of(out);
    assert_eq!(objs.first().unwrap()["type"], "start");
    assert_eq!(objs.last().unwrap()["type"], "end");
    assert!(objs.iter().filter(|o| o["type"] == "interval").count() >= 2);
    let summary = &objs.last().unwrap()["summary"];
    for key in [
        "bytes",
        "seconds",
        "bits_per_second",
        "retransmits",
        "limited_by",
    ] {
        assert!(!summary[key].is_null(), "summary lacks {key}: {summary}");
    }
    assert!(summary["bytes"].as_u64().unwrap() > 0);
    let interval = objs.iter().find(|o| o["type"] == "interval").unwrap();
    let s0 = &interval["streams"][0];
    for key in [
        "bytes",
        "bits_per_second",
        "cwnd_bytes",
        "rtt_ms",
        "retransmits",
        "delivery_rate_bps",
        "pacing_rate_bps",
        "limited_by",
    ] {
        assert!(!s0[key].is_null(), "interval stream lacks {key}: {s0}");
    }
    // The default token was created private on first use.
    let token = home.0.join(".config/longhaul/token");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&token).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn mismatched_tokens_say_how_to_share_one() {
    let home_a = Scratch::new("tok-a");
    let home_b = Scratch::new("tok-b");
    let (_server, addr) = serve(&[], &home_a, &["--listen", "127.0.0.1", "--port", "0"]);
    let out = command(&[], &home_b.0)
        .args(["bench", &addr, "-t", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("same token") && err.contains("LONGHAUL_TOKEN"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "not a one-line error: {err}");
}

#[test]
fn a_server_killed_mid_run_ends_the_client_with_a_clear_error() {
    let home = Scratch::new("kill");
    let (mut server, addr) = serve(&[], &home, &["--listen", "127.0.0.1", "--port", "0"]);
    let mut client = Proc(
        command(&[], &home.0)
            .args(["bench", &addr, "-t", "60s", "-i", "0.2s", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = client.0.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    // Wait until the run is under way.
    loop {
        let l = lines.next().expect("client ended early").unwrap();
        if l.contains("\"interval\"") {
            break;
        }
    }
    let killed_at = Instant::now();
    server.kill();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = client.0.wait().unwrap();
    assert_eq!(status.code(), Some(2));
    let last = rest.last().expect("no error object");
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["type"], "error", "{last}");
    // Bounded: far less than the 60 s the run asked for.
    assert!(killed_at.elapsed() < Duration::from_secs(45));
}

/// Two namespaces joined by a veth pair, deleted on drop.
struct VethPair {
    a: String,
    b: String,
}

impl VethPair {
    fn new() -> Option<Self> {
        let tag = format!("lhb{}", std::process::id() % 100_000);
        let pair = Self {
            a: format!("{tag}a"),
            b: format!("{tag}b"),
        };
        let ip = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        let ok = ip(&["netns", "add", &pair.a])
            && ip(&["netns", "add", &pair.b])
            && ip(&[
                "link",
                "add",
                "veth-lh-a",
                "netns",
                &pair.a,
                "type",
                "veth",
                "peer",
                "name",
                "veth-lh-b",
                "netns",
                &pair.b,
            ])
            && ip(&[
                "-n",
                &pair.a,
                "addr",
                "add",
                "10.231.0.1/24",
                "dev",
                "veth-lh-a",
            ])
            && ip(&[
                "-n",
                &pair.b,
                "addr",
                "add",
                "10.231.0.2/24",
                "dev",
                "veth-lh-b",
            ])
            && ip(&["-n", &pair.a, "link", "set", "veth-lh-a", "up"])
            && ip(&["-n", &pair.b, "link", "set", "veth-lh-b", "up"])
            && ip(&["-n", &pair.a, "link", "set", "lo", "up"])
            && ip(&["-n", &pair.b, "link", "set", "lo", "up"]);
        ok.then_some(pair)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "delete", ns]).status();
        }
    }
}

#[test]
fn bench_between_two_namespaces_over_veth() {
    if !is_root() {
        eprintln!("SKIP: bench_between_two_namespaces_over_veth needs root (network namespaces)");
        return;
    }
    let Some(pair) = VethPair::new() else {
        panic!("could not create namespaces and a veth pair although root");
    };
    let home = Scratch::new("veth");
    let (_server, _addr) = serve(
        &["ip", "netns", "exec", &pair.a],
        &home,
        &["--listen", "10.231.0.1", "--port", "5290", "--once"],
    );
    let out = command(&["ip", "netns", "exec", &pair.b], &home.0)
        .args(["bench", "10.231.0.1", "-t", "1.5s", "-P", "2", "--json"])
        .output()
        .unwrap();
    let objs = json_of(out);
    let end = objs.last().unwrap();
    assert_eq!(end["type"], "end");
    assert!(end["summary"]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(objs[0]["server"], "10.231.0.1:5290");
}

/// Receiver-side pacing (the University of Tokyo's fix for receivers slower than the
/// wire): with a receiving application throttled to 100 Mbit/s, an unclamped sender runs
/// far ahead of it and parks megabytes in the receiver's buffer; with `--rx-rate 100M` the
/// advertised window holds the sender to what the receiver absorbs.
#[test]
fn rx_rate_holds_the_sender_to_a_slow_receiver() {
    if !is_root() || !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!("SKIP: rx_rate_holds_the_sender_to_a_slow_receiver needs root and /dev/net/tun");
        return;
    }
    let name = format!("rx{}", std::process::id() % 100_000);
    let _path = EmulatedPath::up(&name, &["--rtt", "40ms", "--rate", "1G"]);
    let home = Scratch::new("rxrate");
    let ns_a = format!("lh-{name}-a");
    let ns_b = format!("lh-{name}-b");
    let (_server, _) = serve(
        &["ip", "netns", "exec", &ns_b],
        &home,
        &["--listen", "10.99.0.2"],
    );
    let run = |extra: &[&str]| -> (Vec<f64>, f64) {
        let out = command(&["ip", "netns", "exec", &ns_a], &home.0)
            .args([
                "bench",
                "10.99.0.2",
                "-t",
                "3s",
                "-i",
                "0.5s",
                // One stream, as the receive window this test watches is per stream.
                "-P",
                "1",
                "--read-rate",
                "100M",
                "--json",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let objs = json_lines(&out.stdout);
        // What the sender had acknowledged, interval by interval, in bit/s.
        let acked: Vec<f64> = objs
            .iter()
            .filter(|o| o["type"] == "interval")
            .map(|o| o["bits_per_second"].as_f64().unwrap())
            .collect();
        let read = objs.last().unwrap()["summary"]["bits_per_second"]
            .as_f64()
            .unwrap();
        (acked, read)
    };
    let (free, free_read) = run(&[]);
    let (clamped, clamped_read) = run(&["--rx-rate", "100M"]);
    let peak = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    // The reader is throttled in both runs.
    assert!(
        free_read < 130e6 && clamped_read < 130e6,
        "{free_read} {clamped_read}"
    );
    // Unclamped, the sender fills the receiver's buffer at path speed first.
    assert!(
        peak(&free) > 300e6,
        "unclamped sender peaked at only {}",
        peak(&free)
    );
    // Clamped, it never gets much ahead of the reader.
    assert!(
        peak(&clamped) < 200e6,
        "clamped sender peaked at {}",
        peak(&clamped)
    );
}

/// bench measures the path: the session is authenticated over TLS, its data streams go
/// unencrypted (the server's log says so), and the end reports what TLS costs per core;
/// `--encryption on` runs the data in TLS.
#[test]
fn bench_data_is_unencrypted_unless_asked_and_reports_what_tls_allows() {
    let home = Scratch::new("bench-plain");
    let (server, addr) = serve(&[], &home, &["--listen", "127.0.0.1", "--port", "0"]);
    let target = format!("127.0.0.1:{}", addr.rsplit(':').next().unwrap());
    for (flags, encrypted, logged) in [
        (&[][..], false, "data unencrypted, as the client asked"),
        (&["--encryption", "on"][..], true, "data in TLS"),
    ] {
        let out = command(&[], &home.0)
            .args(["bench", &target, "-t", "0.5s", "--json"])
            .args(flags)
            .output()
            .unwrap();
        let objs = json_of(out);
        let end = objs.last().unwrap();
        assert_eq!(end["type"], "end", "{end}");
        let p = &end["data_protection"];
        assert_eq!(p["encrypted"], encrypted, "{end}");
        for key in ["seal_bps_per_core", "open_bps_per_core"] {
            assert!(p[key].as_u64().is_some_and(|b| b > 1_000_000), "{key}: {p}");
        }
        assert!(
            p["cipher"].as_str().is_some_and(|c| c.contains("AES")),
            "{p}"
        );
        let log = server.log_with(logged);
        assert!(log.contains(logged), "{log}");
    }
    let text = command(&[], &home.0)
        .args(["bench", &target, "-t", "0.3s"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("Data: unencrypted") && l.contains("per core")),
        "{text}"
    );
}
