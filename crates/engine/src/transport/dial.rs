//! The client's side of the transport, for bench and cp alike: reaching the server, the
//! data connections opened at the same moment as the control connection, and their
//! hellos. Round trips are the cost of a long path (docs/startup.md counts them):
//!
//! - t = 0: the control connection's and every data connection's SYN leave together;
//! - 1 RTT: TCP is up; the connect time is the RTT's first sample (the kernel answers a
//!   SYN, so no application delay is in it), the TLS handshake its second; TLS starts on
//!   every connection;
//! - 2 RTT: TLS is up, and the server's hello (0.5-RTT data, proving the token for its
//!   certificate) came with it: [`dial`] returns with the client's proof queued, the
//!   caller queues its request behind it, and [`DataDialer::attach`] sends the data
//!   hellos in the same flight.
//!
//! A data connection's receive buffer fixes its window scale in the SYN, before the RTT
//! is known: as root a receiving data socket gets the largest buffer first
//! ([`MAX_WINDOW`]) and its plan's own once connected ([`DataDialer::attach`]).

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhaul_policy::{BufferChoice, Side, MAX_WINDOW};
use longhaul_proto::{
    features, ChannelBinding, ClientSession, Credential, Message, ProtoError, Token,
};
use socket2::{Domain, Protocol, Socket, Type};

use super::framed::FramedConn;
use super::secure::SecureStream;
use super::setup::{read_error, read_until};
use super::sockopts;
use super::tls::{ClientTls, Encryption, Fingerprint, Security, ServerTrust, TlsError};
use crate::transport::BenchError;

/// The port `longhaul serve` listens on by default.
pub const DEFAULT_PORT: u16 = 5290;
/// How long the handshake may wait for each answer.
pub const HANDSHAKE_TIMEOUT: Duration = longhaul_proto::CLIENT_WAIT;
pub use super::connect::connect_any;
use super::connect::{ControlSyn, CONNECT_TIMEOUT};

/// The data connections to open together with the control connection.
#[derive(Debug, Clone, Copy)]
pub struct DataPlan {
    /// How many (0: none, e.g. `tune --peer`; [`AUTO_STREAMS`]: chosen by a
    /// [`DataStart`], from a remembered path before the connect or from the RTT the
    /// control connection's TCP handshake measured, one round trip later).
    pub streams: u16,
    /// This end receives on them (a pull, `bench --reverse`): their window scale must be
    /// set before connect.
    pub receiving: bool,
}

/// [`DataPlan::streams`] asking for the path's stream count: on a long path many streams
/// reach the rate round trips sooner (every stream starts with the kernel's 10-segment
/// window). A [`DataStart`] chooses it: from what is remembered of the path before the
/// connect (then the connections still go at t = 0), else once the control connection's
/// connect has measured the RTT (one round trip later).
pub const AUTO_STREAMS: u16 = u16::MAX;

/// How an [`AUTO_STREAMS`] plan's data connections start.
pub trait DataStart {
    /// Connections to open to `peer` together with the control connection (0: none, wait
    /// for the RTT): a guess from what is known of the path.
    fn before_connect(&mut self, peer: SocketAddr) -> u16;
    /// The count once the control connection's TCP handshake has measured `rtt` (`tcp` is
    /// that connection). `opened` are on their way to its address (0 if none, or if the
    /// guess went to another address).
    fn at_connect(&mut self, rtt: Duration, tcp: &TcpStream, opened: u16) -> Count;
}

pub use longhaul_policy::data_start::Count;

/// The path's count ([`longhaul_policy::streams_for_path`]) at the connect, no guess.
pub struct PathStreams;

impl DataStart for PathStreams {
    fn before_connect(&mut self, _peer: SocketAddr) -> u16 {
        0
    }

    fn at_connect(&mut self, rtt: Duration, _tcp: &TcpStream, _opened: u16) -> Count {
        Count::New(longhaul_policy::streams_for_path(rtt))
    }
}

