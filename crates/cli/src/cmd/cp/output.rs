//! What `longhaul cp` prints besides progress: warnings, the far end's start over ssh, the
//! end of a transfer (text or JSON) and a dry run's list.

use std::time::Duration;

use longhaul_engine::cp::client::CpReport;
use longhaul_engine::cp::hash_ahead::HashedCounts;
use longhaul_engine::cp::telemetry::CpVerdict;
use longhaul_engine::ssh::launch::FarEnd;
use longhaul_model::units::{format_bytes, format_rate_bps};
use serde_json::json;

use super::super::common::{emit_json, say};
use super::PER_GB_MIN_BYTES;

pub(super) fn warn(json: bool, w: String) {
    if json {
        emit_json(&json!({"type": "warning", "message": w}));
    } else {
        eprintln!("longhaul cp: warning: {w}");
    }
}

/// The far end's start over ssh, apart from the transfer (whose seconds start at its
/// first data stream): a line before the end line (`far_start` in JSON).
pub(super) fn print_far_started(end: &FarEnd, json: bool) {
    let up = end.uploaded();
    if json {
        emit_json(&json!({
            "type": "far_start",
            "seconds": end.took().as_secs_f64(),
            "uploaded_bytes": up.map(|u| u.sent_bytes),
            "upload_seconds": up.map(|u| u.took.as_secs_f64()),
            "data_via": data_via(end),
            "connect_back_port": end.via_connect_back().map(|(port, _)| port),
        }));
        return;
    }
    say(&format!(
        "Far end: started over ssh in {:.2} s (login and start-up, not in the transfer's time){}",
        end.took().as_secs_f64(),
        match up {
            Some(u) => format!(
                ", of which {:.2} s uploading this longhaul ({:.1} MB)",
                u.took.as_secs_f64(),
                u.sent_bytes as f64 / 1e6
            ),
            None => String::new(),
        }
    ));
    if end.via_ssh().is_some() {
        say("Data: carried through ssh, one ssh connection per stream (the far port was not reachable, or --via-ssh)");
    }
    if let Some((port, _)) = end.via_connect_back() {
        say(&format!(
            "Data: the far end connected back to this host's port {port} (its own port was not reachable)"
        ));
    }
}

/// A `sync --checksum` pull's old copies hashed while the far end started: how many the
/// receiver took instead of reading them again.
pub(super) fn print_hashed_ahead(c: HashedCounts, json: bool) {
    if json {
        emit_json(&json!({
            "type": "hashed_ahead",
            "files": c.hashed, "used_files": c.used_files, "used_bytes": c.used_bytes,
        }));
    } else if c.used_files > 0 {
        say(&format!(
            "Old copies: {} file(s), {:.1} MB hashed while the transfer was set up",
            c.used_files,
            c.used_bytes as f64 / 1e6
        ));
    }
}

/// How the session's connections reached the far end: `tcp` (its port), `connect-back`
/// (from it to a port here) or `ssh` (through ssh).
pub(super) fn data_via(end: &FarEnd) -> &'static str {
    match (end.via_ssh(), end.via_connect_back()) {
        (Some(_), _) => "ssh",
        (None, Some(_)) => "connect-back",
        (None, None) => "tcp",
    }
}

