//! The records `longhaul cp --json` prints, one JSON Lines object each, as typed values (a
//! copy's own, and those of a third-party or striped copy it directs): one
//! definition for the writer (the `longhaul` binary builds and prints them) and the reader
//! ([`crate::runlog`] reads longhaul's own `start` and `end` through them).
//!
//! Each record type names its `"type"` ([`RecordKind`]); [`Record`] puts that first and the
//! record's fields after it. The schema is the README's (`longhaul cp` and `longhaul sync`):
//! a field present only in some runs is absent, not `null`, where the README says so (the
//! verdict of [`CopyEnd`]), and `null` where it says that (`cpu_seconds_per_gb` under
//! 64 MiB, `far_start`'s upload when nothing was uploaded).

mod copy;
mod dry_run;
mod notes;
mod relayed;

pub use copy::{CopyEnd, CopyInterval, CopyStart, CpuByStage, StreamSummary, Verdict};
pub use dry_run::{DryRunEnd, SendAction, WouldDelete, WouldSend};
pub use notes::{DataVia, FarStart, HashedAhead, RunError, Warning};
pub use relayed::{
    PairProgress, RelayEnd, RelayInterval, RelayStart, ShareDone, ShareEnd, StripedEnd,
    StripedInterval, StripedStart,
};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A record's `"type"`: what a JSON Lines reader dispatches on.
pub trait RecordKind {
    /// The value of the line's `"type"` field (`start`, `end`, `warning`...).
    const TYPE: &'static str;
}

/// One line of `--json` output: `{"type": KIND, ...the record's fields}`, `type` first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record<T> {
    /// The record's kind ([`RecordKind::TYPE`]).
    #[serde(rename = "type")]
    pub kind: String,
    /// The record's fields, at the line's top level.
    #[serde(flatten)]
    pub body: T,
}

impl<T: RecordKind> Record<T> {
    /// `body` with its `"type"`.
    pub fn new(body: T) -> Self {
        Self {
            kind: T::TYPE.to_string(),
            body,
        }
    }
}

impl<T: RecordKind + Serialize> Record<T> {
    /// The line as JSON text, without its newline.
    pub fn to_line(&self) -> String {
        // A record is strings, numbers, booleans and maps with string keys: nothing in it
        // can fail to serialise (a non-finite float is written as `null`).
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The record of type `T` that `line` (one parsed JSON object) holds, or `None` when its
/// `"type"` is another or a field of `T` is missing or of another type (an older
/// longhaul's line, or another program's: read those field by field).
pub fn read_record<T: RecordKind + DeserializeOwned>(line: &Map<String, Value>) -> Option<T> {
    if line.get("type").and_then(Value::as_str) != Some(T::TYPE) {
        return None;
    }
    serde_json::from_value(Value::Object(line.clone())).ok()
}

#[cfg(test)]
mod tests;
