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

/// The server's certificate (its SHA-256) in these tests.
const CERT: [u8; 32] = [5; 32];

/// One TLS connection's binding (`e` stands for its exporter).
fn binding(e: u8) -> ChannelBinding {
    ChannelBinding {
        cert: CERT,
        exporter: [e; 32],
    }
}

/// A client on connection 1 that has not yet seen the server's hello.
fn client(t: &str) -> ClientSession {
    ClientSession::new(token(t), [7; 32], binding(1))
}

/// A server on connection 1 (its hello is [`server_hello`]).
fn server(t: &str) -> ServerSession {
    ServerSession::new(token(t).into(), [9; 32], binding(1))
}

/// The 0.5-RTT hello of a server holding `t`.
fn server_hello(t: &str) -> Message {
    let mut flight = ServerSession::hello(&token(t).into(), [9; 32], &CERT);
    assert_eq!(flight.len(), 1, "one token, one hello");
    flight.remove(0)
}

/// A client and a server on one connection, the server's hello delivered (it must pass).
fn pair(ct: &str, st: &str) -> (ClientSession, ServerSession) {
    let mut c = client(ct);
    c.handle(server_hello(st)).unwrap();
    (c, server(st))
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
    let (mut c, mut s) = pair(
        "9a6bc8cdba84f761976ff4030011e843",
        "9a6bc8cdba84f761976ff4030011e843",
    );
    pump(&mut c, &mut s).unwrap();
    assert_eq!(
        c.poll_event(),
        Some(ClientEvent::Authenticated {
            session_id: s.session_id(),
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

    let mut attach = DataAttachments::new(s.session_id(), secret, 4);
    for stream in 0..4 {
        let Some(Message::DataHello {
            session_id,
            stream,
            mac,
        }) = c.data_hello(stream, b"data conn")
        else {
            panic!("no data hello")
        };
        // Presented on another TLS connection (a replay), it fails.
        assert_eq!(
            attach.attach(session_id, stream, &mac, b"another conn"),
            Err(ProtoError::AuthFailed)
        );
        attach
            .attach(session_id, stream, &mac, b"data conn")
            .unwrap();
        // A replay of the same hello is refused.
        assert!(attach
            .attach(session_id, stream, &mac, b"data conn")
            .is_err());
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
    // The sending server's jump-start verdict (the client announced the feature).
    assert!(s.takes_jump_verdict());
    s.send_jump_verdict(JumpOutcome::RetreatedOnQueue);
    pump(&mut c, &mut s).unwrap();
    assert_eq!(
        c.poll_event(),
        Some(ClientEvent::PeerJumpVerdict(JumpOutcome::RetreatedOnQueue))
    );

    c.send_results(results.clone());
    s.send_results(results.clone());
    pump(&mut c, &mut s).unwrap();
    assert_eq!(
        s.poll_event(),
        Some(ServerEvent::PeerResults(results.clone()))
    );
    assert_eq!(c.poll_event(), Some(ClientEvent::PeerResults(results)));
}

/// A client that did not announce `JUMP_VERDICT` (an older build) is never sent one, and
/// one it did not ask for is refused.
#[test]
fn the_jump_verdict_goes_only_to_a_client_that_takes_it() {
    let t = "9a6bc8cdba84f761976ff4030011e843";
    let mut c = ClientSession::with_features(
        token(t),
        [7; 32],
        binding(1),
        features::DEFAULT & !features::JUMP_VERDICT,
    );
    c.handle(server_hello(t)).unwrap();
    let mut s = server(t);
    pump(&mut c, &mut s).unwrap();
    assert!(!s.takes_jump_verdict());
    c.request(params()).unwrap();
    pump(&mut c, &mut s).unwrap();
    s.accept(BenchReady {
        facts: HostFacts::default(),
        rcvbuf_bytes: 1 << 20,
        sndbuf_bytes: 0,
        rx_rate_bps: 0,
        jump_start_bps: 0,
        jump_note: String::new(),
    });
    s.start();
    pump(&mut c, &mut s).unwrap();
    s.send_jump_verdict(JumpOutcome::Confirmed);
    assert!(
        s.poll_transmit().is_none(),
        "sent to a client that did not ask"
    );
    let refused = c.handle(Message::JumpVerdict {
        outcome: JumpOutcome::Confirmed,
    });
    assert!(matches!(refused, Err(ProtoError::Unexpected { .. })));
}

#[test]
fn wrong_token_fails_on_the_client_before_it_proves_anything() {
    let mut c = client("8cf257be99bba4bc4fcc77328756fa20");
    let err = c
        .handle(server_hello("4e1228910ae89955d385d7659d09cd9c"))
        .unwrap_err();
    assert_eq!(err, ProtoError::AuthFailed);
    assert!(err.to_string().contains("token"), "{err}");
    // Only the hello went out (it carries no secret), then the refusal: no proof.
    let sent: Vec<Message> = std::iter::from_fn(|| c.poll_transmit()).collect();
    assert!(matches!(sent[0], Message::ClientHello { .. }));
    assert!(!sent
        .iter()
        .any(|m| matches!(m, Message::ClientProof { .. })));
    assert!(c.data_hello(0, &[]).is_none());
}

#[test]
fn a_server_hello_for_another_certificate_is_refused() {
    // A man in the middle with his own certificate replays the real server's hello:
    // the proof names the real certificate, not the one this TLS handshake presented.
    let t = "9a6bc8cdba84f761976ff4030011e843";
    let mut c = ClientSession::new(
        token(t),
        [7; 32],
        ChannelBinding {
            cert: [6; 32],
            exporter: [1; 32],
        },
    );
    assert_eq!(c.handle(server_hello(t)), Err(ProtoError::AuthFailed));
}

#[test]
fn a_proof_replayed_on_another_connection_is_refused() {
    let t = "9a6bc8cdba84f761976ff4030011e843";
    let (mut c, _) = pair(t, t);
    let sent: Vec<Message> = std::iter::from_fn(|| c.poll_transmit()).collect();
    // The same messages, written by an attacker into another TLS connection to the server.
    let mut elsewhere = ServerSession::new(token(t).into(), [9; 32], binding(2));
    let mut result = Ok(());
    for m in sent {
        result = elsewhere.handle(m);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(ProtoError::AuthFailed));
    assert!(std::iter::from_fn(|| elsewhere.poll_event())
        .next()
        .is_none());
}

/// The flights a client waits for before data may go: the server's hello rides with TLS
/// (no flight of its own); then one answer. Counted without a clock: a flight is all a
/// side can send before it must hear from the other.
#[test]
fn data_may_go_after_one_answer_to_the_first_flight() {
    let t = "9a6bc8cdba84f761976ff4030011e843";
    let (mut c, mut s) = pair(t, t);
    // Client flight 1 (as its TLS handshake ends): hello, proof, parameters, and on every
    // data connection its hello; nothing awaited in between.
    c.request(params()).unwrap();
    let flight: Vec<Message> = std::iter::from_fn(|| c.poll_transmit()).collect();
    let kinds: Vec<&str> = flight.iter().map(Message::kind).collect();
    assert_eq!(kinds, ["ClientHello", "ClientProof", "BenchParams"]);
    let hellos: Vec<Message> = (0..4)
        .map(|i| {
            c.data_hello(i, &[i as u8])
                .expect("a data hello before any answer")
        })
        .collect();
    // The server: that one flight is enough for the welcome, the acceptance and Start.
    for m in flight {
        s.handle(m).unwrap();
    }
    let mut secret = None;
    while let Some(ev) = s.poll_event() {
        match ev {
            ServerEvent::Authenticated { secret: x, .. } => secret = Some(x),
            ServerEvent::Params(_) => s.accept(BenchReady {
                facts: HostFacts::default(),
                rcvbuf_bytes: 0,
                sndbuf_bytes: 0,
                rx_rate_bps: 0,
                jump_start_bps: 0,
                jump_note: String::new(),
            }),
            _ => {}
        }
    }
    let mut attach = DataAttachments::new(s.session_id(), secret.unwrap(), 4);
    for (i, h) in hellos.into_iter().enumerate() {
        let Message::DataHello {
            session_id,
            stream,
            mac,
        } = h
        else {
            unreachable!()
        };
        attach.attach(session_id, stream, &mac, &[i as u8]).unwrap();
    }
    assert!(attach.complete());
    s.start();
    // Server flight 1: all the client waits for.
    let answer: Vec<Message> = std::iter::from_fn(|| s.poll_transmit()).collect();
    let kinds: Vec<&str> = answer.iter().map(Message::kind).collect();
    assert_eq!(kinds, ["Welcome", "BenchReady", "Start"]);
    for m in answer {
        c.handle(m).unwrap();
    }
    let events: Vec<ClientEvent> = std::iter::from_fn(|| c.poll_event()).collect();
    assert!(
        matches!(events.last(), Some(ClientEvent::Started)),
        "{events:?}"
    );
}

#[test]
fn a_client_that_fakes_its_proof_is_refused() {
    let mut s = server("4e1228910ae89955d385d7659d09cd9c");
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
    let mut s = server("4e1228910ae89955d385d7659d09cd9c");
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
fn an_older_server_hello_is_refused_with_both_versions_named() {
    let t = "9a6bc8cdba84f761976ff4030011e843";
    let mut c = client(t);
    let Message::ServerHello {
        features,
        nonce,
        proof,
        ..
    } = server_hello(t)
    else {
        unreachable!()
    };
    let err = c
        .handle(Message::ServerHello {
            version: PROTOCOL_VERSION - 1,
            features,
            nonce,
            proof,
        })
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&PROTOCOL_VERSION.to_string())
            && text.contains(&(PROTOCOL_VERSION - 1).to_string()),
        "{text}"
    );
}

#[test]
fn messages_out_of_order_are_refused() {
    let mut s = server("4e1228910ae89955d385d7659d09cd9c");
    assert!(matches!(
        s.handle(Message::BenchParams(params())),
        Err(ProtoError::Unexpected { .. })
    ));
    let mut c = client("4e1228910ae89955d385d7659d09cd9c");
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
    let mut c = client("4e1228910ae89955d385d7659d09cd9c");
    let err = c
        .handle(Message::Error {
            code: ErrorCode::Busy,
            message: "try later".into(),
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "peer reported: try later");
}

fn authenticated_pair() -> (ClientSession, ServerSession) {
    let (mut c, mut s) = pair(
        "9a6bc8cdba84f761976ff4030011e843",
        "9a6bc8cdba84f761976ff4030011e843",
    );
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
    let mut s = server("4e1228910ae89955d385d7659d09cd9c");
    assert!(matches!(
        s.handle(Message::HostReportRequest {
            rate_bps: 1,
            rtt_us: 1
        }),
        Err(ProtoError::Unexpected { .. })
    ));
    let mut c = client("4e1228910ae89955d385d7659d09cd9c");
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
    let mut c = client("9a6bc8cdba84f761976ff4030011e843");
    let mut s = server("9a6bc8cdba84f761976ff4030011e843");
    // Not yet authenticated: both ends refuse.
    assert!(c.begin_transfer().is_err());
    assert!(s.begin_transfer().is_err());

    let (mut c, mut s) = pair(
        "9a6bc8cdba84f761976ff4030011e843",
        "9a6bc8cdba84f761976ff4030011e843",
    );
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
    let (mut c2, mut s2) = pair(
        "9a6bc8cdba84f761976ff4030011e843",
        "9a6bc8cdba84f761976ff4030011e843",
    );
    pump(&mut c2, &mut s2).unwrap();
    s2.begin_transfer().unwrap();
    assert!(s2.begin_transfer().is_err());
}

#[test]
fn a_transfer_may_be_requested_right_behind_the_proof() {
    let t = "9a6bc8cdba84f761976ff4030011e843";
    let mut c = client(t);
    let mut s = server(t);
    // Before the server's hello: no transfer, no data hello.
    assert!(c.begin_transfer().is_err());
    assert!(c.data_hello(0, &[]).is_none());
    c.handle(server_hello(t)).unwrap();
    c.begin_transfer().unwrap();
    // Data hellos go at once, before the welcome.
    assert!(c.data_hello(0, &[]).is_some());
    pump(&mut c, &mut s).unwrap();
    let id = s.session_id();
    assert!(matches!(
        c.poll_event(),
        Some(ClientEvent::Authenticated { session_id, .. }) if session_id == id
    ));
    s.begin_transfer().unwrap();
    assert!(c.request(params()).is_err());
}

#[test]
fn a_welcome_for_another_session_is_refused() {
    let t = "9a6bc8cdba84f761976ff4030011e843";
    let (mut c, _) = pair(t, t);
    let wrong = c.session_id() ^ 1;
    let err = c
        .handle(Message::Welcome { session_id: wrong })
        .unwrap_err();
    assert!(err.to_string().contains("session"), "{err}");
}

/// A server holding several tokens proves each in its first flight; every holder gets in,
/// the server learns which token each holds, and a stranger is refused after the proofs.
#[test]
fn a_server_with_several_tokens_knows_which_one_the_client_holds() {
    let tokens = [
        "22028884e920bde9a9867497f16bee30",
        "9f1c0d2e7a6b5843c1d0e9f8a7b6c5d4",
        "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    ];
    let ring = Keyring::new(tokens.iter().map(|t| token(t)).collect()).unwrap();
    let flight = ServerSession::hello(&ring, [9; 32], &CERT);
    assert_eq!(flight.len(), 2, "a hello and the other proofs");
    assert!(matches!(&flight[1], Message::ServerProofs { proofs } if proofs.len() == 2));
    for (i, t) in tokens.iter().enumerate() {
        let mut c = client(t);
        let mut s = ServerSession::new(ring.clone(), [9; 32], binding(1));
        for m in &flight {
            let mut buf = Vec::new();
            encode_frame(m, &mut buf);
            c.handle(decode_frame(&buf).unwrap().unwrap().0).unwrap();
        }
        pump(&mut c, &mut s).unwrap();
        assert!(matches!(
            c.poll_event(),
            Some(ClientEvent::Authenticated { session_id, .. }) if session_id == s.session_id()
        ));
        let Some(ServerEvent::Authenticated { access, .. }) = s.poll_event() else {
            panic!("token {i} was not taken");
        };
        assert_eq!(access, Access::Token(i));
    }
    // A client of another server: nothing in the hello, nothing in the proofs.
    let mut stranger = client("4e1228910ae89955d385d7659d09cd9c");
    stranger.handle(flight[0].clone()).unwrap();
    assert_eq!(
        stranger.handle(flight[1].clone()),
        Err(ProtoError::AuthFailed)
    );
    // Proofs nobody announced are not waited for, nor taken out of turn.
    let mut c = client(tokens[1]);
    let Message::ServerHello {
        version,
        nonce,
        proof,
        ..
    } = flight[0].clone()
    else {
        panic!("not a hello");
    };
    let plain = Message::ServerHello {
        version,
        features: features::ALL,
        nonce,
        proof,
    };
    assert_eq!(c.handle(plain), Err(ProtoError::AuthFailed));
    let mut c = client(tokens[0]);
    assert!(c.handle(flight[1].clone()).is_err());
}
