//! The client end of `longhaul cp`: connects and authenticates like bench, measures the
//! RTT, sizes windows, streams and chunks from the path, asks the server for a push or a
//! pull, opens the data streams and runs the sending or receiving end.
//!
//! Its parts: `config` (what to copy, and how), `report` (how the transfer was set up,
//! and what happened), `reply` (the server's answers while the copy is set up) and
//! `paths` (the remote path and the local destination as this end checks them).

use crate::transport::secure::SecureStream;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use longhaul_proto::transfer::{CopyDirection, TransferMessage, TransferOptions, TransferParams};
use longhaul_transfer::opening::{CopyOpening, OpeningError};
use longhaul_transfer::request::{check_answer, path_chunk_size};
use longhaul_transfer::session::ExpectedList;
use longhaul_transfer::{names_a_directory, require_directory, RequestedPath};

use super::recv::run_receiver;
use super::send::{run_sender, Sender, SourceRoot};
use super::{CpError, Progress};
use crate::host;
use crate::telemetry::StreamCounters;
use crate::transport::control::ControlLink;
use crate::transport::sockopts;
use longhaul_policy::{JumpValidator, RateProbe, Role, TransportRequest, Window};

mod config;
mod paths;
mod reply;
mod report;
mod share;

pub use config::{CpConfig, CpJob, MemoryGate};
use report::RunFacts;
pub use report::{CpReport, CpStart};

use paths::{local_target, remote_refused, requested_top};
use reply::{await_answer, opening_error, send_flight};

