//! Symlink entries through both sessions, in memory (no files, sockets or clocks): a
//! link is made by the driver (`MakeSymlink`) with its target verbatim, wherever it
//! points, and commits without any chunk or digest; its `FileCommitted` never precedes
//! `FileListEnd`, and a list that does not fit makes no link; the quick check leaves a
//! link with the same target alone; `--no-clobber` and `--checksum-only` treat links like
//! files; a link that cannot be made fails alone; the sender's and the receiver's counts
//! of files include links; a chunk, a digest or `HaveChunks` naming a link is a protocol
//! error. Hard link entries (`sync -H`) are made (`MakeHardLink`) only after every file
//! of the list is finished, name their target's placed path, fail alone when the target
//! failed, are left alone when already the target's inode, and one naming anything but an
//! earlier file of the list is a protocol error.

// The sessions take `now` from their driver: a test needs one Instant to offset from.
#![allow(clippy::disallowed_methods)]

mod pair;

use longhaul_proto::transfer::EntryId;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use longhaul_proto::transfer::{ChunkHeader, EntryKind, FileEntry, SkipReason, TransferMessage};
use longhaul_transfer::session::recv::Arrival;
use longhaul_transfer::session::{
    ExpectedList, HardLinkJob, LinkJob, LookResult, Meta, PeerMisbehaved, Placed, RecvConfig,
    RecvEvent, RecvInput, RecvSession, Room, SendConfig, SendSession, SessionError, Work,
};
use longhaul_transfer::StreamId;

const CS: u64 = 4096;

fn entry(path: &str, kind: EntryKind, size: u64, target: &[u8]) -> FileEntry {
    FileEntry {
        mode: match kind {
            EntryKind::Dir => 0o755,
            EntryKind::File | EntryKind::HardLink => 0o644,
            EntryKind::Symlink => 0o777,
        },
        mtime_nanos: 9,
        fingerprint: 3,
        link_target: target.to_vec(),
        ..pair::entry(path, kind, size)
    }
}

fn dir(path: &str) -> FileEntry {
    entry(path, EntryKind::Dir, 0, b"")
}

fn file(path: &str, size: u64) -> FileEntry {
    entry(path, EntryKind::File, size, b"")
}

fn link(path: &str, target: &[u8]) -> FileEntry {
    entry(path, EntryKind::Symlink, 0, target)
}

fn hard_link(path: &str, target: &str) -> FileEntry {
    entry(path, EntryKind::HardLink, 0, target.as_bytes())
}

fn config() -> RecvConfig {
    RecvConfig::into_directory(CS)
}

/// What is at the destination of a symlink entry.
fn existing_link(target: &[u8]) -> LookResult {
    LookResult {
        existing: Some(Meta {
            is_file: false,
            is_dir: false,
            len: target.len() as u64,
            mtime_secs: 5,
            mtime_nanos: 0,
            mode: 0o777,
            special: None,
        }),
        link_target: Some(target.to_vec()),
        ..LookResult::default()
    }
}

fn existing_dir() -> LookResult {
    LookResult {
        existing: Some(Meta {
            is_file: false,
            is_dir: true,
            len: 4096,
            mtime_secs: 5,
            mtime_nanos: 0,
            mode: 0o777,
            special: None,
        }),
        ..LookResult::default()
    }
}

/// The destination model and what the run saw.
#[derive(Default)]
struct World {
    /// Entry -> what a look finds (default: nothing).
    looks: HashMap<EntryId, LookResult>,
    /// Links whose making fails (a directory in the way).
    fail: HashSet<EntryId>,
    /// The links the receiver asked for, in order.
    links_made: Vec<LinkJob>,
    /// The hard links it asked for, in order, with the files placed by then.
    hard_links_made: Vec<(HardLinkJob, usize)>,
    /// Files placed (their commits answered).
    placed: usize,
    /// The list was answered (`FileListEnd` queued) when each link was asked for.
    list_end_before_links: Vec<bool>,
    commits: BTreeMap<EntryId, (bool, String)>,
    skipped: BTreeMap<EntryId, SkipReason>,
    fix_dirs: usize,
    /// Commits the sender had when the directories were fixed.
    commits_at_fix: Option<usize>,
    chunks_sent: Vec<EntryId>,
}

