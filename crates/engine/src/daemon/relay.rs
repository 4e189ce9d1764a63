//! Third-party copies on a daemon (see `longhaul_proto::ticket`): as the source, a
//! ticket for one path to a client that proved a token; as the destination, a pull from
//! the source with the client's ticket into this server's files, its progress and end
//! told to the client. The pull is `cp`'s own client, run here.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::ticket::{RelayDone, RelayProgress, RelayPull};
use longhaul_proto::{Access, Credential, ErrorCode, ServerSession};
use longhaul_transfer::{require_directory, Filter, RequestedPath};

use super::reach::land;
use super::server::{refuse, send_all, ServeConfig, Shared};
use super::tickets::TicketScope;
use super::ServeError;
use crate::bench::DEFAULT_PORT;
use crate::cp::client::{run_cp, CpConfig, CpJob, CpReport, CpStart, MemoryGate};
use crate::cp::recv::RecvTarget;
use crate::cp::telemetry::CpTelemetry;
use crate::cp::Progress;
use crate::transport::dial::resolve;
use crate::transport::framed::FramedConn;
use crate::transport::tls::{Encryption, Fingerprint, Security, ServerTrust};
use longhaul_policy::{BufferChoice, MemoryNeed, RelayFrom, Side};

use super::memory::{socket_bytes, MemoryHold};

/// How often a relayed pull's progress goes to the client (it also keeps the client's
/// reads from timing out while the source lists a large tree).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// A path in the canonical wire form both the ticket and the pull that uses it carry
/// (the raw bytes where they do not parse: the comparison then fails closed).
pub(super) fn canonical(wire: &[u8]) -> Vec<u8> {
    RequestedPath::from_wire(wire).map_or_else(|_| wire.to_vec(), |r| r.to_wire())
}

/// Issues a ticket for `path` to a client that proved token `access`: the path must be
/// one that token reaches and must exist.
pub(super) fn issue_ticket(
    session: &mut ServerSession,
    conn: &mut FramedConn,
    (shared, cfg): (&Arc<Shared>, &ServeConfig),
    access: Access,
    path: &[u8],
    lifetime_secs: u32,
) -> Result<String, ServeError> {
    let Access::Token(token) = access else {
        return Err(refuse(
            session,
            conn,
            "a ticket opens one pull; it cannot ask for another ticket".into(),
        ));
    };
    let wire = canonical(path);
    let landed = match land(&cfg.files, token, &wire, false, cfg.caps) {
        Ok(l) => l,
        Err(why) => return Err(refuse(session, conn, why)),
    };
    if let Some(p) = &landed.path {
        if let Err(e) = landed.root.metadata(&p.to_path_buf()) {
            let why = format!("no ticket for {}: {e}", String::from_utf8_lossy(&wire));
            return Err(refuse(session, conn, why));
        }
    }
    let (mut id, mut secret) = ([0u8; 16], [0u8; 32]);
    if getrandom::getrandom(&mut id)
        .and_then(|()| getrandom::getrandom(&mut secret))
        .is_err()
    {
        return Err(refuse(
            session,
            conn,
            "the server's random source failed".into(),
        ));
    }
    let scope = TicketScope {
        token,
        path: wire.clone(),
    };
    let lifetime = Duration::from_secs(u64::from(lifetime_secs));
    let grant = match shared
        .tickets
        .issue(id, secret, scope, lifetime, Instant::now())
    {
        Ok(g) => g,
        Err(why) => return Err(refuse(session, conn, why)),
    };
    session.send_ticket(grant);
    send_all(session, conn).map_err(ServeError::io("sending the ticket"))?;
    Ok(format!(
        "issued a ticket for {} ({lifetime_secs} s, one pull)",
        String::from_utf8_lossy(&wire)
    ))
}

/// Whether a pull request of a session that proved a ticket stays within it: a pull of
/// exactly the ticket's path. The words to refuse with otherwise.
pub(super) fn within_ticket(scope: &TicketScope, push: bool, path: &[u8]) -> Result<usize, String> {
    if push {
        return Err("a ticket opens its path for reading only: pull it".into());
    }
    if canonical(path) != scope.path {
        return Err(format!(
            "the ticket is for {}, not {}",
            String::from_utf8_lossy(&scope.path),
            String::from_utf8_lossy(path)
        ));
    }
    Ok(scope.token)
}

