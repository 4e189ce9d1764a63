//! `tune --peer`'s exchange over real loopback sockets: a real server in a thread answers
//! with its findings for the path asked about, and the same server then still serves other
//! sessions; a hostile server's malformed report is refused with a clear error.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use longhaul_engine::bench::{peer_report, BenchError};
use longhaul_engine::daemon::{ServeConfig, Server};
use longhaul_engine::transport::framed::FramedConn;
use longhaul_engine::transport::tls::{Security, ServerTls};

fn server_tls() -> ServerTls {
    static TLS: std::sync::OnceLock<ServerTls> = std::sync::OnceLock::new();
    TLS.get_or_init(|| ServerTls::ephemeral().unwrap()).clone()
}

fn pinned() -> Security {
    Security::pinned(server_tls().fingerprint())
}
use longhaul_proto::{ProtoError, ServerEvent, ServerSession, Token};

fn token() -> Token {
    Token::new(b"8cf257be99bba4bc4fcc77328756fa20").unwrap()
}

#[test]
fn a_server_reports_its_findings_for_the_path_asked_about() {
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let l2 = log.clone();
    let server = Server::bind(
        ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            keyring: token().into(),
            once: false,
            rx_rate_bps: None,
            files: Default::default(),
            tls: server_tls(),
            keep_setuid: false,
            caps: Default::default(),
        },
        Arc::new(move |line: &str| l2.lock().unwrap().push(line.to_string())),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let handle = std::thread::spawn(move || server.serve(Some(s2)));
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let guard = Stop(stop);

    let target = addr.to_string();
    let measured = peer_report(&target, &token(), &pinned(), 10_000_000_000, None).unwrap();
    assert_eq!(measured.addr, addr);
    assert!(measured.rtt > Duration::ZERO && measured.rtt < Duration::from_secs(5));
    assert!(!measured.report.findings.is_empty());
    assert_eq!(measured.report.omitted, 0);

    // The server judged the path the client named: 10 Gbit/s at 100 ms wants 250 MB buffers.
    let given = peer_report(
        &target,
        &token(),
        &pinned(),
        10_000_000_000,
        Some(Duration::from_millis(100)),
    )
    .unwrap();
    let rmem = given
        .report
        .findings
        .iter()
        .find(|f| f.key == "net.ipv4.tcp_rmem")
        .expect("no tcp_rmem finding");
    assert_eq!(rmem.wanted.as_deref(), Some("max >= 250000000"));

    // A wrong token is refused as for a bench, and the server keeps serving.
    let wrong = Token::new(b"4e1228910ae89955d385d7659d09cd9c").unwrap();
    let err = peer_report(&target, &wrong, &pinned(), 1_000_000_000, None).unwrap_err();
    assert!(
        matches!(err, BenchError::Proto(ProtoError::AuthFailed)),
        "{err}"
    );
    peer_report(&target, &token(), &pinned(), 1_000_000_000, None).unwrap();

    drop(guard);
    handle.join().unwrap().unwrap().unwrap();
    let lines = log.lock().unwrap();
    assert!(
        lines.iter().filter(|l| l.contains("host report")).count() >= 3,
        "{lines:?}"
    );
}

/// A server that authenticates properly, then answers the request with `reply`.
fn hostile_server(reply: &'static str) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let tls = server_tls();
        let cert = tls.fingerprint().0;
        let mut hello = Vec::new();
        longhaul_proto::encode_frame(
            &ServerSession::hello(&token().into(), [3; 32], &cert)[0],
            &mut hello,
        );
        let stream = tls.accept(stream, Duration::from_secs(10), &hello).unwrap();
        let binding = longhaul_proto::ChannelBinding {
            cert,
            exporter: stream.exporter().unwrap(),
        };
        let mut conn = FramedConn::new(stream);
        let mut session = ServerSession::new(token().into(), [3; 32], binding);
        loop {
            let Ok(msg) = conn.recv() else { return };
            if session.handle(msg).is_err() {
                return;
            }
            while let Some(ev) = session.poll_event() {
                if let ServerEvent::HostReportRequested { .. } = ev {
                    session.send_host_report(reply.to_string());
                }
            }
            while let Some(m) = session.poll_transmit() {
                if conn.send(&m).is_err() {
                    return;
                }
            }
        }
    });
    (addr, handle)
}

#[test]
fn a_malformed_report_is_refused_with_a_clear_error() {
    for reply in [
        "not json",
        r#"{"findings":[{"key":"k","severity":"dire","current":"","why":""}]}"#,
    ] {
        let (addr, handle) = hostile_server(reply);
        let err = peer_report(&addr, &token(), &pinned(), 1_000_000_000, None).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("host report") && text.contains("same longhaul release"),
            "{text}"
        );
        handle.join().unwrap();
    }
}