/// Runs both sessions until both are done.
fn run(
    entries: Vec<FileEntry>,
    cfg: RecvConfig,
    room: Option<Room>,
    world: &mut World,
) -> Result<(SendSession, RecvSession), SessionError> {
    let send_cfg = SendConfig {
        chunk_size: CS,
        checksum_only: cfg.checksum_only,
        streams: 1,
    };
    let mut tx = SendSession::new(entries.clone(), send_cfg)?;
    let mut rx = RecvSession::new(cfg);
    if let Some(r) = room {
        rx = rx.with_room(r);
    }
    let mut list_end_sent = false;
    let mut fix_pending = false;
    let now = Instant::now();
    for _ in 0..10_000 {
        if tx.is_done() && rx.is_done() {
            return Ok((tx, rx));
        }
        while let Some(m) = tx.poll_transmit() {
            rx.handle(m)?;
        }
        while let Some(ev) = rx.poll_event() {
            match ev {
                RecvEvent::CreateDir { rel, .. } => rx.handle(RecvInput::DirsCreated(vec![rel]))?,
                RecvEvent::Look { id, .. } => {
                    let found = world.looks.get(&id).cloned().unwrap_or_default();
                    rx.handle(RecvInput::Looked { file: id, found })?;
                }
                RecvEvent::Open { id, .. } => rx.handle(RecvInput::Opened {
                    file: id,
                    intact: true,
                })?,
                RecvEvent::Commit(job) => {
                    world.placed += 1;
                    let r = if world.fail.contains(&job.id) {
                        Err("no room".to_string())
                    } else {
                        Ok(())
                    };
                    rx.handle(RecvInput::Placed {
                        file: job.id,
                        result: r.map(|()| Placed::Here),
                    })?
                }
                RecvEvent::MakeHardLink(job) => {
                    let id = job.id;
                    world.hard_links_made.push((job, world.placed));
                    rx.handle(RecvInput::HardLinkMade {
                        file: id,
                        result: Ok(()),
                    })?;
                }
                RecvEvent::MakeSymlink(job) => {
                    world.list_end_before_links.push(rx.is_listed());
                    let r = if world.fail.contains(&job.id) {
                        Err(format!("{} is a directory", job.final_rel.display()))
                    } else {
                        Ok(())
                    };
                    let id = job.id;
                    world.links_made.push(job);
                    rx.handle(RecvInput::SymlinkMade {
                        file: id,
                        result: r,
                    })?;
                }
                RecvEvent::FixDirs(_) => {
                    // Answered once the sender heard all the receiver sent before it.
                    world.fix_dirs += 1;
                    fix_pending = true;
                }
                RecvEvent::HashFromFile { .. }
                | RecvEvent::Discard { .. }
                | RecvEvent::DropOrphanManifest { .. }
                | RecvEvent::HashOld { .. }
                | RecvEvent::SetMode { .. }
                | RecvEvent::ListDest(_)
                | RecvEvent::GatherShares { .. }
                | RecvEvent::Remove(_) => {
                    panic!("no file is compared or discarded here")
                }
            }
        }
        while let Some(m) = rx.poll_transmit() {
            match &m {
                TransferMessage::FileListEnd { .. } => list_end_sent = true,
                TransferMessage::FileCommitted { file, ok, reason } => {
                    assert!(list_end_sent, "FileCommitted before FileListEnd");
                    let fresh = world.commits.insert(*file, (*ok, reason.clone()));
                    assert!(fresh.is_none(), "{file} committed twice");
                }
                TransferMessage::SkipFile { file, reason } => {
                    world.skipped.insert(*file, *reason);
                }
                _ => {}
            }
            tx.handle(m)?;
        }
        if fix_pending {
            fix_pending = false;
            world.commits_at_fix.get_or_insert(world.commits.len());
            rx.handle(RecvInput::DirsFixed)?;
        }
        if rx.is_listed() {
            while let Work::Send(unit) = tx.next_work(StreamId(0), now) {
                for c in &unit.chunks {
                    let e = tx.entry_of(c);
                    world.chunks_sent.push(e);
                    let d = vec![0u8; c.len as usize];
                    let header = pair::send_chunk(&mut tx, c, &d);
                    let hash = header.hash;
                    let mut plan = rx.chunk_header(&header)?;
                    plan.hasher.update(&d);
                    if rx.chunk_arrived(&header, plan.hasher.finish())? == Arrival::Write {
                        rx.chunk_written(e, c.id.index, hash)?;
                        rx.handle(RecvInput::ChunkRecorded {
                            file: e,
                            index: c.id.index,
                            hash,
                            len: c.len,
                        })?;
                    }
                }
            }
        }
    }
    panic!("no end after 10000 rounds");
}

