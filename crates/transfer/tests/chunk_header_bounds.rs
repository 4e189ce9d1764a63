//! A chunk header is checked against the file's chunk grid before anything is hashed: a
//! token holder that sends `len = 0` for a chunk of a multi-chunk file (or a length or
//! offset off the grid, or an index past the end) gets a protocol error, not a plan whose
//! hasher panics in blake3 ("empty subtree") and kills the stream thread. A sender that
//! says the transfer is done before the files are whole is refused too.

// The sessions take `now` from their driver: a test needs one Instant to offset from.
#![allow(clippy::disallowed_methods)]

mod pair;

use std::time::Instant;

use longhaul_proto::transfer::{ChunkHeader, EntryKind, FileEntry};
use longhaul_transfer::session::{
    PeerMisbehaved, RecvConfig, RecvEvent, RecvSession, SendConfig, SendSession, SessionError, Work,
};
use longhaul_transfer::StreamId;

const CHUNK: u64 = 4096;
const SIZE: u64 = 3 * CHUNK - 100;

/// A receiving session with one 3-chunk file open, and the sender's first header for it.
fn open_file() -> (RecvSession, ChunkHeader) {
    let entries = vec![FileEntry {
        path: b"data.bin".to_vec(),
        kind: EntryKind::File,
        size: SIZE,
        mtime_secs: 1_700_000_000,
        mtime_nanos: 0,
        mode: 0o644,
        fingerprint: 7,
        link_target: Vec::new(),
    }];
    let mut tx = SendSession::new(
        entries,
        SendConfig {
            chunk_size: CHUNK,
            checksum_only: false,
            streams: 1,
        },
    )
    .unwrap();
    let mut rx = RecvSession::new(RecvConfig::into_directory(CHUNK));
    pair::exchange(&mut tx, &mut rx, |rx, ev| {
        if matches!(ev, RecvEvent::Look { .. } | RecvEvent::Open { .. }) {
            rx.handle(pair::plain_answer(&ev).unwrap()).unwrap();
        }
    });
    let Work::Send(unit) = tx.next_work(StreamId(0), Instant::now()) else {
        panic!("the sender has work once the file is open");
    };
    let c = &unit.chunks[0];
    let mut hasher = tx.hasher(c);
    hasher.update(&vec![0; c.len as usize]);
    let header = ChunkHeader {
        file: tx.entry_of(c),
        index: c.id.index,
        flags: 0,
        offset: c.offset,
        len: c.len as u32,
        hash: hasher.finish(),
    };
    (rx, header)
}

fn refused(h: ChunkHeader) -> PeerMisbehaved {
    let (mut rx, _) = open_file();
    match rx.chunk_header(&h) {
        Err(SessionError::Protocol(why)) => why,
        Err(e) => panic!("{h:?}: not a protocol error: {e}"),
        Ok(mut plan) => {
            // Before the fix, this is where the stream thread died.
            plan.hasher.update(&vec![0; plan.payload as usize]);
            let _ = plan.hasher.finish();
            panic!("{h:?} was accepted")
        }
    }
}

#[test]
fn headers_off_the_chunk_grid_are_refused_before_hashing() {
    let (_, good) = open_file();
    assert_eq!(
        (good.index, good.offset, u64::from(good.len)),
        (0, 0, CHUNK)
    );
    let off_grid = |why: PeerMisbehaved| matches!(why, PeerMisbehaved::ChunkOffGrid { .. });
    let why = refused(ChunkHeader { len: 0, ..good });
    assert!(off_grid(why.clone()), "{why}");
    assert!(why.to_string().contains("chunk grid"), "{why}");
    for h in [
        ChunkHeader { len: 1, ..good },
        ChunkHeader {
            index: 1,
            offset: 0,
            ..good
        },
        ChunkHeader {
            index: 2,
            offset: 2 * CHUNK,
            len: CHUNK as u32,
            ..good
        },
        ChunkHeader {
            index: 3,
            offset: 3 * CHUNK,
            len: 1,
            ..good
        },
        ChunkHeader {
            index: u32::MAX,
            offset: u64::MAX - 5,
            len: 4,
            ..good
        },
    ] {
        let why = refused(h);
        assert!(off_grid(why.clone()), "{h:?}: {why}");
    }
    // The last chunk's own length is fine.
    let (mut rx, _) = open_file();
    let last = ChunkHeader {
        index: 2,
        offset: 2 * CHUNK,
        len: (SIZE - 2 * CHUNK) as u32,
        ..good
    };
    rx.chunk_header(&last)
        .expect("the last, short chunk is on the grid");
}

/// A sender that says `TransferDone` while a file of the list has not arrived whole (a
/// hostile or broken one: a real sender waits for every file's commit) stops the session
/// with a protocol error; the receiver must not end as if the copy were complete.
#[test]
fn a_transfer_done_before_the_files_are_whole_is_refused() {
    let (mut rx, _) = open_file();
    let done = longhaul_proto::transfer::TransferMessage::TransferDone { files: 1, bytes: 0 };
    match rx.handle(done) {
        Err(SessionError::Protocol(why)) => {
            assert_eq!(why, PeerMisbehaved::EndedEarly { unfinished: 1 });
            assert!(
                why.to_string().contains("1 entry not received whole"),
                "{why}"
            )
        }
        other => panic!("an early TransferDone was taken: {other:?}"),
    }
    assert!(!rx.is_done());
}