/// Runs a relayed pull for a client that proved token `access`: lands the destination
/// as a push's would, pulls from the source with the ticket into it, and tells the
/// client its progress and end.
pub(super) fn run_relay(
    session: &mut ServerSession,
    mut conn: FramedConn,
    (shared, cfg): (&Arc<Shared>, &ServeConfig),
    access: Access,
    pull: RelayPull,
) -> Result<String, ServeError> {
    let Access::Token(token) = access else {
        return Err(refuse(
            session,
            &mut conn,
            "a ticket opens one pull; it cannot start a relayed one".into(),
        ));
    };
    let opts = pull.options;
    if opts.delete || opts.delta || opts.answered_ahead {
        return Err(refuse(
            session,
            &mut conn,
            "a third-party copy takes no --delete and no sync rules (copy it with cp, or \
             sync through this host)"
                .into(),
        ));
    }
    // Where the client would have this server connect: resolved once, here, and only
    // to an address `serve --relay-from` allows (the pull dials that address).
    let server = match allowed_source(&pull.source, &cfg.relay_from) {
        Ok(s) => s,
        Err(why) => return Err(refuse(session, &mut conn, why)),
    };
    let landed = match land(&cfg.files, token, &pull.dest_path, true, cfg.caps) {
        Ok(l) => l,
        Err(why) => return Err(refuse(session, &mut conn, why)),
    };
    if let (true, Some(p)) = (landed.dir_required, &landed.path) {
        let is_dir = landed
            .root
            .metadata(&p.to_path_buf())
            .is_ok_and(|m| m.is_dir());
        if let Err(e) = require_directory(true, is_dir, p.as_bytes()) {
            return Err(refuse(session, &mut conn, e.to_string()));
        }
    }
    // The pull's chunks and buffers, reserved from the budget once the pull knows them.
    let held: Arc<Mutex<Option<MemoryHold>>> = Arc::default();
    let area = landed.area.map(str::to_string);
    let target = RecvTarget {
        root: landed.root.clone(),
        target: landed.path,
        no_clobber: opts.no_clobber,
        checksum_only: opts.checksum_only,
        sync: opts.sync,
        keep_setuid: cfg.keep_setuid,
        // The pull sets what the source may name.
        expect: None,
        caps: landed.caps,
        delta: None,
        delete: None,
        answered_ahead: false,
        share: pull.share,
        is_dir: pull.dest_is_dir,
        hashed_ahead: None,
        // Set by the copy from the source's features.
        answer_keepalive: false,
    };
    let source = pull.source.clone();
    let cp = CpConfig {
        server,
        remote_path: pull.source_path,
        user_paths: pull.source_user_paths,
        job: CpJob::Relay { target },
        credential: Credential::Ticket(pull.ticket),
        security: Security {
            trust: ServerTrust::Pinned(Fingerprint(pull.certificate)),
            encryption: if pull.plain_data {
                Encryption::Off
            } else {
                Encryption::On
            },
        },
        recursive: opts.recursive,
        no_clobber: opts.no_clobber,
        sync: opts.sync,
        checksum_only: opts.checksum_only,
        keep_setuid: cfg.keep_setuid,
        streams: (pull.streams > 0).then_some(pull.streams),
        jump_start: pull.jump_start,
        rate_bps: (pull.rate_bps > 0).then_some(pull.rate_bps),
        window: (pull.window_bytes > 0).then_some(pull.window_bytes),
        congestion: (!pull.congestion.is_empty()).then_some(pull.congestion),
        chunk_size: (pull.chunk_size > 0).then_some(pull.chunk_size),
        delta: None,
        filter: Filter::default(),
        delete: false,
        hard_links: opts.hard_links,
        memory_gate: Some(memory_gate(shared, &held)),
        hashed_ahead: None,
    };
    let progress = Arc::new(Progress::default());
    let started = Instant::now();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let telemetry = std::sync::Mutex::new(None::<(CpTelemetry, u16)>);
    let mut client_gone = false;
    let result = std::thread::scope(|scope| {
        let (pulling, telemetry) = (progress.clone(), &telemetry);
        // The pull's thread inherits this one's user (an area's), as its own threads do.
        scope.spawn(move || {
            let mut on_start = |s: &CpStart| {
                if let Ok(mut t) = telemetry.lock() {
                    *t = CpTelemetry::start(s, &pulling, None).map(|t| (t, s.streams));
                }
            };
            let _ = done_tx.send(run_cp(cp, pulling.clone(), &mut on_start));
        });
        loop {
            match done_rx.recv_timeout(PROGRESS_EVERY) {
                Ok(result) => break result,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    break Err(crate::cp::CpError::Internal(
                        "the relayed pull's thread ended without a result",
                    ))
                }
                Err(_) if client_gone => {}
                Err(_) => {
                    let streams = telemetry
                        .lock()
                        .ok()
                        .and_then(|t| t.as_ref().map(|t| t.1))
                        .unwrap_or(0);
                    session.send_relay_progress(progress_now(&progress, started, streams));
                    // The client may have gone: the copy goes on to its end, as a
                    // pull this server's user started would.
                    client_gone = send_all(session, &mut conn).is_err();
                }
            }
        }
    });
    let verdict = telemetry
        .into_inner()
        .ok()
        .flatten()
        .map(|(t, _)| t.verdict());
    match result {
        Ok(report) => {
            shared
                .metrics
                .moved(0, report.moved_bytes, report.seconds, area.as_deref());
            let done = relay_done(
                &report,
                verdict.map(|v| format!("{}: {}", v.limited_by_text, v.advice)),
            );
            let line = format!(
                "pulled from {source} for the client: {} files ok, {} skipped, {} failed, {:.3} GB in {:.2} s; {}",
                report.files_ok,
                report.files_skipped,
                report.failed.len(),
                report.moved_bytes as f64 / 1e9,
                report.seconds,
                held.lock()
                    .ok()
                    .and_then(|h| h.as_ref().map(MemoryHold::describe))
                    .unwrap_or_default()
            );
            session.send_relay_done(done);
            if !client_gone {
                send_all(session, &mut conn).map_err(ServeError::io("sending the relay's end"))?;
            }
            Ok(line)
        }
        Err(e) => {
            let hint = match &e {
                // The destination cannot reach the source from where it is.
                crate::cp::CpError::Setup(
                    crate::transport::BenchError::Connect { .. }
                    | crate::transport::BenchError::Resolve { .. },
                ) => {
                    " (this server cannot reach the source by the name the client gave: \
                      name it as this server sees it, open the source's port to this \
                      server, or copy in two steps through a host that reaches both)"
                }
                _ => e.rerun_hint(),
            };
            let why = format!("pulling from {source}: {e}{hint}");
            session.abort(ErrorCode::Aborted, why.clone());
            let _ = send_all(session, &mut conn);
            Err(ServeError::Refused { reason: why })
        }
    }
}