#[test]
fn links_are_made_verbatim_and_commit_without_data() {
    let entries = vec![
        dir("top"),
        file("top/f", 9000),
        link("top/in", b"f"),
        link("top/out", b"../../../etc/passwd"),
        link("top/abs", b"/etc/shadow"),
        link("top/dangling", b"nowhere/at/all"),
        file("top/g", 0),
    ];
    let mut w = World::default();
    let (tx, rx) = run(entries.clone(), config(), None, &mut w).unwrap();
    let made: Vec<(PathBuf, PathBuf, Vec<u8>)> = w
        .links_made
        .iter()
        .map(|j| (j.final_rel.clone(), j.temp_rel.clone(), j.target.clone()))
        .collect();
    let want = |name: &str, target: &[u8]| {
        (
            PathBuf::from(format!("top/{name}")),
            PathBuf::from(format!("top/.{name}.longhaul-link")),
            target.to_vec(),
        )
    };
    assert_eq!(
        made,
        [
            want("in", b"f"),
            want("out", b"../../../etc/passwd"),
            want("abs", b"/etc/shadow"),
            want("dangling", b"nowhere/at/all"),
        ]
    );
    assert!(w.links_made.iter().all(|j| j.mtime == (1_700_000_000, 9)));
    assert!(w.list_end_before_links.iter().all(|&b| b));
    // No chunk for a link; the files' chunks only.
    assert!(
        w.chunks_sent.iter().all(|e| [1, 6].contains(&e.0)),
        "{:?}",
        w.chunks_sent
    );
    for id in 1..=6 {
        assert_eq!(
            w.commits.get(&EntryId(id)),
            Some(&(true, String::new())),
            "entry {id}"
        );
    }
    // The directories are fixed once, before the last commit goes out.
    assert_eq!(w.fix_dirs, 1);
    assert_eq!(w.commits_at_fix, Some(5));
    assert_eq!(tx.outcome().files_ok, 6);
    assert_eq!(rx.outcome().files_ok, 6);
    let (tp, rp) = (tx.progress(), rx.progress());
    assert_eq!((tp.files_done, tp.files_total), (6, 6));
    assert_eq!((rp.files_done, rp.files_total), (6, 6));
}

#[test]
fn a_list_of_links_only_ends_and_fixes_the_directories() {
    let entries = vec![dir("top"), link("top/l", b"x")];
    let mut w = World::default();
    let (tx, rx) = run(entries, config(), None, &mut w).unwrap();
    assert_eq!(w.links_made.len(), 1);
    assert_eq!(w.fix_dirs, 1);
    assert_eq!(
        w.commits_at_fix,
        Some(0),
        "the commit waits for the directories"
    );
    assert!(w.chunks_sent.is_empty());
    assert_eq!((tx.outcome().files_ok, rx.outcome().files_ok), (1, 1));
}