pub(super) fn print_end(
    r: &CpReport,
    cpu: f64,
    verdict: Option<&CpVerdict>,
    json: bool,
    delete: bool,
) {
    let secs = r.seconds.max(1e-6);
    let moved = r.moved_bytes;
    let bps = moved as f64 * 8.0 / secs;
    // CPU per GB of the files' bytes (stable across resumes and --checksum-only), only
    // over enough of them to mean something: a few bytes give a figure of millions.
    let per_gb = (r.bytes >= PER_GB_MIN_BYTES).then(|| cpu / (r.bytes as f64 / 1e9));
    if r.rejected_chunks > 0 {
        warn(
            json,
            format!(
                "{} chunk(s) failed the receiver's BLAKE3 check and were sent again: the \
                 source changed while it was read, or the bytes were altered on the way \
                 (nothing wrong was written; the files' digests matched)",
                r.rejected_chunks
            ),
        );
    }
    if json {
        let mut end = json!({
            "type": "end", "ok": r.failed.is_empty(),
            "files": r.files_ok, "bytes": r.bytes, "seconds": r.seconds,
            "bits_per_second": bps, "sent_bytes": moved, "resumed_bytes": r.resumed_bytes,
            "skipped_files": r.files_skipped, "failed_files": r.failed.len(),
            "failures": r.failed, "rejected_chunks": r.rejected_chunks,
            "cpu_seconds": cpu, "cpu_seconds_per_gb": per_gb,
            "cpu_by_stage": {
                "cipher_seconds": r.stages.cipher.as_secs_f64(),
                "hash_seconds": r.stages.hash.as_secs_f64(),
                "disk_seconds": r.stages.disk.as_secs_f64(),
                "socket_and_rest_seconds": r.stages.rest(Duration::from_secs_f64(cpu)).as_secs_f64(),
            },
            "streams": r.start.streams, "chunk_bytes": r.start.chunk_bytes,
            "direction": r.start.direction, "deleted_files": r.deleted,
            "unchanged_files": r.files_unchanged, "unchanged_bytes": r.unchanged_bytes,
            "compared_files": r.files_compared,
            "created_files": r.files_ok.saturating_sub(r.files_unchanged + r.files_compared),
            "reused_bytes": r.reused_bytes,
            "first_byte_ms": longhaul_engine::startup::first_data_after_start()
                .map(|t| t.as_secs_f64() * 1e3),
            "first_byte_rtts": longhaul_engine::startup::first_data_rtts(r.start.rtt),
            "data_dialed_rtts": longhaul_engine::startup::data_dialed_rtts(r.start.rtt),
            "warmup_bytes": longhaul_engine::startup::warmup_bytes(),
            "answered_ahead": r.start.answered_ahead,
            "jump_start": r.jump_start,
        });
        if let (Some(v), Some(obj)) = (verdict, end.as_object_mut()) {
            obj.insert("limited_by".into(), json!(v.limited_by));
            obj.insert("limited_by_text".into(), json!(v.limited_by_text));
            obj.insert("advice".into(), json!(v.advice));
            obj.insert("balance".into(), json!(v.balance));
            obj.insert("retransmits".into(), json!(v.retransmits));
            // `streams` is the stream count (as before); bench's per-stream array is here.
            obj.insert("stream_summaries".into(), json!(v.streams));
        }
        emit_json(&end);
        return;
    }
    for f in &r.failed {
        eprintln!("longhaul cp: failed: {f}");
    }
    say(&format!(
        "{} {} files ({}) in {:.2} s = {}{}{}{}{}; {} streams, {} chunks, RTT {:.2} ms; CPU {:.2} s ({})",
        if r.start.direction == "push" { "sent" } else { "received" },
        r.files_ok,
        format_bytes(moved as f64),
        r.seconds,
        format_rate_bps(bps),
        // Files found unchanged are counted below, not as resumed.
        match r.resumed_bytes.saturating_sub(r.unchanged_bytes) {
            0 => String::new(),
            resumed => format!(", {} already there (resumed)", format_bytes(resumed as f64)),
        },
        if r.files_skipped > 0 {
            format!(", {} skipped (exist)", r.files_skipped)
        } else {
            String::new()
        },
        if r.files_unchanged > 0 {
            format!(
                ", {} unchanged ({})",
                r.files_unchanged,
                format_bytes(r.unchanged_bytes as f64)
            )
        } else {
            String::new()
        } + &if r.files_compared > 0 {
            format!(
                ", {} compared chunk by chunk ({} kept from the old copies)",
                r.files_compared,
                format_bytes(r.reused_bytes as f64)
            )
        } else {
            String::new()
        },
        if delete {
            format!(", deleted {}", r.deleted)
        } else {
            String::new()
        },
        r.start.streams,
        format_bytes(r.start.chunk_bytes as f64),
        r.start.rtt.as_secs_f64() * 1e3,
        cpu,
        match per_gb {
            Some(s) => format!("{s:.2} s/GB"),
            None => "too little data for a per-GB figure".into(),
        },
    ));
    if per_gb.is_some() {
        say(&format!(
            "CPU by stage: {}",
            r.stages.per_gb_text(Duration::from_secs_f64(cpu), r.bytes)
        ));
    }
    if let Some(v) = verdict {
        if v.streams.len() > 1 || v.retransmits > 0 {
            let (balance, carried) = v.carrying_balance();
            say(&format!(
                "Streams: {} retransmits, slowest stream {:.0} % of the fastest{}",
                v.retransmits,
                balance * 100.0,
                if carried < v.streams.len() {
                    format!(
                        " ({carried} of {} streams carried data: fewer chunks than streams)",
                        v.streams.len()
                    )
                } else {
                    String::new()
                }
            ));
        }
        say(&format!("Limited by: {}: {}", v.limited_by_text, v.advice));
    }
}

/// `sync -n`: what a real run would send, file by file, then the totals (`would_send`
/// lines and an `end` with `dry_run: true` in JSON).
pub(super) fn print_dry_run(r: &CpReport, json: bool) {
    let total: u64 = r.would_send.iter().map(|w| w.bytes).sum();
    let mut lines = r.would_send.clone();
    lines.sort_by(|a, b| a.path.cmp(&b.path));
    for w in &lines {
        let path = String::from_utf8_lossy(&w.path);
        let action = if w.compared { "update" } else { "create" };
        if json {
            emit_json(&json!({
                "type": "would_send", "path": path, "action": action,
                "size": w.size, "bytes": w.bytes,
            }));
        } else if w.compared {
            say(&format!(
                "would update {}: {} of {} differ",
                longhaul_proto::printable(&path),
                format_bytes(w.bytes as f64),
                format_bytes(w.size as f64)
            ));
        } else {
            say(&format!(
                "would create {} ({})",
                longhaul_proto::printable(&path),
                format_bytes(w.size as f64)
            ));
        }
    }
    for path in &r.would_delete {
        let path = path.to_string_lossy();
        if json {
            emit_json(&json!({"type": "would_delete", "path": path}));
        } else {
            say(&format!(
                "would delete {}",
                longhaul_proto::printable(&path)
            ));
        }
    }
    if json {
        emit_json(&json!({
            "type": "end", "ok": r.failed.is_empty(), "dry_run": true,
            "would_delete": r.deleted,
            "files": lines.len(), "would_send_bytes": total,
            "unchanged_files": r.files_unchanged, "compared_files": r.files_compared,
            "failures": r.failed, "direction": r.start.direction,
        }));
    } else {
        say(&format!(
            "dry run: {} files would be sent or updated, {} would cross; {} unchanged; {} would be deleted; nothing was changed",
            lines.len(),
            format_bytes(total as f64),
            r.files_unchanged,
            r.deleted
        ));
    }
}
