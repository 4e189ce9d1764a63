//! The record layer against rustls itself (the same records both ways, key updates both
//! ways) and against a hostile stream (altered, split, unencrypted, malformed records).

use super::*;
use crate::transport::tls::handover::{hand_over, in_memory, MemoryEnd};
use crate::transport::tls::{ClientTls, ServerTls, ServerTrust};
use std::io::{Read, Write};

fn ends() -> (MemoryEnd, MemoryEnd) {
    let server = ServerTls::ephemeral().unwrap();
    let client = ClientTls::new(
        crate::transport::tls::identity::CERT_NAME,
        0,
        ServerTrust::Pinned(server.fingerprint()),
    )
    .unwrap();
    in_memory(&client, &server).expect("an in-memory handshake")
}

fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 4096 + seed) as u8).collect()
}

/// Gives `wire` to `rx` in pieces of `piece` bytes, reading out all plaintext as it goes.
fn feed(rx: &mut Receiver, wire: &[u8], piece: usize) -> Result<(Vec<u8>, bool), RecordError> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 5000];
    let mut closed = false;
    for mut part in wire.chunks(piece.max(1)) {
        while !part.is_empty() {
            let space = rx.space();
            let n = space.len().min(part.len());
            space[..n].copy_from_slice(&part[..n]);
            rx.filled(n);
            part = &part[n..];
            loop {
                match rx.read(&mut buf)? {
                    Step::Plain(n) => got.extend_from_slice(&buf[..n]),
                    Step::NeedMore => break,
                    Step::Closed => {
                        closed = true;
                        break;
                    }
                }
            }
        }
    }
    Ok((got, closed))
}

/// Everything rustls has to send.
fn tls_out(c: &mut rustls::Connection) -> Vec<u8> {
    let mut wire = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut wire).unwrap();
    }
    wire
}

/// Gives `wire` to rustls and reads out its plaintext.
fn tls_in(c: &mut rustls::Connection, wire: &[u8]) -> Result<Vec<u8>, rustls::Error> {
    let mut rd = wire;
    let mut got = Vec::new();
    while !rd.is_empty() {
        c.read_tls(&mut rd).unwrap();
        c.process_new_packets()?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match c.reader().read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => break,
            }
        }
    }
    Ok(got)
}

#[test]
fn rustls_opens_what_the_record_layer_seals_and_the_record_layer_opens_what_rustls_seals() {
    let (client, mut server) = ends();
    server.conn.set_buffer_limit(None);
    let h = hand_over(client.conn, &client.log, &[], 0).unwrap();
    assert_eq!(h.suite, Suite::Aes128Gcm);
    assert!(h.exporter.is_some() && h.peer_certificate.is_some());
    let (mut tx, mut rx) = (h.sender, h.receiver);
    let up = pattern(300_000, 1);
    assert_eq!(tx.seal(&up, usize::MAX), up.len());
    let wire = std::mem::take(tx.take());
    assert_eq!(tls_in(&mut server.conn, &wire).unwrap(), up);

    let down = pattern(200_000, 2);
    server.conn.writer().write_all(&down).unwrap();
    server.conn.send_close_notify();
    let wire = tls_out(&mut server.conn);
    let (got, closed) = feed(&mut rx, &wire, 70_000).unwrap();
    assert!(got == down && closed);
}

#[test]
fn a_key_update_the_peer_asks_for_is_followed_and_answered_before_the_next_record() {
    let (client, mut server) = ends();
    let h = hand_over(client.conn, &client.log, &[], 0).unwrap();
    let (mut tx, mut rx) = (h.sender, h.receiver);
    // rustls asks for a KeyUpdate, then sends under its new key.
    server.conn.refresh_traffic_keys().unwrap();
    server.conn.writer().write_all(b"after the update").unwrap();
    let wire = tls_out(&mut server.conn);
    let (got, _) = feed(&mut rx, &wire, wire.len()).unwrap();
    assert_eq!(got, b"after the update");
    assert!(rx.take_update_request(), "the request is seen");
    assert!(!rx.take_update_request(), "and taken once");
    // Our KeyUpdate goes before our next record; rustls reads both.
    tx.owe_update();
    tx.seal(b"answered", usize::MAX);
    let first_key_records = tx.records_on_key();
    assert_eq!(first_key_records, 1, "the data went under the new key");
    let wire = std::mem::take(tx.take());
    assert_eq!(tls_in(&mut server.conn, &wire).unwrap(), b"answered");
}

