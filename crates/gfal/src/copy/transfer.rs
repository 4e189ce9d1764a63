//! Moving a copy's bytes with the engine: an upload or download is `longhaul cp`'s push or
//! pull of one file ([`run_cp`], on a worker thread while gfal2's thread reports progress
//! every second); a third-party copy is `longhaul cp longhaul://A/x longhaul://B/y`'s ticket
//! and relay, progress reported as the destination sends it.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Instant;

use longhaul_engine::cp::client::{run_cp, CpConfig, CpJob, CpReport};
use longhaul_engine::cp::remote_fs::FsError;
use longhaul_engine::cp::send::SendItem;
use longhaul_engine::cp::third_party::{relay_with_ticket, Peer, PullShape};
use longhaul_engine::cp::walk::walk_local;
use longhaul_engine::cp::{CpError, Progress};
use longhaul_proto::ticket::RelayDone;
use longhaul_proto::transfer::TransferOptions;

use super::monitor::{RateMeter, REPORT_EVERY};
use super::{CopyParams, Direction, Hooks, LogLevel};
use crate::error::{errno_of_io, Note, PluginError, Side};
use crate::settings::Settings;
use crate::url::LonghaulUrl;

/// Moves the bytes of `direction`.
pub(super) fn run(
    settings: &Settings,
    direction: &Direction,
    params: &CopyParams,
    hooks: &dyn Hooks,
) -> Result<(), PluginError> {
    let failed = |e: PluginError| e.at(Side::Transfer, Note::None);
    match direction {
        Direction::Upload { local, remote } => {
            let items = walk_local(&[local.to_path_buf()], false, &mut |w| {
                hooks.log(LogLevel::Warning, &w)
            })
            .map_err(|e| PluginError::new(libc::EIO, e.to_string()).at(Side::Source, Note::None))?
            .into_iter()
            .map(|s| SendItem {
                entry: s.entry,
                origin: s.origin,
            })
            .collect();
            let cfg = config(settings, remote, params, CpJob::Push { items })?;
            let report = run_watched(cfg, hooks).map_err(failed)?;
            check_report(&report, &remote.shown()).map_err(failed)
        }
        Direction::Download { remote, local } => {
            let job = CpJob::Pull {
                dest: local.to_path_buf(),
            };
            let cfg = config(settings, remote, params, job)?;
            let report = run_watched(cfg, hooks).map_err(failed)?;
            check_report(&report, &local.display().to_string()).map_err(failed)
        }
        Direction::ThirdParty { from, to } => {
            let done = third_party(settings, from, to, params, hooks)?;
            if done.files_failed > 0 {
                return Err(failed(PluginError::new(
                    libc::EIO,
                    format!(
                        "{} could not pull {}: {}",
                        to.shown(),
                        from.shown(),
                        done.failures.join("; ")
                    ),
                )));
            }
            if done.files_ok == 0 && done.files_skipped > 0 {
                return Err(exists(&to.shown()));
            }
            Ok(())
        }
    }
}

/// `longhaul cp`'s configuration for one file to or from `remote`.
fn config(
    settings: &Settings,
    remote: &LonghaulUrl,
    params: &CopyParams,
    job: CpJob,
) -> Result<CpConfig, PluginError> {
    Ok(CpConfig {
        server: remote.endpoint.target(),
        remote_path: remote.path.clone(),
        user_paths: false,
        job,
        credential: settings.token(&remote.endpoint)?.into(),
        security: settings.security()?,
        recursive: false,
        // An existing destination was refused or removed before: this is only a race's.
        no_clobber: !params.replace,
        hard_links: false,
        memory_gate: None,
        hashed_ahead: None,
        sync: false,
        checksum_only: false,
        keep_setuid: false,
        streams: params.streams,
        jump_start: true,
        rate_bps: None,
        window: None,
        congestion: None,
        chunk_size: None,
        delta: None,
        filter: Default::default(),
        delete: false,
    })
}

