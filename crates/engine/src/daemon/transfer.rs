//! The server end of `longhaul cp`: checks a `TransferParams` against the served files
//! ([`ServedFiles`]: a daemon's root, or an ssh user's own file system),
//! prepares the receiving target (push) or lists the source (pull), and runs that end. A
//! pull's jump-start ask is bounded by this server's view and carried out as bench's
//! server does ([`ServerJump`]: the route for the session, the sender's pacer at the
//! jump's rate).

use crate::transport::secure::SecureStream;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use longhaul_proto::transfer::{CopyDirection, TransferParams};
use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::answering::{AnsweringError, CopyAnswering, KEEPALIVE};
use longhaul_transfer::request::{answer_chunk_size, check_request};
use longhaul_transfer::require_directory;
use longhaul_transfer::session::recv::SyncRules;
use longhaul_transfer::session::{ListCaps, SendInput};

use super::ServeError;
use crate::cp::recv::{run_receiver, RecvTarget};
use crate::cp::send::{run_sender, SendItem, Sender, SourceRoot};
use crate::cp::walk::{walk_served_filtered, walk_served_root_filtered};
use crate::cp::{CpError, Progress};
use crate::host;
use crate::jump::ServerJump;
use crate::transport::attach::AttachError;
use crate::transport::control::ControlLink;
use crate::transport::framed::FramedConn;
use crate::transport::sockopts;
use longhaul_policy::{MemoryNeed, Role, TransportRequest, Window};

/// How the server connects a session's data streams (implemented by the bench server).
pub trait StreamAttach {
    /// Makes the session ready for `streams` data connections (before the client is told
    /// to open them); `rcvbuf` is the receive buffer the streams will get, if receiving.
    fn expect(&mut self, streams: u16, rcvbuf: Option<u64>) -> Result<(), AttachError>;
    /// Waits for every data connection; gives up once `gone()` says the client is gone.
    fn collect(&mut self, gone: &dyn Fn() -> bool) -> Result<Vec<SecureStream>, AttachError>;
    /// The session's key for chunk MACs.
    fn chunk_key(&self) -> longhaul_proto::ChunkKey;
    /// Reserves the session's memory from the server's budget for the rest of the
    /// transfer; with `cut_chunk` (a push, whose chunks the server holds) the chunk may be
    /// made smaller to fit. Returns the chunk size, or the words to refuse with.
    fn reserve_memory(&mut self, need: MemoryNeed, cut_chunk: bool) -> Result<u64, String>;
    /// The features the client announced ([`longhaul_proto::features`]): what a sending
    /// server may tell it (intervals, the jump's verdict, the held rate) and how it may
    /// frame chunks (their hashes after their bytes).
    fn peer_features(&self) -> u64 {
        0
    }
    /// The transfer ended having sent and received these payload bytes in `seconds`, in
    /// exported area `area` if any (for the server's counters).
    fn moved(&mut self, _sent: u64, _received: u64, _seconds: f64, _area: Option<&str>) {}
}

/// The files a server's transfers may reach.
#[derive(Debug, Clone, Default)]
pub enum ServedFiles {
    /// None: transfers are refused (`longhaul serve` without `--root`).
    #[default]
    Nothing,
    /// Everything below a root and nothing outside it (`longhaul serve --root DIR`): the
    /// client's path is relative to the root, `..` and absolute paths refused.
    Root(Arc<ServedRoot>),
    /// Several roots, each opened by its own tokens (`serve --config` with areas): the
    /// client's path starts with the area's name, and is relative to its root below that.
    Areas(Arc<super::Areas>),
    /// The ssh user's own files (`longhaul ssh-server`, started by the user over ssh, with
    /// the user's rights): the client's path is absolute or relative to `home`, `..`
    /// allowed, symlinks followed ([`ServedRoot::open_unconfined`]).
    User {
        /// `/`, unconfined.
        root: Arc<ServedRoot>,
        /// Where relative paths start (the process's `$HOME`, as sshd set it).
        home: PathBuf,
    },
}