#[test]
fn a_sender_updates_its_key_before_the_limit_and_rustls_follows() {
    let (client, mut server) = ends();
    let mut tx = hand_over(client.conn, &client.log, &[], 0)
        .unwrap()
        .sender
        .with_record_limit(4);
    let data = pattern(40 * MAX_PLAIN, 3);
    tx.seal(&data, usize::MAX);
    assert!(tx.records_on_key() < 4);
    let wire = std::mem::take(tx.take());
    assert_eq!(tls_in(&mut server.conn, &wire).unwrap(), data);
}

/// A sender and a receiver of the same key (no handshake: the layer alone).
fn pair(suite: Suite) -> (Sender, Receiver) {
    let secret = [7u8; 48];
    let secret = &secret[..if suite == Suite::Aes256Gcm { 48 } else { 32 }];
    (
        Sender::new(Direction::new(suite, secret, 0)),
        Receiver::new(Direction::new(suite, secret, 0), 0, &[], &[]),
    )
}

#[test]
fn records_split_anywhere_across_socket_reads_arrive_whole_and_in_order() {
    let data = pattern(150_000, 4);
    for suite in [Suite::Aes128Gcm, Suite::Aes256Gcm, Suite::Chacha20Poly1305] {
        for piece in [1, 5, 6, 4096, 16_405, 16_406, 65_536] {
            let (mut tx, mut rx) = pair(suite);
            for part in data.chunks(9_999) {
                tx.seal(part, usize::MAX);
            }
            tx.close_notify();
            let (got, closed) = feed(&mut rx, tx.take(), piece).unwrap();
            assert!(got == data && closed, "{suite:?}, pieces of {piece}");
            assert_eq!(rx.buffered(), 0);
        }
    }
}

#[test]
fn a_record_altered_anywhere_is_refused_and_nothing_after_it_is_delivered() {
    let (mut tx, _) = pair(Suite::Aes128Gcm);
    tx.seal(&pattern(3 * MAX_PLAIN, 5), usize::MAX);
    let wire = std::mem::take(tx.take());
    // A header byte (the additional data), a ciphertext byte, a tag byte.
    let record = MAX_PLAIN + OVERHEAD;
    for at in [record + 3, record + 100, 2 * record - 1] {
        let (_, mut rx) = pair(Suite::Aes128Gcm);
        let mut bad = wire.clone();
        bad[at] ^= 0x01;
        let mut buf = vec![0u8; 4 * MAX_PLAIN];
        let mut got = 0;
        let mut rest = &bad[..];
        let err = loop {
            match rx.read(&mut buf) {
                Ok(Step::Plain(n)) => got += n,
                Ok(Step::NeedMore) if !rest.is_empty() => {
                    let space = rx.space();
                    let n = space.len().min(rest.len());
                    space[..n].copy_from_slice(&rest[..n]);
                    rx.filled(n);
                    rest = &rest[n..];
                }
                Ok(other) => panic!("{other:?} after an altered record"),
                Err(e) => break e,
            }
        };
        assert_eq!(got, MAX_PLAIN, "the first record only (byte {at})");
        assert!(
            matches!(err, RecordError::Altered | RecordError::Protocol(_)),
            "{err}"
        );
        assert_eq!(rx.read(&mut buf), Err(err), "refused for good");
    }
    // Records replayed or reordered fail too (the sequence number is in the nonce).
    let (_, mut rx) = pair(Suite::Aes128Gcm);
    let mut swapped = wire[record..2 * record].to_vec();
    swapped.extend_from_slice(&wire[..record]);
    assert_eq!(feed(&mut rx, &swapped, 100_000), Err(RecordError::Altered));
}

