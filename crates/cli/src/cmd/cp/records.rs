//! The records of `longhaul cp --json` ([`longhaul_report::records`]) built from the
//! engine's reports: the one place where a field of the schema gets its value, for the JSON
//! line and the human text alike.

use std::time::Duration;

use longhaul_engine::bench::report::{IntervalView, StreamSummary as EngineStreamSummary};
use longhaul_engine::cp::client::{CpReport, CpStart};
use longhaul_engine::cp::telemetry::CpVerdict;
use longhaul_engine::cp::Progress;
use longhaul_engine::ssh::launch::FarEnd;
use longhaul_policy::LimitedBy;
use longhaul_report::records::{
    CopyEnd, CopyInterval, CopyStart, CpuByStage, DataVia, FarStart, StreamSummary, Verdict,
};

use super::PER_GB_MIN_BYTES;

/// The `start` record once the set-up and the file list are known.
pub(super) fn start_record(s: &CpStart, progress: &Progress, interval: Duration) -> CopyStart {
    let (_, bytes, _, files) = progress.snapshot();
    CopyStart {
        direction: s.direction.to_string(),
        streams: s.streams,
        chunk_bytes: s.chunk_bytes,
        rtt_ms: s.rtt.as_secs_f64() * 1e3,
        window_bytes: s.window_bytes,
        congestion: s.congestion.clone(),
        files,
        bytes,
        interval_s: interval.as_secs_f64(),
    }
}

/// An `interval` record: bench's interval object, then the transfer's progress.
pub(super) fn interval_record(v: &IntervalView, progress: &Progress) -> CopyInterval {
    let telemetry = match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    let (done, total, files, files_total) = progress.snapshot();
    CopyInterval {
        telemetry,
        seconds: v.end,
        done_bytes: done,
        total_bytes: total,
        files,
        total_files: files_total,
    }
}

/// The `end` record of a copy that ran, this process having spent `cpu` seconds.
pub(super) fn end_record(r: &CpReport, cpu: f64, verdict: Option<&CpVerdict>) -> CopyEnd {
    let secs = r.seconds.max(1e-6);
    let cpu_by_stage = CpuByStage {
        cipher_seconds: r.stages.cipher.as_secs_f64(),
        hash_seconds: r.stages.hash.as_secs_f64(),
        disk_seconds: r.stages.disk.as_secs_f64(),
        socket_and_rest_seconds: r.stages.rest(Duration::from_secs_f64(cpu)).as_secs_f64(),
    };
    let rtt = r.start.rtt;
    CopyEnd {
        ok: r.failed.is_empty(),
        files: r.files_ok,
        bytes: r.bytes,
        seconds: r.seconds,
        bits_per_second: r.moved_bytes as f64 * 8.0 / secs,
        sent_bytes: r.moved_bytes,
        resumed_bytes: r.resumed_bytes,
        skipped_files: r.files_skipped,
        failed_files: r.failed.len() as u64,
        failures: r.failed.clone(),
        rejected_chunks: r.rejected_chunks,
        cpu_seconds: cpu,
        // Per GB of the files' bytes (stable across resumes and --checksum-only), only over
        // enough of them to mean something: a few bytes give a figure of millions.
        cpu_seconds_per_gb: (r.bytes >= PER_GB_MIN_BYTES).then(|| cpu / (r.bytes as f64 / 1e9)),
        cpu_by_stage,
        streams: r.start.streams,
        chunk_bytes: r.start.chunk_bytes,
        direction: r.start.direction.to_string(),
        deleted_files: r.deleted,
        unchanged_files: r.files_unchanged,
        unchanged_bytes: r.unchanged_bytes,
        compared_files: r.files_compared,
        created_files: r
            .files_ok
            .saturating_sub(r.files_unchanged + r.files_compared),
        reused_bytes: r.reused_bytes,
        first_byte_ms: longhaul_engine::startup::first_data_after_start()
            .map(|t| t.as_secs_f64() * 1e3),
        first_byte_rtts: longhaul_engine::startup::first_data_rtts(rtt),
        data_dialed_rtts: longhaul_engine::startup::data_dialed_rtts(rtt),
        warmup_bytes: longhaul_engine::startup::warmup_bytes(),
        answered_ahead: r.start.answered_ahead,
        jump_start: serde_json::to_value(&r.jump_start).unwrap_or_default(),
        verdict: verdict.map(verdict_record),
    }
}

fn verdict_record(v: &CpVerdict) -> Verdict {
    Verdict {
        limited_by: code(v.limited_by),
        limited_by_text: v.limited_by_text.to_string(),
        advice: v.advice.to_string(),
        balance: v.balance,
        retransmits: v.retransmits,
        stream_summaries: v.streams.iter().map(stream_record).collect(),
    }
}

fn stream_record(s: &EngineStreamSummary) -> StreamSummary {
    StreamSummary {
        id: s.id,
        bytes: s.bytes,
        bits_per_second: s.bits_per_second,
        retransmits: s.retransmits,
        min_rtt_ms: s.min_rtt_ms,
        cwnd_bytes: s.cwnd_bytes,
        limited_by: code(s.limited_by),
    }
}

/// Bench's code for a verdict (`receiver_window`, `network`...): its serde name, as bench's
/// own lines write it.
fn code(l: LimitedBy) -> String {
    match serde_json::to_value(l) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{l:?}"),
    }
}

/// The `far_start` record: the far end's start over ssh and how the data reached it.
pub(super) fn far_start_record(end: &FarEnd) -> FarStart {
    let up = end.uploaded();
    FarStart {
        seconds: end.took().as_secs_f64(),
        uploaded_bytes: up.map(|u| u.sent_bytes),
        upload_seconds: up.map(|u| u.took.as_secs_f64()),
        data_via: data_via(end),
        connect_back_port: end.via_connect_back().map(|(port, _)| port),
    }
}

/// How the session's connections reached the far end: its port, from it to a port here, or
/// through ssh.
fn data_via(end: &FarEnd) -> DataVia {
    match (end.via_ssh(), end.via_connect_back()) {
        (Some(_), _) => DataVia::Ssh,
        (None, Some(_)) => DataVia::ConnectBack,
        (None, None) => DataVia::Tcp,
    }
}
