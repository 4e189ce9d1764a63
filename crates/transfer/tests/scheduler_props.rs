//! Property tests of the chunk scheduler under random interleavings of pulls, verifies,
//! chunk failures and stream failures: every byte of every file is assigned and verified
//! exactly once, a file completes exactly once and only when all its chunks are verified,
//! a chunk is never in flight twice (no duplicates, even when the queue is dry), and a
//! failed chunk is always sent again.

// The sessions take `now` from their driver: a test needs one Instant to offset from.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use longhaul_transfer::{ChunkId, ChunkScheduler, FileId, Retry, SchedulerConfig, StreamId};
use proptest::prelude::*;

const CHUNK: u64 = 4096;

#[derive(Debug, Clone, Copy)]
enum Op {
    Pull(u32),
    Verify(u32),
    Fail(u32),
    StreamDies(u32),
}

fn arb_op(streams: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..streams).prop_map(Op::Pull),
        3 => (0..streams).prop_map(Op::Verify),
        1 => (0..streams).prop_map(Op::Fail),
        1 => (0..streams).prop_map(Op::StreamDies),
    ]
}

fn arb_size() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1..CHUNK,
        CHUNK..8 * CHUNK,
        Just(CHUNK),
        Just(3 * CHUNK)
    ]
}

struct Model {
    sizes: Vec<u64>,
    held: BTreeMap<u32, BTreeSet<ChunkId>>,
    verified: BTreeMap<ChunkId, (u64, u64)>,
    completed: BTreeSet<FileId>,
    failed_once: BTreeSet<ChunkId>,
}

impl Model {
    fn holder(&self, id: ChunkId) -> Option<u32> {
        self.held
            .iter()
            .find(|(_, s)| s.contains(&id))
            .map(|(&k, _)| k)
    }
}

fn pull(s: &mut ChunkScheduler, m: &mut Model, stream: u32, now: Instant) -> bool {
    let Some(unit) = s.next_work(StreamId(stream), now) else {
        return false;
    };
    let cfg = *s.config();
    assert!(!unit.chunks.is_empty());
    assert!(unit.chunks.len() <= cfg.batch_max_files);
    assert!(unit.bytes() <= cfg.chunk_size.max(cfg.batch_bytes));
    for c in &unit.chunks {
        assert!(
            !m.verified.contains_key(&c.id),
            "{:?} handed out after verify",
            c.id
        );
        assert_eq!(m.holder(c.id), None, "{:?} handed out twice", c.id);
        assert!(c.offset + c.len <= m.sizes[c.id.file.slot()]);
        m.held.entry(stream).or_default().insert(c.id);
        m.failed_once.remove(&c.id);
    }
    true
}

