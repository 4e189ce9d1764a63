//! One bench or cp session on `longhaul serve`, once its client has proved the token: a
//! session slot (or "busy"), the request, the transport plan, the data connections, and
//! then the run ([`drive`]) or the file transfer ([`super::transfer`]). The accept loop and
//! the connection handshakes are in [`super::server`] and [`super::conn`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use longhaul_proto::{
    Access, BenchParams, BenchReady, Direction, ErrorCode, Message, ProtoError, ServerEvent,
    ServerSession,
};

use super::door::{NoSlot, PendingConn, SessionSlot};
use super::error::ServeError;
use super::memory::{socket_bytes, MemoryHold};
use super::tickets::TicketScope;
use crate::daemon::transfer::serve_transfer;
use crate::datarun::run::{DataRun, Role, SenderPlan};
use crate::host;
use crate::jump::ServerJump;
use crate::transport::control::{ControlLink, Incoming};
use crate::transport::framed::{Frame, FramedConn};
use crate::transport::sockopts;
use longhaul_policy::{MemoryNeed, Side, TransportRequest, Window};
use longhaul_proto::transfer::TransferMessage;

use super::server::{
    recv_error, refuse, send_all, send_queued, widen_window_scale, Attach, ServeConfig, Shared,
};

/// Takes a session slot for a client that just proved the token, waiting in line when
/// every slot is taken; tells the client "busy" when none comes.
fn take_slot(
    pending: &mut PendingConn,
    session: &mut ServerSession,
    conn: &mut FramedConn,
) -> Result<SessionSlot, ServeError> {
    pending.proved();
    let limits = pending.door().limits();
    match pending.door().session_slot(pending.peer()) {
        Ok(slot) => Ok(slot),
        Err(why) => {
            let message = match why {
                NoSlot::LineFull => format!(
                    "the server runs {} sessions and {} more wait for one; try again later",
                    limits.max_sessions, limits.max_waiting
                ),
                NoSlot::Waited(w) => format!(
                    "the server runs {} sessions and none ended within {:.0} s; try again later",
                    limits.max_sessions,
                    w.as_secs_f64()
                ),
            };
            // Drop the welcome the session queued: the client gets the refusal instead.
            while session.poll_transmit().is_some() {}
            let _ = conn.send(&Message::Error {
                code: ErrorCode::Busy,
                message,
            });
            Err(ServeError::Busy)
        }
    }
}

/// What a session's client proved, for the server's counters and `once`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Proof {
    /// Nothing (yet).
    #[default]
    Nothing,
    /// A token or a ticket: the session's outcome is the server's business (see
    /// [`ServeConfig::once`]).
    Session,
    /// A token, and the session only issued a ticket: a third-party copy's source serves
    /// the ticket's pull next, so `once` does not end with it.
    TicketIssued,
}

