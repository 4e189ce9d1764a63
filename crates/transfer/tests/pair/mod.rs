//! Both ends of cp's session driven against each other in memory (see
//! `session_props.rs`): the sender's control messages go into the receiver's `handle`
//! and back, the receiver's events are answered by a tiny destination model, and chunks
//! are "sent" by hashing slices of in-memory files with the sessions' own hashers.

// The sessions take `now` from their driver: a test needs one Instant to offset from.
#![allow(clippy::disallowed_methods)]
#![allow(dead_code)]

use longhaul_proto::transfer::EntryId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use longhaul_proto::transfer::{ChunkHeader, EntryKind, FileEntry, SkipReason, TransferMessage};
/// The delivery order, reproducible from the case's seed: the workspace's one test RNG.
pub use longhaul_testkit::Rng;
use longhaul_transfer::scheduler::StreamId;
use longhaul_transfer::session::recv::Arrival;
use longhaul_transfer::session::{
    LookResult, Meta, OpenPlan, Placed, RecvConfig, RecvEvent, RecvInput, RecvSession, SendConfig,
    SendInput, SendSession, SessionError, Work,
};
use longhaul_transfer::{chunk_hash, ResumeManifest, SourceIdentity};

pub const MTIME: i64 = 1_700_000_000;

/// What is at the destination of one file before the transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
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
pub struct Case {
    pub chunk_size: u64,
    pub streams: u16,
    pub no_clobber: bool,
    pub files: Vec<(Vec<u8>, Dest)>,
    /// (entry, chunk index) -> deliveries to corrupt before a good one.
    pub corrupt: BTreeMap<(EntryId, u32), u32>,
    /// Drives the delivery order.
    pub seed: u64,
}

#[derive(Debug, Default)]
pub struct Report {
    /// Entry -> committed ok.
    pub committed: BTreeMap<EntryId, bool>,
    /// Entry -> the digest the sender announced.
    pub digests: BTreeMap<EntryId, [u8; 32]>,
    pub skipped: BTreeMap<EntryId, SkipReason>,
    /// Every chunk the sender put on a stream, with how often.
    pub sent: BTreeMap<(EntryId, u32), u32>,
    pub rejected: u64,
    /// Commits the sender had heard of when the receiver asked to fix the directories.
    pub commits_before_dirs_fixed: Option<usize>,
    pub dirs_fixed_calls: usize,
}

