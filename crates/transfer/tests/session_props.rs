//! Both ends of cp's session driven against each other in memory, in pure form: the
//! sender's control messages go into the receiver's `handle` and back, the receiver's
//! events are answered by a tiny destination model, and chunks are "sent" by hashing
//! slices of in-memory files with the sessions' own hashers. No threads, files, sockets
//! or clocks.
//!
//! Checked: every file commits with the source's BLAKE3; a corrupted chunk is refused and
//! sent again until it verifies; `--no-clobber` skips an existing file; the quick check
//! (same size and mtime) says `AlreadyComplete`; a resume skips the recorded chunks, and a
//! resume whose records are not intact sends everything; the last `FileCommitted` waits
//! for the directories' times; a message out of place is a protocol error; losing every
//! stream gives up. Random file sizes, chunk sizes and delivery orders come from proptest.

// The sessions take `now` from their driver: a test needs one Instant to offset from.
#![allow(clippy::disallowed_methods)]

mod pair;

use longhaul_proto::transfer::EntryId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use longhaul_proto::transfer::{EntryKind, SkipReason, TransferMessage};
use longhaul_transfer::session::{
    RecvConfig, RecvEvent, RecvInput, RecvSession, SendConfig, SendInput, SendSession,
    SessionError, Work,
};
use longhaul_transfer::StreamId;
use pair::*;
use proptest::prelude::*;

