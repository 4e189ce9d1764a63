//! Drives a client and a server session against each other in memory, through the codec,
//! and checks the handshake, the parameter and results exchange, the host report exchange,
//! and every refusal path.

use longhaul_proto::*;

fn token(s: &str) -> Token {
    Token::new(s.as_bytes()).unwrap()
}

fn params() -> BenchParams {
    BenchParams {
        streams: 4,
        duration_ms: 10_000,
        bytes: 0,
        direction: Direction::ClientToServer,
        congestion: "bbr".into(),
        rate_bps: 1_000_000_000,
        window_bytes: 0,
        window_fixed: false,
        rx_rate_bps: 0,
        read_rate_bps: 0,
        rtt_us: 180_000,
        interval_ms: 1000,
        send_mode: SendMode::Sendfile,
        jump: None,
    }
}

/// Moves every queued message from one end to the other through the wire codec.
fn pump(c: &mut ClientSession, s: &mut ServerSession) -> Result<(), ProtoError> {
    loop {
        let mut moved = false;
        while let Some(m) = c.poll_transmit() {
            moved = true;
            let mut buf = Vec::new();
            encode_frame(&m, &mut buf);
            let (m, _) = decode_frame(&buf)?.unwrap();
            s.handle(m)?;
        }
        while let Some(m) = s.poll_transmit() {
            moved = true;
            let mut buf = Vec::new();
            encode_frame(&m, &mut buf);
            let (m, _) = decode_frame(&buf)?.unwrap();
            c.handle(m)?;
        }
        if !moved {
            return Ok(());
        }
    }
}

#[test]
fn full_session_runs_and_data_streams_attach_once() {
    let mut c = ClientSession::new(token("shared-secret-0123456789abcdef"), [7; 32]);
    let mut s = ServerSession::new(token("shared-secret-0123456789abcdef"), [9; 32], 42);
    pump(&mut c, &mut s).unwrap();
    assert_eq!(
        c.poll_event(),
        Some(ClientEvent::Authenticated {
            session_id: 42,
            features: features::DEFAULT
        })
    );
    let Some(ServerEvent::Authenticated { secret, .. }) = s.poll_event() else {
        panic!("server did not authenticate the client")
    };

    c.ping(1);
    c.request(params()).unwrap();
    pump(&mut c, &mut s).unwrap();
    assert_eq!(c.poll_event(), Some(ClientEvent::Pong { seq: 1 }));
    assert_eq!(s.poll_event(), Some(ServerEvent::Params(params())));

    s.accept(BenchReady {
        facts: HostFacts::default(),
        rcvbuf_bytes: 1 << 20,
        sndbuf_bytes: 0,
        rx_rate_bps: 0,
        jump_start_bps: 0,
        jump_note: String::new(),
    });
    pump(&mut c, &mut s).unwrap();
    assert!(matches!(c.poll_event(), Some(ClientEvent::Ready(_))));

    let mut attach = DataAttachments::new(42, secret, 4);
    for stream in 0..4 {
        let Some(Message::DataHello {
            session_id,
            stream,
            mac,
        }) = c.data_hello(stream)
        else {
            panic!("no data hello")
        };
        attach.attach(session_id, stream, &mac).unwrap();
        // A replay of the same hello is refused.
        assert!(attach.attach(session_id, stream, &mac).is_err());
    }
    assert!(attach.complete());

    s.start();
    pump(&mut c, &mut s).unwrap();
    assert_eq!(c.poll_event(), Some(ClientEvent::Started));

    let results = Results {
        wall_us: 10_000_000,
        streams: vec![StreamResult {
            stream: 0,
            bytes: 123,
            ..Default::default()
        }],
        ..Default::default()
    };
    c.send_results(results.clone());
    s.send_results(results.clone());
    pump(&mut c, &mut s).unwrap();
    assert_eq!(
        s.poll_event(),
        Some(ServerEvent::PeerResults(results.clone()))
    );
    assert_eq!(c.poll_event(), Some(ClientEvent::PeerResults(results)));
}

#[test]
fn wrong_token_fails_on_the_client_before_it_proves_anything() {
    let mut c = ClientSession::new(token("client-token-0123456789abcdef"), [1; 32]);
    let mut s = ServerSession::new(token("server-token-0123456789abcdef"), [2; 32], 1);
    let err = pump(&mut c, &mut s).unwrap_err();
    assert_eq!(err, ProtoError::AuthFailed);
    assert!(err.to_string().contains("token"), "{err}");
}

