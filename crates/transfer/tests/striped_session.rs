//! A striped copy's sessions (`longhaul_proto::stripe`): several pairs of a sender and a
//! receiver, each receiver with its share, run against one shared destination model (the
//! file system every receiving host sees): each chunk crosses once, each file is put in
//! place once with the source's bytes, every manifest is gone at the end, and a pair that
//! dies mid-copy is finished by a rerun of its share.

// The sessions take `now` from their driver: a test needs one Instant to offset from.
#![allow(clippy::disallowed_methods)]

mod pair;

use longhaul_proto::transfer::EntryId;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Instant;

use longhaul_proto::stripe::Share;
use longhaul_proto::transfer::{ChunkHeader, EntryKind, FileEntry, SkipReason, TransferMessage};
use longhaul_transfer::session::recv::SyncRules;
use longhaul_transfer::session::recv::{Arrival, CommitJob};
use longhaul_transfer::session::{
    LookResult, Meta, OpenPlan, Placed, RecvConfig, RecvEvent, RecvInput, RecvSession, SendConfig,
    SendEvent, SendInput, SendSession, SessionError, Work,
};
use longhaul_transfer::{chunk_hash, StreamId};
use pair::{bytes, entry, send_chunk, Rng, MTIME};

const CHUNK: u64 = 4096;

/// What every receiving host sees.
#[derive(Default)]
struct Disk {
    /// Part files by entry.
    parts: HashMap<EntryId, Vec<u8>>,
    /// Manifests by name.
    manifests: HashMap<PathBuf, Vec<u8>>,
    /// Files put in place, by entry: the bytes and which share put them there.
    placed: BTreeMap<EntryId, (Vec<u8>, u16)>,
}

/// One pair: a sender and the receiver of one share.
struct Pair {
    share: Share,
    tx: SendSession,
    rx: RecvSession,
    wire: Vec<(ChunkHeader, Vec<u8>)>,
    manifest_of: HashMap<EntryId, PathBuf>,
    fix_dirs: bool,
    /// Entries the receiver answered `SkipFile OtherShare`.
    to_others: Vec<EntryId>,
    /// Commits asked for and not yet done.
    commits: std::collections::VecDeque<CommitJob>,
}

fn list(data: &[Vec<u8>]) -> Vec<FileEntry> {
    let mut entries = vec![entry("top", EntryKind::Dir, 0)];
    for (i, d) in data.iter().enumerate() {
        entries.push(entry(&format!("top/f{i}"), EntryKind::File, d.len() as u64));
    }
    entries
}

fn pair(entries: &[FileEntry], share: Share) -> Pair {
    let tx = SendSession::new(
        entries.to_vec(),
        SendConfig {
            chunk_size: CHUNK,
            checksum_only: false,
            streams: 3,
        },
    )
    .unwrap();
    let rx = RecvSession::new(RecvConfig::into_directory(CHUNK)).with_share(share);
    Pair {
        share,
        tx,
        rx,
        wire: Vec::new(),
        manifest_of: HashMap::new(),
        fix_dirs: false,
        to_others: Vec::new(),
        commits: Default::default(),
    }
}

/// The source's bytes of entry `e` (entry 0 is the directory).
fn src(data: &[Vec<u8>], e: EntryId) -> &[u8] {
    &data[e.slot() - 1]
}

fn meta(len: u64, mtime_secs: i64) -> Meta {
    Meta {
        is_file: true,
        is_dir: false,
        len,
        mtime_secs,
        mtime_nanos: 7,
        mode: 0o644,
        special: None,
    }
}