/// A control connection whose server has proved the token; the client's proof is queued
/// in `session` (sent by the next [`flush`]), and the data connections are on their way.
pub struct Dialed {
    /// The framed control connection.
    pub conn: FramedConn,
    /// The client's session state machine.
    pub session: ClientSession,
    /// The server's address that answered.
    pub addr: SocketAddr,
    /// The RTT: the smaller of the control connection's TCP connect (SYN to SYN-ACK,
    /// answered by the server's kernel) and its TLS handshake.
    pub rtt: Duration,
    /// The data connections, connecting since the start.
    pub data: DataDialer,
    /// The TLS of data connections opened later (a jump-start run opens them once the
    /// routes' initial windows are set); `None`: plain TCP.
    pub data_tls: Option<ClientTls>,
    /// The server's certificate, when this contact pinned it in the known-servers file.
    pub pinned_now: Option<Fingerprint>,
}

/// Connects to `target` (`HOST`, `HOST:PORT`, `[V6]:PORT`) and opens `data`'s connections
/// at the same moment, sets up TLS (trusting the server's certificate as `security` says),
/// sends the client's hello and checks the server's (0.5-RTT) hello against `token`.
pub fn dial(
    target: &str,
    token: &Token,
    security: &Security,
    data: DataPlan,
) -> Result<Dialed, BenchError> {
    let credential = Credential::Token(token.clone());
    dial_with(target, &credential, security, data, &mut PathStreams)
}

/// [`dial`] proving `credential` (a token, or a ticket of the server's, whose server is
/// then known by its pinned certificate alone), with `start` choosing the stream count of
/// an [`AUTO_STREAMS`] plan (a jump-start sets its routes' initial windows there, before
/// any data connection exists). A server that closed the control connection before its
/// TLS began (its door full, see [`TlsError::Closed`]) is dialed again ([`DIALS`] times in
/// all).
pub fn dial_with(
    target: &str,
    credential: &Credential,
    security: &Security,
    data: DataPlan,
    start: &mut dyn DataStart,
) -> Result<Dialed, BenchError> {
    redialing(|_| dial_once(target, credential, security, data, start))
}

/// Runs `attempt` (given its number, from 0) again while the server closed the
/// connection before its TLS began ([`TlsError::Closed`]), [`DIALS`] times in all, after a
/// pause that doubles from [`REDIAL_PAUSE`].
fn redialing<T>(mut attempt: impl FnMut(u32) -> Result<T, BenchError>) -> Result<T, BenchError> {
    let (mut n, mut pause) = (0, REDIAL_PAUSE);
    loop {
        match attempt(n) {
            Err(BenchError::Tls(TlsError::Closed { .. })) if n + 1 < DIALS => {
                std::thread::sleep(pause);
                pause *= 2;
                n += 1;
            }
            done => return done,
        }
    }
}

/// Dials in all when the server closes the control connection before its TLS begins:
/// under a flood of bare connections a door may evict a client's in the instant between
/// its accept and its first bytes (a pull of `serve_spread_flood` failed so in one run of
/// six on this 2-core host), and the next dial is the newest at the door.
pub const DIALS: u32 = 3;
/// The pause before the second dial (doubled before each next).
const REDIAL_PAUSE: Duration = Duration::from_millis(100);