#[test]
fn quick_check_no_clobber_and_replacement() {
    let entries = vec![
        dir("top"),
        link("top/same", b"t1"),
        link("top/other", b"t2"),
        link("top/file_there", b"t3"),
    ];
    let mut w = World::default();
    w.looks.insert(EntryId(1), existing_link(b"t1"));
    w.looks.insert(EntryId(2), existing_link(b"something else"));
    w.looks.insert(
        EntryId(3),
        LookResult {
            existing: Some(Meta {
                is_file: true,
                is_dir: false,
                len: 10,
                mtime_secs: 1_700_000_000,
                mtime_nanos: 9,
                mode: 0o644,
                special: None,
            }),
            ..LookResult::default()
        },
    );
    let (tx, _) = run(entries.clone(), config(), None, &mut w).unwrap();
    // The same target is left alone; another target or a file is replaced.
    assert_eq!(
        w.skipped.get(&EntryId(1)),
        Some(&SkipReason::AlreadyComplete)
    );
    let made: Vec<EntryId> = w.links_made.iter().map(|j| j.id).collect();
    assert_eq!(made, [EntryId(2), EntryId(3)]);
    assert_eq!(tx.outcome().files_ok, 3);

    // --no-clobber: anything there stays (the same link still counts as complete).
    let mut w2 = World {
        looks: w.looks.clone(),
        ..World::default()
    };
    let cfg = RecvConfig {
        no_clobber: true,
        ..config()
    };
    let (tx, _) = run(entries, cfg, None, &mut w2).unwrap();
    assert!(w2.links_made.is_empty());
    assert_eq!(
        w2.skipped.get(&EntryId(1)),
        Some(&SkipReason::AlreadyComplete)
    );
    assert_eq!(w2.skipped.get(&EntryId(2)), Some(&SkipReason::Exists));
    assert_eq!(w2.skipped.get(&EntryId(3)), Some(&SkipReason::Exists));
    assert_eq!((tx.outcome().files_ok, tx.outcome().files_skipped), (1, 2));
}

#[test]
fn a_link_that_cannot_be_made_fails_alone() {
    let entries = vec![dir("top"), link("top/d", b"x"), file("top/f", 100)];
    let mut w = World::default();
    w.looks.insert(EntryId(1), existing_dir());
    w.fail.insert(EntryId(1));
    let (tx, rx) = run(entries, config(), None, &mut w).unwrap();
    assert!(!w.commits[&EntryId(1)].0);
    assert!(
        w.commits[&EntryId(1)].1.contains("is a directory"),
        "{:?}",
        w.commits
    );
    assert_eq!(w.commits[&EntryId(2)], (true, String::new()));
    let out = tx.outcome();
    assert_eq!(out.files_ok, 1);
    assert_eq!(out.failed.len(), 1);
    assert!(out.failed[0].starts_with("top/d: "), "{:?}", out.failed);
    assert_eq!(rx.outcome().failed.len(), 1);
}

#[test]
fn checksum_only_compares_targets() {
    let entries = vec![
        dir("top"),
        link("top/same", b"t"),
        link("top/other", b"t"),
        link("top/missing", b"t"),
    ];
    let mut w = World::default();
    w.looks.insert(EntryId(1), existing_link(b"t"));
    w.looks.insert(EntryId(2), existing_link(b"u"));
    let cfg = RecvConfig {
        checksum_only: true,
        ..config()
    };
    let (tx, rx) = run(entries, cfg, None, &mut w).unwrap();
    assert!(w.links_made.is_empty());
    assert_eq!(
        w.skipped.get(&EntryId(1)),
        Some(&SkipReason::AlreadyComplete)
    );
    assert_eq!(w.skipped.get(&EntryId(2)), Some(&SkipReason::Missing));
    assert_eq!(w.skipped.get(&EntryId(3)), Some(&SkipReason::Missing));
    assert_eq!(tx.outcome().files_ok, 1);
    let failed = rx.outcome().failed;
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed
        .iter()
        .any(|l| l.contains("other") && l.contains("differs")));
    assert!(failed
        .iter()
        .any(|l| l.contains("missing at the destination")));
}

#[test]
fn a_list_that_does_not_fit_makes_no_link() {
    let entries = vec![dir("top"), link("top/a", b"x"), link("top/b", b"y")];
    let mut w = World::default();
    let room = Room {
        free_bytes: 1 << 30,
        free_inodes: Some(2),
        on: "the test".into(),
    };
    let Err(e) = run(entries, config(), Some(room), &mut w) else {
        panic!("a list needing 3 inodes fitted in 2");
    };
    assert!(e.to_string().contains("not enough inodes"), "{e}");
    assert!(w.links_made.is_empty());
}