/// Runs a copy; `progress` is updated as it goes, `on_start` called once set up.
pub fn run_cp(
    cfg: CpConfig,
    progress: Arc<Progress>,
    on_start: &mut dyn FnMut(&CpStart),
) -> Result<CpReport, CpError> {
    // The request's path, canonical on the wire (`dir/` keeps its trailing slash), and
    // cp's `cp host:f nodir/`: a local destination written as a directory must be one.
    // Both are checked before anything is asked of the server.
    // Over ssh the far end reads the path as typed (absolute or from the home, `..`
    // allowed); a daemon gets the canonical form.
    let wire_path = if cfg.user_paths {
        if cfg.remote_path.is_empty() {
            b".".to_vec()
        } else {
            cfg.remote_path.clone()
        }
    } else {
        RequestedPath::from_typed(&cfg.remote_path)
            .map_err(|e| remote_refused(&cfg, e))?
            .to_wire()
    };
    // The rules travel in one frame, checked before anything is asked of the server.
    let rules = TransferMessage::FilterRules {
        rules: cfg.filter.rules(),
    };
    longhaul_proto::transfer::encode_transfer_frame(&rules, &mut Vec::new()).map_err(|e| {
        CpError::Filter(format!(
            "the --exclude/--include rules do not fit one request ({e}); use fewer or \
             shorter patterns"
        ))
    })?;
    if let CpJob::Pull { dest } = &cfg.job {
        let typed = dest.as_os_str().as_bytes();
        let shown = typed.strip_suffix(b"/").unwrap_or(typed);
        require_directory(names_a_directory(typed), dest.is_dir(), shown).map_err(CpError::Path)?;
    }
    // Round trips are the cost of a long path (436 ms each), so the set-up overlaps
    // them (docs/startup.md): the data streams connect with the control connection, the
    // RTT is its connect time, and the request, the file list and the data hellos go
    // right behind our proof, in one flight.
    let push = matches!(cfg.job, CpJob::Push { .. });
    // The stream count and the jump as `crate::client_start` decides them, bench's way: a
    // push to a path seen before may jump from its own route; a pull's jump is the
    // server's, and its data connections leave behind the request (its route first).
    let probing = cfg.window.is_none() && cfg.rate_bps.is_none();
    let crate::client_start::Started {
        mut conn,
        session,
        rtt,
        pinned_now,
        ends,
        mss,
        mut jump,
        streams,
        data,
        ..
    } = crate::client_start::start_session(&crate::client_start::StartPlan {
        target: &cfg.server,
        token: &cfg.credential,
        security: &cfg.security,
        user_streams: cfg.streams,
        jump_start: cfg.jump_start,
        probing,
        receiving: !push,
    })?;
    // Both ends' addresses and the segment size, for the path's record.
    let path_ends = ends.map(|(peer, local)| (peer, local, mss));
    let Request {
        params,
        plan,
        mut warnings,
        congestion,
        share,
        pull_top,
        answered_ahead,
    } = request(&cfg, wire_path, &session, (rtt, streams, &jump), pinned_now)?;
    let (chunk_request, params_direction) = (params.chunk_size, params.direction);
    // Our proof, the request and its rules leave in one flight (the set-up's machine).
    let mut opening = CopyOpening::new(session, params, rules).map_err(|e| match e {
        OpeningError::Session(e) => CpError::Protocol(e.to_string()),
        other => opening_error(other),
    })?;
    send_flight(&mut conn, &mut opening, "sending the transfer request")?;
    // A push sends its file list right behind the request: the server answers it while
    // the data streams connect.
    let (mut sender, dest) = match cfg.job {
        CpJob::Push { items } => {
            let mut sender = Sender::new(
                items,
                SourceRoot::Local,
                chunk_request,
                cfg.checksum_only,
                streams,
                None,
            )?;
            if let Some(rules) = cfg.delta {
                if rules.dry_run {
                    sender.session.set_dry_run();
                }
                // A cache that cannot be opened only costs re-reading.
                sender.hash_cache = crate::cp::hash_cache::HashCache::open_default()
                    .ok()
                    .map(|c| (c, !rules.checksum));
            }
            while let Some(frame) = sender.session.poll_transmit() {
                opening.queue(frame);
            }
            send_flight(&mut conn, &mut opening, "sending the file list")?;
            (Some(sender), None)
        }
        CpJob::Pull { dest } => (None, Some(Dest::Local(dest))),
        CpJob::Relay { target } => (None, Some(Dest::Served(Box::new(target)))),
    };
    // The data hellos, in the same flight: a pull's server starts once they attach. A
    // jumping pull's connections leave now, right behind the request: the server sets its
    // route as it reads the request, a round trip before their handshakes complete there.
    let mut socks =
        data.after_request()
            .attach(opening.session(), plan.side, &plan.buffer, None)?;
    // A push's streams would idle the round trip to the server's answer: they fill their
    // initial windows meanwhile (cp::warmup), in parallel, and the answer is awaited.
    let warm = push
        && jump.plan.is_none()
        && !cfg.checksum_only
        && opening.session().features() & longhaul_proto::features::WARMUP != 0;
    // The server's receiver takes chunks' hashes after their bytes.
    let hash_after = opening.session().features() & longhaul_proto::features::HASH_AFTER != 0;
    let key = opening.session().chunk_key().filter(|_| warm);
    let (ready, warm_spans) = std::thread::scope(|scope| {
        let runs: Vec<_> = match &key {
            Some(key) => socks
                .iter_mut()
                .map(|s| scope.spawn(move || super::warmup::send(s, key).ok().flatten()))
                .collect(),
            None => Vec::new(),
        };
        let ready = await_answer(&mut conn, &mut opening);
        let spans: Vec<_> = runs.into_iter().map(|r| r.join().ok().flatten()).collect();
        (ready, spans)
    });
    let ready = ready?;
    let session = opening.into_session();
    let chunk_size = ready.chunk_size;
    if !push {
        jump.server_answered(true, ready.jump_start_bps, &ready.jump_note);
    }
    // A server may lower a push's chunks to fit its memory budget, never raise them.
    let lowered = check_answer(params_direction, share.is_some(), chunk_request, chunk_size)
        .map_err(|e| CpError::Protocol(e.to_string()))?;
    if let Some(lowered) = lowered {
        let adopted = sender
            .as_mut()
            .and_then(|s| s.session.adopt_chunk_size(lowered).ok());
        if adopted.is_none() {
            return Err(CpError::Protocol(format!(
                "the server chose chunks of {chunk_size} bytes for a push of {chunk_request}"
            )));
        }
        warnings.push(format!(
            "the server cut the chunks from {chunk_request} to {chunk_size} bytes to fit its \
             memory budget (fewer --streams keep larger chunks)"
        ));
    }
    let chunk_key = session
        .chunk_key()
        .ok_or_else(|| CpError::Protocol("authenticated without a session key".into()))?;
    for s in &socks {
        sockopts::apply_connected(s.tcp(), &plan)
            .map_err(|e| CpError::io("setting up a data stream", e))?;
    }
    // Telemetry: payload bytes per stream, and the sockets to sample.
    let counters = Arc::new(StreamCounters::new(socks.len()));
    for (i, span) in warm_spans.into_iter().enumerate() {
        if let Some(span) = span {
            counters.set_warmup(i, span);
        }
    }
    progress.count_streams(counters);
    let sockets = socks
        .iter()
        .map(|s| s.try_clone().map(Arc::new))
        .collect::<std::io::Result<_>>()
        .map_err(|e| CpError::io("cloning a data stream for telemetry", e))?;
    let start = CpStart {
        direction: if push { "push" } else { "pull" },
        streams,
        chunk_bytes: chunk_size,
        rtt,
        window_bytes: longhaul_policy::choice_bytes(&plan.buffer),
        congestion,
        warnings,
        sockets,
        answered_ahead,
    };
    on_start(&start);
    let link = ControlLink::start(conn).map_err(|e| CpError::io("control connection", e))?;
    let running = Running {
        link,
        socks,
        chunk_key,
        start,
        jump,
        rtt,
        path_ends,
        progress,
        t0: Instant::now(),
    };
    match (sender.take(), dest) {
        (Some(mut sender), _) => {
            sender.probe = (probing && rtt >= Duration::from_millis(1))
                .then(|| RateProbe::new(rtt, running.start.congestion != "bbr"));
            sender.hash_after = hash_after;
            if session.features() & longhaul_proto::features::SOURCE_CHANGED != 0 {
                sender.check_sources();
            }
            sender.answer_keepalive =
                session.features() & longhaul_proto::features::ANSWER_KEEPALIVE != 0;
            run_push(running, sender)
        }
        (None, Some(dest)) => {
            let mut target = match dest {
                Dest::Local(dest) => {
                    let mut t = local_target(&dest, cfg.no_clobber, cfg.checksum_only, cfg.sync)?;
                    t.keep_setuid = cfg.keep_setuid;
                    t.hashed_ahead = cfg.hashed_ahead.clone();
                    t
                }
                // Landed by the daemon, with its own rules (caps, set-user-ID bits).
                Dest::Served(target) => *target,
            };
            // The server may send only what was asked for: the requested source (its
            // base name; the root's own name when the root was asked for), and
            // directories only with -r.
            target.delta = cfg.delta;
            target.delete = cfg.delete.then(|| Arc::new(cfg.filter.clone()));
            target.expect = Some(ExpectedList {
                top: pull_top,
                recursive: cfg.recursive,
            });
            target.answered_ahead = answered_ahead;
            target.answer_keepalive =
                session.features() & longhaul_proto::features::ANSWER_KEEPALIVE != 0;
            run_pull(running, target, chunk_size)
        }
        (None, None) => Err(CpError::Internal(
            "a copy with neither source nor destination",
        )),
    }
}