fn arb_case() -> impl Strategy<Value = Case> {
    (0u32..3, 1u16..4, any::<u64>()).prop_flat_map(|(shift, streams, seed)| {
        let chunk_size = 4096u64 << shift;
        let size = prop_oneof![
            Just(0usize),
            1..chunk_size as usize,
            Just(chunk_size as usize),
            chunk_size as usize..5 * chunk_size as usize,
        ];
        (
            proptest::collection::vec((size, any::<u8>()), 1..6),
            proptest::collection::vec((0u32..6, 0u32..5, 1u32..3), 0..4),
        )
            .prop_map(move |(files, corrupt)| {
                let files: Vec<(Vec<u8>, Dest)> = files
                    .into_iter()
                    .map(|(len, salt)| (bytes(len, salt), Dest::Empty))
                    .collect();
                let corrupt = corrupt
                    .into_iter()
                    .map(|(f, i, n)| ((EntryId(1 + f % files.len() as u32), i), n))
                    .collect();
                Case {
                    chunk_size,
                    streams,
                    no_clobber: false,
                    files,
                    corrupt,
                    seed,
                }
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every file commits with the source's digest, whatever the sizes, chunk size,
    /// streams and delivery order; corrupted chunks are refused and sent again.
    #[test]
    fn every_file_commits_with_its_digest(case in arb_case()) {
        let r = run(&case).unwrap();
        for (i, (d, _)) in case.files.iter().enumerate() {
            let e = EntryId(i as u32 + 1);
            prop_assert_eq!(r.committed.get(&e), Some(&true), "file {} not committed", e);
            prop_assert_eq!(r.digests.get(&e), Some(&blake3_of(d)));
        }
        // Only corruptions of chunks that exist happen, each refused once.
        let corrupted: u32 = case
            .corrupt
            .iter()
            .filter(|((e, i), _)| r.sent.contains_key(&(*e, *i)))
            .map(|(_, n)| n)
            .sum();
        prop_assert_eq!(r.rejected, u64::from(corrupted));
        for (&(e, i), &n) in &r.sent {
            let bad = case.corrupt.get(&(e, i)).copied().unwrap_or(0);
            prop_assert_eq!(n, 1 + bad, "chunk {} of {} sent {} times", i, e, n);
        }
        prop_assert_eq!(r.dirs_fixed_calls, 1);
        prop_assert_eq!(r.commits_before_dirs_fixed, Some(case.files.len() - 1));
    }

    /// A resume sends exactly the chunks not recorded; records that are not intact send
    /// every chunk again. Either way the file commits with the right digest.
    #[test]
    fn resume_skips_recorded_chunks(
        chunks in 2u64..9,
        tail in 0u64..4096,
        recorded in proptest::collection::btree_set(0u32..9, 0..9),
        intact in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let cs = 4096;
        let len = ((chunks - 1) * cs + tail.max(1)) as usize;
        let n = chunks as u32;
        let recorded: BTreeSet<u32> = recorded.into_iter().filter(|&i| i < n).collect();
        let case = Case {
            chunk_size: cs,
            streams: 2,
            no_clobber: false,
            files: vec![(bytes(len, 9), Dest::Partial { chunks: recorded.clone(), intact })],
            corrupt: BTreeMap::new(),
            seed,
        };
        let r = run(&case).unwrap();
        prop_assert_eq!(r.committed.get(&EntryId(1)), Some(&true));
        prop_assert_eq!(r.digests.get(&EntryId(1)), Some(&blake3_of(&case.files[0].0)));
        let sent: BTreeSet<u32> = r.sent.keys().map(|&(_, i)| i).collect();
        let want: BTreeSet<u32> = if intact {
            (0..n).filter(|i| !recorded.contains(i)).collect()
        } else {
            (0..n).collect()
        };
        prop_assert_eq!(sent, want);
    }
}

#[test]
fn corrupted_chunk_is_rejected_until_it_verifies() {
    let case = Case {
        chunk_size: 4096,
        streams: 2,
        no_clobber: false,
        files: vec![(bytes(3 * 4096 + 10, 1), Dest::Empty)],
        corrupt: BTreeMap::from([((EntryId(1), 1), 3)]),
        seed: 7,
    };
    let r = run(&case).unwrap();
    assert_eq!(r.rejected, 3);
    assert_eq!(
        r.sent[&(EntryId(1), 1)],
        4,
        "three bad copies, then a good one"
    );
    assert!(r.committed[&EntryId(1)]);
}

#[test]
fn no_clobber_skips_an_existing_file() {
    let case = Case {
        chunk_size: 4096,
        streams: 1,
        no_clobber: true,
        files: vec![(bytes(9000, 1), Dest::Other), (bytes(100, 2), Dest::Empty)],
        corrupt: BTreeMap::new(),
        seed: 3,
    };
    let r = run(&case).unwrap();
    assert_eq!(r.skipped.get(&EntryId(1)), Some(&SkipReason::Exists));
    assert!(
        !r.sent.keys().any(|&(e, _)| e == EntryId(1)),
        "no chunk of a skipped file"
    );
    assert_eq!(r.committed.get(&EntryId(1)), None);
    assert_eq!(r.committed.get(&EntryId(2)), Some(&true));
}

#[test]
fn clobber_replaces_an_existing_file() {
    let case = Case {
        chunk_size: 4096,
        streams: 1,
        no_clobber: false,
        files: vec![(bytes(9000, 1), Dest::Other)],
        corrupt: BTreeMap::new(),
        seed: 3,
    };
    let r = run(&case).unwrap();
    assert!(r.skipped.is_empty());
    assert_eq!(r.committed.get(&EntryId(1)), Some(&true));
}

#[test]
fn quick_check_says_already_complete() {
    let case = Case {
        chunk_size: 4096,
        streams: 2,
        no_clobber: false,
        files: vec![
            (bytes(20_000, 1), Dest::Same),
            (bytes(10, 2), Dest::Same),
            (bytes(5000, 3), Dest::Empty),
        ],
        corrupt: BTreeMap::new(),
        seed: 11,
    };
    let r = run(&case).unwrap();
    assert_eq!(
        r.skipped.get(&EntryId(1)),
        Some(&SkipReason::AlreadyComplete)
    );
    assert_eq!(
        r.skipped.get(&EntryId(2)),
        Some(&SkipReason::AlreadyComplete)
    );
    assert!(r.sent.keys().all(|&(e, _)| e == EntryId(3)));
    assert_eq!(r.committed.get(&EntryId(3)), Some(&true));
}

#[test]
fn everything_skipped_still_fixes_dirs_and_finishes() {
    // In every delivery order: the driver's answer to FixDirs may come after the
    // sender's TransferDone reached the receiver, which then answers it only once the
    // tree is final.
    for seed in 0..64 {
        let case = Case {
            chunk_size: 4096,
            streams: 1,
            no_clobber: false,
            files: vec![(bytes(100, 1), Dest::Same)],
            corrupt: BTreeMap::new(),
            seed,
        };
        let r = run(&case).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(r.sent.is_empty() && r.committed.is_empty(), "seed {seed}");
        assert_eq!(r.dirs_fixed_calls, 1, "seed {seed}");
    }
}

/// Drives one file to the point where its last commit waits for the directories.
#[test]
fn last_commit_waits_for_dirs_fixed() {
    let data = bytes(5000, 4);
    let entries = vec![
        entry("top", EntryKind::Dir, 0),
        entry("top/a", EntryKind::File, data.len() as u64),
    ];
    let mut tx = SendSession::new(
        entries,
        SendConfig {
            chunk_size: 4096,
            checksum_only: false,
            streams: 1,
        },
    )
    .unwrap();
    let mut rx = RecvSession::new(RecvConfig::into_directory(4096));
    let pump_tx = |tx: &mut SendSession, rx: &mut RecvSession| {
        while let Some(m) = tx.poll_transmit() {
            rx.handle(m).unwrap();
        }
    };
    pump_tx(&mut tx, &mut rx);
    let mut fix_dirs = 0;
    let answer = |rx: &mut RecvSession, fix_dirs: &mut usize| {
        while let Some(ev) = rx.poll_event() {
            match ev {
                RecvEvent::FixDirs(dirs) => {
                    assert_eq!(dirs.len(), 1, "the one directory");
                    *fix_dirs += 1;
                }
                ev => {
                    if let Some(input) = pair::plain_answer(&ev) {
                        rx.handle(input).unwrap();
                    }
                }
            }
        }
    };
    answer(&mut rx, &mut fix_dirs);
    while let Some(m) = rx.poll_transmit() {
        tx.handle(m).unwrap();
    }
    let now = Instant::now();
    while let Work::Send(unit) = tx.next_work(StreamId(0), now) {
        for c in &unit.chunks {
            let d = &data[c.offset as usize..(c.offset + c.len) as usize];
            let header = pair::send_chunk(&mut tx, c, d);
            pair::receive_new_chunk(&mut rx, &header, d);
        }
    }
    pump_tx(&mut tx, &mut rx); // the digest
    answer(&mut rx, &mut fix_dirs);
    assert_eq!(
        fix_dirs, 1,
        "the directories are fixed before the last commit"
    );
    let before: Vec<_> = std::iter::from_fn(|| rx.poll_transmit()).collect();
    assert!(
        !before
            .iter()
            .any(|m| matches!(m, TransferMessage::FileCommitted { .. })),
        "FileCommitted went out before dirs_fixed: {before:?}"
    );
    for m in before {
        tx.handle(m).unwrap();
    }
    assert!(!tx.is_done());
    rx.handle(RecvInput::DirsFixed).unwrap();
    let after: Vec<_> = std::iter::from_fn(|| rx.poll_transmit()).collect();
    assert!(matches!(
        after.as_slice(),
        [TransferMessage::FileCommitted {
            file: EntryId(1),
            ok: true,
            ..
        }]
    ));
    for m in after {
        tx.handle(m).unwrap();
    }
    assert!(tx.is_done());
    assert_eq!(tx.outcome().files_ok, 1);
}

#[test]
fn a_message_out_of_place_is_a_protocol_error() {
    let mut rx = RecvSession::new(RecvConfig::into_directory(4096));
    let r = rx.handle(TransferMessage::ChunkVerified {
        file: EntryId(0),
        index: 0,
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");

    let mut tx = SendSession::new(
        vec![entry("a", EntryKind::File, 10)],
        SendConfig {
            chunk_size: 4096,
            checksum_only: false,
            streams: 1,
        },
    )
    .unwrap();
    // A digest is something the sender sends, never receives.
    let r = tx.handle(TransferMessage::FileDigest {
        file: EntryId(0),
        blake3: [0; 32],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");

    // An ack for a file not in the transfer, once sending started.
    let mut tx = SendSession::new(
        vec![entry("a", EntryKind::File, 10)],
        SendConfig {
            chunk_size: 4096,
            checksum_only: false,
            streams: 1,
        },
    )
    .unwrap();
    tx.handle(TransferMessage::FileListEnd {
        files: 1,
        bytes: 10,
        deleted: 0,
    })
    .unwrap();
    let r = tx.handle(TransferMessage::ChunkVerified {
        file: EntryId(5),
        index: 0,
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
}

#[test]
fn losing_every_stream_gives_up() {
    let mut tx = SendSession::new(
        vec![entry("a", EntryKind::File, 100_000)],
        SendConfig {
            chunk_size: 4096,
            checksum_only: false,
            streams: 3,
        },
    )
    .unwrap();
    tx.handle(TransferMessage::FileListEnd {
        files: 1,
        bytes: 100_000,
        deleted: 0,
    })
    .unwrap();
    let now = Instant::now();
    for s in 0..3 {
        assert!(matches!(tx.next_work(StreamId(s), now), Work::Send(_)));
    }
    tx.handle(SendInput::StreamFailed {
        stream: StreamId(0),
        why: "reset".into(),
    })
    .unwrap();
    tx.handle(SendInput::StreamFailed {
        stream: StreamId(1),
        why: "reset".into(),
    })
    .unwrap();
    let r = tx.handle(SendInput::StreamFailed {
        stream: StreamId(2),
        why: "timed out".into(),
    });
    assert!(matches!(r, Err(SessionError::GaveUp(_))), "{r:?}");
    assert!(matches!(tx.next_work(StreamId(0), now), Work::Finished));
}

/// A receiver's `HaveChunks` runs must come in order and not overlap: runs that each
/// claim the whole file again would make the sender mark N chunks N times (quadratic
/// work from a few frames), so they are refused as soon as they arrive.
#[test]
fn overlapping_or_unordered_have_chunks_are_refused() {
    let chunks = 64u32;
    let new_sender = || {
        SendSession::new(
            vec![entry("a", EntryKind::File, u64::from(chunks) * 4096)],
            SendConfig {
                chunk_size: 4096,
                checksum_only: false,
                streams: 1,
            },
        )
        .unwrap()
    };
    // Honest runs, ascending and disjoint, over two frames: accepted.
    let mut tx = new_sender();
    tx.handle(TransferMessage::HaveChunks {
        file: EntryId(0),
        ranges: vec![(0, 2), (5, 3)],
    })
    .unwrap();
    tx.handle(TransferMessage::HaveChunks {
        file: EntryId(0),
        ranges: vec![(9, 1)],
    })
    .unwrap();
    // The whole file claimed twice.
    let mut tx = new_sender();
    let r = tx.handle(TransferMessage::HaveChunks {
        file: EntryId(0),
        ranges: vec![(0, chunks), (0, chunks)],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
    // A later frame going back.
    let mut tx = new_sender();
    tx.handle(TransferMessage::HaveChunks {
        file: EntryId(0),
        ranges: vec![(10, 2)],
    })
    .unwrap();
    let r = tx.handle(TransferMessage::HaveChunks {
        file: EntryId(0),
        ranges: vec![(3, 1)],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
    // A run past the end of the file, refused on arrival.
    let mut tx = new_sender();
    let r = tx.handle(TransferMessage::HaveChunks {
        file: EntryId(0),
        ranges: vec![(chunks - 1, 2)],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
}

/// A source found changed once all of it was read (`SendSession::check_sources`): its
/// digest never goes out, the receiver commits nothing of it (and discards its part
/// file), and every other file commits; ahead of the answers or after them.
#[test]
fn a_source_changed_while_read_is_not_committed_and_the_others_are() {
    for ahead in [false, true] {
        let case = Case {
            chunk_size: 4096,
            streams: 3,
            no_clobber: false,
            files: vec![
                (bytes(3 * 4096 + 10, 1), Dest::Empty),
                (bytes(5 * 4096, 2), Dest::Empty),
                (bytes(100, 3), Dest::Empty),
            ],
            corrupt: BTreeMap::new(),
            seed: 11,
        };
        let r = run_checked(&case, ahead, &BTreeSet::from([EntryId(2)])).unwrap();
        assert!(r.committed[&EntryId(1)], "ahead {ahead}");
        assert!(!r.committed[&EntryId(2)], "ahead {ahead}");
        assert!(r.committed[&EntryId(3)], "ahead {ahead}");
        assert!(
            !r.digests.contains_key(&EntryId(2)),
            "ahead {ahead}: {:?}",
            r.digests
        );
        // Checked and unchanged: as without checks.
        let r = run_checked(&case, ahead, &BTreeSet::from([EntryId(99)])).unwrap();
        assert!(r.committed.values().all(|ok| *ok), "ahead {ahead}");
    }
}
