//! A copy's own records: `start` once the set-up and the file list are known, `interval`
//! every `--interval`, and `end` with the transfer's figures and, when the data streams
//! were sampled, the verdict on what limited them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::RecordKind;

/// The `start` line: the set-up and the transfer's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyStart {
    /// `push` or `pull`.
    pub direction: String,
    /// Data streams.
    pub streams: u16,
    /// Chunk size, bytes.
    pub chunk_bytes: u64,
    /// RTT measured in the set-up, ms.
    pub rtt_ms: f64,
    /// Socket buffer per stream on this side, bytes (0: autotuning).
    pub window_bytes: u64,
    /// Congestion control of the sender.
    pub congestion: String,
    /// Files of the transfer.
    pub files: u64,
    /// Bytes of the transfer's files.
    pub bytes: u64,
    /// Seconds between `interval` lines.
    pub interval_s: f64,
}

impl RecordKind for CopyStart {
    const TYPE: &'static str = "start";
}

/// An `interval` line: bench's interval object, then the transfer's progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyInterval {
    /// Bench's interval object (`start`, `end`, `streams`, `bytes`, `bits_per_second`...),
    /// typed in the engine (`IntervalView`), which this crate does not depend on: kept as
    /// its JSON fields.
    #[serde(flatten)]
    pub telemetry: Map<String, Value>,
    /// Seconds since the data streams were set up (the interval's `end`).
    pub seconds: f64,
    /// Bytes moved or found already there.
    pub done_bytes: u64,
    /// Bytes of the transfer's files.
    pub total_bytes: u64,
    /// Files done.
    pub files: u64,
    /// Files of the transfer.
    pub total_files: u64,
}

impl RecordKind for CopyInterval {
    const TYPE: &'static str = "interval";
}

/// The `end` line of a copy that ran (a dry run's is [`super::DryRunEnd`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyEnd {
    /// No file failed.
    pub ok: bool,
    /// Files committed (or found equal).
    pub files: u64,
    /// Bytes of all files of the transfer.
    pub bytes: u64,
    /// Seconds from the first data stream to the end.
    pub seconds: f64,
    /// `sent_bytes * 8 / seconds`.
    pub bits_per_second: f64,
    /// Payload bytes this end sent (push) or received (pull).
    pub sent_bytes: u64,
    /// Bytes verified by an earlier run (or unchanged), not sent again.
    pub resumed_bytes: u64,
    /// Files skipped because they existed (`--no-clobber`).
    pub skipped_files: u64,
    /// Files that failed.
    pub failed_files: u64,
    /// Why each failed.
    pub failures: Vec<String>,
    /// Chunks the receiver's BLAKE3 check refused and that were sent again.
    pub rejected_chunks: u64,
    /// This process's CPU seconds.
    pub cpu_seconds: f64,
    /// CPU seconds per GB of the files' bytes; `null` under 64 MiB of them.
    pub cpu_seconds_per_gb: Option<f64>,
    /// The CPU seconds by stage.
    pub cpu_by_stage: CpuByStage,
    /// Data streams (the count; the per-stream rows are `stream_summaries`).
    pub streams: u16,
    /// Chunk size, bytes.
    pub chunk_bytes: u64,
    /// `push` or `pull`.
    pub direction: String,
    /// Entries removed for `--delete`.
    pub deleted_files: u64,
    /// Files the quick check found complete (same size and mtime).
    pub unchanged_files: u64,
    /// Their bytes (in `resumed_bytes` too).
    pub unchanged_bytes: u64,
    /// Files compared chunk by chunk.
    pub compared_files: u64,
    /// Files neither unchanged nor compared: new at the destination.
    pub created_files: u64,
    /// Bytes taken from the destination's old copies.
    pub reused_bytes: u64,
    /// From the command's start to this end's first data byte, ms.
    pub first_byte_ms: Option<f64>,
    /// The same in round trips of the measured RTT.
    pub first_byte_rtts: Option<f64>,
    /// Round trips from the command's start to the dial of the data connections.
    pub data_dialed_rtts: Option<f64>,
    /// Bytes of the warm-up runs this end sent or dropped.
    pub warmup_bytes: u64,
    /// A pull answered the file list ahead (its destination held nothing of it).
    pub answered_ahead: bool,
    /// Jump-start: bench's object (the engine's `JumpReport`, which this crate does not
    /// depend on), kept as its JSON.
    pub jump_start: Value,
    /// What limited the transfer, when the data streams were sampled; its fields are
    /// absent (not `null`) otherwise.
    #[serde(flatten)]
    pub verdict: Option<Verdict>,
}

impl RecordKind for CopyEnd {
    const TYPE: &'static str = "end";
}

/// The CPU seconds of a copy by stage, each timed with the thread's CPU clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuByStage {
    /// TLS sealing or opening records.
    pub cipher_seconds: f64,
    /// BLAKE3.
    pub hash_seconds: f64,
    /// File reads and writes.
    pub disk_seconds: f64,
    /// The rest of the process's CPU time: socket calls, the kernel's TCP work, the control.
    pub socket_and_rest_seconds: f64,
}

/// The verdict over a whole copy, as bench's: what limited it and what to do about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Bench's code (`receiver_window`, `network`, `unknown`...).
    pub limited_by: String,
    /// The verdict in words.
    pub limited_by_text: String,
    /// What to do about it.
    pub advice: String,
    /// Slowest stream's bytes / fastest's (1.0 = balanced).
    pub balance: f64,
    /// Segments retransmitted, all streams (the sender's; 0 on a pull without reports).
    pub retransmits: u64,
    /// Per stream (bench's `streams` rows, under another name: cp's `streams` is the count).
    pub stream_summaries: Vec<StreamSummary>,
}

/// One stream over the whole copy (bench's per-stream row of its `end`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    /// Stream index.
    pub id: u16,
    /// Bytes the receiver read.
    pub bytes: u64,
    /// Receiver's bit rate.
    pub bits_per_second: f64,
    /// Retransmits (sender).
    pub retransmits: u64,
    /// Smallest RTT (sender), ms.
    pub min_rtt_ms: f64,
    /// Final congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Bench's verdict code for the stream.
    pub limited_by: String,
}
