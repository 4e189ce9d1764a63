//! The daemon's accept loop (`longhaul serve`): accepts control and data connections on
//! one port, authenticates each, runs several sessions at once (each in `session.rs`),
//! and survives misbehaving clients.

use crate::transport::secure::SecureStream;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use longhaul_proto::{Keyring, ServerSession};
use socket2::{Domain, Protocol, Socket, Type};

use super::conn::handle_connection;
use super::door::Door;
pub use super::door::ServeLimits;
use super::error::ServeError;
use super::memory::{default_budget, MemoryHold, ServerMemory};
use super::metrics::{Refusal, ServerMetrics, Snapshot};
use crate::daemon::transfer::{ServedFiles, StreamAttach};
use crate::host;
use crate::transport::attach::{AttachError, AttachTable, Expected};
use crate::transport::control::ControlLink;
use crate::transport::framed::{FramedConn, RecvError};
use crate::transport::tls::ServerTls;
use longhaul_policy::{MemoryNeed, MAX_WINDOW};
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
    /// The tokens clients prove (one, or one per group of areas: see
    /// [`super::areas`]).
    pub keyring: Keyring,
    /// Serve one session, then return: the first whose client proved the token. A
    /// connection that fails TLS, its hello or the proof ends nothing (`ssh-server` is
    /// not ended by whoever else reaches its port).
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
    /// Where a third-party copy's relayed pull may go (`serve --relay-from`).
    pub relay_from: longhaul_policy::RelayFrom,
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
    /// Sessions whose client proved the token, so far.
    pub(super) sessions_proved: AtomicU64,
    /// The memory budget, and the listener's buffer state (see [`super::memory`]).
    pub(super) memory: Arc<ServerMemory>,
    /// The counters `serve --metrics` shows.
    pub(super) metrics: Arc<ServerMetrics>,
    /// The tickets issued for third-party copies, not yet used or expired.
    pub(super) tickets: super::tickets::TicketBook,
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

    /// Counts a connection turned away and logs why, within the log budget.
    pub(super) fn refuse(&self, log: &LogFn, why: Refusal, line: &str) {
        self.metrics.refused(why);
        self.log_conn(log, line);
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
    /// Each proven session's outcome (what `once` waits for).
    done: (mpsc::Sender<Outcome>, mpsc::Receiver<Outcome>),
}

/// A proven session's outcome.
type Outcome = Result<(), ServeError>;

/// Hands the server connections it did not accept itself (an ssh far end's connections
/// back to its client, `ssh::dial_back`): each is admitted and served as an accepted one.
#[derive(Clone)]
pub struct Injector {
    cfg: ServeConfig,
    shared: Arc<Shared>,
    log: LogFn,
    done: mpsc::Sender<Result<(), ServeError>>,
}

impl Injector {
    /// Serves `stream`, a connection with `peer`, as if the listener had accepted it.
    pub fn inject(&self, stream: TcpStream, peer: SocketAddr) -> io::Result<()> {
        take_connection(
            (stream, peer),
            &self.shared,
            &self.cfg,
            &self.log,
            &self.done,
        )
    }
}

impl std::fmt::Debug for Injector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Injector")
    }
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
            sessions_proved: AtomicU64::new(0),
            metrics: Arc::default(),
            tickets: Default::default(),
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
            done: mpsc::channel(),
        })
    }

    /// A handle that serves connections made elsewhere (see [`Injector`]).
    pub fn injector(&self) -> Injector {
        Injector {
            cfg: self.cfg.clone(),
            shared: self.shared.clone(),
            log: self.log.clone(),
            done: self.done.0.clone(),
        }
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

    /// A count of the sessions whose client proved the token so far, readable while
    /// [`Server::serve`] runs: what `ssh-server` watches to give up when its client does
    /// not come (strangers who fail the proof do not keep it waiting).
    pub fn sessions_proved(&self) -> impl Fn() -> u64 + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || shared.sessions_proved.load(Ordering::Relaxed)
    }

    /// The server's counters and memory figures, readable while [`Server::serve`] runs
    /// (what `serve --metrics` shows).
    pub fn metrics(&self) -> Arc<dyn Fn() -> Snapshot + Send + Sync> {
        let shared = self.shared.clone();
        Arc::new(move || {
            shared
                .metrics
                .snapshot(shared.memory.figures(), shared.door.closed())
        })
    }

    /// The address actually bound (port 0 becomes the chosen port).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections until an I/O error on the listener, until `stop` is raised, or
    /// after the first proven session with `once`. Returns that session's outcome with
    /// `once`; connections that never proved the token have no outcome here (they are
    /// logged).
    pub fn serve(self, stop: Option<Arc<AtomicBool>>) -> io::Result<Result<(), ServeError>> {
        let (done_tx, done_rx) = (&self.done.0, &self.done.1);
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
            if !self.shared.door.has_thread_room() {
                // Evicted connections' threads are ending (a burst of evictions outruns
                // them on a busy host): newcomers wait in the kernel's backlog meanwhile.
                std::thread::sleep(Duration::from_millis(1));
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
            take_connection((stream, peer), &self.shared, &self.cfg, &self.log, done_tx)?;
        }
    }
}

