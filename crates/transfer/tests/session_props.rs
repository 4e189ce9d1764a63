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

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use longhaul_proto::transfer::{ChunkHeader, EntryKind, FileEntry, SkipReason, TransferMessage};
use longhaul_transfer::session::recv::Arrival;
use longhaul_transfer::session::{
    LookResult, Meta, OpenPlan, RecvConfig, RecvEvent, RecvSession, SendConfig, SendSession,
    SessionError, Work,
};
use longhaul_transfer::{chunk_hash, ResumeManifest, SourceIdentity};
use proptest::prelude::*;

const MTIME: i64 = 1_700_000_000;

/// What is at the destination of one file before the transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Dest {
    /// Nothing.
    Empty,
    /// A different file of the same name (other mtime).
    Other,
    /// The same file from an earlier run (same size and mtime).
    Same,
    /// A part file and a manifest with these chunks recorded; `intact` is whether their
    /// data still hashes right.
    Partial { chunks: BTreeSet<u32>, intact: bool },
}

#[derive(Debug, Clone)]
struct Case {
    chunk_size: u64,
    streams: u16,
    no_clobber: bool,
    files: Vec<(Vec<u8>, Dest)>,
    /// (entry, chunk index) -> deliveries to corrupt before a good one.
    corrupt: BTreeMap<(u32, u32), u32>,
    /// Drives the delivery order.
    seed: u64,
}

#[derive(Debug, Default)]
struct Report {
    /// Entry -> committed ok.
    committed: BTreeMap<u32, bool>,
    /// Entry -> the digest the sender announced.
    digests: BTreeMap<u32, [u8; 32]>,
    skipped: BTreeMap<u32, SkipReason>,
    /// Every chunk the sender put on a stream, with how often.
    sent: BTreeMap<(u32, u32), u32>,
    rejected: u64,
    /// Commits the sender had heard of when the receiver asked to fix the directories.
    commits_before_dirs_fixed: Option<usize>,
    dirs_fixed_calls: usize,
}

fn entry(path: &str, kind: EntryKind, size: u64) -> FileEntry {
    FileEntry {
        path: path.as_bytes().to_vec(),
        kind,
        size,
        mtime_secs: MTIME,
        mtime_nanos: 7,
        mode: if kind == EntryKind::Dir { 0o755 } else { 0o644 },
        fingerprint: 42,
        link_target: Vec::new(),
    }
}

fn identity(e: &FileEntry) -> SourceIdentity {
    SourceIdentity {
        size: e.size,
        mtime_secs: e.mtime_secs,
        mtime_nanos: e.mtime_nanos,
        fingerprint: e.fingerprint,
    }
}

/// A tiny xorshift: the delivery order, reproducible from the case's seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// A chunk on a data stream: its header and the bytes as they arrive.
struct InFlight {
    header: ChunkHeader,
    bytes: Vec<u8>,
}