/// Runs `cfg` on a worker thread and reports its progress from this one (gfal2's: the
/// monitor callbacks may need it, as Python's do) until it ends.
fn run_watched(cfg: CpConfig, hooks: &dyn Hooks) -> Result<CpReport, PluginError> {
    let progress = Arc::new(Progress::default());
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let worker = {
        let progress = progress.clone();
        std::thread::Builder::new()
            .name("longhaul-gfal-copy".into())
            .spawn(move || {
                let mut warnings = Vec::new();
                let result = run_cp(cfg, progress, &mut |s| warnings.extend(s.warnings.clone()));
                drop(done_tx);
                (result, warnings)
            })
            .map_err(|e| PluginError::new(errno_of_io(&e), format!("starting the copy: {e}")))?
    };
    let start = Instant::now();
    let mut meter = RateMeter::default();
    while let Err(RecvTimeoutError::Timeout) = done_rx.recv_timeout(REPORT_EVERY) {
        let (bytes, ..) = progress.snapshot();
        hooks.monitor(&meter.sample(start.elapsed(), bytes));
    }
    let (result, warnings) = worker
        .join()
        .map_err(|_| PluginError::new(libc::EIO, "the copy's thread panicked"))?;
    for w in warnings {
        hooks.log(LogLevel::Warning, &w);
    }
    let report = result.map_err(cp_error)?;
    hooks.monitor(&meter.sample(start.elapsed(), report.bytes));
    Ok(report)
}

/// A finished push or pull: every file in place, or why not.
fn check_report(report: &CpReport, dest: &str) -> Result<(), PluginError> {
    if !report.failed.is_empty() {
        return Err(PluginError::new(
            libc::EIO,
            format!("copying to {dest} failed: {}", report.failed.join("; ")),
        ));
    }
    if report.files_ok == 0 && report.files_skipped > 0 {
        return Err(exists(dest));
    }
    Ok(())
}

fn exists(dest: &str) -> PluginError {
    PluginError::new(
        libc::EEXIST,
        format!("destination {dest} exists and was kept; allow overwriting to replace it"),
    )
    .at(Side::Destination, Note::Exists)
}

/// The errno of a failed push or pull.
fn cp_error(e: CpError) -> PluginError {
    let errno = match &e {
        CpError::Io { cause, .. } | CpError::Destination { cause, .. } => errno_of_io(cause),
        _ => libc::EIO,
    };
    PluginError::new(errno, format!("{e}{}", e.rerun_hint()))
}

/// Asks `from` for a ticket and `to` to pull with it, reporting the pull's progress.
fn third_party(
    settings: &Settings,
    from: &LonghaulUrl,
    to: &LonghaulUrl,
    params: &CopyParams,
    hooks: &dyn Hooks,
) -> Result<RelayDone, PluginError> {
    let security = settings.security()?;
    let (source, dest) = (from.endpoint.target(), to.endpoint.target());
    let (source_path, dest_path) = (from.wire_path()?, to.wire_path()?);
    let source_token = settings.token(&from.endpoint)?;
    let src = Peer {
        target: &source,
        token: &source_token,
        security: &security,
        path: &source_path,
    };
    let ticket = src.ticket().map_err(|e| {
        PluginError::from(FsError::from(e))
            .context(format!("asking {source} for a ticket to {}", from.shown()))
            .at(Side::Source, Note::None)
    })?;
    let shape = PullShape {
        options: TransferOptions {
            no_clobber: !params.replace,
            preserve: true,
            auto_chunk: true,
            ..TransferOptions::default()
        },
        streams: params.streams.unwrap_or(0),
        jump_start: true,
        ..PullShape::default()
    };
    let mut meter = RateMeter::default();
    let start = Instant::now();
    let mut last = start - REPORT_EVERY;
    let mut on_progress = |p: &longhaul_proto::ticket::RelayProgress| {
        if last.elapsed() >= REPORT_EVERY {
            last = Instant::now();
            hooks.monitor(&meter.sample(start.elapsed(), p.bytes_done));
        }
    };
    let dest_token = settings.token(&to.endpoint)?;
    let dst = Peer {
        target: &dest,
        token: &dest_token,
        security: &security,
        path: &dest_path,
    };
    let done = relay_with_ticket(ticket, &src, &dst, shape, &mut on_progress).map_err(|e| {
        PluginError::from(FsError::from(e))
            .context(format!("{dest} pulling {}", from.shown()))
            .at(Side::Transfer, Note::None)
    })?;
    hooks.monitor(&meter.sample(start.elapsed(), done.bytes));
    Ok(done)
}