/// One dial of [`dial_with`].
fn dial_once(
    target: &str,
    credential: &Credential,
    security: &Security,
    data: DataPlan,
    start: &mut dyn DataStart,
) -> Result<Dialed, BenchError> {
    let (host, port) = split_target(target, DEFAULT_PORT)?;
    if matches!(credential, Credential::Ticket(_))
        && !matches!(security.trust, ServerTrust::Pinned(_))
    {
        return Err(BenchError::Refused(
            "a ticket is proved only to a server whose certificate is pinned".into(),
        ));
    }
    let tls = ClientTls::new(&host, port, security.trust.clone())?;
    let encryption = security.encryption;
    let addrs = resolve_parts(target, &host, port)?;
    // The data connections' TLS: known now unless this is the first contact with a
    // server of the known-servers file (then their TCP connects go now, their TLS once
    // the control connection has pinned the certificate).
    let early_tls = match encryption {
        Encryption::On => tls.for_data_now().map(Some),
        Encryption::Off => Some(None),
    };
    // The control connection's SYN leaves first: a remembered path's route takes tens of
    // milliseconds to set (`ip route`), and the data connections' threads as long to
    // start on a small host (64 of them on a path not remembered).
    let t_connect = Instant::now();
    let syn = ControlSyn::send(addrs[0]);
    let auto = data.streams == AUTO_STREAMS;
    let mut data = data;
    if auto {
        data.streams = start.before_connect(addrs[0]);
    }
    let mut dialer = DataDialer::start(addrs[0], data, credential.clone());
    let (stream, addr) = match syn.map(ControlSyn::finish) {
        Some(Ok(stream)) => (stream, addrs[0]),
        // Refused or silent: the other addresses in turn (not the first again).
        Some(Err(cause)) if addrs.len() == 1 => {
            return Err(BenchError::Connect {
                addr: addrs[0],
                cause,
            })
        }
        Some(Err(_)) => connect_any(&addrs[1..])?,
        // Not begun (a connection back over ssh): each address in turn.
        None => connect_any(&addrs)?,
    };
    // The kernel's own sample of the handshake is the path's round trip (the wait for it
    // began after the data connections' threads; a connection back took a request over
    // ssh and the far end's connect).
    let rtt = longhaul_sys::tcp_info::tcp_info(&stream)
        .ok()
        .filter(|i| i.rtt_us > 0)
        .map_or_else(
            || t_connect.elapsed(),
            |i| Duration::from_micros(u64::from(i.rtt_us)),
        );
    let opened = if addr == addrs[0] { data.streams } else { 0 };
    let count = if auto {
        start.at_connect(rtt, &stream, opened)
    } else {
        Count::Keep
    };
    let replace = match count {
        Count::New(n) => Some(n),
        Count::Trim(n) if addr == addrs[0] && n <= dialer.streams() => {
            dialer.keep_first(n);
            data.streams = n;
            None
        }
        Count::Trim(n) => Some(n),
        Count::Keep => (addr != addrs[0]).then_some(data.streams),
    };
    if let Some(n) = replace {
        // The first address did not answer, or the guess was wrong: the data connections
        // go where the control connection went, as many as wanted (those on their way
        // end when their TLS setup is dropped with them).
        data.streams = n;
        dialer = DataDialer::start(addr, data, credential.clone());
    }
    // Their TLS starts now (their TCP handshakes end with the control connection's), so
    // connections a wrong guess dropped never start one.
    if let Some(t) = &early_tls {
        dialer.give_tls(t.clone());
    }
    stream
        .set_nodelay(true)
        .and_then(|()| stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT)))
        .map_err(io_err("control connection"))?;
    let t_tls = Instant::now();
    let (stream, first_contact) = tls.connect(stream, target, HANDSHAKE_TIMEOUT)?;
    // A SYN lost in a full accept queue is sent again a second later: the TLS
    // handshake's round trip (plus some crypto) is the second sample.
    let rtt = rtt.min(t_tls.elapsed());
    let data_tls = match early_tls {
        Some(t) => t,
        None => {
            let t = Some(tls.for_data()?);
            dialer.give_tls(t.clone());
            t
        }
    };
    let (Some(cert), Some(exporter)) = (stream.peer_certificate(), stream.exporter()) else {
        return Err(BenchError::Refused(
            "the control connection's TLS session has no certificate or exporter".into(),
        ));
    };
    let binding = ChannelBinding {
        cert: cert.0,
        exporter,
    };
    let mut conn = FramedConn::new(stream);
    let mut nonce = [0u8; 32];
    getrandom::getrandom(&mut nonce).map_err(|e| BenchError::Refused(e.to_string()))?;
    // PLAIN_DATA only when asked for: the server lets a session's data connections
    // go without TLS exactly when the hello announced it.
    let features = match encryption {
        Encryption::On => longhaul_proto::features::DEFAULT,
        Encryption::Off => longhaul_proto::features::DEFAULT | longhaul_proto::features::PLAIN_DATA,
    };
    let mut session = ClientSession::proving(credential.clone(), nonce, binding, features);
    // Our hello goes at once (an older server answers it with its version); the
    // server's came with its TLS Finished.
    flush(&mut session, &mut conn)?;
    // The server's hello proves the token for this TLS session: only a server that
    // proved it is pinned on first contact.
    let unpinned = |cause: BenchError| match &first_contact {
        Some(first) => BenchError::NotPinned {
            first: first.clone(),
            cause: Box::new(cause),
        },
        None => cause,
    };
    // A server of several tokens proves the others right behind its hello, in the
    // same flight: taken here, so the proof is known before anything is sent.
    read_until(&mut conn, &mut session, |s| {
        s.server_proved() && !s.awaits_proofs()
    })
    .map_err(|e| unpinned(e.into()))?;
    if let Some(first) = &first_contact {
        tls.pin(first)?;
    }
    let pinned_now = first_contact.map(|f| f.seen);
    Ok(Dialed {
        conn,
        session,
        addr,
        rtt,
        data: dialer,
        data_tls,
        pinned_now,
    })
}