/// Runs a session from its client's hello to its end; `proved` says what the client
/// proved.
pub(super) fn run_session(
    mut conn: FramedConn,
    hello: Message,
    mut session: ServerSession,
    mut pending: PendingConn,
    shared: &Arc<Shared>,
    cfg: &ServeConfig,
    proved: &mut Proof,
) -> Result<String, ServeError> {
    let peer = pending.peer();
    let id = session.session_id();
    let mut msg = hello;
    // Held from the proof of the token to the end of the session.
    let mut slot: Option<SessionSlot> = None;
    // Counted as under way while the slot is held.
    let mut _active = None;
    // Handshake and parameters.
    let (secret, params, plain_data) = {
        let mut secret = None;
        let mut plain_data = false;
        let mut peer_features = 0;
        let mut access = Access::Token(0);
        // What a ticket's holder may pull (a session that proved a ticket).
        let mut ticket: Option<TicketScope> = None;
        loop {
            let r = session.handle(msg);
            let mut events: Vec<ServerEvent> =
                std::iter::from_fn(|| session.poll_event()).collect();
            // A ticket's proof: the ticket is looked up (and used up) before anything is
            // answered.
            let presented = events.iter().find_map(|e| match e {
                ServerEvent::TicketPresented { id } => Some(*id),
                _ => None,
            });
            if let Some(id) = presented {
                match shared.tickets.take(&id, Instant::now()) {
                    Ok(p) => {
                        if let Err(e) = session.ticket_found(&p.secret) {
                            let _ = send_all(&mut session, &mut conn);
                            return Err(e.into());
                        }
                        ticket = Some(p.scope);
                        events.extend(std::iter::from_fn(|| session.poll_event()));
                    }
                    Err(why) => {
                        session.ticket_refused(why.clone());
                        let _ = send_all(&mut session, &mut conn);
                        // The client's request follows its proof in the same flight:
                        // read it away, so a reset does not destroy the refusal.
                        crate::transport::control::close_gracefully(
                            conn.stream(),
                            Duration::from_secs(2),
                        );
                        return Err(ServeError::Refused { reason: why });
                    }
                }
            }
            let proven = events.iter().find_map(|e| match e {
                ServerEvent::Authenticated { secret, .. } => Some(secret),
                _ => None,
            });
            if let (true, Some(s)) = (r.is_ok(), proven) {
                // Its data connections, waiting at the door, can be checked now.
                shared.attach.prove(id, s.clone());
            }
            if r.is_ok() && slot.is_none() && proven.is_some() {
                *proved = Proof::Session;
                shared
                    .sessions_proved
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // The welcome goes out once the session has a slot.
                slot = Some(take_slot(&mut pending, &mut session, &mut conn)?);
                _active = Some(shared.metrics.session_started());
            }
            send_all(&mut session, &mut conn).map_err(ServeError::io("answering the handshake"))?;
            r?;
            let mut params = None;
            for ev in events {
                match ev {
                    ServerEvent::Authenticated {
                        secret: s,
                        access: a,
                        features,
                    } => {
                        secret = Some(s);
                        access = a;
                        plain_data = features & longhaul_proto::features::PLAIN_DATA != 0;
                        peer_features = features;
                    }
                    ServerEvent::Params(_) | ServerEvent::HostReportRequested { .. }
                        if ticket.is_some() =>
                    {
                        let why = "a ticket opens one pull of its path, nothing else".to_string();
                        return Err(refuse(&mut session, &mut conn, why));
                    }
                    ServerEvent::TicketRequested {
                        path,
                        lifetime_secs,
                    } => {
                        *proved = Proof::TicketIssued;
                        return super::relay::issue_ticket(
                            &mut session,
                            &mut conn,
                            (shared, cfg),
                            access,
                            &path,
                            lifetime_secs,
                        );
                    }
                    ServerEvent::FsRequested { op, path } => {
                        return super::namespace::run_fs(
                            &mut session,
                            &mut conn,
                            cfg,
                            access,
                            ticket.is_some(),
                            (op, path),
                        );
                    }
                    ServerEvent::RelayRequested(pull) => {
                        return super::relay::run_relay(
                            &mut session,
                            conn,
                            (shared, cfg),
                            access,
                            *pull,
                        )
                        .map_err(|e| e.with_peer(peer));
                    }
                    ServerEvent::Params(p) => params = Some(p),
                    ServerEvent::HostReportRequested { rate_bps, rtt_us } => {
                        // `tune --peer`: answer and end the session.
                        let line =
                            super::host_report::answer_host_report(&mut session, rate_bps, rtt_us);
                        send_all(&mut session, &mut conn)
                            .map_err(ServeError::io("sending the host report"))?;
                        return line;
                    }
                    _ => {}
                }
            }
            if let (Some(s), Some(p)) = (&secret, params) {
                break (s.clone(), p, plain_data);
            }
            // Each read waits as long as the session's wait allows (see `Wait`).
            if let Some(wait) = session.waiting() {
                let _ = conn.stream().set_read_timeout(Some(wait.limit()));
            }
            msg = match conn.recv_any() {
                Ok(Frame::Bench(m)) => m,
                Ok(Frame::Transfer(TransferMessage::TransferParams(p))) => {
                    let Some(s) = secret.clone() else {
                        return Err(ServeError::Unexpected(
                            "a transfer request before authentication",
                        ));
                    };
                    // A ticket's holder reaches what the ticket's issuer reaches, and
                    // of that only the ticket's path, for a pull.
                    let token = match (&ticket, access) {
                        (Some(scope), _) => {
                            let push = p.direction == longhaul_proto::transfer::CopyDirection::Push;
                            match super::relay::within_ticket(scope, push, &p.path) {
                                Ok(t) => t,
                                Err(why) => {
                                    let refused = refuse(&mut session, &mut conn, why);
                                    // The rules (and a push's list) follow the request:
                                    // read them away, so a reset does not destroy the
                                    // refusal.
                                    crate::transport::control::close_gracefully(
                                        conn.stream(),
                                        Duration::from_secs(2),
                                    );
                                    return Err(refused);
                                }
                            }
                        }
                        (None, Access::Token(t)) => t,
                        (None, Access::Ticket(_)) => {
                            return Err(ServeError::Unexpected("a ticket without its scope"))
                        }
                    };
                    if let Err(e) = session.begin_transfer() {
                        let _ = send_all(&mut session, &mut conn);
                        return Err(e.into());
                    }
                    let mut attach = Attach {
                        shared: shared.clone(),
                        id,
                        secret: s,
                        plain_data,
                        features: peer_features,
                        expected: None,
                        hold: None,
                    };
                    let out = serve_transfer(
                        conn,
                        p,
                        &cfg.files,
                        token,
                        cfg.keep_setuid,
                        cfg.caps,
                        &mut attach,
                    );
                    let memory = attach.hold.as_ref().map(MemoryHold::describe);
                    return out
                        .map(|line| match memory {
                            Some(m) => format!("{line}; {m}"),
                            None => line,
                        })
                        .map_err(|e| e.with_peer(peer));
                }
                Ok(Frame::Transfer(other)) => {
                    let e = ProtoError::Unexpected {
                        got: other.kind(),
                        state: "waiting for the parameters",
                    };
                    let _ = conn.send(&Message::Error {
                        code: ErrorCode::Protocol,
                        message: e.to_string(),
                    });
                    return Err(e.into());
                }
                Err(e) => return Err(recv_error(e)),
            };
        }
    };

    serve_bench(
        conn,
        session,
        (id, secret, plain_data),
        params,
        (shared, cfg),
    )
    .map_err(|e| e.with_peer(peer))
}

