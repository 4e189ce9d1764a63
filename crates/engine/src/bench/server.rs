//! `longhaul serve` for bench runs: accepts control and data connections on one port,
//! authenticates each, runs several sessions at once, and survives misbehaving clients.

use crate::transport::secure::SecureStream;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use longhaul_proto::{
    BenchParams, BenchReady, Direction, ErrorCode, Message, ProtoError, ServerEvent, ServerSession,
    Token,
};
use socket2::{Domain, Protocol, Socket, Type};

pub use super::door::ServeLimits;
use super::door::{Door, NoSlot, PendingConn, SessionSlot};
use super::memory::{default_budget, socket_bytes, MemoryHold, ServerMemory};
use super::run::{DataRun, Role, SenderPlan};
use super::serve_conn::handle_connection;
use super::serve_error::ServeError;
use crate::cp::serve::{serve_transfer, ServedFiles, StreamAttach};
use crate::host;
use crate::jump::ServerJump;
use crate::transport::attach::{AttachError, AttachTable, Expected};
use crate::transport::control::{ControlLink, Incoming};
use crate::transport::framed::{Frame, FramedConn, RecvError};
use crate::transport::sockopts;
use crate::transport::tls::ServerTls;
use longhaul_policy::{MemoryNeed, Side, TransportRequest, Window, MAX_WINDOW};
use longhaul_proto::transfer::TransferMessage;
use longhaul_proto::SessionSecret;
use longhaul_transfer::session::ListCaps;

/// Longest wait of the accept loop before it looks at its stop flag again.
const STOP_CHECK: Duration = Duration::from_millis(100);
/// Concurrent sessions a server runs by default; more wait in line for a slot (see
/// [`ServeLimits`]).
pub const MAX_SESSIONS: usize = 64;
/// Stack of a connection's thread: the handshake, then (for a control connection) the
/// session's own loop; the heavy lifting runs on the session's stream threads.
const CONN_STACK: usize = 256 * 1024;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address and port to listen on (`[::]:5290` accepts IPv4 too).
    pub listen: SocketAddr,
    /// Shared token.
    pub token: Token,
    /// Serve one session, then return.
    pub once: bool,
    /// Receiver-side pacing applied to every run this server receives, bit/s.
    pub rx_rate_bps: Option<u64>,
    /// What `longhaul cp` may read and write: nothing, a daemon's `--root`, or (for
    /// `ssh-server`) the ssh user's own files.
    pub files: ServedFiles,
    /// The certificate and key every connection's TLS presents.
    pub tls: ServerTls,
    /// Keep set-user-ID, set-group-ID and sticky bits of pushed files and directories
    /// (`serve --keep-setuid`); by default they are dropped, so a token holder cannot
    /// place a setuid program (see `longhaul_transfer::mode`).
    pub keep_setuid: bool,
    /// Caps on what one push may write (`serve --max-bytes`, `--max-files`).
    pub caps: ListCaps,
}

/// One line the server logs about a session.
pub type LogFn = Arc<dyn Fn(&str) + Send + Sync>;

pub(super) struct Shared {
    /// The listening socket, so a session can raise its receive buffer (see
    /// [`widen_window_scale`]).
    listener: Option<Socket>,
    pub(super) attach: Arc<AttachTable>,
    /// Who is waiting at the door, and the session slots.
    door: Arc<Door>,
    pub(super) next_id: AtomicU64,
    /// The memory budget, and the listener's buffer state (see [`super::memory`]).
    pub(super) memory: Arc<ServerMemory>,
    /// Lines about connections (refused, failed handshakes, session errors) are limited,
    /// so a flood cannot fill the log.
    conn_log: std::sync::Mutex<longhaul_policy::LogLimiter>,
}

impl Shared {
    /// Logs a line about one connection, within the server's log budget; the next line
    /// printed after some were left out says how many.
    pub(super) fn log_conn(&self, log: &LogFn, line: &str) {
        let verdict = self
            .conn_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .line(std::time::Instant::now());
        match verdict {
            longhaul_policy::LogLine::Drop => {}
            longhaul_policy::LogLine::Print { suppressed: 0 } => log(line),
            longhaul_policy::LogLine::Print { suppressed } => log(&left_out(suppressed, line)),
        }
    }

