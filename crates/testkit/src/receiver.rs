//! A receiving session's plain answers, for the tests of every crate that drive one
//! (transfer's session pairs, the engine's set-up simulation): the answer of an empty
//! destination where every step succeeds. (Its plain configuration is
//! `RecvConfig::into_directory`.)

use longhaul_transfer::session::{LookResult, Placed, RecvEvent, RecvInput};

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
