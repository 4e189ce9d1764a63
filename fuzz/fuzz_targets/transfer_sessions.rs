//! Fuzzes what cp's two session state machines do with a peer's control messages: the
//! input's transfer frames go to a receiving session (as a sender would send them: file
//! lists, digests, the end) and to a sending session over a small fixed list (as a
//! receiver would answer: chunks it has, skips, acks, commits). The driver's work is
//! answered as a driver would. Whatever the peer says, neither may panic (sizes, ids and
//! counts are the peer's choice).
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fuzz::{check_frames, TRANSFER_FRAMES};
use longhaul_proto::transfer::{EntryKind, FileEntry};
use longhaul_transfer::session::{
    ExpectedList, LookResult, Placed, RecvConfig, RecvEvent, RecvInput, RecvSession, SendConfig,
    SendSession,
};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, data)) = data.split_first() else {
        return;
    };
    let msgs = check_frames(&TRANSFER_FRAMES, data);
    let mut rx = RecvSession::new(RecvConfig {
        no_clobber: flags & 4 != 0,
        checksum_only: flags & 8 != 0,
        expect: (flags & 16 != 0).then(|| ExpectedList {
            top: Some(b"top".to_vec()),
            recursive: flags & 32 != 0,
        }),
        keep_setuid: flags & 64 != 0,
        ..RecvConfig::into_directory(4096 << (flags % 4))
    });
    for m in msgs.iter().cloned() {
        if rx.handle(m).is_err() {
            break;
        }
        while let Some(ev) = rx.poll_event() {
            let input = match ev {
                RecvEvent::Look { id, .. } => RecvInput::Looked {
                    file: id,
                    found: LookResult::default(),
                },
                RecvEvent::Open { id, .. } => RecvInput::Opened {
                    file: id,
                    intact: true,
                },
                RecvEvent::Commit(job) => {
                    assert!(job.mode <= 0o7777);
                    RecvInput::Placed {
                        file: job.id,
                        result: Ok(Placed::Here),
                    }
                }
                RecvEvent::FixDirs(_) => RecvInput::DirsFixed,
                RecvEvent::MakeSymlink(job) => {
                    assert!(!job.target.is_empty() && !job.target.contains(&0));
                    RecvInput::SymlinkMade {
                        file: job.id,
                        result: Ok(()),
                    }
                }
                RecvEvent::MakeHardLink(job) => RecvInput::HardLinkMade {
                    file: job.id,
                    result: Ok(()),
                },
                _ => continue,
            };
            if rx.handle(input).is_err() {
                break;
            }
        }
        while rx.poll_transmit().is_some() {}
    }
    let file = |path: &str, kind, size| FileEntry {
        path: path.as_bytes().to_vec(),
        kind,
        size,
        mtime_secs: 1,
        mtime_nanos: 0,
        mode: 0o644,
        fingerprint: 0,
        link_target: match kind {
            EntryKind::Symlink => b"../elsewhere".to_vec(),
            EntryKind::HardLink => b"top/a".to_vec(),
            EntryKind::File | EntryKind::Dir => Vec::new(),
        },
    };
    let entries = vec![
        file("top", EntryKind::Dir, 0),
        file("top/a", EntryKind::File, 10_000),
        file("top/b", EntryKind::File, 0),
        file("top/c", EntryKind::Symlink, 0),
        file("top/d", EntryKind::HardLink, 0),
    ];
    let cfg = SendConfig {
        chunk_size: 4096,
        checksum_only: flags & 8 != 0,
        streams: 2,
    };
    let mut tx = SendSession::new(entries, cfg).expect("a valid list");
    while tx.poll_transmit().is_some() {}
    for m in msgs {
        if tx.handle(m).is_err() {
            break;
        }
        while tx.poll_transmit().is_some() {}
        while tx.poll_event().is_some() {}
    }
});