/// A copy set up: the server answered, the data streams are attached and the control
/// connection is shared; what the sending or receiving end needs to run it.
struct Running {
    link: ControlLink,
    socks: Vec<SecureStream>,
    chunk_key: longhaul_proto::ChunkKey,
    start: CpStart,
    jump: crate::jump::ClientJump,
    rtt: Duration,
    /// Both ends' addresses and the segment size: the path's record.
    path_ends: Option<(std::net::IpAddr, std::net::IpAddr, u32)>,
    progress: Arc<Progress>,
    t0: Instant,
}

/// Runs a push's sending end; the path's record for the next push.
fn run_push(r: Running, mut sender: Sender) -> Result<CpReport, CpError> {
    let Running {
        link,
        socks,
        chunk_key,
        start,
        mut jump,
        rtt,
        path_ends,
        progress,
        t0,
    } = r;
    let bytes = sender.session.progress().total_bytes;
    sender.jump = jump.plan.map(|p| JumpValidator::new(p, rtt));
    let (out, paced) = run_sender(sender, link, || Ok(socks), chunk_key, progress.clone())?;
    jump.restore_route();
    let mut jump_report = jump.report;
    jump_report.set_verdict(paced.jump);
    // The path's record for the next push: the rate held for most of the transfer (not
    // the last round's, which finishing streams or a busy host may have lowered), over a
    // transfer long enough to have held one.
    if let (Some(rate), Some(min_rtt), Some((peer, local, mss))) = (
        paced.steady_bps.or(paced.held_bps),
        paced.min_rtt,
        path_ends,
    ) {
        if out.failed.is_empty() {
            let rate = jump_report.rate_to_remember(rate);
            crate::jump::remember(peer, local, rate, min_rtt, mss);
        }
    }
    let run = RunFacts::after(start, jump_report, t0, &progress);
    Ok(CpReport::sent(run, out, bytes))
}

