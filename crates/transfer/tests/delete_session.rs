//! `--delete` in the receiving session, with a scripted driver: the sent directories are
//! listed only once the list is settled, the extras are removed (deepest first, excluded
//! entries and this transfer's work files kept) before the list's end is answered with
//! their count, and before the directories' times are set.

mod pair;

use longhaul_proto::transfer::EntryId;
use pair::listed;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use longhaul_proto::transfer::{EntryKind, TransferMessage};
use longhaul_transfer::session::{LookResult, RecvConfig, RecvEvent, RecvInput, RecvSession};
use longhaul_transfer::{DestEntry, DestKind, Filter};

fn session(filter: &[(bool, &str)]) -> RecvSession {
    let f = Filter::new(filter.iter().map(|&(i, p)| (i, p.as_bytes()))).unwrap();
    RecvSession::new(RecvConfig {
        target: Some(longhaul_transfer::parse_peer_path(b"dst").unwrap()),
        ..RecvConfig::into_directory(4096)
    })
    .with_delete(Arc::new(f))
}

fn d(name: &str, kind: DestKind) -> DestEntry {
    DestEntry {
        name: name.as_bytes().to_vec(),
        kind,
    }
}

/// What happened, in order: "list P", "remove P...", "fixdirs", "end N".
fn drive(s: &mut RecvSession, dest: &HashMap<PathBuf, Vec<DestEntry>>) -> Vec<String> {
    let mut log = Vec::new();
    let sent = |s: &mut RecvSession, log: &mut Vec<String>| {
        while let Some(m) = s.poll_transmit() {
            if let TransferMessage::FileListEnd { deleted, .. } = m {
                log.push(format!("end {deleted}"));
            }
        }
    };
    loop {
        let mut progressed = false;
        sent(s, &mut log);
        while let Some(ev) = s.poll_event() {
            sent(s, &mut log);
            progressed = true;
            match ev {
                RecvEvent::Look { id, .. } => {
                    // Every file already complete: nothing will be committed.
                    let m = pair::meta_of(&listed("", EntryKind::File));
                    s.handle(RecvInput::Looked {
                        file: id,
                        found: LookResult {
                            existing: Some(m),
                            ..Default::default()
                        },
                    })
                    .unwrap();
                }
                RecvEvent::ListDest(l) => {
                    log.push(format!("list {}", l.path().display()));
                    let found = dest.get(&l.path()).cloned().ok_or("gone".to_string());
                    s.handle(RecvInput::DestListed { listing: l, found })
                        .unwrap();
                }
                RecvEvent::Remove(rs) => {
                    let shown: Vec<String> =
                        rs.iter().map(|r| r.path().display().to_string()).collect();
                    log.push(format!("remove {}", shown.join(" ")));
                    s.handle(RecvInput::Removed(
                        rs.into_iter().map(|r| (r, Ok(()))).collect(),
                    ))
                    .unwrap();
                }
                RecvEvent::FixDirs(_) => log.push("fixdirs".into()),
                _ => {}
            }
        }
        if !progressed {
            return log;
        }
    }
}

#[test]
fn extras_go_before_the_list_is_answered_and_excluded_ones_stay() {
    let mut s = session(&[(false, "*.keep"), (false, "/cache/")]);
    s.handle(TransferMessage::FileEntries {
        first_id: EntryId(0),
        entries: vec![
            listed("src", EntryKind::Dir),
            listed("src/a", EntryKind::File),
            listed("src/sub", EntryKind::Dir),
            listed("src/sub/b", EntryKind::File),
        ],
    })
    .unwrap();
    let dest: HashMap<PathBuf, Vec<DestEntry>> = [
        (
            "dst/src",
            vec![
                d("a", DestKind::File),
                d(".a.longhaul-part", DestKind::File),
                d("sub", DestKind::Dir),
                d("x", DestKind::File),
                d("x.keep", DestKind::File),
                d("cache", DestKind::Dir),
                d("old", DestKind::Dir),
                d("ln", DestKind::Symlink),
            ],
        ),
        (
            "dst/src/sub",
            vec![d("b", DestKind::File), d("y", DestKind::File)],
        ),
        ("dst/src/old", vec![d("z", DestKind::File)]),
    ]
    .into_iter()
    .map(|(p, v)| (PathBuf::from(p), v))
    .collect();
    let before = drive(&mut s, &dest);
    assert!(
        !before.iter().any(|l| l.starts_with("list")),
        "nothing is listed before the list ends: {before:?}"
    );
    s.handle(TransferMessage::FileListEnd {
        files: 4,
        bytes: 20,
        deleted: 0,
    })
    .unwrap();
    let log = drive(&mut s, &dest);
    assert_eq!(
        log,
        [
            "list dst/src",
            "list dst/src/sub",
            "list dst/src/old",
            "remove dst/src/old/z dst/src/sub/y dst/src/ln dst/src/old dst/src/x",
            "end 5",
            "fixdirs",
        ],
    );
    assert_eq!(s.outcome().deleted, 5);
    assert!(s.is_listed());
}

#[test]
fn without_directories_nothing_is_listed() {
    let mut s = session(&[]);
    s.handle(TransferMessage::FileEntries {
        first_id: EntryId(0),
        entries: vec![listed("f", EntryKind::File)],
    })
    .unwrap();
    s.handle(TransferMessage::FileListEnd {
        files: 1,
        bytes: 10,
        deleted: 0,
    })
    .unwrap();
    let log = drive(&mut s, &HashMap::new());
    assert_eq!(log, ["end 0", "fixdirs"]);
}
