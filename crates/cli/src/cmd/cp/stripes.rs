//! `longhaul cp [-r] longhaul://A1,A2/x longhaul://B1,B2/y`: one copy striped over
//! several pairs of hosts (`longhaul_proto::stripe`). The hosts at each end see the same
//! file system; pair i (Ai to Bi) is a third-party copy of share i of the chunks, all
//! pairs at once, with one chunk size. The receiving hosts write into the same part
//! files and the last one to finish a file checks and commits it. A pair that fails
//! leaves its share to a pair that finished (run again on it), else to a rerun. JSON
//! Lines: a `start`, an `interval` per second with each pair's figures, an `end`.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use longhaul_engine::cp::remote_fs::RemoteFs;
use longhaul_engine::cp::third_party::{relay_with_ticket, PullShape};
use longhaul_model::units::{format_bytes, format_rate_bps};
use longhaul_proto::namespace::{FsErrorKind, FsKind};
use longhaul_proto::stripe::Share;
use longhaul_proto::ticket::{RelayDone, RelayProgress};
use longhaul_report::records::{
    PairProgress, ShareDone, ShareEnd, StripedEnd, StripedInterval, StripedStart, Warning,
};
use longhaul_transfer::location::{Location, RemoteSpec};

use super::super::common::{emit_record, say};
use super::third_party::{endpoint, pull_shape, refuse_unsupported, Endpoint};
use super::Args;

/// Chunk size of a striped copy unless `--chunk` says: every pair must cut the files
/// alike, so it cannot follow each pair's path.
pub const STRIPE_CHUNK: u64 = 16 << 20;

/// How often the combined progress is shown.
const SHOW_EVERY: Duration = Duration::from_secs(1);

/// One pair's end: its pull's, or why it failed; and which pair ran the share if not its
/// own.
struct PairEnd {
    done: Result<RelayDone, String>,
    ran_on: usize,
}

