//! Tickets and relayed pulls between real session machines, through the codec: a ticket's
//! holder gets in to a server whose tokens it does not know, a wrong secret or a refused
//! ticket does not, an older server is named as such, and the request and relay
//! exchanges end the session as documented.

use longhaul_proto::stripe::Share;
use longhaul_proto::ticket::{RelayDone, RelayProgress, RelayPull, MAX_RELAY_FAILURES};
use longhaul_proto::transfer::TransferOptions;
use longhaul_proto::*;

const CERT: [u8; 32] = [5; 32];
const SERVER_TOKEN: &str = "22028884e920bde9a9867497f16bee30";

fn binding() -> ChannelBinding {
    ChannelBinding {
        cert: CERT,
        exporter: [1; 32],
    }
}

fn grant() -> TicketGrant {
    TicketGrant {
        id: [3; 16],
        secret: [4; 32],
        lifetime_secs: 60,
    }
}

fn wire(m: &Message) -> Message {
    let mut buf = Vec::new();
    encode_frame(m, &mut buf);
    let (back, used) = decode_frame(&buf).unwrap().unwrap();
    assert_eq!(used, buf.len());
    back
}

/// A server holding its own token, its hello already delivered to a client proving `g`.
fn ticket_pair(g: TicketGrant, server_features: Option<u64>) -> (ClientSession, ServerSession) {
    let ring: Keyring = Token::new(SERVER_TOKEN.as_bytes()).unwrap().into();
    let mut c =
        ClientSession::proving(Credential::Ticket(g), [7; 32], binding(), features::DEFAULT);
    let s = ServerSession::new(ring.clone(), [9; 32], binding());
    for mut m in ServerSession::hello(&ring, [9; 32], &CERT) {
        if let (Some(f), Message::ServerHello { features, .. }) = (server_features, &mut m) {
            *features = f;
        }
        c.handle(wire(&m)).unwrap_or_else(|e| panic!("{e}"));
    }
    (c, s)
}

fn to_server(c: &mut ClientSession, s: &mut ServerSession) -> Result<(), ProtoError> {
    while let Some(m) = c.poll_transmit() {
        s.handle(wire(&m))?;
    }
    Ok(())
}

fn to_client(s: &mut ServerSession, c: &mut ClientSession) -> Result<(), ProtoError> {
    while let Some(m) = s.poll_transmit() {
        c.handle(wire(&m))?;
    }
    Ok(())
}

#[test]
fn a_ticket_holder_gets_in_without_the_servers_token() {
    let (mut c, mut s) = ticket_pair(grant(), None);
    to_server(&mut c, &mut s).unwrap();
    assert_eq!(
        s.poll_event(),
        Some(ServerEvent::TicketPresented { id: [3; 16] })
    );
    // Nothing is answered before the driver has looked the ticket up.
    assert!(s.poll_transmit().is_none());
    s.ticket_found(&grant().token()).unwrap();
    let Some(ServerEvent::Authenticated { secret, access, .. }) = s.poll_event() else {
        panic!("the ticket's holder was not let in");
    };
    assert_eq!(access, Access::Ticket([3; 16]));
    to_client(&mut s, &mut c).unwrap();
    assert!(matches!(
        c.poll_event(),
        Some(ClientEvent::Authenticated { .. })
    ));
    // Both ends derive the same session secret: a data hello checks out.
    let Some(Message::DataHello { mac, .. }) = c.data_hello(0, &[]) else {
        panic!("no data hello");
    };
    assert_eq!(mac, data_mac(&secret, s.session_id(), 0, &[]));
    // A ticket's session asks for no ticket or relay of its own.
    assert!(c.request_ticket(b"x".to_vec(), 60).is_err());
}