fn verify(s: &mut ChunkScheduler, m: &mut Model, stream: u32) {
    let Some(&id) = m.held.get(&stream).and_then(|h| h.iter().next()) else {
        return;
    };
    m.held.get_mut(&stream).unwrap().remove(&id);
    let c = s.chunk(id).unwrap();
    assert!(m.verified.insert(id, (c.offset, c.len)).is_none());
    let done = s.chunk_verified(StreamId(stream), id).unwrap();
    let file_done = (0..s.chunk_count(id.file)).all(|i| {
        m.verified.contains_key(&ChunkId {
            file: id.file,
            index: i,
        })
    });
    assert_eq!(done.is_some(), file_done, "completion of file {}", id.file);
    if let Some(f) = done {
        assert!(
            m.completed.insert(f.file),
            "file {} completed twice",
            f.file
        );
        assert_eq!(f.size, m.sizes[f.file.slot()]);
    }
    // A second report of the same chunk is refused.
    assert!(s.chunk_verified(StreamId(stream), id).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn every_byte_once(
        sizes in proptest::collection::vec(arb_size(), 1..30),
        batch_max_files in 1usize..6,
        streams in 1u32..5,
        ops in proptest::collection::vec(arb_op(4), 0..200),
    ) {
        let cfg = SchedulerConfig {
            batch_max_files,
            max_attempts: u32::MAX,
            ..SchedulerConfig::for_chunk_size(CHUNK)
        };
        let mut s = ChunkScheduler::new(&sizes, cfg).unwrap();
        let mut m = Model {
            sizes: sizes.clone(),
            held: BTreeMap::new(),
            verified: BTreeMap::new(),
            completed: BTreeSet::new(),
            failed_once: BTreeSet::new(),
        };
        let now = Instant::now();
        for op in ops {
            match op {
                Op::Pull(st) => { pull(&mut s, &mut m, st % streams, now); }
                Op::Verify(st) => verify(&mut s, &mut m, st % streams),
                Op::Fail(st) => {
                    let st = st % streams;
                    if let Some(&id) = m.held.get(&st).and_then(|h| h.iter().next()) {
                        m.held.get_mut(&st).unwrap().remove(&id);
                        match s.chunk_failed(StreamId(st), id).unwrap() {
                            Retry::Requeued { .. } => {
                                prop_assert!(m.holder(id).is_none());
                                m.failed_once.insert(id);
                            }
                            Retry::GaveUp { .. } => prop_assert!(false, "gave up"),
                            Retry::Dropped => prop_assert!(false, "no file is dropped here"),
                        }
                    }
                }
                Op::StreamDies(st) => {
                    let st = st % streams;
                    let held = m.held.remove(&st).unwrap_or_default();
                    let back = s.stream_failed(StreamId(st));
                    prop_assert_eq!(&back.iter().map(|(id, _)| *id).collect::<BTreeSet<ChunkId>>(), &held);
                    for (id, r) in back {
                        match r {
                            Retry::Requeued { .. } => {
                                prop_assert!(m.holder(id).is_none());
                                m.failed_once.insert(id);
                            }
                            Retry::GaveUp { .. } => prop_assert!(false, "gave up"),
                            Retry::Dropped => prop_assert!(false, "no file is dropped here"),
                        }
                    }
                }
            }
            let all = m.verified.len() as u64
                == (0..sizes.len() as u32).map(|f| u64::from(s.chunk_count(FileId(f)))).sum::<u64>();
            prop_assert_eq!(s.is_complete(), all);
            let in_flight: usize = m.held.values().map(BTreeSet::len).sum();
            prop_assert_eq!(s.in_flight_chunks(), in_flight);
        }
        // Drain: every stream verifies what it holds, then stream 0 pulls the rest.
        for st in 0..streams {
            while m.held.get(&st).is_some_and(|h| !h.is_empty()) {
                verify(&mut s, &mut m, st);
            }
        }
        let mut guard = 0;
        while pull(&mut s, &mut m, 0, now) {
            while m.held.get(&0).is_some_and(|h| !h.is_empty()) {
                verify(&mut s, &mut m, 0);
            }
            guard += 1;
            prop_assert!(guard < 10_000);
        }
        prop_assert!(s.is_complete());
        prop_assert!(m.failed_once.is_empty(), "failed chunks never resent: {:?}", m.failed_once);
        prop_assert_eq!(m.completed.len(), sizes.len());
        prop_assert_eq!(s.verified_bytes(), sizes.iter().sum::<u64>());
        // The verified ranges of each file tile [0, size) exactly.
        for (f, &size) in sizes.iter().enumerate() {
            let mut end = 0;
            for (id, (off, len)) in &m.verified {
                if id.file.slot() == f {
                    prop_assert_eq!(*off, end);
                    end += len;
                }
            }
            prop_assert_eq!(end, size);
        }
    }

    #[test]
    fn resumed_chunks_never_sent(
        sizes in proptest::collection::vec(arb_size(), 1..20),
        done in proptest::collection::vec(any::<bool>(), 200),
    ) {
        let mut s = ChunkScheduler::new(&sizes, SchedulerConfig::for_chunk_size(CHUNK)).unwrap();
        let mut skipped = BTreeSet::new();
        let mut k = 0;
        for f in 0..sizes.len() as u32 {
            for i in 0..s.chunk_count(FileId(f)) {
                if done[k % done.len()] {
                    let id = ChunkId { file: FileId(f), index: i };
                    s.mark_already_verified(id).unwrap();
                    skipped.insert(id);
                }
                k += 1;
            }
        }
        let now = Instant::now();
        while let Some(u) = s.next_work(StreamId(3), now) {
            for c in u.chunks {
                prop_assert!(!skipped.contains(&c.id));
                s.chunk_verified(StreamId(3), c.id).unwrap();
            }
        }
        prop_assert!(s.is_complete());
        prop_assert_eq!(s.verified_bytes(), sizes.iter().sum::<u64>());
    }
}