impl Dialed {
    /// Sends the queued proof and waits for the server's welcome (for callers that
    /// have nothing to send in its flight, such as `tune --peer`).
    pub fn authenticate(&mut self) -> Result<(), BenchError> {
        flush(&mut self.session, &mut self.conn)?;
        let mut welcomed = false;
        read_until(&mut self.conn, &mut self.session, |s| {
            while let Some(ev) = s.poll_event() {
                welcomed |= matches!(ev, longhaul_proto::ClientEvent::Authenticated { .. });
            }
            welcomed
        })?;
        flush(&mut self.session, &mut self.conn)
    }
}

impl Dialed {
    /// The RTT: the minimum of the connect time and `pings` pings on the idle,
    /// authenticated connection (for `tune --peer`; bench and cp take the connect time).
    pub fn measure_rtt(&mut self, pings: u32) -> Result<Duration, BenchError> {
        let mut rtt = self.rtt;
        for seq in 0..pings {
            let t0 = Instant::now();
            self.session.ping(seq);
            flush(&mut self.session, &mut self.conn)?;
            loop {
                let msg = recv(&mut self.conn, "measuring the RTT")?;
                self.session.handle(msg)?;
                if let Some(longhaul_proto::ClientEvent::Pong { seq: s }) =
                    self.session.poll_event()
                {
                    if s == seq {
                        break;
                    }
                }
            }
            rtt = rtt.min(t0.elapsed());
        }
        Ok(rtt)
    }
}

/// Data connections being opened in parallel with the control connection (one RTT, not
/// N, for TCP and TLS alike); each reads past the server's hello; the hellos go once the
/// client's proof does ([`DataDialer::attach`]).
pub struct DataDialer {
    started: Instant,
    connecting: Vec<JoinHandle<Result<SecureStream, BenchError>>>,
    /// Each connection's TLS setup, given when known (`None`: plain).
    tls: Vec<mpsc::Sender<Option<ClientTls>>>,
    receiving: bool,
}

