//! End-to-end bench runs over real loopback sockets (IPv4 and IPv6): a server in a thread,
//! the client in the test, and every refusal path a hostile or mistaken peer can take.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use longhaul_engine::bench::report::{IntervalView, StartReport};
use longhaul_engine::bench::{run_bench, BenchConfig, BenchObserver};
use longhaul_engine::transport::dial::{dial, flush, recv, DataPlan};
use longhaul_proto::{encode_frame, BenchParams, Direction, Message, SendMode, Token};

mod support;

use support::{pinned, token, TestServer};

/// A server without files listening on `listen`.
fn bench_server(listen: &str) -> TestServer {
    TestServer::setup().listen(listen).start()
}

#[derive(Default)]
struct Collect {
    start: Option<StartReport>,
    intervals: Vec<IntervalView>,
}

impl BenchObserver for Collect {
    fn start(&mut self, report: &StartReport) {
        self.start = Some(report.clone());
    }
    fn interval(&mut self, view: &IntervalView) {
        self.intervals.push(view.clone());
    }
}

fn config(target: String) -> BenchConfig {
    BenchConfig {
        target,
        streams: Some(1),
        duration: Duration::from_millis(1500),
        bytes: None,
        reverse: false,
        congestion: None,
        rate_bps: None,
        window: None,
        rx_rate_bps: None,
        interval: Duration::from_millis(500),
        send_mode: SendMode::Sendfile,
        read_rate_bps: None,
        token: token(),
        security: pinned(),
        jump_start: false,
    }
}

#[test]
fn timed_run_over_ipv4_reports_intervals_and_both_ends() {
    let server = bench_server("127.0.0.1:0");
    let mut cfg = config(server.target());
    cfg.streams = Some(2);
    let mut obs = Collect::default();
    let end = run_bench(&cfg, &mut obs).unwrap();
    let start = obs.start.expect("no start report");
    assert_eq!(start.streams, 2);
    assert!(
        start.rtt_ms > 0.0 && start.rtt_ms < 100.0,
        "rtt {}",
        start.rtt_ms
    );
    assert!(
        obs.intervals.len() >= 2,
        "{} intervals",
        obs.intervals.len()
    );
    assert!(obs.intervals.iter().all(|i| i.streams.len() == 2));
    let s = &end.summary;
    assert!(s.bytes > 0);
    assert!(s.seconds >= 1.4, "seconds {}", s.seconds);
    assert_eq!(end.streams.len(), 2);
    assert_eq!(end.streams.iter().map(|x| x.bytes).sum::<u64>(), s.bytes);
    assert!(s.sender.cpu_seconds > 0.0 && s.receiver.cpu_seconds > 0.0);
    // Interval byte counts (acknowledged at the sender) add up to about the total.
    let acked: u64 = obs.intervals.iter().map(|i| i.bytes).sum();
    assert!(acked <= s.bytes, "acked {acked} > received {}", s.bytes);
}

#[test]
fn reverse_run_over_ipv6() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("SKIP: no IPv6 loopback on this host");
        return;
    }
    let server = bench_server("[::1]:0");
    let mut cfg = config(server.target());
    cfg.reverse = true;
    cfg.send_mode = SendMode::Write;
    let mut obs = Collect::default();
    let end = run_bench(&cfg, &mut obs).unwrap();
    assert!(obs.start.unwrap().reverse);
    assert!(end.summary.bytes > 0);
    // In reverse the intervals come from the server's sender-side samples.
    assert!(!obs.intervals.is_empty());
}

#[test]
fn byte_budget_is_exact_and_shared_by_streams() {
    let server = bench_server("127.0.0.1:0");
    let mut cfg = config(server.target());
    cfg.streams = Some(3);
    cfg.bytes = Some(300_000_001);
    let end = run_bench(&cfg, &mut Collect::default()).unwrap();
    assert_eq!(end.summary.bytes, 300_000_001);
}

#[test]
fn pacing_caps_the_rate() {
    let server = bench_server("127.0.0.1:0");
    let mut cfg = config(server.target());
    cfg.rate_bps = Some(200_000_000);
    cfg.streams = Some(2);
    let end = run_bench(&cfg, &mut Collect::default()).unwrap();
    // Pacing is an upper bound: a slow machine only lowers the rate.
    assert!(
        end.summary.bits_per_second < 260_000_000.0,
        "paced to 200 Mbit/s but ran at {}",
        end.summary.bits_per_second
    );
}