#[test]
fn unencrypted_and_malformed_records_after_the_handshake_are_refused_with_what_they_were() {
    let cases: [(&[u8], &str); 4] = [
        (&[22, 3, 3, 0, 40], "unencrypted record (content type 22)"),
        (&[20, 3, 3, 0, 1, 1], "unencrypted record (content type 20)"),
        (&[23, 3, 1, 0, 40], "version 3.1"),
        (&[23, 3, 3, 0x48, 0x01], "length 18433"),
    ];
    for (wire, says) in cases {
        let (_, mut rx) = pair(Suite::Aes128Gcm);
        let err = feed(&mut rx, wire, 100).unwrap_err();
        assert!(err.to_string().contains(says), "{err} (wanted {says})");
    }
    // A record whose content is over 2^14 bytes, although authentic (sealed here by
    // hand: the sender never makes one).
    let (mut big, mut rx) = pair(Suite::Aes128Gcm);
    big.out.resize(HEADER + MAX_PLAIN + 100, 0);
    big.finish_record(0, APPLICATION_DATA);
    let err = feed(&mut rx, big.take(), 100_000).unwrap_err();
    assert!(err.to_string().contains("record_overflow"), "{err}");
    // An alert other than close_notify ends the stream with what it said.
    let (mut tx, mut rx) = pair(Suite::Aes128Gcm);
    tx.alert_for(&RecordError::Altered);
    assert_eq!(feed(&mut rx, tx.take(), 100), Err(RecordError::Alert(20)));
}

#[test]
fn a_file_read_straight_into_a_record_arrives_and_a_failed_read_leaves_nothing() {
    let (mut tx, mut rx) = pair(Suite::Aes128Gcm);
    tx.begin_record(10).copy_from_slice(b"0123456789");
    tx.end_record();
    // A read that failed: the record is dropped, no sequence number spent.
    tx.begin_record(MAX_PLAIN).fill(9);
    tx.abandon_record();
    tx.begin_record(3).copy_from_slice(b"abc");
    tx.end_record();
    let (got, _) = feed(&mut rx, tx.take(), 1000).unwrap();
    assert_eq!(got, b"0123456789abc");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Whatever bytes arrive and however they are split, the receiver delivers only what
    /// the sender sealed, in order, and never panics: untouched records arrive whole, an
    /// altered byte ends the stream at the record it is in.
    #[test]
    fn only_what_was_sealed_is_ever_delivered(
        sizes in proptest::collection::vec(0usize..40_000, 1..6),
        piece in 1usize..30_000,
        flip in proptest::option::of((0usize..200_000, 1u8..=255)),
        junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
    ) {
        let (mut tx, mut rx) = pair(Suite::Aes128Gcm);
        let mut sent = Vec::new();
        for (i, n) in sizes.iter().enumerate() {
            let part = pattern(*n, i);
            tx.seal(&part, usize::MAX);
            sent.extend_from_slice(&part);
        }
        tx.close_notify();
        let mut wire = std::mem::take(tx.take());
        let altered = flip.filter(|(at, _)| *at < wire.len());
        if let Some((at, x)) = altered {
            wire[at] ^= x;
        }
        match feed(&mut rx, &wire, piece) {
            Ok((got, closed)) => {
                proptest::prop_assert!(altered.is_none());
                proptest::prop_assert!(got == sent && closed);
            }
            Err(_) => proptest::prop_assert!(altered.is_some()),
        }
        // Random bytes never pass for records.
        let (_, mut rx) = pair(Suite::Aes128Gcm);
        let got = feed(&mut rx, &junk, piece).map(|(g, _)| g).unwrap_or_default();
        proptest::prop_assert!(got.is_empty());
    }
}
