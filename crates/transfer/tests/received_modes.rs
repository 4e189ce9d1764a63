//! The modes a receiving session asks its driver to set, end to end through both sessions
//! in memory: a setuid file and a setgid directory arrive without those bits unless the
//! receiver keeps them (`keep_setuid`), and the directory created while the tree is
//! written never carries them either.

// The sessions take `now` from their driver: a test needs one Instant to offset from.
#![allow(clippy::disallowed_methods)]

mod pair;

use std::time::Instant;

use longhaul_proto::transfer::{EntryKind, FileEntry};
use longhaul_transfer::session::{
    RecvConfig, RecvEvent, RecvInput, RecvSession, SendConfig, SendSession, Work,
};
use longhaul_transfer::StreamId;

/// What the receiver asked for: (path, mode) of directories created, directories fixed
/// and files committed.
#[derive(Debug, Default)]
struct Modes {
    created: Vec<(String, u32)>,
    fixed: Vec<(String, u32)>,
    committed: Vec<(String, u32)>,
}

/// Sends `top/` (mode `dir_mode`) holding `top/tool` (mode `file_mode`) through both
/// sessions and collects every mode the receiver asked its driver to set.
fn transfer(dir_mode: u32, file_mode: u32, keep_setuid: bool) -> Modes {
    transfer_into(dir_mode, file_mode, keep_setuid, 0, false)
}

/// [`transfer`] by a receiver with `umask`, into a destination where `top/` already
/// exists when `top_existed` (the driver then reports no directory created).
fn transfer_into(
    dir_mode: u32,
    file_mode: u32,
    keep_setuid: bool,
    umask: u32,
    top_existed: bool,
) -> Modes {
    let data = vec![0x5a_u8; 3000];
    let entries = vec![
        FileEntry {
            mode: dir_mode,
            ..pair::entry("top", EntryKind::Dir, 0)
        },
        FileEntry {
            mode: file_mode,
            ..pair::entry("top/tool", EntryKind::File, data.len() as u64)
        },
    ];
    let cfg = SendConfig {
        chunk_size: 4096,
        checksum_only: false,
        streams: 1,
    };
    let mut tx = SendSession::new(entries, cfg).unwrap();
    let mut rx = RecvSession::new(RecvConfig {
        keep_setuid,
        umask,
        ..RecvConfig::into_directory(4096)
    });
    let mut modes = Modes::default();
    let show = |p: &std::path::Path| p.display().to_string();
    let pump = |tx: &mut SendSession, rx: &mut RecvSession, modes: &mut Modes| {
        pair::exchange(tx, rx, |rx, ev| match ev {
            RecvEvent::CreateDir { rel, mode } => {
                modes.created.push((show(&rel), mode));
                rx.handle(RecvInput::DirsCreated(if top_existed {
                    vec![]
                } else {
                    vec![rel]
                }))
                .unwrap();
            }
            ev => {
                match &ev {
                    RecvEvent::Commit(job) => {
                        modes.committed.push((show(&job.final_rel), job.mode))
                    }
                    RecvEvent::FixDirs(dirs) => modes
                        .fixed
                        .extend(dirs.iter().filter_map(|d| Some((show(&d.rel), d.mode?)))),
                    _ => {}
                }
                if let Some(input) = pair::plain_answer(&ev) {
                    rx.handle(input).unwrap();
                }
            }
        })
    };
    pump(&mut tx, &mut rx, &mut modes);
    while let Work::Send(unit) = tx.next_work(StreamId(0), Instant::now()) {
        for c in &unit.chunks {
            let d = &data[c.offset as usize..(c.offset + c.len) as usize];
            let header = pair::send_chunk(&mut tx, c, d);
            pair::receive_new_chunk(&mut rx, &header, d);
        }
        pump(&mut tx, &mut rx, &mut modes);
    }
    pump(&mut tx, &mut rx, &mut modes);
    assert!(tx.is_done(), "the transfer finished: {modes:?}");
    assert_eq!(tx.outcome().files_ok, 1, "{modes:?}");
    modes
}

#[test]
fn setuid_and_setgid_are_dropped_by_default() {
    let m = transfer(0o2755, 0o4755, false);
    assert_eq!(m.committed, vec![("top/tool".into(), 0o755)]);
    assert_eq!(m.fixed, vec![("top".into(), 0o755)]);
    for (path, mode) in &m.created {
        assert_eq!(mode & 0o7000, 0, "{path} created with {mode:o}");
    }
}

#[test]
fn a_sticky_file_loses_the_bit_and_a_sticky_directory_keeps_it() {
    let m = transfer(0o1777, 0o1644, false);
    assert_eq!(m.committed, vec![("top/tool".into(), 0o644)]);
    assert_eq!(m.fixed, vec![("top".into(), 0o1777)]);
}

#[test]
fn keep_setuid_keeps_the_senders_bits() {
    let m = transfer(0o2755, 0o6755, true);
    assert_eq!(m.committed, vec![("top/tool".into(), 0o6755)]);
    assert_eq!(m.fixed, vec![("top".into(), 0o2755)]);
    // The directory is still created plain; its bits come once its contents are in.
    for (path, mode) in &m.created {
        assert_eq!(mode & 0o7000, 0, "{path} created with {mode:o}");
    }
}

#[test]
fn the_umask_is_taken_from_files_and_created_directories() {
    let m = transfer_into(0o777, 0o666, false, 0o027, false);
    assert_eq!(m.committed, vec![("top/tool".into(), 0o640)]);
    assert_eq!(m.fixed, vec![("top".into(), 0o750)]);
}

#[test]
fn a_directory_that_existed_is_not_re_moded() {
    let m = transfer_into(0o777, 0o644, false, 0o022, true);
    assert_eq!(m.committed, vec![("top/tool".into(), 0o644)]);
    assert_eq!(
        m.fixed,
        vec![],
        "only directories the transfer created are fixed"
    );
}