    /// Logs a line that is always printed (a session's outcome), with the count of lines
    /// about connections left out before it, if any.
    pub(super) fn log_always(&self, log: &LogFn, line: &str) {
        let suppressed = self
            .conn_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_suppressed();
        match suppressed {
            0 => log(line),
            n => log(&left_out(n, line)),
        }
    }
}

fn left_out(suppressed: u64, line: &str) -> String {
    format!("({suppressed} lines about connections left out: too many to log) {line}")
}

/// A bound server.
pub struct Server {
    listener: TcpListener,
    cfg: ServeConfig,
    shared: Arc<Shared>,
    log: LogFn,
}

impl Server {
    /// Binds the listening socket.
    pub fn bind(cfg: ServeConfig, log: LogFn) -> io::Result<Self> {
        let sock = Socket::new(
            Domain::for_address(cfg.listen),
            Type::STREAM,
            Some(Protocol::TCP),
        )?;
        sock.set_reuse_address(true)?;
        if cfg.listen.is_ipv6() {
            // Dual stack: [::] also accepts IPv4 clients.
            let _ = sock.set_only_v6(false);
        }
        sock.bind(&cfg.listen.into()).map_err(|e| {
            if e.kind() == io::ErrorKind::AddrInUse {
                io::Error::new(
                    e.kind(),
                    format!(
                        "port {} is in use (another longhaul serve?); pick another with --port",
                        cfg.listen.port()
                    ),
                )
            } else {
                e
            }
        })?;
        // What an accepted socket gets by default, before any session raises the
        // listener's buffer.
        let default_rcvbuf = longhaul_sys::socket::receive_buffer(&sock).unwrap_or(0);
        // Every client opens its control and data connections at once (up to 257).
        sock.listen(1024)?;
        let listener: TcpListener = sock.into();
        let shared = Arc::new(Shared {
            listener: listener.try_clone().ok().map(Socket::from),
            attach: Arc::default(),
            door: Arc::new(Door::new(ServeLimits::default())),
            next_id: AtomicU64::new(0),
            conn_log: std::sync::Mutex::new(longhaul_policy::LogLimiter::for_server(
                std::time::Instant::now(),
            )),
            memory: Arc::new(ServerMemory::new(default_budget(), default_rcvbuf)),
        });
        // Data connections arrive with the control connection, before any request says
        // what window they need (docs/startup.md), and a window scale is fixed in the
        // handshake: as root the listener's buffer is raised at once. Accepted sockets
        // are set back until their session proves itself (see `super::memory`).
        if longhaul_sys::socket::can_force_buffers() {
            if let Some(l) = &shared.listener {
                shared.memory.mark_widened();
                let _ = longhaul_sys::socket::set_receive_buffer(l, MAX_WINDOW, true);
            }
        }
        let mut seed = [0u8; 8];
        getrandom::getrandom(&mut seed).map_err(|e| io::Error::other(e.to_string()))?;
        shared
            .next_id
            .store(u64::from_le_bytes(seed) >> 16, Ordering::Relaxed);
        Ok(Self {
            listener,
            cfg,
            shared,
            log,
        })
    }

