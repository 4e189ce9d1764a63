//! `longhaul sync`'s delta in pure form: both sessions in memory, one file whose old copy
//! at the destination differs from the source in random ways (chunks rewritten, grown,
//! truncated). The receiver's events are answered by a model of the destination that
//! hashes the old copy, writes received chunks into a part file and, at the commit,
//! copies the reused runs from the old copy (or keeps it).
//!
//! Checked: the rebuilt file equals the source byte for byte, and its BLAKE3 is the
//! source's; exactly the chunks whose hash differs carry bytes; the old file is kept only
//! when it is the source. Hostile peers: a `CHUNK_FLAG_SAME` header for a chunk the
//! receiver did not name (or with another hash, or in a transfer without sync) stops the
//! transfer; old chunk hashes out of order or past the file's end stop the sender.

// The sessions take `now` from their driver: a test needs one Instant to offset from.
#![allow(clippy::disallowed_methods)]

mod pair;

use longhaul_proto::transfer::EntryId;
use std::time::Instant;

use longhaul_proto::transfer::{ChunkHeader, EntryKind, TransferMessage, CHUNK_FLAG_SAME};
use longhaul_transfer::chunk_hash;
use longhaul_transfer::session::recv::{Arrival, OldCopy, SyncRules};
use longhaul_transfer::session::{
    LookResult, Meta, Placed, RecvConfig, RecvEvent, RecvInput, RecvSession, SendConfig, SendInput,
    SendSession, SessionError, Work,
};
use longhaul_transfer::FileIdentity;
use longhaul_transfer::StreamId;
use proptest::prelude::*;

const CS: u64 = 4096;

fn rx_session(rules: Option<SyncRules>) -> RecvSession {
    let rx = RecvSession::new(RecvConfig::into_directory(CS));
    match rules {
        Some(r) => rx.with_sync(r),
        None => rx,
    }
}

/// The chunk hashes of `data` on the grid.
fn hashes_of(data: &[u8]) -> Vec<[u8; 32]> {
    let whole = (data.len() as u64).div_ceil(CS) <= 1;
    data.chunks(CS as usize)
        .enumerate()
        .map(|(i, c)| chunk_hash(c, i as u64 * CS, whole))
        .collect()
}

/// What the model destination did.
#[derive(Debug, Default)]
struct Outcome {
    /// The file at the destination after the commit.
    result: Vec<u8>,
    kept_old: bool,
    payload: u64,
    digest_ok: bool,
}

