//! What `longhaul cp` prints besides progress: warnings, the far end's start over ssh, the
//! end of a transfer (text or JSON) and a dry run's list.

use std::time::Duration;

use longhaul_engine::cp::client::CpReport;
use longhaul_engine::cp::hash_ahead::HashedCounts;
use longhaul_engine::cp::telemetry::CpVerdict;
use longhaul_engine::ssh::launch::FarEnd;
use longhaul_model::units::{format_bytes, format_rate_bps};
use longhaul_report::records::{
    DataVia, DryRunEnd, HashedAhead, SendAction, Warning, WouldDelete, WouldSend,
};

use super::super::common::{emit_record, say};
use super::records::{end_record, far_start_record};

pub(super) fn warn(json: bool, w: String) {
    if json {
        emit_record(Warning { message: w });
    } else {
        eprintln!("longhaul cp: warning: {w}");
    }
}

/// The far end's start over ssh, apart from the transfer (whose seconds start at its
/// first data stream): a line before the end line (`far_start` in JSON).
pub(super) fn print_far_started(end: &FarEnd, json: bool) {
    let far = far_start_record(end);
    if json {
        emit_record(far);
        return;
    }
    say(&format!(
        "Far end: started over ssh in {:.2} s (login and start-up, not in the transfer's time){}",
        far.seconds,
        match (far.upload_seconds, far.uploaded_bytes) {
            (Some(took), Some(bytes)) => format!(
                ", of which {took:.2} s uploading this longhaul ({:.1} MB)",
                bytes as f64 / 1e6
            ),
            _ => String::new(),
        }
    ));
    if far.data_via == DataVia::Ssh {
        say("Data: carried through ssh, one ssh connection per stream (the far port was not reachable, or --via-ssh)");
    }
    if let Some(port) = far.connect_back_port {
        say(&format!(
            "Data: the far end connected back to this host's port {port} (its own port was not reachable)"
        ));
    }
}

/// A `sync --checksum` pull's old copies hashed while the far end started: how many the
/// receiver took instead of reading them again.
pub(super) fn print_hashed_ahead(c: HashedCounts, json: bool) {
    let c = HashedAhead {
        files: c.hashed,
        used_files: c.used_files,
        used_bytes: c.used_bytes,
    };
    if json {
        emit_record(c);
    } else if c.used_files > 0 {
        say(&format!(
            "Old copies: {} file(s), {:.1} MB hashed while the transfer was set up",
            c.used_files,
            c.used_bytes as f64 / 1e6
        ));
    }
}

/// The end of a copy that ran: the `end` record, or its text (from the same record).
pub(super) fn print_end(
    r: &CpReport,
    cpu: f64,
    verdict: Option<&CpVerdict>,
    json: bool,
    delete: bool,
) {
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
    let end = end_record(r, cpu, verdict);
    if json {
        emit_record(end);
        return;
    }
    for f in &end.failures {
        eprintln!("longhaul cp: failed: {f}");
    }
    say(&format!(
        "{} {} files ({}) in {:.2} s = {}{}{}{}{}; {} streams, {} chunks, RTT {:.2} ms; CPU {:.2} s ({})",
        if end.direction == "push" { "sent" } else { "received" },
        end.files,
        format_bytes(end.sent_bytes as f64),
        end.seconds,
        format_rate_bps(end.bits_per_second),
        // Files found unchanged are counted below, not as resumed.
        match end.resumed_bytes.saturating_sub(end.unchanged_bytes) {
            0 => String::new(),
            resumed => format!(", {} already there (resumed)", format_bytes(resumed as f64)),
        },
        if end.skipped_files > 0 {
            format!(", {} skipped (exist)", end.skipped_files)
        } else {
            String::new()
        },
        if end.unchanged_files > 0 {
            format!(
                ", {} unchanged ({})",
                end.unchanged_files,
                format_bytes(end.unchanged_bytes as f64)
            )
        } else {
            String::new()
        } + &if end.compared_files > 0 {
            format!(
                ", {} compared chunk by chunk ({} kept from the old copies)",
                end.compared_files,
                format_bytes(end.reused_bytes as f64)
            )
        } else {
            String::new()
        },
        if delete {
            format!(", deleted {}", end.deleted_files)
        } else {
            String::new()
        },
        end.streams,
        format_bytes(end.chunk_bytes as f64),
        r.start.rtt.as_secs_f64() * 1e3,
        end.cpu_seconds,
        match end.cpu_seconds_per_gb {
            Some(s) => format!("{s:.2} s/GB"),
            None => "too little data for a per-GB figure".into(),
        },
    ));
    if end.cpu_seconds_per_gb.is_some() {
        say(&format!(
            "CPU by stage: {}",
            r.stages.per_gb_text(Duration::from_secs_f64(cpu), r.bytes)
        ));
    }
    if let (Some(v), Some(said)) = (verdict, &end.verdict) {
        if said.stream_summaries.len() > 1 || said.retransmits > 0 {
            let (balance, carried) = v.carrying_balance();
            say(&format!(
                "Streams: {} retransmits, slowest stream {:.0} % of the fastest{}",
                said.retransmits,
                balance * 100.0,
                if carried < said.stream_summaries.len() {
                    format!(
                        " ({carried} of {} streams carried data: fewer chunks than streams)",
                        said.stream_summaries.len()
                    )
                } else {
                    String::new()
                }
            ));
        }
        say(&format!(
            "Limited by: {}: {}",
            said.limited_by_text, said.advice
        ));
    }
}

/// `sync -n`: what a real run would send, file by file, then the totals (`would_send`
/// lines and an `end` with `dry_run: true` in JSON).
pub(super) fn print_dry_run(r: &CpReport, json: bool) {
    let mut lines: Vec<WouldSend> = r
        .would_send
        .iter()
        .map(|w| WouldSend {
            path: String::from_utf8_lossy(&w.path).into_owned(),
            action: SendAction::of(w.compared),
            size: w.size,
            bytes: w.bytes,
        })
        .collect();
    lines.sort_by(|a, b| a.path.cmp(&b.path));
    let end = DryRunEnd {
        ok: r.failed.is_empty(),
        dry_run: true,
        would_delete: r.deleted,
        files: lines.len() as u64,
        would_send_bytes: lines.iter().map(|w| w.bytes).sum(),
        unchanged_files: r.files_unchanged,
        compared_files: r.files_compared,
        failures: r.failed.clone(),
        direction: r.start.direction.to_string(),
    };
    for w in lines {
        if json {
            emit_record(w);
        } else if w.action == SendAction::Update {
            say(&format!(
                "would update {}: {} of {} differ",
                longhaul_proto::printable(&w.path),
                format_bytes(w.bytes as f64),
                format_bytes(w.size as f64)
            ));
        } else {
            say(&format!(
                "would create {} ({})",
                longhaul_proto::printable(&w.path),
                format_bytes(w.size as f64)
            ));
        }
    }
    for path in &r.would_delete {
        let gone = WouldDelete {
            path: path.to_string_lossy().into_owned(),
        };
        if json {
            emit_record(gone);
        } else {
            say(&format!(
                "would delete {}",
                longhaul_proto::printable(&gone.path)
            ));
        }
    }
    if json {
        emit_record(end);
    } else {
        say(&format!(
            "dry run: {} files would be sent or updated, {} would cross; {} unchanged; {} would be deleted; nothing was changed",
            end.files,
            format_bytes(end.would_send_bytes as f64),
            end.unchanged_files,
            end.would_delete
        ));
    }
}
