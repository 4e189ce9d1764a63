//! The client's side of the transport, for bench and cp alike: reaching the server,
//! the handshake's first round trip (the RTT's first sample), the data connections opened
//! concurrently while the control connection finishes its work, and their hellos.
//!
//! Round trips are the cost of a long path, so [`dial`] returns as soon as the server has
//! proved itself, with the client's proof queued but not sent: cp sends it together with
//! its request and file list, bench waits for the welcome ([`Dialed::authenticate`]).

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhaul_policy::{BufferChoice, Side};
use longhaul_proto::{ClientEvent, ClientSession, Message, ProtoError, Token};
use socket2::{Domain, Protocol, Socket, Type};

use super::framed::{FramedConn, RecvError};
use super::secure::SecureStream;
use super::sockopts;
use super::tls::{ClientTls, Encryption, Fingerprint, Security};
use crate::bench::BenchError;

/// The port `longhaul serve` listens on by default.
pub const DEFAULT_PORT: u16 = 5290;
/// How long the handshake may wait for each answer.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A control connection whose server has proved the token; the client's proof is queued
/// in `session` (sent by the next [`flush`]).
pub struct Dialed {
    /// The framed control connection.
    pub conn: FramedConn,
    /// The client's session state machine.
    pub session: ClientSession,
    /// The server's address that answered.
    pub addr: SocketAddr,
    /// The handshake's RTT: the smaller of the TCP connect (answered by the kernel) and
    /// the hello round trip.
    pub rtt: Duration,
    /// TLS for the data connections (the certificate the control connection accepted);
    /// `None` with `--encryption off`.
    pub data_tls: Option<ClientTls>,
    /// The server's certificate, when this contact pinned it in the known-servers file.
    pub pinned_now: Option<Fingerprint>,
}

/// Connects to `target` (`HOST`, `HOST:PORT`, `[V6]:PORT`), sets up TLS (trusting the
/// server's certificate as `security` says) and runs the first round trip of the
/// handshake with `token`.
pub fn dial(target: &str, token: &Token, security: &Security) -> Result<Dialed, BenchError> {
    let (host, port) = split_target(target, DEFAULT_PORT)?;
    let tls = ClientTls::new(&host, port, security.trust.clone())?;
    let encryption = security.encryption;
    let addrs = resolve_parts(target, &host, port)?;
    let t_connect = Instant::now();
    let (stream, addr) = connect_any(&addrs)?;
    let connect_rtt = t_connect.elapsed();
    stream
        .set_nodelay(true)
        .and_then(|()| stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT)))
        .map_err(io_err("control connection"))?;
    let (stream, pinned_now) = tls.connect(stream, target, HANDSHAKE_TIMEOUT)?;
    let data_tls = match encryption {
        Encryption::On => Some(tls.for_data()?),
        Encryption::Off => None,
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
    let mut session = ClientSession::with_features(token.clone(), nonce, features);
    let t0 = Instant::now();
    flush(&mut session, &mut conn)?;
    let msg = recv(&mut conn, "authenticating")?;
    let rtt = t0.elapsed().min(connect_rtt);
    if let Err(e) = session.handle(msg) {
        let _ = flush(&mut session, &mut conn);
        return Err(e.into());
    }
    Ok(Dialed {
        conn,
        session,
        addr,
        rtt,
        data_tls,
        pinned_now,
    })
}

impl Dialed {
    /// Sends the queued proof and waits for the server's welcome.
    pub fn authenticate(&mut self) -> Result<(), BenchError> {
        flush(&mut self.session, &mut self.conn)?;
        loop {
            if let Some(ClientEvent::Authenticated { .. }) = self.session.poll_event() {
                return Ok(());
            }
            let msg = recv(&mut self.conn, "authenticating")?;
            self.session.handle(msg).inspect_err(|_| {
                let _ = flush(&mut self.session, &mut self.conn);
            })?;
            flush(&mut self.session, &mut self.conn)?;
        }
    }