#[test]
fn a_wrong_secret_or_a_refused_ticket_is_turned_away() {
    let mut wrong = grant();
    wrong.secret[0] ^= 1;
    let (mut c, mut s) = ticket_pair(wrong, None);
    to_server(&mut c, &mut s).unwrap();
    assert_eq!(
        s.ticket_found(&grant().token()),
        Err(ProtoError::AuthFailed)
    );
    assert!(matches!(
        s.poll_transmit(),
        Some(Message::Error {
            code: ErrorCode::Auth,
            ..
        })
    ));

    let (mut c, mut s) = ticket_pair(grant(), None);
    to_server(&mut c, &mut s).unwrap();
    s.ticket_refused("ticket used already; ask its issuer for a new one".into());
    let err = to_client(&mut s, &mut c).unwrap_err();
    assert!(err.to_string().contains("used already"), "{err}");
    // Looking a ticket up without a proof in hand is a local mistake.
    assert!(s.ticket_found(&grant().token()).is_err());
}

#[test]
fn an_older_server_is_named_as_such() {
    let ring: Keyring = Token::new(SERVER_TOKEN.as_bytes()).unwrap().into();
    let mut c = ClientSession::proving(
        Credential::Ticket(grant()),
        [7; 32],
        binding(),
        features::DEFAULT,
    );
    let mut hello = ServerSession::hello(&ring, [9; 32], &CERT).remove(0);
    if let Message::ServerHello { features, .. } = &mut hello {
        *features &= !features::TICKETS;
    }
    let err = c.handle(hello).unwrap_err();
    assert!(err.to_string().contains("older longhaul"), "{err}");
}

fn token_pair() -> (ClientSession, ServerSession) {
    let t = Token::new(SERVER_TOKEN.as_bytes()).unwrap();
    let ring: Keyring = t.clone().into();
    let mut c = ClientSession::new(t, [7; 32], binding());
    let mut s = ServerSession::new(ring.clone(), [9; 32], binding());
    for m in ServerSession::hello(&ring, [9; 32], &CERT) {
        c.handle(wire(&m)).unwrap();
    }
    to_server(&mut c, &mut s).unwrap();
    to_client(&mut s, &mut c).unwrap();
    assert!(matches!(
        s.poll_event(),
        Some(ServerEvent::Authenticated { .. })
    ));
    assert!(matches!(
        c.poll_event(),
        Some(ClientEvent::Authenticated { .. })
    ));
    (c, s)
}

#[test]
fn a_ticket_is_asked_for_and_issued_once() {
    let (mut c, mut s) = token_pair();
    assert!(c.request_ticket(b"data/run1".to_vec(), 0).is_err());
    c.request_ticket(b"data/run1".to_vec(), 90).unwrap();
    to_server(&mut c, &mut s).unwrap();
    assert_eq!(
        s.poll_event(),
        Some(ServerEvent::TicketRequested {
            path: b"data/run1".to_vec(),
            lifetime_secs: 90
        })
    );
    s.send_ticket(grant());
    s.send_ticket(grant());
    to_client(&mut s, &mut c).unwrap();
    assert_eq!(c.poll_event(), Some(ClientEvent::TicketIssued(grant())));
    assert_eq!(c.poll_event(), None);
    assert!(s.is_reported());
}

fn relay() -> RelayPull {
    RelayPull {
        source: "a.example:7474".into(),
        certificate: [8; 32],
        ticket: grant(),
        source_path: b"data/run1".to_vec(),
        dest_path: b"incoming".to_vec(),
        options: TransferOptions {
            recursive: true,
            preserve: true,
            auto_chunk: true,
            ..TransferOptions::default()
        },
        streams: 0,
        rate_bps: 0,
        window_bytes: 0,
        chunk_size: 0,
        congestion: String::new(),
        plain_data: false,
        jump_start: true,
        source_user_paths: false,
        share: None,
        dest_is_dir: None,
    }
}