/// Runs the striped copy from `srcs` to `dsts` (paired in order).
pub(super) fn run(
    args: &Args,
    srcs: &[RemoteSpec],
    dsts: &[RemoteSpec],
) -> anyhow::Result<ExitCode> {
    refuse_unsupported(args)?;
    if args.hard_links || args.source_token_file.is_some() {
        anyhow::bail!(
            "-H and --source-token-file are not taken by a striped copy yet; run it as one copy"
        );
    }
    if srcs.len() != dsts.len() {
        anyhow::bail!(
            "a striped copy pairs the hosts in order: {} source hosts and {} destination hosts \
             (name as many at each end)",
            srcs.len(),
            dsts.len()
        );
    }
    let n = srcs.len();
    let ends = |specs: &[RemoteSpec], source| {
        specs
            .iter()
            .map(|s| endpoint(args, &Location::Daemon(s.clone()), None, source))
            .collect::<anyhow::Result<Vec<Endpoint>>>()
    };
    let dst_path = dsts[0].path.clone();
    let (srcs, dsts) = (ends(srcs, true)?, ends(dsts, false)?);
    let mut shape = pull_shape(args, false)?;
    shape.chunk_size = args.chunk.unwrap_or(STRIPE_CHUNK);
    shape.options.auto_chunk = false;
    shape.dest_is_dir = Some(dest_is_dir(&dst_path, &dsts[0])?);
    let json = args.json;
    if json {
        emit_record(StripedStart {
            direction: STRIPED.into(),
            pairs: n as u64,
            source: srcs.iter().map(|e| e.shown.clone()).collect(),
            destination: dsts.iter().map(|e| e.shown.clone()).collect(),
            chunk_size: shape.chunk_size,
        });
    }
    let live = !json && !args.no_progress && std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut ends: Vec<PairEnd> = std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel();
        let pulls: Vec<_> = (0..n)
            .map(|i| {
                let (tx, shape) = (tx.clone(), shape.clone());
                let (src, dst) = (&srcs[i], &dsts[i]);
                scope.spawn(move || share_pull(i, n, (src, dst), shape, &tx))
            })
            .collect();
        drop(tx);
        follow(&rx, n, json, live);
        pulls
            .into_iter()
            .enumerate()
            .map(|(i, h)| PairEnd {
                done: h
                    .join()
                    .unwrap_or_else(|_| Err("its thread panicked".into())),
                ran_on: i,
            })
            .collect()
    });
    if live {
        eprintln!();
    }
    // A failed pair's share goes to a pair that finished, once.
    if let Some(good) = ends.iter().position(|e| e.done.is_ok()) {
        for k in 0..n {
            if let Err(why) = &ends[k].done {
                warn_line(
                    json,
                    &format!(
                        "pair {} ({} -> {}) failed: {why}; its share goes to pair {}",
                        k + 1,
                        srcs[k].shown,
                        dsts[k].shown,
                        good + 1
                    ),
                );
                let (tx, _rx) = mpsc::channel();
                let pair = (&srcs[good], &dsts[good]);
                let done = share_pull(k, n, pair, shape.clone(), &tx);
                ends[k] = PairEnd { done, ran_on: good };
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    print_end(&ends, (&srcs, &dsts), seconds, json);
    let failed = ends
        .iter()
        .any(|e| e.done.as_ref().map_or(true, |d| d.files_failed > 0));
    Ok(ExitCode::from(u8::from(failed)))
}

/// Whether the destination (`path` as typed, at `end`) is a directory the copy goes
/// into, or the new name: asked once, so that every pair places alike while one of them
/// creates it (each looking for itself, the second found the first's directory and put
/// the tree inside it).
fn dest_is_dir(path: &[u8], end: &Endpoint) -> anyhow::Result<bool> {
    let fs = RemoteFs {
        target: end.target.clone(),
        token: end.token.clone(),
        security: end.security.clone(),
    };
    let path = if path.is_empty() { &b"."[..] } else { path };
    match fs.stat(path) {
        Ok(s) => Ok(s.kind == FsKind::Dir),
        Err(e) if e.kind == FsErrorKind::NotFound => Ok(false),
        Err(e) => anyhow::bail!("looking at {}: {e}", end.shown),
    }
}

/// Share `i` of `n` over one pair: a ticket from its source, the pull by its destination.
fn share_pull(
    i: usize,
    n: usize,
    (src, dst): (&Endpoint, &Endpoint),
    mut shape: PullShape,
    tx: &mpsc::Sender<(usize, RelayProgress)>,
) -> Result<RelayDone, String> {
    let share = Share::new(i as u16, n as u16).map_err(|e| e.to_string())?;
    shape.share = Some(share);
    let (src_peer, dst_peer) = (src.peer(), dst.peer());
    let ticket = src_peer
        .ticket()
        .with_context(|| format!("asking {} for a ticket", src.shown))
        .map_err(|e| format!("{e:#}"))?;
    relay_with_ticket(ticket, &src_peer, &dst_peer, shape, &mut |p| {
        let _ = tx.send((i, *p));
    })
    .with_context(|| format!("{} pulling {share} from {}", dst.shown, src.shown))
    .map_err(|e| format!("{e:#}"))
}

/// Shows the pairs' reports as they come, combined, until every pair has ended.
fn follow(rx: &mpsc::Receiver<(usize, RelayProgress)>, n: usize, json: bool, live: bool) {
    let mut latest: Vec<Option<RelayProgress>> = vec![None; n];
    let mut shown = Instant::now();
    for (i, p) in rx.iter() {
        latest[i] = Some(p);
        if shown.elapsed() < SHOW_EVERY && latest.iter().any(Option::is_none) {
            continue;
        }
        shown = Instant::now();
        let moved: u64 = latest.iter().flatten().map(|p| p.moved_bytes).sum();
        let total = latest
            .iter()
            .flatten()
            .map(|p| p.bytes_total)
            .max()
            .unwrap_or(0);
        let elapsed = latest
            .iter()
            .flatten()
            .map(|p| p.elapsed_ms)
            .max()
            .unwrap_or(0);
        if json {
            let pairs = latest
                .iter()
                .map(|p| {
                    p.map(|p| PairProgress {
                        moved_bytes: p.moved_bytes,
                        bytes_done: p.bytes_done,
                        files_done: p.files_done.into(),
                        streams: p.streams,
                    })
                })
                .collect();
            emit_record(StripedInterval {
                elapsed: elapsed as f64 / 1e3,
                moved_bytes: moved,
                bytes_total: total,
                pairs,
            });
        } else if live {
            eprint!(
                "\r{} of {} moved by {n} pairs in {:.0} s   ",
                format_bytes(moved as f64),
                format_bytes(total as f64),
                elapsed as f64 / 1e3
            );
        }
    }
}

fn warn_line(json: bool, line: &str) {
    if json {
        emit_record(Warning {
            message: line.to_string(),
        });
    } else {
        eprintln!("longhaul cp: {line}");
    }
}

/// The `direction` of a striped copy's lines.
const STRIPED: &str = "striped";

/// The end of a striped copy: the `end` record, or its text from the same record.
fn print_end(ends: &[PairEnd], (srcs, dsts): (&[Endpoint], &[Endpoint]), seconds: f64, json: bool) {
    let end = end_record(ends, (srcs, dsts), seconds);
    if json {
        emit_record(end);
        return;
    }
    let n = end.pairs.len();
    for share in &end.pairs {
        let (src, dst) = (&share.source, &share.destination);
        match (&share.done, &share.error) {
            (Some(d), _) => {
                for f in &d.failures {
                    eprintln!("longhaul cp: failed: {}", longhaul_proto::printable(f));
                }
                say(&format!(
                    "share {} of {n}: {dst} received {} from {src} in {:.2} s = {}{}; {} streams, RTT {:.2} ms",
                    share.share,
                    format_bytes(d.sent_bytes as f64),
                    d.seconds,
                    format_rate_bps(d.bits_per_second),
                    match d.resumed_bytes {
                        0 => String::new(),
                        r => format!(", {} already there", format_bytes(r as f64)),
                    },
                    d.streams,
                    d.rtt_ms,
                ));
            }
            (None, why) => eprintln!(
                "longhaul cp: share {} of {n} ({src} -> {dst}) failed: {}; run the same \
                 command again: each share resumes from what it verified",
                share.share,
                why.as_deref().unwrap_or_default()
            ),
        }
    }
    say(&format!(
        "striped over {n} pairs: {} files, {} moved in {:.2} s = {}",
        end.files,
        format_bytes(end.sent_bytes as f64),
        end.seconds,
        format_rate_bps(end.bits_per_second)
    ));
}

/// The `end` record of a striped copy that took `seconds`: all pairs, and each share.
fn end_record(
    ends: &[PairEnd],
    (srcs, dsts): (&[Endpoint], &[Endpoint]),
    seconds: f64,
) -> StripedEnd {
    let ok: Vec<&RelayDone> = ends.iter().filter_map(|e| e.done.as_ref().ok()).collect();
    let moved: u64 = ok.iter().map(|d| d.moved_bytes).sum();
    let failed_files: u64 = ok.iter().map(|d| u64::from(d.files_failed)).sum();
    let pairs = ends
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (done, error) = match &e.done {
                Ok(d) => {
                    let secs = d.elapsed_ms as f64 / 1e3;
                    let done = ShareDone {
                        files: d.files_ok.into(),
                        sent_bytes: d.moved_bytes,
                        resumed_bytes: d.resumed_bytes,
                        seconds: secs,
                        bits_per_second: d.moved_bytes as f64 * 8.0 / secs.max(1e-3),
                        streams: d.streams,
                        rtt_ms: f64::from(d.rtt_us) / 1e3,
                        failures: d.failures.clone(),
                        limited_by_text: d.limited_by.clone(),
                    };
                    (Some(done), None)
                }
                Err(why) => (None, Some(why.clone())),
            };
            ShareEnd {
                share: i as u64 + 1,
                source: srcs[e.ran_on].shown.clone(),
                destination: dsts[e.ran_on].shown.clone(),
                ok: e.done.as_ref().is_ok_and(|d| d.files_failed == 0),
                done,
                error,
            }
        })
        .collect();
    StripedEnd {
        ok: ok.len() == ends.len() && failed_files == 0,
        direction: STRIPED.into(),
        files: ok.iter().map(|d| u64::from(d.files_ok)).sum(),
        bytes: ok.iter().map(|d| d.bytes).max().unwrap_or(0),
        seconds,
        bits_per_second: moved as f64 * 8.0 / seconds.max(1e-3),
        sent_bytes: moved,
        failed_files,
        pairs,
    }
}