/// Runs a whole transfer; the entry list is one directory, then the files below it.
fn run(case: &Case) -> Result<Report, SessionError> {
    let mut entries = vec![entry("top", EntryKind::Dir, 0)];
    let mut data: Vec<Vec<u8>> = vec![Vec::new()];
    let mut dest: Vec<Dest> = vec![Dest::Empty];
    for (i, (bytes, d)) in case.files.iter().enumerate() {
        entries.push(entry(
            &format!("top/f{i}"),
            EntryKind::File,
            bytes.len() as u64,
        ));
        data.push(bytes.clone());
        dest.push(d.clone());
    }
    let cs = case.chunk_size;
    let mut tx = SendSession::new(
        entries.clone(),
        SendConfig {
            chunk_size: cs,
            checksum_only: false,
            streams: case.streams,
        },
    )?;
    let mut rx = RecvSession::new(RecvConfig {
        chunk_size: cs,
        target: None,
        target_is_dir: true,
        no_clobber: case.no_clobber,
        checksum_only: false,
        sync: false,
        expect: None,
        keep_setuid: false,
        umask: 0o022,
    });
    let mut rng = Rng(case.seed | 1);
    let mut report = Report::default();
    let mut corrupt = case.corrupt.clone();
    let mut wire: Vec<InFlight> = Vec::new();
    let mut fix_dirs_pending = false;
    let now = Instant::now();
    let mut tx_commits = 0usize;

    for _step in 0..100_000 {
        if tx.is_done() && rx.is_done() {
            return Ok(report);
        }
        let mut progressed = false;
        // Control, sender -> receiver.
        while let Some(m) = tx.poll_transmit() {
            if let TransferMessage::FileDigest { file, blake3 } = &m {
                report.digests.insert(*file, *blake3);
            }
            rx.handle(m)?;
            progressed = true;
        }
        // The receiver's events, answered by the destination model.
        while let Some(ev) = rx.poll_event() {
            progressed = true;
            match ev {
                RecvEvent::CreateDir { .. }
                | RecvEvent::Discard { .. }
                | RecvEvent::DropOrphanManifest { .. } => {}
                RecvEvent::Look { id, .. } => {
                    let e = &entries[id as usize];
                    let meta = |mtime_secs| Meta {
                        is_file: true,
                        is_dir: false,
                        len: e.size,
                        mtime_secs,
                        mtime_nanos: i64::from(e.mtime_nanos),
                        mode: e.mode,
                        special: None,
                    };
                    let found = match &dest[id as usize] {
                        Dest::Empty => LookResult::default(),
                        Dest::Other => LookResult {
                            existing: Some(meta(MTIME - 100)),
                            ..LookResult::default()
                        },
                        Dest::Same => LookResult {
                            existing: Some(meta(MTIME)),
                            ..LookResult::default()
                        },
                        Dest::Partial { chunks, .. } => {
                            let mut m = ResumeManifest::new(identity(e), cs).unwrap();
                            let whole = m.chunk_count() == 1;
                            for &i in chunks {
                                let off = u64::from(i) * cs;
                                let end = (off + cs).min(e.size);
                                let d = &data[id as usize][off as usize..end as usize];
                                m.record_verified(i, chunk_hash(d, off, whole)).unwrap();
                            }
                            LookResult {
                                existing: None,
                                part: Some(meta(0)),
                                manifest: Some(m.encode()),
                                link_target: None,
                                inode: None,
                            }
                        }
                    };
                    rx.looked(id, found)?;
                }
                RecvEvent::Open { id, plan, .. } => {
                    let intact = match (&dest[id as usize], &plan) {
                        (Dest::Partial { intact, .. }, OpenPlan::Resume { .. }) => *intact,
                        _ => true,
                    };
                    rx.opened(id, intact)?;
                }
                RecvEvent::HashFromFile { id, .. } => {
                    panic!("the receiver hashes from disk only in --checksum-only (file {id})")
                }
                RecvEvent::HashOld { id, .. } | RecvEvent::SetMode { rel: _, mode: id } => {
                    panic!("sync events without sync ({id})")
                }
                RecvEvent::Commit(job) => rx.placed(job.id, Ok(())),
                RecvEvent::MakeSymlink(job) => {
                    panic!("no symlink in this list: {job:?}")
                }
                RecvEvent::MakeHardLink(job) => {
                    panic!("no hard link in this list: {job:?}")
                }
                RecvEvent::FixDirs(_) => {
                    // Answered later, once the sender had a chance to hear everything
                    // the receiver sent so far.
                    fix_dirs_pending = true;
                }
                RecvEvent::ListDest(_) | RecvEvent::Remove(_) => {
                    panic!("no --delete here")
                }
            }
        }
        // The sender's own work: hash chunks the receiver already has.
        while let Some(longhaul_transfer::session::SendEvent::HashFromFile { entry, chunks }) =
            tx.poll_event()
        {
            progressed = true;
            let d = &data[entry as usize];
            let whole = (d.len() as u64).div_ceil(cs) <= 1;
            for i in chunks {
                let off = u64::from(i) * cs;
                let end = (off + cs).min(d.len() as u64);
                tx.hashed(
                    entry,
                    i,
                    chunk_hash(&d[off as usize..end as usize], off, whole),
                );
            }
        }
        // Control, receiver -> sender.
        while let Some(m) = rx.poll_transmit() {
            progressed = true;
            match &m {
                TransferMessage::FileCommitted { file, ok, .. } => {
                    tx_commits += 1;
                    assert!(
                        report.committed.insert(*file, *ok).is_none(),
                        "file {file} committed twice"
                    );
                }
                TransferMessage::SkipFile { file, reason } => {
                    report.skipped.insert(*file, *reason);
                }
                TransferMessage::ChunkRejected { .. } => report.rejected += 1,
                _ => {}
            }
            tx.handle(m)?;
        }
        if fix_dirs_pending && rng.below(3) == 0 {
            report.commits_before_dirs_fixed.get_or_insert(tx_commits);
            report.dirs_fixed_calls += 1;
            fix_dirs_pending = false;
            rx.dirs_fixed();
            progressed = true;
        }
        // A random stream pulls work, or a random chunk on the wire arrives.
        let mut pulled = false;
        if rx.is_listed() && (wire.is_empty() || rng.below(2) == 0) {
            let stream = rng.below(usize::from(case.streams.max(1))) as u32;
            if let Work::Send(unit) = tx.next_work(stream, now) {
                progressed = true;
                pulled = true;
                for c in &unit.chunks {
                    let e = tx.entry_of(c);
                    let d = &data[e as usize][c.offset as usize..(c.offset + c.len) as usize];
                    let mut h = tx.hasher(c);
                    h.update(d);
                    let hash = h.finish();
                    tx.chunk_sent(c, hash, c.len);
                    *report.sent.entry((e, c.id.index)).or_default() += 1;
                    let mut bytes = d.to_vec();
                    if let Some(n) = corrupt.get_mut(&(e, c.id.index)).filter(|n| **n > 0) {
                        *n -= 1;
                        match bytes.first_mut() {
                            Some(b) => *b ^= 0xff,
                            None => bytes.push(1),
                        }
                    }
                    wire.push(InFlight {
                        header: ChunkHeader {
                            file: e,
                            index: c.id.index,
                            flags: 0,
                            offset: c.offset,
                            len: c.len as u32,
                            hash,
                        },
                        bytes,
                    });
                }
            }
        }
        if !pulled && !wire.is_empty() {
            progressed = true;
            let InFlight { header, bytes } = wire.swap_remove(rng.below(wire.len()));
            let mut plan = rx.chunk_header(&header)?;
            plan.hasher.update(&bytes);
            match rx.chunk_arrived(&header, plan.hasher.finish())? {
                Arrival::Write => {
                    rx.chunk_written(header.file, header.index, header.hash)?;
                    rx.chunk_recorded(
                        header.file,
                        header.index,
                        header.hash,
                        u64::from(header.len),
                    );
                }
                Arrival::Duplicate | Arrival::Rejected => {}
                Arrival::Reused => panic!("chunk_arrived never answers Reused"),
            }
        }
        if !progressed && !fix_dirs_pending {
            panic!(
                "stalled: sender done {}, receiver done {}",
                tx.is_done(),
                rx.is_done()
            );
        }
    }
    panic!("no end after 100000 steps");
}