#[test]
fn a_relayed_pull_reports_progress_then_its_end() {
    let (mut c, mut s) = token_pair();
    c.request_relay(relay()).unwrap();
    to_server(&mut c, &mut s).unwrap();
    assert_eq!(
        s.poll_event(),
        Some(ServerEvent::RelayRequested(Box::new(relay())))
    );
    let p = RelayProgress {
        elapsed_ms: 1000,
        files_total: 3,
        bytes_total: 3 << 30,
        bytes_done: 1 << 30,
        moved_bytes: 1 << 30,
        streams: 8,
        ..RelayProgress::default()
    };
    s.send_relay_progress(p);
    let done = RelayDone {
        files_ok: 2,
        files_failed: 1,
        failures: (0..40).map(|i| format!("f{i}: no space")).collect(),
        limited_by: "the path".into(),
        ..RelayDone::default()
    };
    s.send_relay_done(done.clone());
    s.send_relay_progress(p);
    to_client(&mut s, &mut c).unwrap();
    assert_eq!(c.poll_event(), Some(ClientEvent::RelayProgress(p)));
    let Some(ClientEvent::RelayDone(got)) = c.poll_event() else {
        panic!("no end");
    };
    assert_eq!(got.failures.len(), MAX_RELAY_FAILURES, "the list is cut");
    assert_eq!(got.files_failed, 1, "the count is whole");
    assert_eq!(c.poll_event(), None, "nothing after the end");
}

#[test]
fn hostile_relay_fields_are_refused_on_decode() {
    for bad in [
        RelayPull {
            source: String::new(),
            ..relay()
        },
        RelayPull {
            chunk_size: 3000,
            ..relay()
        },
        RelayPull {
            ticket: TicketGrant {
                lifetime_secs: 0,
                ..grant()
            },
            ..relay()
        },
        RelayPull {
            source_path: b"a\0b".to_vec(),
            ..relay()
        },
        RelayPull {
            streams: 300,
            ..relay()
        },
        // A share without the chunk size every pair must use.
        RelayPull {
            share: Some(Share::new(1, 2).unwrap()),
            ..relay()
        },
    ] {
        let mut buf = Vec::new();
        encode_frame(&Message::RelayPull(Box::new(bad.clone())), &mut buf);
        assert!(decode_frame(&buf).is_err(), "{bad:?} was taken");
    }
    assert_eq!(
        wire(&Message::RelayPull(Box::new(relay()))),
        Message::RelayPull(Box::new(relay()))
    );
    let striped = RelayPull {
        share: Some(Share::new(1, 2).unwrap()),
        chunk_size: 16 << 20,
        dest_is_dir: Some(false),
        ..relay()
    };
    assert_eq!(
        wire(&Message::RelayPull(Box::new(striped.clone()))),
        Message::RelayPull(Box::new(striped))
    );
    // A share the codec cannot build (index past the count) is refused, not clamped.
    let mut buf = Vec::new();
    encode_frame(
        &Message::RelayPull(Box::new(RelayPull {
            chunk_size: 16 << 20,
            ..relay()
        })),
        &mut buf,
    );
    let n = buf.len();
    buf[n - 5..n - 1].copy_from_slice(&[0, 2, 0, 5]);
    assert!(decode_frame(&buf).is_err(), "share 6 of 2 was taken");
    buf[n - 5..].copy_from_slice(&[0, 0, 0, 0, 3]);
    assert!(decode_frame(&buf).is_err(), "placement 3 was taken");
}

#[test]
fn a_share_is_asked_only_of_a_destination_with_stripes() {
    let striped = RelayPull {
        share: Some(Share::new(0, 2).unwrap()),
        chunk_size: 16 << 20,
        ..relay()
    };
    // Both ends of this pair are this build: asked and taken.
    let (mut c, mut s) = token_pair();
    c.request_relay(striped.clone()).unwrap();
    to_server(&mut c, &mut s).unwrap();
    assert_eq!(
        s.poll_event(),
        Some(ServerEvent::RelayRequested(Box::new(striped.clone())))
    );
    // A session without the feature (as with an older server) refuses to ask.
    let t = Token::new(SERVER_TOKEN.as_bytes()).unwrap();
    let ring: Keyring = t.clone().into();
    let wanted = features::DEFAULT & !features::STRIPES;
    let mut c = ClientSession::with_features(t, [7; 32], binding(), wanted);
    for m in ServerSession::hello(&ring, [9; 32], &CERT) {
        c.handle(wire(&m)).unwrap();
    }
    let mut s = ServerSession::new(ring, [9; 32], binding());
    to_server(&mut c, &mut s).unwrap();
    to_client(&mut s, &mut c).unwrap();
    let err = c.request_relay(striped).unwrap_err().to_string();
    assert!(err.contains("without striped copies"), "{err}");
}