/// A bench run, its parameters read and the client proved (the session `id`, its data
/// connections' `secret`, and whether they go without TLS): the transport planned and
/// its memory reserved, the data streams attached and started, run to the end.
fn serve_bench(
    mut conn: FramedConn,
    mut session: ServerSession,
    (id, secret, plain_data): (u64, longhaul_proto::SessionSecret, bool),
    params: BenchParams,
    (shared, cfg): (&Arc<Shared>, &ServeConfig),
) -> Result<String, ServeError> {
    let role = match params.direction {
        Direction::ClientToServer => Role::Receiver,
        Direction::ServerToClient => Role::Sender,
    };
    let rtt = Duration::from_micros(params.rtt_us as u64);
    let request = TransportRequest {
        role,
        streams: params.streams,
        rate_bps: (params.rate_bps > 0).then_some(params.rate_bps),
        window: Window::requested(params.window_bytes, params.window_fixed),
        congestion: (!params.congestion.is_empty()).then(|| params.congestion.clone()),
    };
    let (transport, facts) = match host::plan_transport_here(&request, rtt) {
        Ok(planned) => planned,
        Err(e) => {
            let reason = e.to_string();
            session.reject(format!("on the server: {reason}"));
            let _ = send_all(&mut session, &mut conn);
            return Err(ServeError::Refused { reason });
        }
    };
    let congestion = transport.congestion.clone();
    let side = transport.side;
    let choice = transport.buffer.clone();
    let need = MemoryNeed {
        streams: params.streams,
        chunk_bytes: 0,
        socket_bytes: socket_bytes(side, &choice, &facts),
    };
    let hold = match MemoryHold::reserve(&shared.memory, need) {
        Ok(h) => h,
        Err(reason) => {
            session.reject(format!("on the server: {reason}"));
            let _ = send_all(&mut session, &mut conn);
            return Err(ServeError::Refused { reason });
        }
    };
    let rx_rate = match role {
        Role::Receiver if params.rx_rate_bps > 0 => Some(params.rx_rate_bps),
        Role::Receiver => cfg.rx_rate_bps,
        Role::Sender => None,
    };
    let expected = shared
        .attach
        .expect(id, secret, params.streams, plain_data)?;
    let chosen = longhaul_policy::choice_bytes(&choice);
    if side == Side::Receive {
        widen_window_scale(shared, chosen, &facts);
    }
    // Jump-start asked by the client: bounded by this server's own view, the route's
    // initial windows set before the data connections' handshakes complete here (the
    // client opens them behind the request), removed when the session ends.
    let mut jump = params.jump.map(|ask| {
        ServerJump::for_session(
            &ask,
            conn.stream().tcp(),
            rtt,
            params.streams,
            (chosen, transport.window_bytes),
            role == Role::Sender,
        )
    });
    session.accept(BenchReady {
        facts: facts.clone(),
        rcvbuf_bytes: if side == Side::Receive { chosen } else { 0 },
        sndbuf_bytes: if side == Side::Send { chosen } else { 0 },
        rx_rate_bps: rx_rate.unwrap_or(0),
        jump_start_bps: jump.as_ref().map_or(0, |j| j.start_bps),
        jump_note: jump.as_ref().map(|j| j.note.clone()).unwrap_or_default(),
    });
    send_all(&mut session, &mut conn).map_err(ServeError::io("sending BenchReady"))?;

    // Wait for every data stream.
    let sockets = match expected.collect() {
        Ok(s) => s,
        Err(e) => {
            session.abort(ErrorCode::Aborted, e.to_string());
            let _ = send_all(&mut session, &mut conn);
            return Err(e.into());
        }
    };
    for s in &sockets {
        shared.memory.restore_data_socket(s, &facts);
        sockopts::apply_buffer(s, side, &choice)
            .and_then(|()| sockopts::tune_connected(s.tcp(), congestion.as_deref()))
            .and_then(|()| match rx_rate {
                Some(r) => sockopts::clamp_for_rx_rate(s.tcp(), r, params.streams, rtt).map(drop),
                None => Ok(()),
            })
            .map_err(ServeError::io("setting up a data stream"))?;
    }
    if let Some(j) = jump.as_mut() {
        j.check_windows(sockets.iter().map(|s| s.tcp()));
    }
    session.start();
    send_all(&mut session, &mut conn).map_err(ServeError::io("sending Start"))?;

    let plan = (role == Role::Sender).then(|| SenderPlan {
        mode: params.send_mode,
        pacing_bps: transport.pacing_bps,
        probe: transport.probe.clone(),
        bytes: (params.bytes > 0).then_some(params.bytes),
        jump: jump
            .as_ref()
            .and_then(ServerJump::validator)
            .filter(|_| transport.probe.is_some()),
    });
    let mut run = DataRun::start(role, sockets, plan, params.read_rate_bps)
        .map_err(ServeError::io("starting the data streams"))?;
    let outcome = drive(&mut session, conn, &mut run, &params, role, rtt);
    let jumped = ServerJump::log_note(jump.as_ref(), run.jump_verdict());
    drop(jump);
    outcome.map(|(bytes, secs)| {
        match role {
            Role::Sender => shared.metrics.moved(bytes, 0, secs, None),
            _ => shared.metrics.moved(0, bytes, secs, None),
        }
        format!(
            "{} {} streams ({}), {:.3} GB in {:.2} s = {:.3} Gbit/s; {}{jumped}",
            if role == Role::Sender {
                "sent"
            } else {
                "received"
            },
            params.streams,
            if plain_data {
                "data unencrypted, as the client asked"
            } else {
                "data in TLS"
            },
            bytes as f64 / 1e9,
            secs,
            bytes as f64 * 8.0 / secs.max(1e-6) / 1e9,
            hold.describe()
        )
    })
}

