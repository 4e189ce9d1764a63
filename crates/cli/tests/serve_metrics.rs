//! `longhaul serve --metrics ADDR` and `--log-json`, with a real server process and real
//! connections on loopback: a bench, a push and a pull against it, a client with the wrong
//! token and a stranger who sends no TLS, then a scrape over HTTP in which every figure
//! moved as those did; anything but `GET /metrics` is not answered with the figures; a
//! connection that never speaks shows as closed at its deadline. With `--log-json` every
//! line the server logs is a JSON object.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use support::http::{free_port, get};
use support::{cp_command, longhaul, make_token, Rng, Scratch, Server, MIB};

/// The value of the sample `name` (with its labels) in an exposition.
fn sample(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn a_scrape_counts_what_the_server_did() {
    let s = Scratch::new("serve-metrics");
    let home = s.dir("home");
    let root = s.dir("root");
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = Server::start_with(&home, &root, &["--metrics", &metrics]);
    let scrape = || get(&metrics, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let before = scrape();
    assert!(before.starts_with("HTTP/1.1 200 OK\r\n"), "{before}");
    assert!(
        before.contains("Content-Type: text/plain; version=0.0.4"),
        "{before}"
    );
    assert_eq!(
        sample(&before, "longhaul_sessions_total{outcome=\"ok\"}"),
        0
    );
    assert!(
        sample(&before, "longhaul_memory_budget_bytes") > 0,
        "{before}"
    );

    // A bench, a push and a pull.
    let bench = longhaul(&home)
        .args(["bench", &server.addr, "-t", "1s", "--json"])
        .output()
        .unwrap();
    assert!(bench.status.success(), "{}", server.log());
    let src = s.join("src.bin");
    std::fs::write(&src, Rng::from_env("serve_metrics").bytes(3 * MIB as usize)).unwrap();
    let push = cp_command(&home)
        .arg(&src)
        .arg(server.remote("pushed.bin"))
        .output()
        .unwrap();
    assert!(push.status.success(), "{}", server.log());
    let pull = cp_command(&home)
        .arg(server.remote("pushed.bin"))
        .arg(s.join("pulled.bin"))
        .output()
        .unwrap();
    assert!(pull.status.success(), "{}", server.log());
    // A client with another token, and a stranger who speaks no TLS.
    let other = s.dir("other");
    let token = s.join("other-token");
    make_token(&other, &token);
    let wrong = longhaul(&other)
        .args(["bench", &server.addr, "-t", "1s", "--token-file"])
        .arg(&token)
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    let mut stranger = TcpStream::connect(&server.addr).unwrap();
    stranger.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    stranger
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = stranger.read_to_end(&mut sink);

    // Sessions end on the server a moment after the clients do.
    let mut after = scrape();
    for _ in 0..50 {
        if sample(&after, "longhaul_sessions_total{outcome=\"ok\"}") >= 3
            && sample(&after, "longhaul_refused_total{reason=\"auth\"}") >= 1
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        after = scrape();
    }
    let log = server.log();
    assert_eq!(
        sample(&after, "longhaul_sessions_total{outcome=\"ok\"}"),
        3,
        "{after}\n{log}"
    );
    assert_eq!(
        sample(&after, "longhaul_sessions_total{outcome=\"failed\"}"),
        0
    );
    assert_eq!(sample(&after, "longhaul_sessions_active"), 0);
    assert!(
        sample(&after, "longhaul_refused_total{reason=\"auth\"}") >= 1,
        "{after}\n{log}"
    );
    assert!(
        sample(&after, "longhaul_refused_total{reason=\"protocol\"}") >= 1,
        "{after}\n{log}"
    );
    // The bench sent (the server receives a forward bench), the push and pull each moved
    // the file.
    let received = sample(&after, "longhaul_bytes_total{direction=\"received\"}");
    let sent = sample(&after, "longhaul_bytes_total{direction=\"sent\"}");
    assert!(received > 3 * MIB, "received {received}\n{after}");
    assert!(sent >= 3 * MIB, "sent {sent}\n{after}");
    // Every connection counted: the bench's and each copy's control and data connections,
    // the wrong client's, the stranger's.
    assert!(sample(&after, "longhaul_connections_total") >= 6, "{after}");

    // Nothing but a GET of /metrics gets the figures.
    let other_path = get(&metrics, "GET / HTTP/1.1\r\n\r\n");
    assert!(other_path.starts_with("HTTP/1.1 404"), "{other_path}");
    assert!(!other_path.contains("longhaul_"), "{other_path}");
    let post = get(&metrics, "POST /metrics HTTP/1.1\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 400"), "{post}");
    // A scraper that never finishes its request does not keep the endpoint from others.
    let _silent = TcpStream::connect(&metrics).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(scrape().starts_with("HTTP/1.1 200"));

    // A connection to the server that never speaks is closed at its deadline (5 s).
    let idle = TcpStream::connect(&server.addr).unwrap();
    let closed = |t: &str| sample(t, "longhaul_door_closed_total{why=\"deadline\"}");
    let mut text = scrape();
    for _ in 0..100 {
        if closed(&text) >= 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        text = scrape();
    }
    assert!(closed(&text) >= 1, "{text}");
    drop(idle);
}

#[test]
fn a_metrics_address_that_cannot_be_bound_is_one_clear_error() {
    let s = Scratch::new("serve-metrics-bad");
    let home = s.dir("home");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap().to_string();
    let out = longhaul(&home)
        .args([
            "serve",
            "--listen",
            "127.0.0.1",
            "--port",
            "0",
            "--metrics",
            &at,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("cannot serve --metrics on {at}")),
        "{err}"
    );
}

#[test]
fn log_json_writes_one_object_per_line() {
    let s = Scratch::new("serve-log-json");
    let home = s.dir("home");
    let mut child = longhaul(&home)
        .args([
            "serve",
            "--listen",
            "127.0.0.1",
            "--port",
            "0",
            "--log-json",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    // Read until the listening line, then stop the server.
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.contains("listening on") {
        let n = stderr.read(&mut buf).unwrap();
        assert!(n > 0, "serve ended: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let _ = child.kill();
    let _ = child.wait();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 3, "{text}");
    for line in &lines[..lines.len() - 1] {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["time"].as_f64().unwrap() > 1.7e9, "{line}");
        assert!(v["message"].is_string(), "{line}");
    }
    assert!(text.contains("\"message\":\"TLS certificate"), "{text}");
}