/// Runs a sync of `new` over `old` (present at the destination with another mtime).
fn run(old: &[u8], new: &[u8]) -> Result<Outcome, SessionError> {
    let mut tx = SendSession::new(
        vec![pair::entry("f", EntryKind::File, new.len() as u64)],
        SendConfig {
            chunk_size: CS,
            checksum_only: false,
            streams: 2,
        },
    )?;
    let mut rx = rx_session(Some(SyncRules::default()));
    let mut part = vec![0u8; new.len()];
    let mut out = Outcome::default();
    let now = Instant::now();
    for _ in 0..10_000 {
        if tx.is_done() && rx.is_done() {
            return Ok(out);
        }
        while let Some(m) = tx.poll_transmit() {
            if let TransferMessage::FileDigest { blake3, .. } = &m {
                out.digest_ok = *blake3 == *blake3::hash(new).as_bytes();
            }
            rx.handle(m)?;
        }
        while let Some(ev) = rx.poll_event() {
            match ev {
                RecvEvent::Look { id, .. } => {
                    let existing = Meta {
                        is_file: true,
                        is_dir: false,
                        len: old.len() as u64,
                        mtime_secs: 1,
                        mtime_nanos: 0,
                        mode: 0o644,
                        special: None,
                    };
                    rx.handle(RecvInput::Looked {
                        file: id,
                        found: LookResult {
                            existing: Some(existing),
                            ..LookResult::default()
                        },
                    })?;
                }
                RecvEvent::HashOld { id, size, .. } => {
                    assert_eq!(size, old.len() as u64);
                    let copy = OldCopy {
                        identity: FileIdentity {
                            size,
                            ..FileIdentity::default()
                        },
                        hashes: hashes_of(old),
                    };
                    rx.handle(RecvInput::OldHashed {
                        file: id,
                        old: Ok(copy),
                    })?;
                }
                RecvEvent::Open { id, .. } => rx.handle(RecvInput::Opened {
                    file: id,
                    intact: true,
                })?,
                RecvEvent::Commit(job) => {
                    match &job.reuse {
                        Some(r) if r.keep_old => {
                            out.kept_old = true;
                            out.result = old.to_vec();
                        }
                        Some(r) => {
                            for &(off, len) in &r.runs {
                                let (o, l) = (off as usize, len as usize);
                                part[o..o + l].copy_from_slice(&old[o..o + l]);
                            }
                            out.result = part.clone();
                        }
                        None => out.result = part.clone(),
                    }
                    rx.handle(RecvInput::Placed {
                        file: job.id,
                        result: Ok(Placed::Here),
                    })?;
                }
                RecvEvent::FixDirs(_) => rx.handle(RecvInput::DirsFixed)?,
                _ => {}
            }
        }
        while let Some(m) = rx.poll_transmit() {
            tx.handle(m)?;
        }
        if !rx.is_listed() {
            continue;
        }
        if let Work::Send(unit) = tx.next_work(StreamId(0), now) {
            for c in &unit.chunks {
                let bytes = &new[c.offset as usize..(c.offset + c.len) as usize];
                let mut h = tx.hasher(c);
                h.update(bytes);
                let hash = h.finish();
                let same = tx.old_hash(c) == Some(hash);
                let header = ChunkHeader {
                    file: tx.entry_of(c),
                    index: c.id.index,
                    flags: if same { CHUNK_FLAG_SAME } else { 0 },
                    offset: c.offset,
                    len: c.len as u32,
                    hash,
                };
                let plan = rx.chunk_header(&header)?;
                if same {
                    assert!(plan.same && plan.payload == 0);
                    tx.handle(SendInput::ChunkReused { chunk: *c, hash })?;
                    assert_eq!(rx.chunk_reused(&header)?, Arrival::Reused);
                    continue;
                }
                tx.handle(SendInput::ChunkSent {
                    chunk: *c,
                    hash,
                    payload: c.len,
                })?;
                out.payload += c.len;
                let mut hasher = plan.hasher;
                hasher.update(bytes);
                assert_eq!(rx.chunk_arrived(&header, hasher.finish())?, Arrival::Write);
                part[c.offset as usize..(c.offset + c.len) as usize].copy_from_slice(bytes);
                rx.chunk_written(header.file, header.index, hash)?;
                rx.handle(RecvInput::ChunkRecorded {
                    file: header.file,
                    index: header.index,
                    hash,
                    len: c.len,
                })?;
            }
        }
    }
    panic!("the sync did not finish");
}

/// Bytes of the chunks of `new` whose hash differs from `old`'s chunk at that index.
fn differing(old: &[u8], new: &[u8]) -> u64 {
    let (ho, hn) = (hashes_of(old), hashes_of(new));
    new.chunks(CS as usize)
        .enumerate()
        .filter(|(i, _)| ho.get(*i) != hn.get(*i))
        .map(|(_, c)| c.len() as u64)
        .sum()
}

fn mutate(old: &[u8], edits: &[(usize, u8)], resize: i64) -> Vec<u8> {
    let mut new = old.to_vec();
    for &(at, b) in edits {
        if !new.is_empty() {
            let i = at % new.len();
            new[i] ^= b | 1;
        }
    }
    let len = (new.len() as i64 + resize).max(0) as usize;
    new.resize(len, 0xab);
    new
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn a_sync_rebuilds_the_source_sending_only_differing_chunks(
        old in proptest::collection::vec(any::<u8>(), 0..(12 * CS as usize)),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        resize in -(3 * CS as i64)..(3 * CS as i64),
    ) {
        let new = mutate(&old, &edits, resize);
        let out = run(&old, &new).unwrap();
        prop_assert_eq!(&out.result, &new);
        prop_assert!(out.digest_ok);
        prop_assert_eq!(out.payload, differing(&old, &new));
        prop_assert_eq!(out.kept_old, old == new && !new.is_empty());
    }
}