pub fn entry(path: &str, kind: EntryKind, size: u64) -> FileEntry {
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

/// An entry as the listing tests offer it: a file of 10 bytes, or a directory (or a link)
/// of none, with [`entry`]'s times, modes and fingerprint.
pub fn listed(path: &str, kind: EntryKind) -> FileEntry {
    entry(path, kind, if kind == EntryKind::File { 10 } else { 0 })
}

/// What a look at the destination finds where it holds a file as `e` describes it (the
/// same size, mtime and mode).
pub fn meta_of(e: &FileEntry) -> Meta {
    Meta {
        is_file: true,
        is_dir: false,
        len: e.size,
        mtime_secs: e.mtime_secs,
        mtime_nanos: i64::from(e.mtime_nanos),
        mode: e.mode,
        special: None,
    }
}

pub fn identity(e: &FileEntry) -> SourceIdentity {
    SourceIdentity {
        size: e.size,
        mtime_secs: e.mtime_secs,
        mtime_nanos: e.mtime_nanos,
        fingerprint: e.fingerprint,
    }
}

// Each test binary takes its part of this module (as `dead_code` allows above).
#[allow(unused_imports)]
pub use longhaul_testkit::chunks::{receive_chunk, send_chunk};
#[allow(unused_imports)]
pub use longhaul_testkit::receiver::plain_answer;

/// Receives chunk `header` whose bytes are `d` as a data stream's driver does when it is
/// written: checked, hashed, found new, written and its record appended (acked).
pub fn receive_new_chunk(rx: &mut RecvSession, header: &ChunkHeader, d: &[u8]) {
    let arrival = receive_chunk(rx, header, d).expect("a new chunk is taken");
    assert_eq!(arrival, Arrival::Write);
}

/// Control both ways until neither end has more to say: the sender's messages go to the
/// receiver, each receiver event to `answer`, the receiver's messages back to the sender.
/// For the drivers that move the chunks themselves, in order, between exchanges.
pub fn exchange(
    tx: &mut SendSession,
    rx: &mut RecvSession,
    mut answer: impl FnMut(&mut RecvSession, RecvEvent),
) {
    loop {
        let mut busy = false;
        while let Some(m) = tx.poll_transmit() {
            rx.handle(m).unwrap();
            busy = true;
        }
        while let Some(ev) = rx.poll_event() {
            busy = true;
            answer(rx, ev);
        }
        while let Some(m) = rx.poll_transmit() {
            tx.handle(m).unwrap();
            busy = true;
        }
        if !busy {
            return;
        }
    }
}

/// A chunk on a data stream: its header and the bytes as they arrive.
struct InFlight {
    header: ChunkHeader,
    bytes: Vec<u8>,
}

/// Runs a whole transfer; the entry list is one directory, then the files below it.
pub fn run(case: &Case) -> Result<Report, SessionError> {
    run_with(case, false)
}

/// [`run`], with the list answered ahead (`ahead`: the receiver said it holds nothing, the
/// sender's chunks leave before its answers, and they wait on the wire until the
/// receiver has placed the list, as a driver reads its data streams only then).
pub fn run_with(case: &Case, ahead: bool) -> Result<Report, SessionError> {
    run_checked(case, ahead, &BTreeSet::new())
}

/// [`run_with`], with the sender checking each source once it has read all of it
/// (`SendSession::check_sources`) when `changed` is not empty: the files of `changed`
/// (entry ids) are found changed, every other one as listed.
pub fn run_checked(
    case: &Case,
    ahead: bool,
    changed: &BTreeSet<EntryId>,
) -> Result<Report, SessionError> {
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
    if !changed.is_empty() {
        tx.check_sources();
    }
    if ahead {
        tx.handle(SendInput::AnsweredAhead)?;
    }
    let rx = RecvSession::new(RecvConfig {
        no_clobber: case.no_clobber,
        ..RecvConfig::into_directory(cs)
    });
    let mut rx = if ahead { rx.with_answered_ahead() } else { rx };
    let mut rng = Rng::new(case.seed);
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
                    let e = &entries[id.slot()];
                    let meta = |mtime_secs| Meta {
                        mtime_secs,
                        ..meta_of(e)
                    };
                    let found = match &dest[id.slot()] {
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
                                let d = &data[id.slot()][off as usize..end as usize];
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
                    rx.handle(RecvInput::Looked { file: id, found })?;
                }
                RecvEvent::Open { id, plan, .. } => {
                    let intact = match (&dest[id.slot()], &plan) {
                        (Dest::Partial { intact, .. }, OpenPlan::Resume { .. }) => *intact,
                        _ => true,
                    };
                    rx.handle(RecvInput::Opened { file: id, intact })?;
                }
                RecvEvent::HashFromFile { id, .. } => {
                    panic!("the receiver hashes from disk only in --checksum-only (file {id})")
                }
                RecvEvent::HashOld { id, .. } => panic!("sync events without sync ({id})"),
                RecvEvent::SetMode { mode, .. } => panic!("sync events without sync ({mode})"),
                RecvEvent::Commit(job) => rx.handle(RecvInput::Placed {
                    file: job.id,
                    result: Ok(Placed::Here),
                })?,
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
                RecvEvent::GatherShares { id, .. } => panic!("no stripes here (file {id})"),
            }
        }
        // The sender's own work: hash chunks the receiver already has.
        while let Some(ev) = tx.poll_event() {
            progressed = true;
            let (entry, chunks) = match ev {
                longhaul_transfer::session::SendEvent::HashFromFile { entry, chunks } => {
                    (entry, chunks)
                }
                longhaul_transfer::session::SendEvent::CheckSource { entry } => {
                    let why = changed.contains(&entry).then(|| "its mtime changed".into());
                    tx.handle(SendInput::SourceChecked {
                        file: entry,
                        changed: why,
                    })?;
                    continue;
                }
            };
            let d = &data[entry.slot()];
            let whole = (d.len() as u64).div_ceil(cs) <= 1;
            for i in chunks {
                let off = u64::from(i) * cs;
                let end = (off + cs).min(d.len() as u64);
                tx.handle(SendInput::Hashed {
                    file: entry,
                    index: i,
                    hash: chunk_hash(&d[off as usize..end as usize], off, whole),
                })?;
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
            rx.handle(RecvInput::DirsFixed)?;
            progressed = true;
        }
        // A random stream pulls work, or a random chunk on the wire arrives.
        let mut pulled = false;
        if (ahead || rx.is_listed()) && (wire.is_empty() || rng.below(2) == 0) {
            let stream = rng.below(usize::from(case.streams.max(1))) as u32;
            if let Work::Send(unit) = tx.next_work(StreamId(stream), now) {
                progressed = true;
                pulled = true;
                for c in &unit.chunks {
                    let e = tx.entry_of(c);
                    let d = &data[e.slot()][c.offset as usize..(c.offset + c.len) as usize];
                    let header = send_chunk(&mut tx, c, d);
                    *report.sent.entry((e, c.id.index)).or_default() += 1;
                    let mut bytes = d.to_vec();
                    if let Some(n) = corrupt.get_mut(&(e, c.id.index)).filter(|n| **n > 0) {
                        *n -= 1;
                        match bytes.first_mut() {
                            Some(b) => *b ^= 0xff,
                            None => bytes.push(1),
                        }
                    }
                    wire.push(InFlight { header, bytes });
                }
            }
        }
        if !pulled && !wire.is_empty() && rx.is_listed() {
            progressed = true;
            let InFlight { header, bytes } = wire.swap_remove(rng.below(wire.len()));
            if receive_chunk(&mut rx, &header, &bytes)? == Arrival::Reused {
                panic!("chunk_arrived never answers Reused");
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

pub fn blake3_of(d: &[u8]) -> [u8; 32] {
    *blake3::hash(d).as_bytes()
}

pub fn bytes(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}
