//! The sender waits for the receiver's answer to its list, and the receiver says it is
//! answering, until the answer's end: what the drivers bound the wait by (the sender)
//! and keep the connection alive for (the receiver) when both ends announced
//! `features::ANSWER_KEEPALIVE`.

mod pair;

use longhaul_proto::transfer::EntryKind;
use longhaul_proto::Wait;
use longhaul_transfer::session::{RecvConfig, RecvSession, SendConfig, SendSession};

#[test]
fn the_sender_waits_for_the_answer_to_its_list_until_the_receiver_s_end_of_it() {
    let entries = vec![
        pair::entry("a", EntryKind::File, 10_000),
        pair::entry("b", EntryKind::File, 0),
    ];
    let config = SendConfig {
        chunk_size: 4096,
        checksum_only: false,
        streams: 2,
    };
    let mut tx = SendSession::new(entries, config).unwrap();
    let mut rx = RecvSession::new(RecvConfig::into_directory(4096));
    assert_eq!(tx.waiting(), Some(Wait::ListAnswer));
    assert!(rx.answering());
    // The list crosses; the receiver's looks are not answered yet: still answering.
    while let Some(m) = tx.poll_transmit() {
        rx.handle(m).unwrap();
    }
    let looks: Vec<_> = std::iter::from_fn(|| rx.poll_event()).collect();
    assert!(!looks.is_empty());
    assert!(rx.answering());
    assert_eq!(tx.waiting(), Some(Wait::ListAnswer));
    // The destination answers; the answer's end reaches the sender.
    for ev in looks {
        if let Some(answer) = pair::plain_answer(&ev) {
            rx.handle(answer).unwrap();
        }
    }
    pair::exchange(&mut tx, &mut rx, |rx, ev| {
        if let Some(answer) = pair::plain_answer(&ev) {
            rx.handle(answer).unwrap();
        }
    });
    assert!(!rx.answering());
    assert_eq!(tx.waiting(), None);
}