    /// Replaces the default [`ServeLimits`] (before [`Server::serve`]).
    pub fn with_limits(mut self, limits: ServeLimits) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.door = Arc::new(Door::new(limits));
        }
        self
    }

    /// Sets the memory budget, bytes (`serve --memory`; default a quarter of the RAM).
    pub fn with_memory(self, bytes: u64) -> Self {
        self.shared.memory.set_total(bytes);
        self
    }

    /// The memory budget and what is reserved of it, for logs.
    pub fn memory_report(&self) -> String {
        self.shared.memory.describe()
    }

    /// A count of the sessions begun so far (control connections that said hello),
    /// readable while [`Server::serve`] runs: what `ssh-server` watches to give up when
    /// no client comes. Only its changes mean anything.
    pub fn sessions_begun(&self) -> impl Fn() -> u64 + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || shared.next_id.load(Ordering::Relaxed)
    }

    /// The address actually bound (port 0 becomes the chosen port).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections until an I/O error on the listener, until `stop` is raised, or
    /// after the first session with `once`. Returns the first session's outcome with `once`.
    pub fn serve(self, stop: Option<Arc<AtomicBool>>) -> io::Result<Result<(), ServeError>> {
        let (done_tx, done_rx) = mpsc::channel::<Result<(), ServeError>>();
        self.listener.set_nonblocking(true)?;
        loop {
            if self.cfg.once {
                if let Ok(r) = done_rx.try_recv() {
                    return Ok(r);
                }
            }
            if stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
                return Ok(Ok(()));
            }
            // Close the pending connections past their deadline. Wake at once for a
            // connection; at least every STOP_CHECK for `stop`, `once` and the next
            // deadline (no sleeping between looks).
            let wait = self.shared.door.expire().map_or(STOP_CHECK, |due| {
                due.saturating_duration_since(Instant::now())
                    .clamp(Duration::from_millis(1), STOP_CHECK)
            });
            if !longhaul_sys::socket::wait_readable(&self.listener, wait)? {
                continue;
            }
            let (stream, peer) = match self.listener.accept() {
                Ok(x) => x,
                // Another waiter took it, or the client gave up: look again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_transient(&e) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => return Err(e),
            };
            // Accepted sockets do not inherit O_NONBLOCK on Linux; make sure anyway.
            stream.set_nonblocking(false)?;
            // Not the listener's raised buffer: an unauthenticated peer gets the default.
            self.shared.memory.shrink_accepted(&stream);
            // Room is made by evicting the oldest pending connection, never by refusing
            // this one (see `longhaul_policy::admission`).
            let Some(pending) = self.shared.door.admit(&stream, peer) else {
                continue;
            };
            let shared = self.shared.clone();
            let cfg = self.cfg.clone();
            let log = self.log.clone();
            let done = done_tx.clone();
            // On failure the closure (and with it the connection and its place at the
            // door) is dropped.
            let _ = std::thread::Builder::new()
                .name("lh-conn".into())
                .stack_size(CONN_STACK)
                .spawn(move || {
                    if let Some(outcome) = handle_connection(stream, pending, &shared, &cfg, &log) {
                        let _ = done.send(outcome);
                    }
                });
        }
    }
}

/// The window scale of a connection is fixed in its handshake, from the listening
/// socket's receive buffer or, when that is not set, from the larger of tcp_rmem's ceiling
/// and rmem_max. When a session needs a window beyond that, the listener's buffer is raised
/// (as root) before the data connections arrive. The listener keeps the larger buffer
/// afterwards, which only matters to later runs that would have been autotuned.
fn widen_window_scale(shared: &Shared, rcvbuf: u64, facts: &longhaul_proto::HostFacts) {
    let Some(listener) = &shared.listener else {
        return;
    };
    let basis = facts.tcp_rmem_max.max(facts.rmem_max).max(1);
    let mut scale = 0u32;
    while (basis >> scale) > 65_535 && scale < 14 {
        scale += 1;
    }
    let max_window = 65_535u64 << scale;
    if rcvbuf <= max_window || !facts.can_force_buffers {
        return;
    }
    let current = longhaul_sys::socket::receive_buffer(listener).unwrap_or(0);
    if current < 2 * rcvbuf {
        // First, so that no socket accepted from now on keeps the raised buffer.
        shared.memory.mark_widened();
        let _ = longhaul_sys::socket::set_receive_buffer(listener, rcvbuf.min(MAX_WINDOW), true);
    }
}

/// An accept error that passes (out of descriptors or memory for a moment, a client that
/// gave up before the accept): back off briefly, the listener stays readable meanwhile.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::ECONNABORTED)
    )
}

fn send_all(session: &mut ServerSession, conn: &mut FramedConn) -> io::Result<()> {
    while let Some(m) = session.poll_transmit() {
        conn.send(&m)?;
    }
    Ok(())
}

/// Sends what the session queued through the control link's writer.
fn send_queued(session: &mut ServerSession, link: &ControlLink) -> io::Result<()> {
    while let Some(m) = session.poll_transmit() {
        link.tx.send_bench(&m)?;
    }
    Ok(())
}

/// A failed read of the control connection: a timeout is the client gone silent.
fn recv_error(e: RecvError) -> ServeError {
    match e {
        RecvError::Io(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            ServeError::ClientSilent
        }
        RecvError::Io(e) => ServeError::Io {
            what: "reading the control connection",
            cause: e,
        },
        RecvError::Proto(e) => ServeError::Protocol(e),
        RecvError::Closed => ServeError::ClientClosed,
    }
}

/// Data-stream attachment for a transfer session (see [`StreamAttach`]).
struct Attach {
    shared: Arc<Shared>,
    id: u64,
    secret: SessionSecret,
    plain_data: bool,
    /// The client takes interval reports when this end sends (a pull).
    intervals: bool,
    expected: Option<Expected>,
    /// The session's memory, held until the transfer ends.
    hold: Option<MemoryHold>,
}