    /// The RTT: the minimum over `pings` pings on the idle, authenticated connection.
    pub fn measure_rtt(&mut self, pings: u32) -> Result<Duration, BenchError> {
        let mut rtt = self.rtt;
        for seq in 0..pings {
            let t0 = Instant::now();
            self.session.ping(seq);
            flush(&mut self.session, &mut self.conn)?;
            loop {
                let msg = recv(&mut self.conn, "measuring the RTT")?;
                self.session.handle(msg)?;
                if let Some(ClientEvent::Pong { seq: s }) = self.session.poll_event() {
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

/// Data connections being opened in parallel (one RTT, not N, for TCP and TLS alike).
/// Buffers are set before connect (the receive buffer fixes the window scale); the
/// hellos go once the session's secret is known ([`DataDialer::attach`]).
pub struct DataDialer {
    connecting: Vec<JoinHandle<Result<SecureStream, BenchError>>>,
}

impl DataDialer {
    /// Starts `n` connects to `addr` with this end's buffer plan, each with a TLS
    /// handshake unless `tls` is `None`; `rx_clamp` (rate, streams, RTT) clamps a
    /// receiver's window for receiver-side pacing.
    pub fn start(
        addr: SocketAddr,
        n: u16,
        side: Side,
        choice: &BufferChoice,
        rx_clamp: Option<(u64, u16, Duration)>,
        tls: Option<ClientTls>,
    ) -> Self {
        let connecting = (0..n)
            .map(|i| {
                let choice = choice.clone();
                let tls = tls.clone();
                std::thread::spawn(move || -> Result<SecureStream, BenchError> {
                    let what = format!("opening data stream {i} to {addr}");
                    let sock =
                        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
                            .map_err(io_err(what.clone()))?;
                    sockopts::apply_buffer(&sock, side, &choice).map_err(io_err(what.clone()))?;
                    sock.connect_timeout(&addr.into(), CONNECT_TIMEOUT)
                        .map_err(io_err(what.clone()))?;
                    let stream: TcpStream = sock.into();
                    if let Some((rate, streams, rtt)) = rx_clamp {
                        sockopts::clamp_for_rx_rate(&stream, rate, streams, rtt)
                            .map_err(io_err(what.clone()))?;
                    }
                    match tls {
                        Some(tls) => {
                            Ok(tls.connect(stream, &addr.to_string(), HANDSHAKE_TIMEOUT)?.0)
                        }
                        None => Ok(SecureStream::plain(stream)),
                    }
                })
            })
            .collect();
        Self { connecting }
    }

    /// Waits for every connect and proves each stream to the server (stream `i` is
    /// `sockets[i]`); needs the authenticated session's secret.
    pub fn attach(self, session: &ClientSession) -> Result<Vec<SecureStream>, BenchError> {
        let mut out = Vec::with_capacity(self.connecting.len());
        for (i, h) in self.connecting.into_iter().enumerate() {
            let sock = h
                .join()
                .map_err(|_| BenchError::Refused("a data connection thread panicked".into()))??;
            let hello = session
                .data_hello(i as u16)
                .ok_or_else(|| BenchError::Refused("the session has no secret yet".into()))?;
            let mut framed = FramedConn::new(sock);
            framed
                .send(&hello)
                .map_err(io_err(format!("data stream {i}")))?;
            out.push(framed.into_parts().0);
        }
        Ok(out)
    }
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

/// Connects to the first address that answers (plain TCP: TLS comes after).
pub fn connect_any(addrs: &[SocketAddr]) -> Result<(TcpStream, SocketAddr), BenchError> {
    let mut last = None;
    for a in addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(s) => return Ok((s, *a)),
            Err(e) => last = Some((*a, e)),
        }
    }
    let (addr, cause) = last.unwrap_or_else(|| {
        (
            addrs[0],
            std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
        )
    });
    Err(BenchError::Connect { addr, cause })
}

/// Reads one bench/session message; the server's error, a close or a timeout is the
/// error, naming what the client was doing.
pub fn recv(conn: &mut FramedConn, what: &'static str) -> Result<Message, BenchError> {
    match conn.recv() {
        Ok(Message::Error { code, message }) => Err(ProtoError::Peer { code, message }.into()),
        Ok(m) => Ok(m),
        Err(RecvError::Proto(p)) => Err(p.into()),
        Err(RecvError::Closed) => Err(BenchError::Io {
            what: format!("the server closed the connection while {what}"),
            cause: std::io::ErrorKind::UnexpectedEof.into(),
        }),
        Err(RecvError::Io(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(BenchError::Timeout(what))
        }
        Err(RecvError::Io(cause)) => Err(BenchError::Io {
            what: format!("control connection, while {what}"),
            cause,
        }),
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
