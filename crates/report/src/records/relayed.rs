//! The records of copies this host only directs: a third-party copy (one server pulls from
//! another with a ticket) and a striped one (several such pairs, each a share of the
//! files' chunks). Their figures are what the destinations report.

use serde::{Deserialize, Serialize};

use super::RecordKind;

/// The `start` line of a third-party copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayStart {
    /// `third-party`.
    pub direction: String,
    /// The source as named.
    pub source: String,
    /// The destination as named.
    pub destination: String,
}

impl RecordKind for RelayStart {
    const TYPE: &'static str = "start";
}

/// An `interval` line of a third-party copy: the destination's progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayInterval {
    /// Seconds since the destination's pull began.
    pub elapsed: f64,
    /// Files done.
    pub files_done: u64,
    /// Files of the copy.
    pub files_total: u64,
    /// Bytes done (moved or found already there).
    pub bytes_done: u64,
    /// Bytes of the copy's files.
    pub bytes_total: u64,
    /// Payload bytes that crossed between the servers.
    pub moved_bytes: u64,
    /// Data streams.
    pub streams: u16,
}

impl RecordKind for RelayInterval {
    const TYPE: &'static str = "interval";
}

/// The `end` line of a third-party copy, with the keys of a two-party copy's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayEnd {
    /// No file failed.
    pub ok: bool,
    /// `third-party`.
    pub direction: String,
    /// The source as named.
    pub source: String,
    /// The destination as named.
    pub destination: String,
    /// Files committed.
    pub files: u64,
    /// Bytes of all files of the copy.
    pub bytes: u64,
    /// Seconds of the destination's pull.
    pub seconds: f64,
    /// `sent_bytes * 8 / seconds`.
    pub bits_per_second: f64,
    /// Payload bytes that crossed between the servers.
    pub sent_bytes: u64,
    /// Bytes verified by an earlier run, not sent again.
    pub resumed_bytes: u64,
    /// Files skipped because they existed.
    pub skipped_files: u64,
    /// Files that failed.
    pub failed_files: u64,
    /// Why some of them failed (the destination reports a few).
    pub failures: Vec<String>,
    /// Data streams.
    pub streams: u16,
    /// RTT between the servers, ms.
    pub rtt_ms: f64,
    /// What limited the copy, in words (empty when the destination did not say).
    pub limited_by_text: String,
}

impl RecordKind for RelayEnd {
    const TYPE: &'static str = "end";
}

/// The `start` line of a striped copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StripedStart {
    /// `striped`.
    pub direction: String,
    /// Pairs of servers, one share each.
    pub pairs: u64,
    /// The sources as named, one per pair.
    pub source: Vec<String>,
    /// The destinations as named, one per pair.
    pub destination: Vec<String>,
    /// Chunk size, bytes.
    pub chunk_size: u64,
}

impl RecordKind for StripedStart {
    const TYPE: &'static str = "start";
}

/// An `interval` line of a striped copy: all pairs, and each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StripedInterval {
    /// Seconds since the pulls began (the latest a pair reported).
    pub elapsed: f64,
    /// Payload bytes that crossed, all pairs.
    pub moved_bytes: u64,
    /// Bytes of the copy's files.
    pub bytes_total: u64,
    /// Each pair's last progress; `null` before its first.
    pub pairs: Vec<Option<PairProgress>>,
}

impl RecordKind for StripedInterval {
    const TYPE: &'static str = "interval";
}

/// One pair's progress in a striped copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairProgress {
    /// Payload bytes that crossed.
    pub moved_bytes: u64,
    /// Bytes of its share done.
    pub bytes_done: u64,
    /// Files done.
    pub files_done: u64,
    /// Data streams.
    pub streams: u16,
}

/// The `end` line of a striped copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StripedEnd {
    /// Every pair ended and no file failed.
    pub ok: bool,
    /// `striped`.
    pub direction: String,
    /// Files committed, all pairs.
    pub files: u64,
    /// Bytes of the copy's files.
    pub bytes: u64,
    /// Seconds from the start to the last pair's end.
    pub seconds: f64,
    /// `sent_bytes * 8 / seconds`.
    pub bits_per_second: f64,
    /// Payload bytes that crossed, all pairs.
    pub sent_bytes: u64,
    /// Files that failed, all pairs.
    pub failed_files: u64,
    /// Each share's end.
    pub pairs: Vec<ShareEnd>,
}

impl RecordKind for StripedEnd {
    const TYPE: &'static str = "end";
}

/// How one share of a striped copy ended: its figures, or the error that stopped it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareEnd {
    /// The share's number, from 1.
    pub share: u64,
    /// The source that served it.
    pub source: String,
    /// The destination that pulled it.
    pub destination: String,
    /// It ended and no file failed.
    pub ok: bool,
    /// Its figures, when it ended (absent otherwise).
    #[serde(flatten)]
    pub done: Option<ShareDone>,
    /// What stopped it (absent when it ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The figures of a share that ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareDone {
    /// Files committed.
    pub files: u64,
    /// Payload bytes that crossed.
    pub sent_bytes: u64,
    /// Bytes verified by an earlier run, not sent again.
    pub resumed_bytes: u64,
    /// Seconds of its pull.
    pub seconds: f64,
    /// `sent_bytes * 8 / seconds`.
    pub bits_per_second: f64,
    /// Data streams.
    pub streams: u16,
    /// RTT between its servers, ms.
    pub rtt_ms: f64,
    /// Why files failed.
    pub failures: Vec<String>,
    /// What limited it, in words.
    pub limited_by_text: String,
}