/// The gate of a relayed pull's memory (see [`MemoryGate`]): once the pull knows its
/// streams, chunk and buffers, they are reserved from the server's budget as a push's
/// are (the chunk made smaller to fit), held in `held` until the pull ends.
fn memory_gate(shared: &Arc<Shared>, held: &Arc<Mutex<Option<MemoryHold>>>) -> MemoryGate {
    let (shared, held) = (shared.clone(), held.clone());
    Arc::new(move |streams: u16, chunk: u64, choice: &BufferChoice| {
        let mut need = MemoryNeed {
            streams,
            chunk_bytes: chunk,
            socket_bytes: socket_bytes(Side::Receive, choice, &crate::host::host_facts()),
        };
        if let Some(fitted) = shared.memory.fit_chunk(need) {
            need.chunk_bytes = fitted;
        }
        let hold = MemoryHold::reserve(&shared.memory, need)?;
        if let Ok(mut h) = held.lock() {
            *h = Some(hold);
        }
        Ok(need.chunk_bytes)
    })
}

/// The address to pull from: `source` resolved, the first of its addresses `relay_from`
/// allows (with every address allowed, the name itself, so the pull may try them all).
fn allowed_source(source: &str, relay_from: &RelayFrom) -> Result<String, String> {
    if *relay_from == RelayFrom::Anywhere {
        return Ok(source.to_string());
    }
    let addrs = resolve(source, DEFAULT_PORT).map_err(|e| format!("the source: {e}"))?;
    addrs
        .iter()
        .find(|a| relay_from.allows(a.ip()))
        .map(|a| a.to_string())
        .ok_or_else(|| {
            format!(
                "this server pulls for third-party copies only from {} (serve --relay-from), \
                 and {source} is at {}",
                relay_from.describe(),
                addrs
                    .iter()
                    .map(|a| a.ip().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// The progress so far, for the client.
fn progress_now(progress: &Progress, started: Instant, streams: u16) -> RelayProgress {
    let (done, total, files_done, files_total) = progress.snapshot();
    let moved = progress
        .stream_counters()
        .map_or(0, |c| (0..usize::from(streams)).map(|i| c.get(i)).sum());
    RelayProgress {
        elapsed_ms: started.elapsed().as_millis().min(u128::from(u64::MAX)) as u64,
        files_total: files_total.min(u64::from(u32::MAX)) as u32,
        files_done: files_done.min(u64::from(u32::MAX)) as u32,
        bytes_total: total,
        bytes_done: done,
        moved_bytes: moved,
        streams,
    }
}

/// The end the client is told.
fn relay_done(report: &CpReport, limited_by: Option<String>) -> RelayDone {
    let count = |n: u64| n.min(u64::from(u32::MAX)) as u32;
    RelayDone {
        elapsed_ms: (report.seconds * 1e3) as u64,
        files_ok: count(report.files_ok),
        files_skipped: count(report.files_skipped),
        files_failed: count(report.failed.len() as u64),
        bytes: report.bytes,
        moved_bytes: report.moved_bytes,
        resumed_bytes: report.resumed_bytes,
        streams: report.start.streams,
        rtt_us: report.start.rtt.as_micros().min(u128::from(u32::MAX)) as u32,
        failures: report.failed.clone(),
        limited_by: limited_by.unwrap_or_default(),
    }
}