fn blake3_of(d: &[u8]) -> [u8; 32] {
    *blake3::hash(d).as_bytes()
}

fn bytes(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}

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
                    .map(|(f, i, n)| ((1 + f % files.len() as u32, i), n))
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
            let e = i as u32 + 1;
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
        prop_assert_eq!(r.committed.get(&1), Some(&true));
        prop_assert_eq!(r.digests.get(&1), Some(&blake3_of(&case.files[0].0)));
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
        corrupt: BTreeMap::from([((1, 1), 3)]),
        seed: 7,
    };
    let r = run(&case).unwrap();
    assert_eq!(r.rejected, 3);
    assert_eq!(r.sent[&(1, 1)], 4, "three bad copies, then a good one");
    assert!(r.committed[&1]);
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
    assert_eq!(r.skipped.get(&1), Some(&SkipReason::Exists));
    assert!(
        !r.sent.keys().any(|&(e, _)| e == 1),
        "no chunk of a skipped file"
    );
    assert_eq!(r.committed.get(&1), None);
    assert_eq!(r.committed.get(&2), Some(&true));
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
    assert_eq!(r.committed.get(&1), Some(&true));
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
    assert_eq!(r.skipped.get(&1), Some(&SkipReason::AlreadyComplete));
    assert_eq!(r.skipped.get(&2), Some(&SkipReason::AlreadyComplete));
    assert!(r.sent.keys().all(|&(e, _)| e == 3));
    assert_eq!(r.committed.get(&3), Some(&true));
}