/// One step of pair `p`; whether anything happened. Chunks sent are counted in `sent`.
fn step(
    p: &mut Pair,
    data: &[Vec<u8>],
    disk: &mut Disk,
    sent: &mut BTreeMap<(EntryId, u32), u32>,
    rng: &mut Rng,
) -> Result<bool, SessionError> {
    let mut progressed = false;
    if !p.commits.is_empty() && rng.below(2) == 0 {
        if let Some(job) = p.commits.pop_front() {
            commit(p, disk, &job);
            progressed = true;
        }
    }
    while let Some(m) = p.tx.poll_transmit() {
        p.rx.handle(m)?;
        progressed = true;
    }
    while let Some(ev) = p.rx.poll_event() {
        progressed = true;
        match ev {
            RecvEvent::CreateDir { .. } | RecvEvent::DropOrphanManifest { .. } => {}
            RecvEvent::Look {
                id, manifest_rel, ..
            } => {
                let size = src(data, id).len() as u64;
                let found = LookResult {
                    existing: disk.placed.get(&id).map(|_| meta(size, MTIME)),
                    part: disk.parts.get(&id).map(|p| meta(p.len() as u64, 0)),
                    manifest: manifest_rel.and_then(|m| disk.manifests.get(&m).cloned()),
                    ..LookResult::default()
                };
                p.rx.handle(RecvInput::Looked { file: id, found })?;
            }
            RecvEvent::Open {
                id,
                plan,
                manifest_rel,
                size,
                shared,
                ..
            } => {
                assert_eq!(
                    shared,
                    size > CHUNK,
                    "only files of several chunks are shared"
                );
                let part = disk.parts.entry(id).or_default();
                part.resize(size as usize, 0);
                let m = manifest_rel.clone().unwrap_or_default();
                match plan {
                    OpenPlan::Fresh {
                        manifest_header: Some(h),
                    } => {
                        disk.manifests.insert(m.clone(), h.to_vec());
                    }
                    OpenPlan::Resume { manifest_len, .. } => {
                        disk.manifests.get_mut(&m).unwrap().truncate(manifest_len);
                    }
                    _ => {}
                }
                p.manifest_of.insert(id, m);
                p.rx.handle(RecvInput::Opened {
                    file: id,
                    intact: true,
                })?;
            }
            RecvEvent::GatherShares { id, manifests, .. } => {
                let found = manifests
                    .iter()
                    .map(|m| disk.manifests.get(m).cloned())
                    .collect();
                p.rx.handle(RecvInput::SharesGathered {
                    file: id,
                    manifests: found,
                })?;
            }
            // Put in place later, at a step of its own: another share's gather may come
            // between (the last two shares then both find every chunk recorded).
            RecvEvent::Commit(job) => p.commits.push_back(job),
            RecvEvent::FixDirs(_) => p.fix_dirs = true,
            other => panic!("not in a striped copy: {other:?}"),
        }
    }
    while let Some(SendEvent::HashFromFile { entry, chunks }) = p.tx.poll_event() {
        progressed = true;
        let d = src(data, entry);
        let whole = (d.len() as u64).div_ceil(CHUNK) <= 1;
        for i in chunks {
            let off = u64::from(i) * CHUNK;
            let end = (off + CHUNK).min(d.len() as u64);
            p.tx.handle(SendInput::Hashed {
                file: entry,
                index: i,
                hash: chunk_hash(&d[off as usize..end as usize], off, whole),
            })?;
        }
    }
    while let Some(m) = p.rx.poll_transmit() {
        progressed = true;
        if let TransferMessage::SkipFile { file, reason } = &m {
            match reason {
                SkipReason::OtherShare => p.to_others.push(*file),
                SkipReason::AlreadyComplete => {}
                other => panic!("file {file} skipped: {other:?}"),
            }
        }
        p.tx.handle(m)?;
    }
    if p.fix_dirs {
        p.fix_dirs = false;
        p.rx.handle(RecvInput::DirsFixed)?;
        progressed = true;
    }
    if p.rx.is_listed() && (p.wire.is_empty() || rng.below(2) == 0) {
        let stream = rng.below(3) as u32;
        if let Work::Send(unit) = p.tx.next_work(StreamId(stream), Instant::now()) {
            for c in &unit.chunks {
                let e = p.tx.entry_of(c);
                let d = &src(data, e)[c.offset as usize..(c.offset + c.len) as usize];
                *sent.entry((e, c.id.index)).or_default() += 1;
                p.wire.push((send_chunk(&mut p.tx, c, d), d.to_vec()));
            }
            return Ok(true);
        }
    }
    if !p.wire.is_empty() && p.rx.is_listed() {
        progressed = true;
        let (h, bytes) = p.wire.swap_remove(rng.below(p.wire.len()));
        let mut plan = p.rx.chunk_header(&h)?;
        plan.hasher.update(&bytes);
        if p.rx.chunk_arrived(&h, plan.hasher.finish())? == Arrival::Write {
            let part = disk.parts.entry(h.file).or_default();
            let size = src(data, h.file).len();
            part.resize(size, 0);
            part[h.offset as usize..h.offset as usize + bytes.len()].copy_from_slice(&bytes);
            if let Some(record) = p.rx.chunk_written(h.file, h.index, h.hash)? {
                let m = &p.manifest_of[&h.file];
                disk.manifests
                    .get_mut(m)
                    .unwrap()
                    .extend_from_slice(&record);
            }
            p.rx.handle(RecvInput::ChunkRecorded {
                file: h.file,
                index: h.index,
                hash: h.hash,
                len: u64::from(h.len),
            })?;
        }
    }
    Ok(progressed)
}