#[test]
fn a_client_that_fakes_its_proof_is_refused() {
    let mut s = ServerSession::new(token("server-token-0123456789abcdef"), [2; 32], 1);
    s.handle(Message::ClientHello {
        version: PROTOCOL_VERSION,
        features: 0,
        nonce: [3; 32],
    })
    .unwrap();
    let _hello = s.poll_transmit();
    assert_eq!(
        s.handle(Message::ClientProof { proof: [0; 32] }),
        Err(ProtoError::AuthFailed)
    );
    assert!(matches!(
        s.poll_transmit(),
        Some(Message::Error {
            code: ErrorCode::Auth,
            ..
        })
    ));
    assert!(s.poll_event().is_none());
}

#[test]
fn version_mismatch_is_reported_to_the_peer() {
    let mut s = ServerSession::new(token("server-token-0123456789abcdef"), [2; 32], 1);
    let err = s
        .handle(Message::ClientHello {
            version: 99,
            features: 0,
            nonce: [3; 32],
        })
        .unwrap_err();
    assert!(matches!(
        err,
        ProtoError::VersionMismatch { theirs: 99, .. }
    ));
    assert!(err.to_string().contains("same longhaul release"));
    assert!(matches!(
        s.poll_transmit(),
        Some(Message::Error {
            code: ErrorCode::Version,
            ..
        })
    ));
}

#[test]
fn messages_out_of_order_are_refused() {
    let mut s = ServerSession::new(token("server-token-0123456789abcdef"), [2; 32], 1);
    assert!(matches!(
        s.handle(Message::BenchParams(params())),
        Err(ProtoError::Unexpected { .. })
    ));
    let mut c = ClientSession::new(token("server-token-0123456789abcdef"), [2; 32]);
    assert!(matches!(
        c.handle(Message::Start),
        Err(ProtoError::Unexpected { .. })
    ));
    assert!(c.request(params()).is_err());
}

#[test]
fn absurd_parameters_are_refused_with_the_field_named() {
    let mut bad = params();
    bad.streams = 0;
    assert!(bad.validate().unwrap_err().to_string().contains("streams"));
    let mut bad = params();
    bad.bytes = 5;
    assert!(bad.validate().unwrap_err().to_string().contains("not both"));
    let mut bad = params();
    bad.congestion = "../etc".into();
    assert!(bad.validate().is_err());
    let mut bad = params();
    bad.interval_ms = 1;
    assert!(bad.validate().is_err());
    let mut bad = params();
    bad.window_bytes = u64::MAX;
    assert!(bad.validate().is_err());
}

