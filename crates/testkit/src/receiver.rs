//! A receiving session's plain answers, for the tests of every crate that drive one
//! (transfer's session pairs, the engine's set-up simulation): its configuration for a
//! copy into a directory, and the answer of an empty destination where every step
//! succeeds.

use longhaul_transfer::session::{LookResult, Placed, RecvConfig, RecvEvent, RecvInput};

/// A receiving session's configuration: into the root (a directory), chunks of
/// `chunk_size`, nothing optional, umask 022; a test names only what differs.
pub fn recv_config(chunk_size: u64) -> RecvConfig {
    RecvConfig {
        chunk_size,
        target: None,
        target_is_dir: true,
        no_clobber: false,
        checksum_only: false,
        sync: false,
        expect: None,
        keep_setuid: false,
        umask: 0o022,
    }
}

/// The answer of an empty destination where every step succeeds, for the events that
/// have one: nothing at the destination, every open intact, every directory made by this
/// transfer, every commit placed, the directories fixed. A test's driver answers the rest
/// (and these, when it models something else).
pub fn plain_answer(ev: &RecvEvent) -> Option<RecvInput> {
    Some(match ev {
        RecvEvent::Look { id, .. } => RecvInput::Looked {
            file: *id,
            found: LookResult::default(),
        },
        RecvEvent::Open { id, .. } => RecvInput::Opened {
            file: *id,
            intact: true,
        },
        RecvEvent::CreateDir { rel, .. } => RecvInput::DirsCreated(vec![rel.clone()]),
        RecvEvent::Commit(job) => RecvInput::Placed {
            file: job.id,
            result: Ok(Placed::Here),
        },
        RecvEvent::FixDirs(_) => RecvInput::DirsFixed,
        _ => return None,
    })
}