/// Puts file `job` in place, or finds it put there by another share.
fn commit(p: &mut Pair, disk: &mut Disk, job: &CommitJob) {
    let part = disk.parts.get(&job.id).cloned();
    for m in job.manifest_rel.iter().chain(&job.other_manifests) {
        disk.manifests.remove(m);
    }
    match part {
        Some(bytes) => {
            disk.placed.insert(job.id, (bytes, p.share.index()));
            disk.parts.remove(&job.id);
            p.rx.handle(RecvInput::Placed {
                file: job.id,
                result: Ok(Placed::Here),
            })
            .unwrap();
        }
        // Put in place by another share a moment ago: done too, and counted by that
        // share.
        None => {
            assert!(disk.placed.contains_key(&job.id) && !job.other_manifests.is_empty());
            p.rx.handle(RecvInput::Placed {
                file: job.id,
                result: Ok(Placed::ByAnotherShare),
            })
            .unwrap();
        }
    }
}

fn done(p: &Pair) -> bool {
    p.tx.is_done() && p.rx.is_done()
}

/// Runs the pairs interleaved until all are done, or until `stop` steps when given
/// (then returns with them unfinished, as when a host dies).
fn run(
    pairs: &mut [Pair],
    data: &[Vec<u8>],
    disk: &mut Disk,
    sent: &mut BTreeMap<(EntryId, u32), u32>,
    seed: u64,
    stop: Option<usize>,
) {
    let mut rng = Rng::new(seed);
    for n in 0..200_000 {
        if stop == Some(n) || pairs.iter().all(done) {
            return;
        }
        let k = rng.below(pairs.len());
        if !done(&pairs[k]) {
            step(&mut pairs[k], data, disk, sent, &mut rng).unwrap();
        }
    }
    panic!("no end after 200000 steps");
}

fn tree() -> Vec<Vec<u8>> {
    let mut data = vec![
        bytes(37 * CHUNK as usize + 100, 1),
        bytes(2 * CHUNK as usize, 2),
    ];
    data.extend((0..20).map(|i| bytes(100 + i * 50, i as u8)));
    data.push(Vec::new());
    data.push(bytes(5 * CHUNK as usize - 1, 9));
    data
}

fn shares(count: u16) -> Vec<Share> {
    (0..count).map(|i| Share::new(i, count).unwrap()).collect()
}

fn check_whole(data: &[Vec<u8>], disk: &Disk) {
    for (i, d) in data.iter().enumerate() {
        let e = EntryId(i as u32 + 1);
        let (bytes, _) = disk
            .placed
            .get(&e)
            .unwrap_or_else(|| panic!("f{i} not in place"));
        assert_eq!(bytes, d, "f{i}'s bytes");
    }
    assert!(
        disk.parts.is_empty(),
        "part files left: {:?}",
        disk.parts.keys()
    );
    assert!(
        disk.manifests.is_empty(),
        "manifests left: {:?}",
        disk.manifests.keys()
    );
}

#[test]
fn each_chunk_crosses_once_and_each_file_is_placed_once() {
    for count in [2u16, 3] {
        for seed in 1..25u64 {
            let data = tree();
            let entries = list(&data);
            let mut pairs: Vec<Pair> = shares(count)
                .into_iter()
                .map(|s| pair(&entries, s))
                .collect();
            let (mut disk, mut sent) = (Disk::default(), BTreeMap::new());
            run(&mut pairs, &data, &mut disk, &mut sent, seed * 7919, None);
            check_whole(&data, &disk);
            let chunks: u32 = data
                .iter()
                .map(|d| (d.len() as u64).div_ceil(CHUNK).max(1) as u32)
                .sum();
            assert_eq!(
                sent.len() as u32,
                chunks,
                "{count} shares, seed {seed}: every chunk sent"
            );
            assert!(
                sent.values().all(|&n| n == 1),
                "a chunk crossed twice: {sent:?}"
            );
            let mut put_by = vec![0u32; usize::from(count)];
            for (_, by) in disk.placed.values() {
                put_by[usize::from(*by)] += 1;
            }
            assert!(
                put_by.iter().all(|&n| n > 0),
                "every share put files in place: {put_by:?}"
            );
            let (mut ok, mut other, mut left) = (0, 0, 0);
            for p in &pairs {
                let o = p.rx.outcome();
                assert!(o.failed.is_empty(), "{:?}", o.failed);
                ok += o.files_ok;
                other += o.files_to_other_shares;
                left += o.files_left_to_shares;
                assert_eq!(
                    p.tx.outcome().files_to_other_shares,
                    o.files_to_other_shares
                );
            }
            assert_eq!(
                ok,
                data.len() as u64,
                "each file committed by one share, counted once"
            );
            let shared = data.iter().filter(|d| d.len() as u64 > CHUNK).count() as u64;
            // Each small file by one share (the others skip it), each shared file by all.
            let small = data.len() as u64 - shared;
            assert_eq!(other, small * u64::from(count - 1), "small files skipped");
            assert_eq!(
                ok + left,
                small + shared * u64::from(count),
                "each share finished its files"
            );
        }
    }
}