#[test]
fn peer_error_ends_the_session_with_its_message() {
    let mut c = ClientSession::new(token("server-token-0123456789abcdef"), [2; 32]);
    let err = c
        .handle(Message::Error {
            code: ErrorCode::Busy,
            message: "try later".into(),
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "peer reported: try later");
}

fn authenticated_pair() -> (ClientSession, ServerSession) {
    let mut c = ClientSession::new(token("shared-secret-0123456789abcdef"), [7; 32]);
    let mut s = ServerSession::new(token("shared-secret-0123456789abcdef"), [9; 32], 42);
    pump(&mut c, &mut s).unwrap();
    assert!(matches!(
        c.poll_event(),
        Some(ClientEvent::Authenticated { .. })
    ));
    assert!(matches!(
        s.poll_event(),
        Some(ServerEvent::Authenticated { .. })
    ));
    (c, s)
}

#[test]
fn host_report_is_asked_for_after_authentication_and_ends_the_session() {
    let (mut c, mut s) = authenticated_pair();
    c.ping(3);
    c.request_host_report(1_000_000_000, 180_000).unwrap();
    pump(&mut c, &mut s).unwrap();
    assert_eq!(c.poll_event(), Some(ClientEvent::Pong { seq: 3 }));
    assert_eq!(
        s.poll_event(),
        Some(ServerEvent::HostReportRequested {
            rate_bps: 1_000_000_000,
            rtt_us: 180_000
        })
    );
    assert!(!s.is_reported());
    let json = r#"{"findings":[]}"#.to_string();
    s.send_host_report(json.clone());
    assert!(s.is_reported());
    pump(&mut c, &mut s).unwrap();
    assert_eq!(
        c.poll_event(),
        Some(ClientEvent::HostReport {
            findings_json: json
        })
    );
    // The session is over: neither a run nor a second report may follow.
    assert!(c.request(params()).is_err());
    assert!(c.request_host_report(1_000_000_000, 180_000).is_err());
    assert!(matches!(
        s.handle(Message::BenchParams(params())),
        Err(ProtoError::Unexpected { .. })
    ));
}

#[test]
fn host_report_before_authentication_or_unasked_is_refused() {
    let mut s = ServerSession::new(token("server-token-0123456789abcdef"), [2; 32], 1);
    assert!(matches!(
        s.handle(Message::HostReportRequest {
            rate_bps: 1,
            rtt_us: 1
        }),
        Err(ProtoError::Unexpected { .. })
    ));
    let mut c = ClientSession::new(token("server-token-0123456789abcdef"), [2; 32]);
    assert!(c.request_host_report(1_000_000_000, 1000).is_err());
    let (mut c, _s) = authenticated_pair();
    assert!(matches!(
        c.handle(Message::HostReport {
            findings_json: "{}".into()
        }),
        Err(ProtoError::Unexpected { .. })
    ));
    // A server that was not asked does not answer.
    let (_c, mut s) = authenticated_pair();
    s.send_host_report("{}".into());
    assert!(s.poll_transmit().is_none());
}

#[test]
fn absurd_report_paths_are_refused_with_the_field_named() {
    for (rate, rtt, field) in [
        (0, 1000, "rate"),
        (u64::MAX, 1000, "rate"),
        (limits::MAX_REPORT_RATE_BPS + 1, 1000, "rate"),
        (1_000_000, 0, "rtt"),
        (1_000_000, limits::MAX_REPORT_RTT_US + 1, "rtt"),
    ] {
        let err = validate_report_request(rate, rtt).unwrap_err();
        assert!(err.to_string().contains(field), "{err}");
        // The server refuses it too, and tells the client which field.
        let (_c, mut s) = authenticated_pair();
        let err = s
            .handle(Message::HostReportRequest {
                rate_bps: rate,
                rtt_us: rtt,
            })
            .unwrap_err();
        assert!(matches!(err, ProtoError::InvalidField { .. }));
        assert!(matches!(
            s.poll_transmit(),
            Some(Message::Error {
                code: ErrorCode::Params,
                ..
            })
        ));
    }
    validate_report_request(limits::MAX_REPORT_RATE_BPS, limits::MAX_REPORT_RTT_US).unwrap();
}

#[test]
fn transfer_takes_over_an_authenticated_session_only() {
    let mut c = ClientSession::new(token("shared-secret-0123456789abcdef"), [7; 32]);
    let mut s = ServerSession::new(token("shared-secret-0123456789abcdef"), [9; 32], 5);
    // Not yet authenticated: both ends refuse.
    assert!(c.begin_transfer().is_err());
    assert!(s.begin_transfer().is_err());

    let mut c = ClientSession::new(token("shared-secret-0123456789abcdef"), [7; 32]);
    let mut s = ServerSession::new(token("shared-secret-0123456789abcdef"), [9; 32], 5);
    pump(&mut c, &mut s).unwrap();
    c.begin_transfer().unwrap();
    s.begin_transfer().unwrap();
    // Pings still work during a transfer...
    c.ping(3);
    pump(&mut c, &mut s).unwrap();
    while let Some(ev) = c.poll_event() {
        if let ClientEvent::Pong { seq } = ev {
            assert_eq!(seq, 3);
        }
    }
    // ...but bench parameters do not, on either end.
    assert!(c.request(params()).is_err());
    assert!(s.handle(Message::BenchParams(params())).is_err());
    // A second hand-off is refused.
    let mut c2 = ClientSession::new(token("shared-secret-0123456789abcdef"), [7; 32]);
    let mut s2 = ServerSession::new(token("shared-secret-0123456789abcdef"), [9; 32], 6);
    pump(&mut c2, &mut s2).unwrap();
    s2.begin_transfer().unwrap();
    assert!(s2.begin_transfer().is_err());
}

#[test]
fn a_transfer_may_be_requested_right_behind_the_proof() {
    let mut c = ClientSession::new(token("shared-secret-0123456789abcdef"), [7; 32]);
    let mut s = ServerSession::new(token("shared-secret-0123456789abcdef"), [9; 32], 8);
    // Client hello to the server, server hello back: the client now sends its proof.
    let hello = c.poll_transmit().unwrap();
    s.handle(hello).unwrap();
    c.handle(s.poll_transmit().unwrap()).unwrap();
    c.begin_transfer().unwrap();
    // No secret before the welcome...
    assert!(c.data_hello(0).is_none());
    pump(&mut c, &mut s).unwrap();
    // ...and after it the session is authenticated and data hellos are possible.
    assert!(matches!(
        c.poll_event(),
        Some(ClientEvent::Authenticated { session_id: 8, .. })
    ));
    assert!(c.data_hello(0).is_some());
    s.begin_transfer().unwrap();
    assert!(c.request(params()).is_err());
}
