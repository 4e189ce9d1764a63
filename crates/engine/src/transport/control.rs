//! The control connection once a run or transfer is under way, for bench and cp alike:
//! one writer shared by every thread (acks, digests, intervals, errors; many small
//! messages leave in few writes), one reader thread that turns frames into [`Incoming`]
//! items, keepalives and a user timeout so a peer that vanishes is noticed, and when the
//! peer last said anything ([`ControlLink::silent_for`]).

use std::io::{self, Write};
use std::net::Shutdown;

use super::secure::SecureStream;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhaul_proto::transfer::{encode_transfer_frame, TransferMessage};
use longhaul_proto::{encode_frame, ErrorCode, Message};

use crate::transport::framed::{Frame, FramedConn, RecvError};

/// What the reader thread hands over.
#[derive(Debug)]
pub enum Incoming {
    /// A transfer message.
    Msg(TransferMessage),
    /// A bench/session message other than an error or a ping (a bench run's intervals
    /// and results; a transfer treats one as the peer breaking the protocol).
    Bench(Message),
    /// The peer reported an error and ends the transfer.
    PeerError(String),
    /// The connection failed or closed, or the peer broke the protocol.
    Lost(String),
}

/// Bytes waiting for the writer thread.
#[derive(Default)]
struct Outbox {
    buf: Vec<u8>,
    /// The writer took bytes out of `buf` and has not finished writing them: `flush`
    /// must wait for this too, or a `shutdown` after it overtakes the last message.
    writing: bool,
    /// The writer failed; later sends fail with this.
    failed: Option<String>,
    closed: bool,
}

/// Most bytes queued before a sender waits for the writer (bounds memory).
const OUTBOX_LIMIT: usize = 8 << 20;
/// Most items the reader thread queues before it stops reading (bounds memory: an item
/// decodes from one frame of at most 64 KiB, so the queue holds a few MiB at most; a
/// peer that sends faster than this end handles meets TCP's back-pressure instead).
pub const INBOX_ITEMS: usize = 64;

/// The writing half, cloneable across threads. Messages are queued and written by one
/// thread, so thousands of small acks and digests leave in a few large writes.
#[derive(Clone)]
pub struct ControlTx {
    outbox: Arc<(Mutex<Outbox>, Condvar)>,
    stream: Arc<SecureStream>,
}

impl ControlTx {
    fn new(stream: SecureStream) -> io::Result<(Self, JoinHandle<()>)> {
        let stream = Arc::new(stream);
        let outbox: Arc<(Mutex<Outbox>, Condvar)> = Arc::default();
        let writer = {
            let (outbox, stream) = (outbox.clone(), stream.clone());
            std::thread::Builder::new()
                .name("cp-control-tx".into())
                .spawn(move || write_loop(&outbox, &stream))?
        };
        Ok((Self { outbox, stream }, writer))
    }

    /// Sends one transfer message.
    pub fn send(&self, msg: &TransferMessage) -> io::Result<()> {
        self.send_all(std::slice::from_ref(msg))
    }

    /// Sends every transfer message `next` yields (a session's `poll_transmit`), in one
    /// queueing.
    pub fn send_drained(
        &self,
        mut next: impl FnMut() -> Option<TransferMessage>,
    ) -> io::Result<()> {
        let mut out = Vec::new();
        while let Some(m) = next() {
            out.push(m);
        }
        if out.is_empty() {
            return Ok(());
        }
        self.send_all(&out)
    }

    /// Sends one bench/session message.
    pub fn send_bench(&self, msg: &Message) -> io::Result<()> {
        let mut buf = Vec::with_capacity(256);
        encode_frame(msg, &mut buf);
        self.queue(&buf)
    }