/// Runs the streams to the end, reporting intervals to the client and exchanging results.
fn drive(
    session: &mut ServerSession,
    conn: FramedConn,
    run: &mut DataRun,
    params: &BenchParams,
    role: Role,
    rtt: Duration,
) -> Result<(u64, f64), ServeError> {
    // The shared control link: a reader thread, one coalescing writer, keepalives and a
    // user timeout.
    let link = ControlLink::start(conn).map_err(ServeError::io("starting the control link"))?;
    let interval = Duration::from_millis(params.interval_ms as u64);
    let start = run.started_at();
    let duration = Duration::from_millis(params.duration_ms);
    let deadline = (params.bytes == 0).then(|| start + duration);
    let mut watchdog = longhaul_policy::Watchdog::new(start, duration, params.bytes > 0);
    let probe_every = run.probe_every(rtt);
    let mut next_interval = start + interval;
    let mut next_probe = start + probe_every;
    let mut stopped = false;
    let mut client_gone = false;
    // The jump's verdict goes to the client once (a client that asked for none, or an
    // older one, takes none).
    let mut verdict_told = !session.takes_jump_verdict();
    loop {
        let now = Instant::now();
        if let (Some(d), false) = (deadline, stopped) {
            if now >= d && role == Role::Sender {
                run.stop();
                stopped = true;
            }
        }
        if role == Role::Sender && now >= next_probe {
            run.probe_step();
            next_probe += probe_every;
            if let Some(v) = run.jump_verdict().filter(|_| !verdict_told) {
                verdict_told = true;
                session.send_jump_verdict(crate::jump::outcome_of(v));
                send_queued(session, &link)
                    .map_err(ServeError::io("sending the jump-start verdict"))?;
            }
        }
        if now >= next_interval {
            let r = run.sample();
            session.send_interval(r.report);
            send_queued(session, &link).map_err(ServeError::io("sending an interval report"))?;
            next_interval += interval;
        }
        if run.finished() {
            break;
        }
        if let Some(why) = watchdog.check(now, run.bytes_moved()) {
            run.stop();
            return Err(ServeError::Watchdog { reason: why });
        }
        let mut wake = next_interval;
        if role == Role::Sender {
            wake = wake.min(next_probe);
        }
        let wait = wake
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        match link.recv_timeout(wait) {
            Some(Incoming::Bench(m)) => {
                if let Err(e) = session.handle(m) {
                    run.stop();
                    let _ = send_queued(session, &link);
                    return Err(e.into());
                }
            }
            Some(Incoming::Msg(m)) => {
                run.stop();
                return Err(ServeError::TransferMessageInBench { kind: m.kind() });
            }
            Some(Incoming::PeerError(why)) => {
                run.stop();
                return Err(ServeError::ClientStopped { reason: why });
            }
            Some(Incoming::Lost(_)) if !client_gone => {
                // The client went away: stop sending; the streams end by themselves.
                client_gone = true;
                run.stop();
            }
            _ => {}
        }
    }
    if let Some((stream, cause)) = run.first_error() {
        let e = ServeError::DataStream { stream, cause };
        session.abort(ErrorCode::Aborted, e.to_string());
        let _ = send_queued(session, &link);
        return Err(e);
    }
    if client_gone {
        return Err(ServeError::ClientGone);
    }
    let results = run.results();
    let bytes: u64 = results.streams.iter().map(|s| s.bytes).sum();
    let secs = results
        .streams
        .iter()
        .map(|s| s.elapsed_us)
        .max()
        .unwrap_or(0) as f64
        / 1e6;
    session.send_results(results);
    send_queued(session, &link).map_err(ServeError::io("sending the results"))?;
    // Wait briefly for the client's totals, so both ends close cleanly.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match link.recv_timeout(left) {
            Some(Incoming::Bench(m)) => {
                let done = matches!(m, Message::Results(_));
                session.handle(m)?;
                if done {
                    break;
                }
            }
            _ => break,
        }
    }
    link.mark_finished();
    Ok((bytes, secs))
}