/// Runs one transfer for an authenticated session whose client proved `token` (its
/// place in the server's keyring); returns a log line. A request this server will not
/// serve is [`ServeError::Refused`] with the words the client was sent. `caps` bound what
/// one push may write (`serve --max-bytes`, `--max-files`) where the files are not an
/// area's, which has its own.
#[allow(clippy::too_many_arguments)]
pub fn serve_transfer(
    mut conn: FramedConn,
    params: TransferParams,
    files: &ServedFiles,
    token: usize,
    keep_setuid: bool,
    caps: ListCaps,
    attach: &mut dyn StreamAttach,
) -> Result<String, ServeError> {
    // The opening's machine: the rules, the keepalives of a long walk, the answer.
    let mut answering = CopyAnswering::new(params.clone());
    let refuse = |conn: &mut FramedConn, answering: &mut CopyAnswering, why: String| {
        let refused = answering.refuse(why);
        send_refusal(conn, answering, refused)
    };
    // The rules come right behind the request (empty when there are none).
    let frame = conn.recv_any().map_err(|e| ServeError::Refused {
        reason: format!("reading the filter rules: {e}"),
    })?;
    if let Err(refused) = answering.handle(frame.into(), Instant::now()) {
        return send_refusal(&mut conn, &mut answering, refused);
    }
    let filter = answering.filter().cloned().unwrap_or_default();
    let push = params.direction == CopyDirection::Push;
    // The path asked for, and whether a trailing `/` requires a directory there.
    let (root, path, dir_required, caps, area) =
        match super::reach::land(files, token, &params.path, push, caps) {
            Ok(l) => (l.root, l.path, l.dir_required, l.caps, l.area),
            Err(why) => return refuse(&mut conn, &mut answering, why),
        };
    if let Err(why) = check_request(&params) {
        return refuse(&mut conn, &mut answering, why.to_string());
    }
    let opts = params.options;
    let checksum_only = opts.checksum_only;
    let recursive = opts.recursive;
    let hard_links = opts.hard_links;
    let rtt = Duration::from_micros(u64::from(params.rtt_us));
    // `dir/` must be an existing directory: a push's destination, or a pull's source
    // (a missing source is the walk's to report, as for any source).
    if let (true, Some(p)) = (dir_required, &path) {
        let is_dir = match root.metadata(&p.to_path_buf()) {
            Ok(m) => Some(m.is_dir()),
            Err(_) if push => Some(false),
            Err(_) => None,
        };
        if let Some(Err(e)) = is_dir.map(|d| require_directory(true, d, p.as_bytes())) {
            return refuse(&mut conn, &mut answering, e.to_string());
        }
    }

    // The same decisions as the client and bench, from the request: a fixed window
    // (`--window SIZE`) is set as is, with no autotuning and no rate probe.
    let plan = match host::plan_transport_here(
        &TransportRequest {
            role: if push { Role::Receiver } else { Role::Sender },
            streams: params.streams,
            rate_bps: (params.rate_bps > 0).then_some(params.rate_bps),
            window: Window::requested(params.window_bytes, opts.window_fixed),
            congestion: (!params.congestion.is_empty()).then(|| params.congestion.clone()),
        },
        rtt,
    ) {
        Ok(planned) => planned,
        Err(e) => return refuse(&mut conn, &mut answering, format!("on the server, {e}")),
    };
    let (plan, facts) = plan;
    let (side, choice) = (plan.side, plan.buffer.clone());
    // Jump-start asked by the client (a pull from a path it has seen): bounded by this
    // server's own view, its route's initial windows set before the data connections'
    // handshakes complete here (the client opens them right behind the request, so their
    // ACKs arrive a round trip after it): before the walk, which may take long. Held
    // until the transfer ends, also when it fails.
    let mut jump = params.jump.map(|ask| {
        ServerJump::for_session(
            &ask,
            conn.stream().tcp(),
            rtt,
            params.streams,
            (longhaul_policy::choice_bytes(&choice), plan.window_bytes),
            !push,
        )
    });

    // Pull: list the source now, to choose the chunk size from its size.
    let mut warnings = Vec::new();
    let items: Vec<SendItem> = if push {
        Vec::new()
    } else {
        let listed = walk_keeping_alive(
            (&mut conn, &mut answering),
            root,
            path.as_ref(),
            (recursive, hard_links, &filter),
            &mut warnings,
        );
        match listed {
            Ok(v) if v.is_empty() => {
                let why = if warnings.is_empty() {
                    "nothing to send".to_string()
                } else {
                    warnings.join("; ")
                };
                return refuse(&mut conn, &mut answering, why);
            }
            Ok(v) => v
                .into_iter()
                .map(|s| SendItem {
                    entry: s.entry,
                    origin: s.origin,
                })
                .collect(),
            Err(e) => return refuse(&mut conn, &mut answering, e.to_string()),
        }
    };
    let chunk_size = answer_chunk_size(&params, items.iter().map(|i| i.entry.size).sum());
    // A receiving stream holds a whole chunk: a push's chunks count, and may be cut.
    let need = MemoryNeed {
        streams: params.streams,
        chunk_bytes: if push { chunk_size } else { 0 },
        socket_bytes: super::memory::socket_bytes(side, &choice, &facts),
    };
    let chunk_size = match attach.reserve_memory(need, push) {
        Ok(fitted) if push => fitted,
        Ok(_) => chunk_size,
        Err(why) => return refuse(&mut conn, &mut answering, why),
    };
    let congestion = plan.congestion.clone().unwrap_or_default();
    attach.expect(
        params.streams,
        push.then(|| longhaul_policy::choice_bytes(&choice)),
    )?;
    answering.answer(
        chunk_size,
        jump.as_ref().map_or(0, |j| j.start_bps),
        jump.as_ref().map(|j| j.note.clone()).unwrap_or_default(),
    );
    send_answering(&mut conn, &mut answering).map_err(ServeError::io("sending TransferReady"))?;
    let chunk_key = attach.chunk_key();
    // The data connections attach while the file list crosses, either way: a push's
    // receiver and a pull's sender take them once the list is out (its answer and the
    // attachments then arrive together: a round trip less before data on a long path).
    let peer = attach.peer_features();
    let takes = |f: u64| peer & f != 0;
    let takes_intervals = takes(longhaul_proto::features::TRANSFER_INTERVALS);
    let takes_verdict = takes(longhaul_proto::features::JUMP_VERDICT);
    let takes_held = takes(longhaul_proto::features::HELD_RATE);
    let takes_hash_after = takes(longhaul_proto::features::HASH_AFTER);
    let link = ControlLink::start(conn).map_err(ServeError::io("starting the control link"))?;
    let gone = link.gone();
    let mut collect = || -> Result<Vec<SecureStream>, CpError> {
        let socks = attach.collect(&|| gone.load(std::sync::atomic::Ordering::Relaxed))?;
        for s in &socks {
            sockopts::apply_buffer(s, side, &choice)
                .and_then(|()| sockopts::apply_connected(s.tcp(), &plan))
                .map_err(|e| CpError::io("setting up a data stream", e))?;
        }
        Ok(socks)
    };
    let progress = Arc::new(Progress::default());
    let started = std::time::Instant::now();
    let shown = path
        .as_ref()
        .map(|p| String::from_utf8_lossy(p.as_bytes()).into_owned())
        .unwrap_or_else(|| ".".into());
    if push {
        let target = RecvTarget {
            root: root.clone(),
            target: path,
            no_clobber: opts.no_clobber,
            checksum_only,
            sync: opts.sync,
            keep_setuid,
            // A push's list is the client's own choice of files; the root confines it.
            expect: None,
            caps,
            delta: opts.delta.then_some(SyncRules {
                checksum: opts.checksum,
                contents: opts.contents,
                inplace: opts.inplace,
                dry_run: opts.dry_run,
            }),
            delete: opts.delete.then(|| Arc::new(filter)),
            // A push's list is answered by this end (refused above when asked otherwise).
            answered_ahead: false,
            share: None,
            is_dir: None,
            hashed_ahead: None,
            answer_keepalive: takes(longhaul_proto::features::ANSWER_KEEPALIVE),
        };
        let out = run_receiver(
            target,
            chunk_size,
            link,
            collect,
            chunk_key,
            progress.clone(),
        )?;
        attach.moved(0, out.received_bytes, started.elapsed().as_secs_f64(), area);
        Ok(format!(
            "received into {shown}: {} files ok, {} skipped, {} failed, {} deleted, {:.3} GB in {:.2} s ({} resumed bytes, {} taken from old copies); CPU by stage: {}",
            out.files_ok,
            out.files_skipped,
            out.failed.len(),
            out.deleted,
            out.received_bytes as f64 / 1e9,
            started.elapsed().as_secs_f64(),
            out.resumed_bytes,
            out.reused_bytes,
            progress.stages().split().seconds_text()
        ))
    } else {
        let probe = plan.probe.clone();
        let mut sender = Sender::new(
            items,
            SourceRoot::Served(root.clone()),
            chunk_size,
            checksum_only,
            params.streams,
            probe,
        )?;
        if opts.delta && opts.dry_run {
            sender.session.set_dry_run();
        }
        if opts.answered_ahead {
            // The client holds nothing of the list: chunks go with it, not a round trip
            // after it.
            sender
                .session
                .handle(SendInput::AnsweredAhead)
                .map_err(|e| ServeError::Refused {
                    reason: e.to_string(),
                })?;
        }
        if takes_intervals {
            sender.report_every = Some(crate::cp::peer_intervals::REPORT_EVERY);
            sender.report_held = takes_held;
        }
        sender.tell_jump_verdict = takes_verdict;
        sender.hash_after = takes_hash_after;
        sender.answer_keepalive = takes(longhaul_proto::features::ANSWER_KEEPALIVE);
        if takes(longhaul_proto::features::SOURCE_CHANGED) {
            sender.check_sources();
        }
        // The same pacer start and validation as a push's sender and bench's.
        sender.jump = jump.as_ref().and_then(ServerJump::validator);
        if opts.delta {
            // A cache that cannot be opened only costs re-reading.
            sender.hash_cache = crate::cp::hash_cache::HashCache::open_default()
                .ok()
                .map(|c| (c, !opts.checksum));
        }
        let probing = sender.probe.is_some();
        // What the kernel actually gave the first stream, as the log's proof of the plan;
        // whether the jump's route was in place for every data connection.
        let (mut sndbuf, jumping) = (0, &mut jump);
        let streams = || {
            let socks = collect()?;
            if let Some(j) = jumping.as_mut() {
                j.check_windows(socks.iter().map(|s| s.tcp()));
            }
            sndbuf = socks
                .first()
                .and_then(|s| longhaul_sys::socket::send_buffer(s).ok())
                .unwrap_or(0);
            Ok(socks)
        };
        let (out, paced) = run_sender(sender, link, streams, chunk_key, progress.clone())?;
        let window = format!(
            "send buffer {} (SO_SNDBUF {sndbuf}){}, rate probe {}",
            longhaul_policy::describe(&choice),
            if opts.window_fixed { ", fixed" } else { "" },
            if probing { "on" } else { "off" }
        );
        let jumped = ServerJump::log_note(jump.as_ref(), paced.jump);
        attach.moved(out.sent_bytes, 0, started.elapsed().as_secs_f64(), area);
        Ok(format!(
            "sent {shown}: {} files ok, {} failed, {:.3} GB in {:.2} s, congestion {congestion}, {window}{jumped}{}; CPU by stage: {}",
            out.files_ok,
            out.failed.len(),
            out.sent_bytes as f64 / 1e9,
            started.elapsed().as_secs_f64(),
            if warnings.is_empty() {
                String::new()
            } else {
                format!("; {} entries skipped", warnings.len())
            },
            progress.stages().split().seconds_text()
        ))
    }
}