#[test]
fn a_path_that_needs_more_than_the_caps_gets_forced_buffers_as_root() {
    if unsafe_geteuid() != 0 {
        eprintln!("SKIP: needs root (SO_SNDBUFFORCE)");
        return;
    }
    let server = bench_server("127.0.0.1:0");
    let mut cfg = config(server.target());
    // 10 Tbit/s over the loopback RTT needs far more than 4 MiB per stream.
    cfg.rate_bps = Some(10_000_000_000_000);
    cfg.duration = Duration::from_millis(300);
    let mut obs = Collect::default();
    run_bench(&cfg, &mut obs).unwrap();
    let start = obs.start.unwrap();
    let rtt_s = start.rtt_ms / 1e3;
    let expected = (2.0 * 1e13 * rtt_s / 8.0).clamp(256.0 * 1024.0, (1u64 << 30) as f64);
    let needed = start.window_needed_bytes as f64;
    assert!(
        (needed - expected).abs() / expected < 0.01,
        "{needed} vs {expected}"
    );
    if start.window_needed_bytes > start.client_host.wmem_max {
        assert!(
            start.local_buffer.contains("forced"),
            "{}",
            start.local_buffer
        );
    }
    if start.window_needed_bytes * 2 > start.server_host.tcp_rmem_max {
        assert_eq!(start.server_rcvbuf_bytes, start.window_needed_bytes);
    }
}

#[test]
fn fixed_window_is_set_at_both_ends() {
    let server = bench_server("127.0.0.1:0");
    let mut cfg = config(server.target());
    cfg.window = Some(512 * 1024);
    cfg.duration = Duration::from_millis(300);
    let mut obs = Collect::default();
    run_bench(&cfg, &mut obs).unwrap();
    let start = obs.start.unwrap();
    assert_eq!(start.window_mode, "fixed");
    assert_eq!(start.server_rcvbuf_bytes, 512 * 1024);
    assert!(
        start.local_buffer.starts_with("524288 bytes"),
        "{}",
        start.local_buffer
    );
}

#[test]
fn wrong_token_is_refused_and_the_server_keeps_serving() {
    let server = bench_server("127.0.0.1:0");
    let mut cfg = config(server.target());
    cfg.token = Token::new(b"9a6bc8cdba84f761976ff4030011e843").unwrap();
    let err = run_bench(&cfg, &mut Collect::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("token"), "{err}");
    let ok = run_bench(&config(server.target()), &mut Collect::default()).unwrap();
    assert!(ok.summary.bytes > 0);
}

#[test]
fn missing_congestion_control_is_a_clear_error() {
    let server = bench_server("127.0.0.1:0");
    let mut cfg = config(server.target());
    cfg.congestion = Some("nosuchcc".into());
    let err = run_bench(&cfg, &mut Collect::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("not available") && err.contains("modprobe"),
        "{err}"
    );
}