/// A receiver with one file listed and answered (old copy hashed), ready for chunks.
fn listed_receiver(old: &[u8], new_len: u64, rules: Option<SyncRules>) -> RecvSession {
    let mut rx = rx_session(rules);
    rx.handle(TransferMessage::FileEntries {
        first_id: EntryId(0),
        entries: vec![pair::entry("f", EntryKind::File, new_len)],
    })
    .unwrap();
    rx.handle(TransferMessage::FileListEnd {
        files: 1,
        bytes: new_len,
        deleted: 0,
    })
    .unwrap();
    while let Some(ev) = rx.poll_event() {
        match ev {
            RecvEvent::Look { id, .. } => rx
                .handle(RecvInput::Looked {
                    file: id,
                    found: LookResult {
                        existing: Some(Meta {
                            is_file: true,
                            is_dir: false,
                            len: old.len() as u64,
                            mtime_secs: 1,
                            mtime_nanos: 0,
                            mode: 0o644,
                            special: None,
                        }),
                        ..LookResult::default()
                    },
                })
                .unwrap(),
            RecvEvent::HashOld { id, .. } => rx
                .handle(RecvInput::OldHashed {
                    file: id,
                    old: Ok(OldCopy {
                        identity: FileIdentity {
                            size: old.len() as u64,
                            ..FileIdentity::default()
                        },
                        hashes: hashes_of(old),
                    }),
                })
                .unwrap(),
            ev @ RecvEvent::Open { .. } => rx.handle(pair::plain_answer(&ev).unwrap()).unwrap(),
            _ => {}
        }
    }
    assert!(rx.is_listed());
    rx
}

fn same_header(index: u32, hash: [u8; 32]) -> ChunkHeader {
    ChunkHeader {
        file: EntryId(0),
        index,
        flags: CHUNK_FLAG_SAME,
        offset: u64::from(index) * CS,
        len: CS as u32,
        hash,
    }
}

#[test]
fn a_same_chunk_the_receiver_did_not_name_stops_the_transfer() {
    let old = vec![5u8; 4 * CS as usize];
    let h = hashes_of(&old);
    // Another hash than the old copy's.
    let mut rx = listed_receiver(&old, 4 * CS, Some(SyncRules::default()));
    let r = rx.chunk_header(&same_header(1, [9; 32]));
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{:?}", r.err());
    // A chunk past the old copy's end (the file grew).
    let mut rx = listed_receiver(&old, 6 * CS, Some(SyncRules::default()));
    let r = rx.chunk_header(&same_header(5, h[0]));
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{:?}", r.err());
    // The old copy's hash of another index (a chunk hash binds its offset).
    let mut rx = listed_receiver(&old, 4 * CS, Some(SyncRules::default()));
    let r = rx.chunk_header(&same_header(2, h[1]));
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{:?}", r.err());
    // The right one is accepted.
    let mut rx = listed_receiver(&old, 4 * CS, Some(SyncRules::default()));
    let plan = rx.chunk_header(&same_header(2, h[2])).unwrap();
    assert!(plan.same && plan.payload == 0);
    // Without sync there is no old copy to take a chunk from.
    let mut rx = listed_receiver(&old, 4 * CS, None);
    let r = rx.chunk_header(&same_header(0, h[0]));
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{:?}", r.err());
}

#[test]
fn old_chunk_hashes_out_of_order_or_past_the_end_stop_the_sender() {
    let sender = || {
        let mut tx = SendSession::new(
            vec![pair::entry("f", EntryKind::File, 3 * CS)],
            SendConfig {
                chunk_size: CS,
                checksum_only: false,
                streams: 1,
            },
        )
        .unwrap();
        while tx.poll_transmit().is_some() {}
        tx
    };
    let msg = |first, n| TransferMessage::OldChunks {
        file: EntryId(0),
        first,
        hashes: vec![[1; 32]; n],
    };
    assert!(sender().handle(msg(0, 3)).is_ok());
    assert!(matches!(
        sender().handle(msg(0, 4)),
        Err(SessionError::Protocol(_))
    ));
    assert!(matches!(
        sender().handle(msg(1, 1)),
        Err(SessionError::Protocol(_))
    ));
    let mut tx = sender();
    tx.handle(msg(0, 2)).unwrap();
    assert!(tx.handle(msg(2, 1)).is_ok());
    assert!(matches!(
        tx.handle(msg(3, 1)),
        Err(SessionError::Protocol(_))
    ));
    // A file id that is not a file of the list.
    let r = sender().handle(TransferMessage::OldChunks {
        file: EntryId(5),
        first: 0,
        hashes: vec![[1; 32]],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))));
}
