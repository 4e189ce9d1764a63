//! A list answered ahead (`transfer_flags::ANSWERED_AHEAD`): a pull into a destination
//! that holds nothing says so in its request, and the sender's chunks leave with its
//! list instead of a round trip later, after the receiver's answers.
//!
//! Checked, both sessions in memory (`pair`): every file commits with the source's
//! digest and every chunk crosses once, whatever is found at the destination after all
//! (nothing is skipped as complete, nothing resumed: the sender did not ask); the sender
//! hands out work before any answer; a file or link the receiver skips while chunks flow
//! stops its chunks and counts as skipped; answers only a normal list has (`HaveChunks`)
//! are protocol errors; and a sender asked too late refuses.

// The sessions take `now` from their driver: a test needs one Instant to offset from.
#![allow(clippy::disallowed_methods)]

mod pair;

use longhaul_proto::transfer::EntryId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use longhaul_proto::transfer::{EntryKind, FileEntry, SkipReason, TransferMessage};
use longhaul_transfer::session::{SendConfig, SendInput, SendSession, SessionError, Work};
use longhaul_transfer::StreamId;
use pair::*;
use proptest::prelude::*;

fn dest() -> impl Strategy<Value = Dest> {
    prop_oneof![
        Just(Dest::Empty),
        Just(Dest::Other),
        Just(Dest::Same),
        (
            proptest::collection::btree_set(0u32..5, 0..5),
            any::<bool>()
        )
            .prop_map(|(chunks, intact)| Dest::Partial { chunks, intact }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the destination turns out to hold, every file is received whole: each
    /// chunk crosses once (again after a corruption), nothing is skipped.
    #[test]
    fn every_file_crosses_whole_and_commits(
        files in proptest::collection::vec((0usize..5 * 4096, any::<u8>(), dest()), 1..5),
        streams in 1u16..4,
        corrupt in proptest::collection::vec((0u32..5, 0u32..5), 0..3),
        seed in any::<u64>(),
    ) {
        let case = Case {
            chunk_size: 4096,
            streams,
            no_clobber: false,
            files: files
                .into_iter()
                .map(|(len, salt, d)| {
                    let chunks = (len as u32).div_ceil(4096).max(1);
                    let d = match d {
                        Dest::Partial { chunks: c, intact } => Dest::Partial {
                            chunks: c.into_iter().filter(|&i| i < chunks).collect(),
                            intact,
                        },
                        d => d,
                    };
                    (bytes(len, salt), d)
                })
                .collect(),
            corrupt: BTreeMap::new(),
            seed,
        };
        let case = Case {
            corrupt: corrupt
                .into_iter()
                .map(|(f, i)| ((EntryId(1 + f % case.files.len() as u32), i), 1))
                .collect(),
            ..case
        };
        let r = run_with(&case, true).unwrap();
        prop_assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        for (i, (d, _)) in case.files.iter().enumerate() {
            let e = EntryId(i as u32 + 1);
            prop_assert_eq!(r.committed.get(&e), Some(&true), "file {} not committed", e);
            prop_assert_eq!(r.digests.get(&e), Some(&blake3_of(d)));
            let chunks = (d.len() as u64).div_ceil(4096).max(1) as u32;
            let sent: BTreeSet<u32> =
                r.sent.keys().filter(|k| k.0 == e).map(|k| k.1).collect();
            prop_assert_eq!(sent, (0..chunks).collect::<BTreeSet<u32>>(), "file {}", e);
        }
        for (&(e, i), &n) in &r.sent {
            let bad = case.corrupt.get(&(e, i)).copied().unwrap_or(0);
            prop_assert_eq!(n, 1 + bad, "chunk {} of {} sent {} times", i, e, n);
        }
    }
}

/// A session sending `entries` in chunks of 4 KiB.
fn session(entries: Vec<FileEntry>, streams: u16, checksum_only: bool) -> SendSession {
    let cfg = SendConfig {
        chunk_size: 4096,
        checksum_only,
        streams,
    };
    SendSession::new(entries, cfg).unwrap()
}

/// A sender answered ahead for: a directory, two files of 3 chunks, a symlink.
fn sender() -> SendSession {
    let link = FileEntry {
        link_target: b"elsewhere".to_vec(),
        ..entry("top/l", EntryKind::Symlink, 0)
    };
    let entries = vec![
        entry("top", EntryKind::Dir, 0),
        entry("top/a", EntryKind::File, 3 * 4096),
        entry("top/b", EntryKind::File, 3 * 4096),
        link,
    ];
    let mut tx = session(entries, 2, false);
    tx.handle(SendInput::AnsweredAhead).unwrap();
    tx
}

/// The entries of the chunks `stream` is handed until there is no more work.
fn drain(tx: &mut SendSession, stream: u32) -> Vec<(EntryId, u32)> {
    let mut out = Vec::new();
    while let Work::Send(unit) = tx.next_work(StreamId(stream), Instant::now()) {
        out.extend(unit.chunks.iter().map(|c| (tx.entry_of(c), c.id.index)));
    }
    out
}

#[test]
fn chunks_leave_before_any_answer() {
    let mut tx = sender();
    // Nothing from the receiver yet: the list is still in the outbox.
    assert!(matches!(
        tx.poll_transmit(),
        Some(TransferMessage::FileEntries { .. })
    ));
    let sent = drain(&mut tx, 0);
    assert_eq!(sent.len(), 6, "{sent:?}");
    // The receiver's end of the list comes later and is taken as it is.
    tx.handle(TransferMessage::FileListEnd {
        files: 4,
        bytes: 6 * 4096,
        deleted: 0,
    })
    .unwrap();
}

#[test]
fn a_file_skipped_while_chunks_flow_stops_and_counts_as_skipped() {
    let mut tx = sender();
    let first = tx.next_work(StreamId(0), Instant::now());
    let Work::Send(unit) = first else {
        panic!("no work: {first:?}")
    };
    let c = unit.chunks[0];
    assert_eq!((tx.entry_of(&c), c.id.index), (EntryId(1), 0));
    for (file, reason) in [(1, SkipReason::AlreadyComplete), (3, SkipReason::Exists)] {
        tx.handle(TransferMessage::SkipFile {
            file: EntryId(file),
            reason,
        })
        .unwrap();
    }
    // Only file 2's chunks are left; file 1's chunk in flight is not sent again.
    assert_eq!(
        drain(&mut tx, 1),
        vec![(EntryId(2), 0), (EntryId(2), 1), (EntryId(2), 2)]
    );
    tx.handle(TransferMessage::ChunkRejected {
        file: EntryId(1),
        index: 0,
        reason: longhaul_proto::transfer::RejectReason::Unknown,
    })
    .unwrap();
    assert!(drain(&mut tx, 0).is_empty());
    // Twice is a protocol error; so is a commit of a skipped file.
    let mut again = sender();
    again
        .handle(TransferMessage::SkipFile {
            file: EntryId(1),
            reason: SkipReason::Exists,
        })
        .unwrap();
    assert!(again
        .handle(TransferMessage::SkipFile {
            file: EntryId(1),
            reason: SkipReason::Exists,
        })
        .is_err());
    tx.handle(TransferMessage::FileCommitted {
        file: EntryId(2),
        ok: true,
        reason: String::new(),
    })
    .unwrap();
    assert!(tx.is_done(), "file 2 committed, 1 and the link skipped");
    let o = tx.outcome();
    assert_eq!((o.files_ok, o.files_unchanged, o.files_skipped), (2, 1, 1));
}

#[test]
fn answers_of_a_normal_list_are_protocol_errors() {
    let mut tx = sender();
    let r = tx.handle(TransferMessage::HaveChunks {
        file: EntryId(1),
        ranges: vec![(0, 1)],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
    let mut tx = sender();
    tx.handle(TransferMessage::FileListEnd {
        files: 4,
        bytes: 6 * 4096,
        deleted: 0,
    })
    .unwrap();
    let r = tx.handle(TransferMessage::SkipFile {
        file: EntryId(2),
        reason: SkipReason::Exists,
    });
    assert!(
        r.is_err(),
        "a skip after the receiver's answers ended: {r:?}"
    );
}

#[test]
fn a_sender_asked_after_an_answer_refuses() {
    let mut tx = session(vec![entry("f", EntryKind::File, 4096)], 1, false);
    tx.handle(TransferMessage::SkipFile {
        file: EntryId(0),
        reason: SkipReason::Exists,
    })
    .unwrap();
    assert!(tx.handle(SendInput::AnsweredAhead).is_err());
    let mut check = session(vec![entry("f", EntryKind::File, 4096)], 1, true);
    assert!(check.handle(SendInput::AnsweredAhead).is_err());
}
