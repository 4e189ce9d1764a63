//! Longhaul's own `end` read through its type ([`crate::records::CopyEnd`]): a current
//! `longhaul cp --json` log's figures come from the fields the writer wrote, so a field
//! renamed there is renamed here. Other logs are read field by field ([`super::fields`]).

use serde_json::{Map, Value};

use super::EndSummary;
use crate::records::CopyEnd;

/// The summary of a copy's `end` line, `raw` being the line as it came.
pub(super) fn end_summary(end: &CopyEnd, raw: Map<String, Value>) -> EndSummary {
    let verdict = end.verdict.as_ref();
    EndSummary {
        bytes: Some(end.bytes as f64),
        seconds: Some(end.seconds),
        bits_per_second: Some(end.bits_per_second),
        // Without a verdict the streams were not sampled: the intervals' sum, if any.
        retransmits: verdict.map(|v| v.retransmits as f64),
        // In words; bounded as the tolerant reader bounds text.
        limited_by: verdict.map(|v| v.limited_by_text.chars().take(4096).collect()),
        raw,
    }
}