#[test]
fn a_pull_of_one_symlink_needs_no_r() {
    let cfg = RecvConfig {
        target: None,
        expect: Some(ExpectedList {
            top: Some(b"l".to_vec()),
            recursive: false,
        }),
        ..config()
    };
    let mut w = World::default();
    let (tx, _) = run(vec![link("l", b"/anywhere")], cfg.clone(), None, &mut w).unwrap();
    assert_eq!(tx.outcome().files_ok, 1);
    assert_eq!(w.links_made[0].final_rel, PathBuf::from("l"));
    // A link inside a directory still needs -r.
    let mut rx = RecvSession::new(cfg);
    let r = rx.handle(TransferMessage::FileEntries {
        first_id: EntryId(0),
        entries: vec![link("l/x", b"y")],
    });
    assert!(matches!(r, Err(SessionError::Refused(_))), "{r:?}");
}

/// The receiver of a list with one link, answered up to `FileListEnd`.
fn listed_receiver() -> RecvSession {
    let mut rx = RecvSession::new(config());
    rx.handle(TransferMessage::FileEntries {
        first_id: EntryId(0),
        entries: vec![dir("top"), link("top/l", b"x")],
    })
    .unwrap();
    rx.handle(TransferMessage::FileListEnd {
        files: 2,
        bytes: 0,
        deleted: 0,
    })
    .unwrap();
    while let Some(ev) = rx.poll_event() {
        if let RecvEvent::Look { id, .. } = ev {
            rx.handle(RecvInput::Looked {
                file: id,
                found: LookResult::default(),
            })
            .unwrap();
        }
    }
    assert!(rx.is_listed());
    rx
}