fn send_raw(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

fn error_text(reply: &[u8]) -> String {
    match longhaul_proto::decode_frame(reply) {
        Ok(Some((Message::Error { message, .. }, _))) => message,
        other => panic!("expected an error frame, got {other:?}"),
    }
}

#[test]
fn hostile_input_gets_an_error_and_does_not_stop_the_server() {
    let server = bench_server("127.0.0.1:0");
    // Garbage that is not a frame at all (an HTTP request).
    let reply = send_raw(server.addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(error_text(&reply).contains("longhaul client"));
    // A frame header announcing 4 GB.
    let reply = send_raw(server.addr, &[0xff, 0xff, 0xff, 0xff, 1]);
    assert!(error_text(&reply).contains("exceeds the limit"));
    // A future protocol version.
    let mut buf = Vec::new();
    encode_frame(
        &Message::ClientHello {
            version: 99,
            features: 0,
            nonce: [0; 32],
        },
        &mut buf,
    );
    assert!(error_text(&send_raw(server.addr, &buf)).contains("version"));
    // A data connection naming a session that does not exist.
    let mut buf = Vec::new();
    encode_frame(
        &Message::DataHello {
            session_id: 1,
            stream: 0,
            mac: [0; 32],
        },
        &mut buf,
    );
    assert!(error_text(&send_raw(server.addr, &buf)).contains("unknown session"));
    // A client that connects and says nothing is dropped after the timeout; meanwhile a
    // real client is served.
    let _silent = TcpStream::connect(server.addr).unwrap();
    let ok = run_bench(&config(server.target()), &mut Collect::default()).unwrap();
    assert!(ok.summary.bytes > 0);
    assert!(server.log().iter().any(|l| l.contains("malformed")));
}

#[test]
fn absurd_parameters_from_a_raw_client_are_refused_after_authentication() {
    let server = bench_server("127.0.0.1:0");
    // The real client's handshake, then a request it would never send itself.
    let mut dialed = dial(
        &server.target(),
        &token(),
        &config(server.target()).security,
        DataPlan {
            streams: 0,
            receiving: false,
        },
    )
    .unwrap();
    dialed.authenticate().unwrap();
    // Bypass local validation: 5000 streams.
    let bad = BenchParams {
        streams: 5000,
        duration_ms: 1000,
        bytes: 0,
        direction: Direction::ClientToServer,
        congestion: String::new(),
        rate_bps: 0,
        window_bytes: 0,
        window_fixed: false,
        rx_rate_bps: 0,
        read_rate_bps: 0,
        rtt_us: 100,
        interval_ms: 1000,
        send_mode: SendMode::Write,
        jump: None,
    };
    dialed.conn.send(&Message::BenchParams(bad)).unwrap();
    match dialed.conn.recv().unwrap() {
        Message::Error { message, .. } => assert!(message.contains("streams"), "{message}"),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn data_streams_go_without_tls_only_when_the_client_asked() {
    // Asked for (--encryption off): the run works on plain data connections.
    let server = bench_server("127.0.0.1:0");
    let mut cfg = config(server.target());
    cfg.security.encryption = longhaul_engine::transport::tls::Encryption::Off;
    cfg.duration = Duration::from_millis(500);
    let end = run_bench(&cfg, &mut Collect::default()).unwrap();
    assert!(end.summary.bytes > 0);

    // Not asked for (the real client, encryption on): a plain data connection carrying
    // the session's valid proof (a downgrade by someone who could make one) is refused.
    let mut dialed = dial(
        &server.target(),
        &token(),
        &config(server.target()).security,
        DataPlan {
            streams: 0,
            receiving: false,
        },
    )
    .unwrap();
    dialed.authenticate().unwrap();
    let params = BenchParams {
        streams: 1,
        duration_ms: 1000,
        bytes: 0,
        direction: Direction::ClientToServer,
        congestion: String::new(),
        rate_bps: 0,
        window_bytes: 0,
        window_fixed: false,
        rx_rate_bps: 0,
        read_rate_bps: 0,
        rtt_us: 100,
        interval_ms: 1000,
        send_mode: SendMode::Write,
        jump: None,
    };
    dialed.session.request(params).unwrap();
    flush(&mut dialed.session, &mut dialed.conn).unwrap();
    let ready = recv(&mut dialed.conn, "waiting for BenchReady").unwrap();
    assert!(matches!(ready, Message::BenchReady(_)), "{ready:?}");
    let session = dialed.session;
    let mut b = Vec::new();
    encode_frame(&session.data_hello(0, &[]).unwrap(), &mut b);
    let reply = send_raw(server.addr, &b);
    assert!(
        error_text(&reply).contains("without TLS for a session that encrypts"),
        "{}",
        error_text(&reply)
    );
}

#[test]
fn a_second_server_on_the_same_port_says_the_port_is_in_use() {
    let server = bench_server("127.0.0.1:0");
    let err = TestServer::setup()
        .listen(&server.target())
        .try_start()
        .err()
        .expect("second bind succeeded");
    assert!(err.to_string().contains("in use"), "{err}");
}

#[test]
fn several_clients_at_once() {
    let server = bench_server("127.0.0.1:0");
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let cfg = config(server.target());
            std::thread::spawn(move || run_bench(&cfg, &mut Collect::default()))
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap().unwrap().summary.bytes > 0);
    }
}

fn unsafe_geteuid() -> u32 {
    // Reading /proc avoids an unsafe call in a test of a crate that forbids none.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(u32::MAX)
}