#[test]
fn everything_skipped_still_fixes_dirs_and_finishes() {
    let case = Case {
        chunk_size: 4096,
        streams: 1,
        no_clobber: false,
        files: vec![(bytes(100, 1), Dest::Same)],
        corrupt: BTreeMap::new(),
        seed: 5,
    };
    let r = run(&case).unwrap();
    assert!(r.sent.is_empty() && r.committed.is_empty());
    assert_eq!(r.dirs_fixed_calls, 1);
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
    let mut rx = RecvSession::new(RecvConfig {
        chunk_size: 4096,
        target: None,
        target_is_dir: true,
        no_clobber: false,
        checksum_only: false,
        sync: false,
        expect: None,
        keep_setuid: false,
        umask: 0o022,
    });
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
                RecvEvent::Look { id, .. } => rx.looked(id, LookResult::default()).unwrap(),
                RecvEvent::Open { id, .. } => rx.opened(id, true).unwrap(),
                RecvEvent::CreateDir { rel, .. } => rx.dirs_created(vec![rel]),
                RecvEvent::Commit(job) => rx.placed(job.id, Ok(())),
                RecvEvent::FixDirs(dirs) => {
                    assert_eq!(dirs.len(), 1, "the one directory");
                    *fix_dirs += 1;
                }
                _ => {}
            }
        }
    };
    answer(&mut rx, &mut fix_dirs);
    while let Some(m) = rx.poll_transmit() {
        tx.handle(m).unwrap();
    }
    let now = Instant::now();
    while let Work::Send(unit) = tx.next_work(0, now) {
        for c in &unit.chunks {
            let d = &data[c.offset as usize..(c.offset + c.len) as usize];
            let mut h = tx.hasher(c);
            h.update(d);
            let hash = h.finish();
            tx.chunk_sent(c, hash, c.len);
            let header = ChunkHeader {
                file: tx.entry_of(c),
                index: c.id.index,
                flags: 0,
                offset: c.offset,
                len: c.len as u32,
                hash,
            };
            let mut plan = rx.chunk_header(&header).unwrap();
            plan.hasher.update(d);
            assert_eq!(
                rx.chunk_arrived(&header, plan.hasher.finish()).unwrap(),
                Arrival::Write
            );
            rx.chunk_written(header.file, header.index, hash).unwrap();
            rx.chunk_recorded(header.file, header.index, hash, c.len);
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
    rx.dirs_fixed();
    let after: Vec<_> = std::iter::from_fn(|| rx.poll_transmit()).collect();
    assert!(matches!(
        after.as_slice(),
        [TransferMessage::FileCommitted {
            file: 1,
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
    let mut rx = RecvSession::new(RecvConfig {
        chunk_size: 4096,
        target: None,
        target_is_dir: true,
        no_clobber: false,
        checksum_only: false,
        sync: false,
        expect: None,
        keep_setuid: false,
        umask: 0o022,
    });
    let r = rx.handle(TransferMessage::ChunkVerified { file: 0, index: 0 });
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
        file: 0,
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
    let r = tx.handle(TransferMessage::ChunkVerified { file: 5, index: 0 });
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
        assert!(matches!(tx.next_work(s, now), Work::Send(_)));
    }
    tx.stream_failed(0, "reset").unwrap();
    tx.stream_failed(1, "reset").unwrap();
    let r = tx.stream_failed(2, "timed out");
    assert!(matches!(r, Err(SessionError::GaveUp(_))), "{r:?}");
    assert!(matches!(tx.next_work(0, now), Work::Finished));
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
        file: 0,
        ranges: vec![(0, 2), (5, 3)],
    })
    .unwrap();
    tx.handle(TransferMessage::HaveChunks {
        file: 0,
        ranges: vec![(9, 1)],
    })
    .unwrap();
    // The whole file claimed twice.
    let mut tx = new_sender();
    let r = tx.handle(TransferMessage::HaveChunks {
        file: 0,
        ranges: vec![(0, chunks), (0, chunks)],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
    // A later frame going back.
    let mut tx = new_sender();
    tx.handle(TransferMessage::HaveChunks {
        file: 0,
        ranges: vec![(10, 2)],
    })
    .unwrap();
    let r = tx.handle(TransferMessage::HaveChunks {
        file: 0,
        ranges: vec![(3, 1)],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
    // A run past the end of the file, refused on arrival.
    let mut tx = new_sender();
    let r = tx.handle(TransferMessage::HaveChunks {
        file: 0,
        ranges: vec![(chunks - 1, 2)],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
}