/// Runs a pull's receiving end into `target`; the path's record for the next pull.
fn run_pull(
    r: Running,
    target: super::recv::RecvTarget,
    chunk_size: u64,
) -> Result<CpReport, CpError> {
    let Running {
        link,
        socks,
        chunk_key,
        start,
        mut jump,
        rtt,
        path_ends,
        progress,
        t0,
    } = r;
    let reports = progress.peer_reports().clone();
    let out = run_receiver(
        target,
        chunk_size,
        link,
        || Ok(socks),
        chunk_key,
        progress.clone(),
    )?;
    jump.restore_route();
    let mut jump_report = jump.report;
    // The server's pacer validates, and tells its verdict.
    jump_report.set_peer_outcome(reports.jump());
    // The path's record for the next pull: the steady rate the server reported its
    // streams delivered, the smallest RTT this end's data connections saw.
    if let (Some(rate), Some((peer, local, mss)), true) =
        (reports.steady_rate(), path_ends, out.failed.is_empty())
    {
        let min_rtt = smallest_rtt(&start.sockets).map_or(rtt, |r| r.min(rtt));
        let rate = jump_report.rate_to_remember(rate);
        crate::jump::remember(peer, local, rate, min_rtt, mss);
    }
    let run = RunFacts::after(start, jump_report, t0, &progress);
    Ok(CpReport::received(run, out))
}

/// What a copy asks of the server, and what this end decided for it.
struct Request {
    params: TransferParams,
    /// This end's transport plan (its buffer; on a push its congestion control, probe
    /// and pacing).
    plan: longhaul_policy::TransportPlan,
    warnings: Vec<String>,
    /// The sender's congestion control, for the start line.
    congestion: String,
    /// One share of a striped copy.
    share: Option<longhaul_proto::stripe::Share>,
    /// The name a pull's entries must all start with.
    pull_top: Option<Vec<u8>>,
    answered_ahead: bool,
}

/// The request of a copy as `cfg` asks it, on a path of `rtt` with `streams` data
/// connections and the dial's `jump`, to a server that proved itself in `session` (its
/// certificate `pinned_now` on a first contact): the same transport plan as bench's, the
/// chunk size from the path (checked against a daemon's memory budget for a relayed
/// pull), the options and whether a pull answers its list ahead.
fn request(
    cfg: &CpConfig,
    wire_path: Vec<u8>,
    session: &longhaul_proto::ClientSession,
    (rtt, streams, jump): (Duration, u16, &crate::jump::ClientJump),
    pinned_now: Option<crate::transport::tls::Fingerprint>,
) -> Result<Request, CpError> {
    let push = matches!(cfg.job, CpJob::Push { .. });
    // The same decisions as bench, from the same function: this end's buffer, and on a
    // push the congestion control, the probe and the pacing (the server decides them
    // on a pull, from the request's window and its fixed flag).
    let (plan, _) = host::plan_transport_here(
        &TransportRequest {
            role: if push { Role::Sender } else { Role::Receiver },
            streams,
            rate_bps: cfg.rate_bps,
            window: cfg.window.map_or(Window::Auto, Window::Fixed),
            congestion: cfg.congestion.clone().filter(|_| push),
        },
        rtt,
    )?;
    let needed = plan.window_bytes;
    let mut warnings = plan.warnings.clone();
    if let Some(fp) = pinned_now {
        warnings.push(format!(
            "first contact with {}: its certificate {fp} is now pinned in the known-servers \
             file; a different one will be refused",
            cfg.server
        ));
    }
    let congestion = match (&plan.congestion, &cfg.congestion) {
        (Some(cc), _) => cc.clone(),
        (None, Some(cc)) => cc.clone(),
        (None, None) => "server's choice".to_string(),
    };
    let rate = cfg.rate_bps.unwrap_or(0);
    let chunk_request = match (&cfg.job, cfg.chunk_size) {
        (_, Some(c)) => c,
        (CpJob::Push { items }, None) => {
            let total: u64 = items.iter().map(|i| i.entry.size).sum();
            path_chunk_size(rate, rtt, streams, total)
        }
        // The server knows the total and may lower this (AUTO_CHUNK).
        (CpJob::Pull { .. } | CpJob::Relay { .. }, None) => {
            path_chunk_size(rate, rtt, streams, u64::MAX)
        }
    };
    // What the pull will hold, checked (and perhaps its chunks made smaller) before the
    // request: a daemon's relayed pull reserves it from its memory budget.
    let fitted = match &cfg.memory_gate {
        Some(gate) if !push => {
            gate(streams, chunk_request, &plan.buffer).map_err(|why| CpError::Stopped {
                reason: format!("on this server: {why}"),
            })?
        }
        _ => chunk_request,
    };
    let share = match &cfg.job {
        CpJob::Relay { target } => target.share,
        _ => None,
    };
    if let Some(share) = share {
        share::check(
            share,
            session.features(),
            (chunk_request, fitted),
            cfg.chunk_size,
        )?;
    }
    let chunk_request = fitted;
    // A pull's entries must all start with the requested source's base name (the
    // root's own name when the root was asked for).
    let pull_top = match &cfg.job {
        CpJob::Pull { .. } | CpJob::Relay { .. } if cfg.user_paths => {
            longhaul_transfer::location::ssh_top(&cfg.remote_path)
        }
        CpJob::Pull { .. } | CpJob::Relay { .. } => requested_top(&cfg.remote_path)?,
        CpJob::Push { .. } => None,
    };
    let (options, answered_ahead) = transfer_options(
        cfg,
        session.features(),
        pull_top.as_deref(),
        share.is_some(),
    );
    let params_direction = if push {
        CopyDirection::Push
    } else {
        CopyDirection::Pull
    };
    let params = TransferParams {
        direction: params_direction,
        streams,
        chunk_size: chunk_request,
        rate_bps: cfg.rate_bps.unwrap_or(0),
        window_bytes: needed,
        rtt_us: rtt.as_micros().min(u128::from(u32::MAX)) as u32,
        options,
        // A pull's sender is the server: it checks and applies the choice.
        congestion: if push {
            String::new()
        } else {
            cfg.congestion.clone().unwrap_or_default()
        },
        // "." names the root; "dir/" a directory.
        path: wire_path,
        // A pull's sender is the server: it jumps, bounded by its own view. A push's
        // server only receives, and its listener's buffers are wide.
        jump: if push { None } else { jump.ask() },
    };
    Ok(Request {
        params,
        plan,
        warnings,
        congestion,
        share,
        pull_top,
        answered_ahead,
    })
}