/// An accepted (or injected) connection: admitted at the door and served on a thread of
/// its own; a proven session's outcome goes to `done`.
fn take_connection(
    (stream, peer): (TcpStream, SocketAddr),
    shared: &Arc<Shared>,
    cfg: &ServeConfig,
    log: &LogFn,
    done: &mpsc::Sender<Result<(), ServeError>>,
) -> io::Result<()> {
    shared.metrics.connections.fetch_add(1, Ordering::Relaxed);
    // Accepted sockets do not inherit O_NONBLOCK on Linux; make sure anyway.
    stream.set_nonblocking(false)?;
    // Not the listener's raised buffer: an unauthenticated peer gets the default.
    shared.memory.shrink_accepted(&stream);
    // Room is made by evicting the oldest pending connection, never by refusing
    // this one (see `longhaul_policy::admission`).
    let Some(pending) = shared.door.admit(&stream, peer) else {
        return Ok(());
    };
    let (shared, cfg, log, done) = (shared.clone(), cfg.clone(), log.clone(), done.clone());
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
    Ok(())
}

/// The window scale of a connection is fixed in its handshake, from the listening
/// socket's receive buffer or, when that is not set, from the larger of tcp_rmem's ceiling
/// and rmem_max. When a session needs a window beyond that, the listener's buffer is raised
/// (as root) before the data connections arrive. The listener keeps the larger buffer
/// afterwards, which only matters to later runs that would have been autotuned.
pub(super) fn widen_window_scale(shared: &Shared, rcvbuf: u64, facts: &longhaul_proto::HostFacts) {
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

pub(super) fn send_all(session: &mut ServerSession, conn: &mut FramedConn) -> io::Result<()> {
    while let Some(m) = session.poll_transmit() {
        conn.send(&m)?;
    }
    Ok(())
}

/// Refuses the client's request with `why` (the parameters' error code) and ends the
/// session; the error to return.
pub(super) fn refuse(
    session: &mut ServerSession,
    conn: &mut FramedConn,
    why: String,
) -> ServeError {
    session.abort(longhaul_proto::ErrorCode::Params, why.clone());
    let _ = send_all(session, conn);
    ServeError::Refused { reason: why }
}

/// Sends what the session queued through the control link's writer.
pub(super) fn send_queued(session: &mut ServerSession, link: &ControlLink) -> io::Result<()> {
    while let Some(m) = session.poll_transmit() {
        link.tx.send_bench(&m)?;
    }
    Ok(())
}

/// A failed read of the control connection: a timeout is the client gone silent.
pub(super) fn recv_error(e: RecvError) -> ServeError {
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
pub(super) struct Attach {
    pub(super) shared: Arc<Shared>,
    pub(super) id: u64,
    pub(super) secret: SessionSecret,
    pub(super) plain_data: bool,
    /// What the client announced (`longhaul_proto::features`).
    pub(super) features: u64,
    pub(super) expected: Option<Expected>,
    /// The session's memory, held until the transfer ends.
    pub(super) hold: Option<MemoryHold>,
}

impl StreamAttach for Attach {
    fn moved(&mut self, sent: u64, received: u64, seconds: f64, area: Option<&str>) {
        self.shared.metrics.moved(sent, received, seconds, area);
    }
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

    fn collect(&mut self, gone: &dyn Fn() -> bool) -> Result<Vec<SecureStream>, AttachError> {
        let socks = self
            .expected
            .take()
            .ok_or(AttachError::NotExpecting)?
            .collect_unless(gone)?;
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

    fn peer_features(&self) -> u64 {
        self.features
    }
}
