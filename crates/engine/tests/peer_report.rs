//! `tune --peer`'s exchange over real loopback sockets: a real server in a thread answers
//! with its findings for the path asked about, and the same server then still serves other
//! sessions; a hostile server's malformed report is refused with a clear error.

use std::net::TcpListener;
use std::time::Duration;

use longhaul_engine::bench::{peer_report, BenchError};
use longhaul_engine::transport::framed::FramedConn;

mod support;

use longhaul_proto::{ProtoError, ServerEvent, ServerSession, Token};
use support::{pinned, server_tls, token, TestServer};

#[test]
fn a_server_reports_its_findings_for_the_path_asked_about() {
    let server = TestServer::setup().start();
    let (addr, target) = (server.addr, server.target());
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

    // Each session's line comes as it ends, right after its answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let reported = || {
        server
            .log()
            .iter()
            .filter(|l| l.contains("host report"))
            .count()
    };
    while reported() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(reported() >= 3, "{:?}", server.log());
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