impl StreamAttach for Attach {
    fn expect(&mut self, streams: u16, rcvbuf: Option<u64>) -> Result<(), AttachError> {
        let expected =
            self.shared
                .attach
                .expect(self.id, self.secret.clone(), streams, self.plain_data)?;
        if let Some(bytes) = rcvbuf {
            widen_window_scale(&self.shared, bytes, &host::host_facts());
        }
        self.expected = Some(expected);
        Ok(())
    }

    fn chunk_key(&self) -> longhaul_proto::ChunkKey {
        self.secret.chunk_key()
    }

    fn collect(&mut self) -> Result<Vec<SecureStream>, AttachError> {
        let socks = self
            .expected
            .take()
            .ok_or(AttachError::NotExpecting)?
            .collect()?;
        let facts = host::host_facts();
        for s in &socks {
            self.shared.memory.restore_data_socket(s, &facts);
        }
        Ok(socks)
    }

    fn reserve_memory(&mut self, mut need: MemoryNeed, cut_chunk: bool) -> Result<u64, String> {
        if cut_chunk {
            if let Some(chunk) = self.shared.memory.fit_chunk(need) {
                need.chunk_bytes = chunk;
            }
        }
        self.hold = Some(MemoryHold::reserve(&self.shared.memory, need)?);
        Ok(need.chunk_bytes)
    }

    fn peer_takes_intervals(&self) -> bool {
        self.intervals
    }
}

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

pub(super) fn run_session(
    mut conn: FramedConn,
    hello: Message,
    mut session: ServerSession,
    mut pending: PendingConn,
    shared: &Arc<Shared>,
    cfg: &ServeConfig,
    _log: &LogFn,
) -> Result<String, ServeError> {
    let peer = pending.peer();
    let id = session.session_id();
    let mut msg = hello;
    // Held from the proof of the token to the end of the session.
    let mut slot: Option<SessionSlot> = None;
    // Handshake and parameters.
    let (secret, params, plain_data) = {
        let mut secret = None;
        let mut plain_data = false;
        let mut intervals = false;
        loop {
            let r = session.handle(msg);
            let events: Vec<ServerEvent> = std::iter::from_fn(|| session.poll_event()).collect();
            if r.is_ok()
                && slot.is_none()
                && events
                    .iter()
                    .any(|e| matches!(e, ServerEvent::Authenticated { .. }))
            {
                // The welcome goes out once the session has a slot.
                slot = Some(take_slot(&mut pending, &mut session, &mut conn)?);
            }
            send_all(&mut session, &mut conn).map_err(ServeError::io("answering the handshake"))?;
            r?;
            let mut params = None;
            for ev in events {
                match ev {
                    ServerEvent::Authenticated {
                        secret: s,
                        features,
                    } => {
                        secret = Some(s);
                        plain_data = features & longhaul_proto::features::PLAIN_DATA != 0;
                        intervals = features & longhaul_proto::features::TRANSFER_INTERVALS != 0;
                    }
                    ServerEvent::Params(p) => params = Some(p),
                    ServerEvent::HostReportRequested { rate_bps, rtt_us } => {
                        // `tune --peer`: answer and end the session.
                        let line = super::peer::answer_host_report(&mut session, rate_bps, rtt_us);
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
            msg = match conn.recv_any() {
                Ok(Frame::Bench(m)) => m,
                Ok(Frame::Transfer(TransferMessage::TransferParams(p))) => {
                    let Some(s) = secret.clone() else {
                        return Err(ServeError::Unexpected(
                            "a transfer request before authentication",
                        ));
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
                        intervals,
                        expected: None,
                        hold: None,
                    };
                    let out =
                        serve_transfer(conn, p, &cfg.files, cfg.keep_setuid, cfg.caps, &mut attach);
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
    outcome
        .map(|(bytes, secs)| {
            format!(
                "{} {} streams, {:.3} GB in {:.2} s = {:.3} Gbit/s; {}{jumped}",
                if role == Role::Sender {
                    "sent"
                } else {
                    "received"
                },
                params.streams,
                bytes as f64 / 1e9,
                secs,
                bytes as f64 * 8.0 / secs.max(1e-6) / 1e9,
                hold.describe()
            )
        })
        .map_err(|e| e.with_peer(peer))
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