/// The request's options from `cfg`, and whether a pull answers its list ahead (its
/// destination holds nothing of `pull_top`, the server takes it (`features`), and the
/// copy is not one share of a striped one: a share's answers name the other shares'
/// chunks).
fn transfer_options(
    cfg: &CpConfig,
    features: u64,
    pull_top: Option<&[u8]>,
    striped: bool,
) -> (TransferOptions, bool) {
    let mut options = TransferOptions {
        recursive: cfg.recursive,
        no_clobber: cfg.no_clobber,
        checksum_only: cfg.checksum_only,
        preserve: true,
        auto_chunk: cfg.chunk_size.is_none(),
        sync: cfg.sync,
        window_fixed: cfg.window.is_some(),
        delta: cfg.delta.is_some(),
        checksum: cfg.delta.is_some_and(|r| r.checksum),
        contents: cfg.delta.is_some_and(|r| r.contents),
        inplace: cfg.delta.is_some_and(|r| r.inplace),
        dry_run: cfg.delta.is_some_and(|r| r.dry_run),
        delete: cfg.delete,
        hard_links: cfg.hard_links,
        answered_ahead: false,
    };
    // A pull into a destination that holds nothing of it answers the list ahead, and
    // the server's chunks leave with the list (cp::ahead).
    let may_answer_ahead =
        options.may_answer_ahead() && features & longhaul_proto::features::ANSWER_AHEAD != 0;
    let answered_ahead = match &cfg.job {
        CpJob::Pull { dest } => may_answer_ahead && super::ahead::holds_nothing_of(dest, pull_top),
        CpJob::Relay { target } => {
            may_answer_ahead && super::ahead::served_holds_nothing_of(target, pull_top)
        }
        CpJob::Push { .. } => false,
    };
    // A share's answers name the other shares' chunks: never ahead.
    let answered_ahead = answered_ahead && !striped;
    options.answered_ahead = answered_ahead;
    (options, answered_ahead)
}

/// Where a pull's files go.
enum Dest {
    /// A local path as the user typed it.
    Local(std::path::PathBuf),
    /// A target a daemon landed beneath its root (a relayed pull).
    Served(Box<super::recv::RecvTarget>),
}

/// The smallest RTT the kernel measured on any of `sockets` (`None`: none measured).
fn smallest_rtt(sockets: &[Arc<SecureStream>]) -> Option<Duration> {
    sockets
        .iter()
        .filter_map(|s| longhaul_sys::tcp_info::tcp_info(s.tcp()).ok())
        .map(|i| i.min_rtt_us)
        .filter(|&us| us > 0)
        .min()
        .map(|us| Duration::from_micros(u64::from(us)))
}