#[test]
fn a_share_that_died_is_finished_by_its_rerun() {
    let mut waited = 0;
    for seed in 1..20u64 {
        let data = tree();
        let entries = list(&data);
        let (mut disk, mut sent) = (Disk::default(), BTreeMap::new());
        let [one, two]: [Share; 2] = shares(2).try_into().unwrap();
        // Share 2 dies part way (its sessions dropped, its manifest left as written).
        let mut dying = vec![pair(&entries, two)];
        run(
            &mut dying,
            &data,
            &mut disk,
            &mut sent,
            seed,
            Some(8 + seed as usize * 2),
        );
        assert!(
            !done(&dying[0]),
            "seed {seed}: share 2 finished before it was stopped"
        );
        let mut first = vec![pair(&entries, one)];
        run(&mut first, &data, &mut disk, &mut sent, seed + 100, None);
        let o = first[0].rx.outcome();
        assert!(o.failed.is_empty(), "{:?}", o.failed);
        // A file of which share 2 had not verified all its chunks waits for it.
        waited += u32::from(disk.placed.len() < data.len());
        let mut rerun = vec![pair(&entries, two)];
        run(&mut rerun, &data, &mut disk, &mut sent, seed + 200, None);
        check_whole(&data, &disk);
        let o = rerun[0].rx.outcome();
        assert!(o.failed.is_empty(), "{:?}", o.failed);
        // What the dead run verified was not sent again, unless it was still on its wire.
        let again = sent.values().filter(|&&n| n > 1).count();
        assert!(again <= 40, "seed {seed}: {again} chunks crossed twice");
    }
    assert!(
        waited > 10,
        "files waited for the rerun in only {waited} of 19 runs"
    );
}

#[test]
fn a_chunk_of_another_share_is_refused() {
    let data = tree();
    let entries = list(&data);
    let mut p = pair(&entries, Share::new(0, 2).unwrap());
    let (mut disk, mut sent, mut rng) = (Disk::default(), BTreeMap::new(), Rng::new(3));
    while !p.rx.is_listed() {
        assert!(step(&mut p, &data, &mut disk, &mut sent, &mut rng).unwrap());
    }
    // Chunk 1 of f0 (numbered 2 in the copy, as the directory takes none) is share 1's.
    let d = &data[0][CHUNK as usize..2 * CHUNK as usize];
    let h = ChunkHeader {
        file: EntryId(1),
        index: 0,
        flags: 0,
        offset: 0,
        len: CHUNK as u32,
        hash: chunk_hash(&data[0][..CHUNK as usize], 0, false),
    };
    let ours = p.rx.chunk_header(&h).map(|_| ());
    let theirs = ChunkHeader {
        index: 1,
        offset: CHUNK,
        hash: chunk_hash(d, CHUNK, false),
        ..h
    };
    let err = p.rx.chunk_header(&theirs).err().expect("refused");
    assert!(ours.is_ok(), "{ours:?}");
    assert!(matches!(err, SessionError::Protocol(_)), "{err:?}");
    assert!(err.to_string().contains("another share"), "{err}");
}

#[test]
fn one_chunk_files_go_whole_to_one_share() {
    let data = tree();
    let entries = list(&data);
    let mut skipped: BTreeMap<EntryId, Vec<u16>> = BTreeMap::new();
    for s in shares(2) {
        let mut p = pair(&entries, s);
        let (mut disk, mut sent, mut rng) = (Disk::default(), BTreeMap::new(), Rng::new(5));
        while !p.rx.is_listed() {
            step(&mut p, &data, &mut disk, &mut sent, &mut rng).unwrap();
        }
        for &file in &p.to_others {
            skipped.entry(file).or_default().push(s.index());
        }
    }
    let small = data.iter().filter(|d| d.len() as u64 <= CHUNK).count();
    assert_eq!(
        skipped.len(),
        small,
        "each small file skipped by exactly one of two shares"
    );
    assert!(skipped.values().all(|by| by.len() == 1));
}

#[test]
fn a_share_refuses_what_stripes_cannot_do() {
    let Pair { mut tx, rx, .. } = pair(&list(&tree()), Share::new(1, 2).unwrap());
    let mut rx = rx.with_sync(SyncRules::default());
    let m = tx.poll_transmit().expect("the list");
    let err = rx.handle(m).unwrap_err();
    assert!(
        err.to_string().contains("striped copy takes no sync"),
        "{err}"
    );
}
