//! What a sender may name in its file list (issue 17, item 1 and 6): on a pull only what
//! was asked for — the requested source's base name, directories only with `-r`, one top
//! for a pull of the served root — and never a longhaul work file, push or pull. A
//! hostile server answering `cp host:big.h5 ~` with `.bashrc` is refused before anything
//! is looked at or written.

mod pair;

use longhaul_proto::transfer::EntryId;
use pair::listed;

use longhaul_proto::transfer::{EntryKind, FileEntry, TransferMessage};
use longhaul_transfer::session::{ExpectedList, RecvConfig, RecvEvent, RecvSession, SessionError};

fn session(expect: Option<ExpectedList>) -> RecvSession {
    RecvSession::new(RecvConfig {
        expect,
        ..RecvConfig::into_directory(4096)
    })
}

/// Offers the entries in one frame; the error, and whether the session asked the driver
/// to touch anything (a look, a directory) before refusing.
fn offer(s: &mut RecvSession, entries: Vec<FileEntry>) -> (Result<(), SessionError>, usize) {
    let r = s.handle(TransferMessage::FileEntries {
        first_id: EntryId(0),
        entries,
    });
    let mut touched = 0;
    while s.poll_event().is_some() {
        touched += 1;
    }
    (r, touched)
}

fn pull(top: Option<&str>, recursive: bool) -> RecvSession {
    session(Some(ExpectedList {
        top: top.map(|t| t.as_bytes().to_vec()),
        recursive,
    }))
}

fn refused(r: Result<(), SessionError>, why: &str) {
    match r {
        Err(SessionError::Refused(refusal)) => {
            let text = refusal.to_string();
            assert!(text.contains(why), "{text}")
        }
        other => panic!("expected a refusal mentioning {why:?}, got {other:?}"),
    }
}

#[test]
fn a_pull_of_one_file_takes_only_that_file() {
    let (r, _) = offer(
        &mut pull(Some("big.h5"), false),
        vec![listed("big.h5", EntryKind::File)],
    );
    assert_eq!(r, Ok(()));
    for evil in [".bashrc", ".ssh/authorized_keys", "big.h5x", "other"] {
        let (r, touched) = offer(
            &mut pull(Some("big.h5"), false),
            vec![listed(evil, EntryKind::File)],
        );
        refused(r, "not inside what was asked for");
        assert_eq!(touched, 0, "{evil}: nothing may be looked at or created");
    }
    // The answer to the asked name cannot smuggle a second file in behind it.
    let (r, _) = offer(
        &mut pull(Some("big.h5"), false),
        vec![
            listed("big.h5", EntryKind::File),
            listed(".bashrc", EntryKind::File),
        ],
    );
    refused(r, "not inside what was asked for");
}

#[test]
fn without_r_no_directory_and_nothing_inside_one() {
    let (r, touched) = offer(
        &mut pull(Some("data"), false),
        vec![listed("data", EntryKind::Dir)],
    );
    refused(r, "-r was not given");
    assert_eq!(touched, 0);
    let (r, _) = offer(
        &mut pull(Some("data"), false),
        vec![listed("data/x", EntryKind::File)],
    );
    refused(r, "-r was not given");
}

#[test]
fn with_r_the_tree_below_the_asked_name_is_taken_and_nothing_beside_it() {
    let tree = vec![
        listed("runs", EntryKind::Dir),
        listed("runs/a", EntryKind::File),
        listed("runs/sub", EntryKind::Dir),
        listed("runs/sub/b", EntryKind::File),
    ];
    let (r, touched) = offer(&mut pull(Some("runs"), true), tree.clone());
    assert_eq!(r, Ok(()));
    assert!(touched > 0);
    let mut evil = tree;
    evil.push(listed(".profile", EntryKind::File));
    refused(
        offer(&mut pull(Some("runs"), true), evil).0,
        "not inside what was asked for",
    );
}

#[test]
fn a_pull_of_the_root_keeps_one_top() {
    let ok = vec![
        listed("served", EntryKind::Dir),
        listed("served/a", EntryKind::File),
    ];
    assert_eq!(offer(&mut pull(None, true), ok).0, Ok(()));
    let evil = vec![
        listed("served/a", EntryKind::File),
        listed(".bashrc", EntryKind::File),
    ];
    refused(
        offer(&mut pull(None, true), evil).0,
        "not inside what was asked for",
    );
}

#[test]
fn work_file_names_are_refused_on_push_and_pull() {
    for name in [
        "t/.x.longhaul-part",
        ".x.longhaul-manifest",
        "a/.b.longhaul-part/c",
    ] {
        let kind = EntryKind::File;
        let (r, touched) = offer(&mut session(None), vec![listed(name, kind)]);
        refused(r, "longhaul work file");
        assert_eq!(touched, 0, "{name}");
        let top = name.split('/').next().map(str::to_string);
        let (r, _) = offer(&mut pull(top.as_deref(), true), vec![listed(name, kind)]);
        refused(r, "longhaul work file");
    }
    // An ordinary dotfile is fine on a push.
    let (r, touched) = offer(&mut session(None), vec![listed(".bashrc", EntryKind::File)]);
    assert_eq!(r, Ok(()));
    assert!(touched > 0);
}

#[test]
fn a_legitimate_pull_proceeds_to_look_at_the_destination() {
    let mut s = pull(Some("big.h5"), false);
    let (r, _) = (
        s.handle(TransferMessage::FileEntries {
            first_id: EntryId(0),
            entries: vec![listed("big.h5", EntryKind::File)],
        }),
        (),
    );
    assert_eq!(r, Ok(()));
    assert!(matches!(
        s.poll_event(),
        Some(RecvEvent::Look { id: EntryId(0), .. })
    ));
}