    /// Sends several transfer messages.
    pub fn send_all(&self, msgs: &[TransferMessage]) -> io::Result<()> {
        let mut bytes = Vec::with_capacity(64 * msgs.len());
        for m in msgs {
            encode_transfer_frame(m, &mut bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        }
        self.queue(&bytes)
    }

    /// Tells the peer the transfer failed, and why (best effort).
    pub fn send_error(&self, message: &str) {
        let mut buf = Vec::new();
        encode_frame(
            &Message::Error {
                code: ErrorCode::Aborted,
                message: message.chars().take(2000).collect(),
            },
            &mut buf,
        );
        let _ = self.queue(&buf);
        let _ = self.flush(Duration::from_secs(2));
    }

    fn queue(&self, bytes: &[u8]) -> io::Result<()> {
        let (lock, cv) = &*self.outbox;
        let mut o = lock
            .lock()
            .map_err(|_| io::Error::other("control writer poisoned"))?;
        while o.buf.len() > OUTBOX_LIMIT && o.failed.is_none() && !o.closed {
            o = cv
                .wait(o)
                .map_err(|_| io::Error::other("control writer poisoned"))?;
        }
        if let Some(e) = &o.failed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, e.clone()));
        }
        if o.closed {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "control connection closed",
            ));
        }
        o.buf.extend_from_slice(bytes);
        cv.notify_all();
        Ok(())
    }

    /// Waits until everything queued was written (or `limit` passed).
    pub fn flush(&self, limit: Duration) -> io::Result<()> {
        let (lock, cv) = &*self.outbox;
        let deadline = std::time::Instant::now() + limit;
        let mut o = lock
            .lock()
            .map_err(|_| io::Error::other("control writer poisoned"))?;
        while (!o.buf.is_empty() || o.writing) && o.failed.is_none() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            o = cv
                .wait_timeout(o, left)
                .map_err(|_| io::Error::other("control writer poisoned"))?
                .0;
        }
        match &o.failed {
            Some(e) => Err(io::Error::new(io::ErrorKind::BrokenPipe, e.clone())),
            None => Ok(()),
        }
    }

    /// Writes what is queued, then ends this direction (the peer sees the end of the
    /// stream after our last message; our reader keeps reading until the peer closes,
    /// so nothing unread triggers a reset that would destroy our last message).
    pub fn shutdown(&self) {
        let _ = self.flush(Duration::from_secs(2));
        let (lock, cv) = &*self.outbox;
        if let Ok(mut o) = lock.lock() {
            o.closed = true;
            cv.notify_all();
        }
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

fn write_loop(outbox: &(Mutex<Outbox>, Condvar), stream: &SecureStream) {
    let (lock, cv) = outbox;
    let mut out = Vec::new();
    loop {
        {
            let Ok(mut o) = lock.lock() else { return };
            while o.buf.is_empty() && !o.closed {
                o = match cv.wait(o) {
                    Ok(g) => g,
                    Err(_) => return,
                };
            }
            if o.buf.is_empty() && o.closed {
                return;
            }
            std::mem::swap(&mut out, &mut o.buf);
            o.writing = true;
            cv.notify_all();
        }
        let mut w: &SecureStream = stream;
        if let Err(e) = w.write_all(&out) {
            if let Ok(mut o) = lock.lock() {
                o.failed = Some(e.to_string());
                o.writing = false;
                cv.notify_all();
            }
            return;
        }
        out.clear();
        // Wake anyone waiting in `flush` for the queue to drain.
        if let Ok(mut o) = lock.lock() {
            o.writing = false;
            if o.buf.is_empty() {
                cv.notify_all();
            }
        }
    }
}

/// A control connection split into a shared writer and a reader thread.
pub struct ControlLink {
    /// Writer.
    pub tx: ControlTx,
    /// Items from the reader thread.
    pub rx: mpsc::Receiver<Incoming>,
    reader: Option<JoinHandle<()>>,
    writer: Option<JoinHandle<()>>,
    /// Everything is acknowledged: on drop, do not wait for the peer to close.
    finished: std::sync::atomic::AtomicBool,
    /// Raised by the reader when the connection ends (closed, failed or cut).
    gone: Arc<std::sync::atomic::AtomicBool>,
    /// When the link started; `heard` counts from it.
    started: Instant,
    /// Nanoseconds from `started` to the last frame the peer sent (keepalives included).
    heard: Arc<AtomicU64>,
}

impl ControlLink {
    /// Splits `conn` (keeping any bytes it already read).
    pub fn start(conn: FramedConn) -> io::Result<Self> {
        let (stream, leftover) = conn.into_parts();
        stream.set_read_timeout(None)?;
        let _ = stream.set_nodelay(true);
        // A peer that vanishes without a word (host down, path cut) is noticed within
        // about a minute: keepalives while idle, a user timeout while sending.
        let sock = socket2::SockRef::from(&stream);
        let keepalive = socket2::TcpKeepalive::new()
            .with_time(Duration::from_secs(15))
            .with_interval(Duration::from_secs(5))
            .with_retries(6);
        sock.set_tcp_keepalive(&keepalive)?;
        longhaul_sys::socket::set_user_timeout(&stream, 45_000)?;
        let (control_tx, writer) = ControlTx::new(stream.try_clone()?)?;
        let (tx, rx) = mpsc::sync_channel(INBOX_ITEMS);
        let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ended = gone.clone();
        let started = Instant::now();
        let heard = Arc::new(AtomicU64::new(0));
        let heard_by_reader = heard.clone();
        let reader = std::thread::Builder::new()
            .name("cp-control".into())
            .spawn(move || {
                let mut conn = FramedConn::with_buffer(stream, leftover);
                loop {
                    let frame = conn.recv_any();
                    if frame.is_ok() {
                        let at = started.elapsed().as_nanos();
                        heard_by_reader.store(
                            u64::try_from(at).unwrap_or(u64::MAX),
                            std::sync::atomic::Ordering::Relaxed,
                        );
                    }
                    let item = match frame {
                        Ok(Frame::Transfer(m)) => Incoming::Msg(m),
                        Ok(Frame::Bench(Message::Error { message, .. })) => {
                            Incoming::PeerError(message)
                        }
                        Ok(Frame::Bench(Message::Ping { .. } | Message::Pong { .. })) => continue,
                        Ok(Frame::Bench(m)) => Incoming::Bench(m),
                        Err(RecvError::Closed) => {
                            Incoming::Lost("the peer closed the control connection".into())
                        }
                        Err(e) => Incoming::Lost(format!("control connection: {e}")),
                    };
                    let last = !matches!(item, Incoming::Msg(_) | Incoming::Bench(_));
                    if last {
                        ended.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    if tx.send(item).is_err() || last {
                        return;
                    }
                }
            })?;
        Ok(Self {
            tx: control_tx,
            rx,
            reader: Some(reader),
            writer: Some(writer),
            finished: std::sync::atomic::AtomicBool::new(false),
            gone,
            started,
            heard,
        })
    }

    /// Raised once the connection has ended (the peer closed it, it failed or was cut):
    /// for waits that do not read it, such as a server's for its data streams.
    pub fn gone(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.gone.clone()
    }

    /// The peer acknowledged everything this end needs (every file committed): dropping
    /// the link then sends what is queued and closes without waiting a round trip for the
    /// peer's close (whatever the peer still sends is of no use).
    pub fn mark_finished(&self) {
        self.finished
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// How long the peer has sent nothing (no message, no keepalive), or since the link
    /// started when it has sent nothing yet.
    pub fn silent_for(&self) -> Duration {
        let heard = Duration::from_nanos(self.heard.load(std::sync::atomic::Ordering::Relaxed));
        self.started.elapsed().saturating_sub(heard)
    }

    /// The next item, waiting at most `wait`.
    pub fn recv_timeout(&self, wait: Duration) -> Option<Incoming> {
        match self.rx.recv_timeout(wait) {
            Ok(i) => Some(i),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => Some(Incoming::Lost(
                "the control connection's reader stopped".into(),
            )),
        }
    }
}

impl Drop for ControlLink {
    fn drop(&mut self) {
        self.tx.shutdown();
        if self.finished.load(std::sync::atomic::Ordering::SeqCst) {
            // Wakes the reader at once (it reads an end of stream).
            let _ = self.tx.stream.shutdown(Shutdown::Read);
        } else {
            // Let the reader drain what the peer still sends until it closes (at most 2 s),
            // so that a last message (a refusal) is not lost to a reset.
            let _ = self
                .tx
                .stream
                .set_read_timeout(Some(Duration::from_secs(2)));
        }
        // A reader blocked on a full inbox wakes when the inbox goes away.
        drop(std::mem::replace(&mut self.rx, mpsc::sync_channel(0).1));
        for h in [self.reader.take(), self.writer.take()]
            .into_iter()
            .flatten()
        {
            let _ = h.join();
        }
        let _ = self.tx.stream.shutdown(Shutdown::Both);
    }
}

/// Closes a connection after a last message without losing it: ends our direction,
/// then reads (and drops) what the peer still sends until it closes or `limit` passes.
pub fn close_gracefully(stream: &SecureStream, limit: Duration) {
    use std::io::Read;
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let deadline = std::time::Instant::now() + limit;
    let mut buf = [0u8; 16 * 1024];
    let mut r: &SecureStream = stream;
    while std::time::Instant::now() < deadline {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
}