impl DataDialer {
    /// Starts `plan.streams` connects to `addr`; each waits for [`DataDialer::give_tls`]
    /// after its TCP handshake. `credential` checks the server's hello on each.
    pub fn start(addr: SocketAddr, plan: DataPlan, credential: Credential) -> Self {
        // As root a receiving socket's buffer is raised before connect, so that the
        // window scale of its SYN allows any window the plan may choose once the RTT is
        // known. Without root the kernel's own choice (from tcp_rmem's and rmem_max's
        // ceilings) is already the largest this process can use.
        let prewiden = plan.receiving && longhaul_sys::socket::can_force_buffers();
        let mut tls = Vec::new();
        let connecting = (0..plan.streams)
            .map(|i| {
                let (tx, rx) = mpsc::channel::<Option<ClientTls>>();
                tls.push(tx);
                let credential = credential.clone();
                std::thread::spawn(move || -> Result<SecureStream, BenchError> {
                    let what = format!("opening data stream {i} to {addr}");
                    let connect = || -> Result<TcpStream, BenchError> {
                        let sock = Socket::new(
                            Domain::for_address(addr),
                            Type::STREAM,
                            Some(Protocol::TCP),
                        )
                        .map_err(io_err(what.clone()))?;
                        if prewiden {
                            longhaul_sys::socket::set_receive_buffer(&sock, MAX_WINDOW, true)
                                .map_err(io_err(what.clone()))?;
                        }
                        sock.connect_timeout(&addr.into(), CONNECT_TIMEOUT)
                            .map_err(io_err(what.clone()))?;
                        let stream = TcpStream::from(sock);
                        // Without it the hello would wait behind the TLS Finished for
                        // its ACK (Nagle): one RTT.
                        stream.set_nodelay(true).map_err(io_err(what.clone()))?;
                        Ok(stream)
                    };
                    let (stream, back) = match super::connect_back::connect(&addr, plan.receiving) {
                        Some(back) => {
                            let s = back.map_err(io_err(what.clone()))?;
                            s.set_nodelay(true).map_err(io_err(what.clone()))?;
                            (s, true)
                        }
                        None => (connect()?, false),
                    };
                    let tls = rx.recv_timeout(HANDSHAKE_TIMEOUT).map_err(|_| {
                        BenchError::Refused(format!("{what}: the control connection failed"))
                    })?;
                    let Some(tls) = tls else {
                        return Ok(SecureStream::plain(stream));
                    };
                    // A data connection waits silent at the door until the control
                    // connection's connect gives it its TLS: under a flood the door may
                    // close it as it would a bare one, and it connects again (as
                    // `dial_with` does; a connection back over ssh cannot).
                    let mut first = Some(stream);
                    let mut attempt = |_| {
                        let stream = match first.take() {
                            Some(s) => s,
                            None => connect()?,
                        };
                        let s = tls.connect(stream, &addr.to_string(), HANDSHAKE_TIMEOUT)?.0;
                        read_server_hello(s, &credential, &what)
                    };
                    if back {
                        attempt(0)
                    } else {
                        redialing(attempt)
                    }
                })
            })
            .collect();
        Self {
            started: Instant::now(),
            connecting,
            tls,
            receiving: plan.receiving,
        }
    }

    /// How many connections are on their way.
    pub fn streams(&self) -> u16 {
        self.connecting.len() as u16
    }

    /// Keeps the first `n` connections; the others end before their TLS starts (their
    /// threads see the setup's channel closed and drop their sockets: the server's door
    /// sees a connection close without a byte, which it does not log).
    pub fn keep_first(&mut self, n: u16) {
        let n = usize::from(n);
        self.tls.truncate(n);
        // Detached: each ends as soon as its TCP connect does.
        self.connecting.truncate(n);
    }

    /// The TLS setup for every data connection (`None`: plain TCP).
    pub fn give_tls(&self, tls: Option<ClientTls>) {
        for tx in &self.tls {
            let _ = tx.send(tls.clone());
        }
    }

    /// Waits for every connect, gives each its plan's buffer (`side`, `choice`; and a
    /// receiver's window clamp `rx_clamp`: rate, streams, RTT), and proves each stream
    /// to the server (stream `i` is `sockets[i]`): allowed once the server proved itself.
    pub fn attach(
        self,
        session: &ClientSession,
        side: Side,
        choice: &BufferChoice,
        rx_clamp: Option<(u64, u16, Duration)>,
    ) -> Result<Vec<SecureStream>, BenchError> {
        crate::startup::note_data_dialed(self.started);
        let facts = (self.receiving && matches!(choice, BufferChoice::Autotune))
            .then(crate::host::host_facts);
        let mut out = Vec::with_capacity(self.connecting.len());
        for (i, h) in self.connecting.into_iter().enumerate() {
            let sock = h
                .join()
                .map_err(|_| BenchError::Refused("a data connection thread panicked".into()))??;
            let what = format!("data stream {i}");
            match &facts {
                // Raised before connect: back to what autotuning would reach.
                Some(f) if f.tcp_rmem_max > 0 && longhaul_sys::socket::can_force_buffers() => {
                    longhaul_sys::socket::set_receive_buffer(&sock, f.tcp_rmem_max / 2, true)
                        .map_err(io_err(what.clone()))?
                }
                _ => sockopts::apply_buffer(&sock, side, choice).map_err(io_err(what.clone()))?,
            }
            if let Some((rate, streams, rtt)) = rx_clamp {
                sockopts::clamp_for_rx_rate(sock.tcp(), rate, streams, rtt)
                    .map_err(io_err(what.clone()))?;
            }
            let binding = sock.exporter();
            let hello = session
                .data_hello(i as u16, binding.as_ref().map_or(&[], |b| b))
                .ok_or_else(|| BenchError::Refused("the server has not proved itself".into()))?;
            let mut framed = FramedConn::new(sock);
            framed.send(&hello).map_err(io_err(what))?;
            out.push(framed.into_parts().0);
        }
        Ok(out)
    }
}