/// A pull's source walked (`path` beneath `root`, or the root itself), while the
/// opening's keepalives keep the client waiting: it reads `TransferReady` with a read
/// timeout (15 s), and a large tree takes longer.
fn walk_keeping_alive(
    (conn, answering): (&mut FramedConn, &mut CopyAnswering),
    root: &ServedRoot,
    path: Option<&longhaul_transfer::path::SafeRelPath>,
    (recursive, hard_links, filter): (bool, bool, &longhaul_transfer::Filter),
    warnings: &mut Vec<String>,
) -> Result<Vec<crate::cp::walk::SourceFile>, crate::cp::walk::WalkError> {
    let walked = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut warn = |w| warnings.push(w);
            let listed = match path {
                Some(p) => walk_served_filtered(root, p, recursive, filter, hard_links, &mut warn),
                None => walk_served_root_filtered(root, recursive, filter, hard_links, &mut warn),
            };
            let _ = walked.0.send(listed);
        });
        loop {
            let wait = answering
                .poll_timeout()
                .map_or(KEEPALIVE, |t| t.saturating_duration_since(Instant::now()));
            match walked.1.recv_timeout(wait) {
                Ok(listed) => break listed,
                Err(RecvTimeoutError::Timeout) => {
                    answering.handle_timeout(Instant::now());
                    let _ = send_answering(conn, answering);
                }
                // The walk panicked (this loop would spin on the closed channel): the
                // scope's end carries the panic on, so this value is never seen.
                Err(RecvTimeoutError::Disconnected) => break Ok(Vec::new()),
            }
        }
    })
}

/// Sends what the opening's machine has queued (a refusal, a keepalive, the answer).
fn send_answering(conn: &mut FramedConn, answering: &mut CopyAnswering) -> std::io::Result<()> {
    while let Some(frame) = answering.poll_transmit() {
        conn.send_control(&frame)?;
    }
    Ok(())
}

/// Sends the refusal the opening's machine queued and ends the session with it.
fn send_refusal(
    conn: &mut FramedConn,
    answering: &mut CopyAnswering,
    AnsweringError::Refused(reason): AnsweringError,
) -> Result<String, ServeError> {
    let _ = send_answering(conn, answering);
    // The client may still be sending its file list: read it away so the refusal is not
    // destroyed by a reset.
    crate::transport::control::close_gracefully(conn.stream(), Duration::from_secs(2));
    Err(ServeError::Refused { reason })
}