#[test]
fn data_or_a_digest_for_a_link_is_a_protocol_error() {
    let mut rx = listed_receiver();
    let header = ChunkHeader {
        file: EntryId(1),
        index: 0,
        flags: 0,
        offset: 0,
        len: 0,
        hash: [0; 32],
    };
    assert!(matches!(
        rx.chunk_header(&header),
        Err(SessionError::Protocol(_))
    ));
    let mut rx = listed_receiver();
    let r = rx.handle(TransferMessage::FileDigest {
        file: EntryId(1),
        blake3: [0; 32],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");

    // The sender: chunks of a link, or a second commit of one, are the receiver's error.
    let send = || {
        let cfg = SendConfig {
            chunk_size: CS,
            checksum_only: false,
            streams: 1,
        };
        SendSession::new(vec![dir("top"), link("top/l", b"x")], cfg).unwrap()
    };
    let mut tx = send();
    let r = tx.handle(TransferMessage::HaveChunks {
        file: EntryId(1),
        ranges: vec![(0, 1)],
    });
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
    let mut tx = send();
    tx.handle(TransferMessage::FileListEnd {
        files: 2,
        bytes: 0,
        deleted: 0,
    })
    .unwrap();
    let commit = TransferMessage::FileCommitted {
        file: EntryId(1),
        ok: true,
        reason: String::new(),
    };
    assert!(!tx.is_done());
    tx.handle(commit.clone()).unwrap();
    assert!(tx.is_done());
    let mut tx = send();
    tx.handle(TransferMessage::FileListEnd {
        files: 2,
        bytes: 0,
        deleted: 0,
    })
    .unwrap();
    let two = TransferMessage::FileCommitted {
        file: EntryId(0),
        ok: true,
        reason: String::new(),
    };
    assert!(tx.handle(two).is_err(), "a directory is never committed");
}

#[test]
fn hard_links_are_made_once_every_file_is_placed() {
    let entries = vec![
        dir("top"),
        file("top/a", 9000),
        hard_link("top/b", "top/a"),
        file("top/c", 5000),
        hard_link("top/d", "top/c"),
        hard_link("top/e", "top/a"),
    ];
    let mut w = World::default();
    let (tx, rx) = run(entries, config(), None, &mut w).unwrap();
    let made: Vec<(String, String, String, usize)> = w
        .hard_links_made
        .iter()
        .map(|(j, placed)| {
            let s = |p: &PathBuf| p.display().to_string();
            (s(&j.final_rel), s(&j.temp_rel), s(&j.target_rel), *placed)
        })
        .collect();
    let want = |name: &str, target: &str| {
        (
            format!("top/{name}"),
            format!("top/.{name}.longhaul-link"),
            format!("top/{target}"),
            2,
        )
    };
    assert_eq!(made, [want("b", "a"), want("d", "c"), want("e", "a")]);
    assert!(
        w.chunks_sent.iter().all(|e| [1, 3].contains(&e.0)),
        "{:?}",
        w.chunks_sent
    );
    for id in 1..=5 {
        assert_eq!(
            w.commits.get(&EntryId(id)),
            Some(&(true, String::new())),
            "{id}"
        );
    }
    assert_eq!(w.fix_dirs, 1);
    assert_eq!(
        w.commits_at_fix,
        Some(4),
        "the last commit waits for FixDirs"
    );
    assert_eq!(tx.outcome().files_ok, 5);
    assert_eq!(rx.outcome().files_ok, 5);
}

#[test]
fn a_hard_link_of_a_failed_file_fails_alone() {
    let entries = vec![
        dir("top"),
        file("top/a", 100),
        file("top/c", 100),
        hard_link("top/b", "top/a"),
        hard_link("top/d", "top/c"),
    ];
    let mut w = World {
        fail: HashSet::from([EntryId(1)]),
        ..World::default()
    };
    run(entries, config(), None, &mut w).unwrap();
    let (ok, why) = w.commits[&EntryId(3)].clone();
    assert!(
        !ok && why.contains("top/a") && why.contains("failed"),
        "{why}"
    );
    assert_eq!(w.commits[&EntryId(4)], (true, String::new()));
    assert_eq!(w.hard_links_made.len(), 1);
}

#[test]
fn a_hard_link_already_in_place_is_left_alone() {
    let complete = |inode| LookResult {
        existing: Some(Meta {
            is_file: true,
            is_dir: false,
            len: 100,
            mtime_secs: 1_700_000_000,
            mtime_nanos: 9,
            mode: 0o644,
            special: None,
        }),
        inode: Some(inode),
        ..LookResult::default()
    };
    let entries = vec![
        dir("top"),
        file("top/a", 100),
        hard_link("top/b", "top/a"),
        hard_link("top/c", "top/a"),
    ];
    let mut w = World::default();
    w.looks.insert(EntryId(1), complete((1, 7)));
    w.looks.insert(EntryId(2), complete((1, 7)));
    // A file of its own with the same size and mtime: made a link.
    w.looks.insert(EntryId(3), complete((1, 8)));
    run(entries, config(), None, &mut w).unwrap();
    assert_eq!(
        w.skipped.get(&EntryId(2)),
        Some(&SkipReason::AlreadyComplete)
    );
    let made: Vec<EntryId> = w.hard_links_made.iter().map(|(j, _)| j.id).collect();
    assert_eq!(made, [EntryId(3)]);
}

#[test]
fn a_hard_link_to_anything_but_an_earlier_file_is_a_protocol_error() {
    for target in [
        "top/later",
        "top",
        "top/l",
        "top/nope",
        "../etc/passwd",
        "top//a",
    ] {
        let entries = vec![
            dir("top"),
            file("top/a", 100),
            link("top/l", b"a"),
            hard_link("top/b", target),
            file("top/later", 100),
        ];
        let r = run(entries, config(), None, &mut World::default());
        let Err(SessionError::Protocol(why)) = r else {
            panic!("{target}: not refused as a protocol error")
        };
        let link = match &why {
            PeerMisbehaved::HardLinkTarget { link, .. } => link,
            PeerMisbehaved::HardLinkNotEarlier { link, .. } => link,
            other => panic!("{target}: {other}"),
        };
        assert_eq!(link, "top/b", "{target}: {why}");
    }
}