/// Reads the server's hello that every TLS connection opens with (it came with the TLS
/// handshake), checking its version and proof: a data connection too must reach the
/// token's holder.
fn read_server_hello(
    s: SecureStream,
    credential: &Credential,
    what: &str,
) -> Result<SecureStream, BenchError> {
    let (Some(cert), Some(exporter)) = (s.peer_certificate(), s.exporter()) else {
        return Err(BenchError::Refused(format!(
            "{what}: no server certificate or exporter"
        )));
    };
    // The control session's own check, on this connection's binding.
    let binding = ChannelBinding {
        cert: cert.0,
        exporter,
    };
    let mut check = ClientSession::proving(credential.clone(), [0; 32], binding, features::DEFAULT);
    let mut framed = FramedConn::new(s);
    let hello = recv(&mut framed, "reading a data connection's server hello")?;
    if !matches!(hello, Message::ServerHello { .. }) {
        return Err(ProtoError::Unexpected {
            got: hello.kind(),
            state: "waiting for the server's hello on a data connection",
        }
        .into());
    }
    check.handle(hello)?;
    // A server of several tokens proves the others right behind (in the same flight).
    if check.awaits_proofs() {
        let proofs = recv(&mut framed, "reading a data connection's server proofs")?;
        check.handle(proofs)?;
    }
    let (s, rest) = framed.into_parts();
    if !rest.is_empty() {
        return Err(BenchError::Refused(format!(
            "{what}: the server sent data before the stream attached"
        )));
    }
    Ok(s)
}

/// Parses `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT` or a bare IPv6 address, and resolves it.
pub fn resolve(target: &str, default_port: u16) -> Result<Vec<SocketAddr>, BenchError> {
    let (host, port) = split_target(target, default_port)?;
    resolve_parts(target, &host, port)
}

/// Resolves `host` and `port`, already split from `target` (named in errors).
fn resolve_parts(target: &str, host: &str, port: u16) -> Result<Vec<SocketAddr>, BenchError> {
    let err = |why: &str| BenchError::Resolve {
        target: target.into(),
        why: why.into(),
    };
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| err(&e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(err("no address"));
    }
    Ok(addrs)
}

/// Splits `HOST`, `HOST:PORT`, `[V6]`, `[V6]:PORT` or a bare IPv6 address into host and port.
pub fn split_target(target: &str, default_port: u16) -> Result<(String, u16), BenchError> {
    let err = |why: &str| BenchError::Resolve {
        target: target.into(),
        why: why.into(),
    };
    let (host, port) = if let Some(rest) = target.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(|| err("missing ']'"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| err("bad port"))?,
            None if after.is_empty() => default_port,
            None => return Err(err("unexpected text after ']'")),
        };
        (h.to_string(), port)
    } else if target.matches(':').count() == 1 {
        let (h, p) = target.split_once(':').ok_or_else(|| err("bad port"))?;
        (h.to_string(), p.parse().map_err(|_| err("bad port"))?)
    } else {
        (target.to_string(), default_port)
    };
    if host.is_empty() {
        return Err(err("empty host"));
    }
    Ok((host, port))
}

/// Reads one bench/session message; the server's error, a close or a timeout is the
/// error, naming what the client was doing.
pub fn recv(conn: &mut FramedConn, what: &'static str) -> Result<Message, BenchError> {
    match conn.recv() {
        Ok(Message::Error { code, message }) => Err(ProtoError::Peer { code, message }.into()),
        Ok(m) => Ok(m),
        Err(e) => Err(read_error(e, what)),
    }
}

/// Sends every message the session queued.
pub fn flush(session: &mut ClientSession, conn: &mut FramedConn) -> Result<(), BenchError> {
    while let Some(m) = session.poll_transmit() {
        conn.send(&m).map_err(io_err("control connection"))?;
    }
    Ok(())
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let what = what.into();
    move |cause| BenchError::Io { what, cause }
}
