//! The control connection during a transfer: one writer shared by every thread (acks,
//! digests, errors), and one reader thread that turns frames into [`Incoming`] items.

use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use longhaul_proto::transfer::{encode_transfer_frame, TransferMessage};
use longhaul_proto::{encode_frame, ErrorCode, Message};

use crate::conn::{Frame, FramedConn, RecvError};

/// What the reader thread hands over.
#[derive(Debug)]
pub enum Incoming {
    /// A transfer message.
    Msg(TransferMessage),
    /// The peer reported an error and ends the transfer.
    PeerError(String),
    /// The connection failed or closed, or the peer broke the protocol.
    Lost(String),
}

/// The writing half, cloneable across threads.
#[derive(Clone)]
pub struct ControlTx {
    stream: Arc<Mutex<TcpStream>>,
}

impl ControlTx {
    /// Sends one transfer message.
    pub fn send(&self, msg: &TransferMessage) -> io::Result<()> {
        let mut buf = Vec::with_capacity(64);
        encode_transfer_frame(msg, &mut buf)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        self.write(&buf)
    }

    /// Sends several transfer messages in one write.
    pub fn send_all(&self, msgs: &[TransferMessage]) -> io::Result<()> {
        let mut buf = Vec::new();
        for m in msgs {
            encode_transfer_frame(m, &mut buf)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
            if buf.len() > 1 << 20 {
                self.write(&buf)?;
                buf.clear();
            }
        }
        self.write(&buf)
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
        let _ = self.write(&buf);
    }

    fn write(&self, buf: &[u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let mut s = self
            .stream
            .lock()
            .map_err(|_| io::Error::other("control writer poisoned"))?;
        s.write_all(buf)
    }

    /// Closes both directions (unblocks the reader thread).
    pub fn shutdown(&self) {
        if let Ok(s) = self.stream.lock() {
            let _ = s.shutdown(Shutdown::Both);
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
}

impl ControlLink {
    /// Splits `conn` (keeping any bytes it already read).
    pub fn start(conn: FramedConn) -> io::Result<Self> {
        let (stream, leftover) = conn.into_parts();
        stream.set_read_timeout(None)?;
        let _ = stream.set_nodelay(true);
        let writer = stream.try_clone()?;
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::Builder::new()
            .name("cp-control".into())
            .spawn(move || {
                let mut conn = FramedConn::with_buffer(stream, leftover);
                loop {
                    let item = match conn.recv_any() {
                        Ok(Frame::Transfer(m)) => Incoming::Msg(m),
                        Ok(Frame::Bench(Message::Error { message, .. })) => {
                            Incoming::PeerError(message)
                        }
                        Ok(Frame::Bench(Message::Ping { .. } | Message::Pong { .. })) => continue,
                        Ok(Frame::Bench(m)) => Incoming::Lost(format!(
                            "the peer sent {} during a file transfer",
                            m.kind()
                        )),
                        Err(RecvError::Closed) => {
                            Incoming::Lost("the peer closed the control connection".into())
                        }
                        Err(e) => Incoming::Lost(format!("control connection: {e}")),
                    };
                    let last = !matches!(item, Incoming::Msg(_));
                    if tx.send(item).is_err() || last {
                        return;
                    }
                }
            })?;
        Ok(Self {
            tx: ControlTx {
                stream: Arc::new(Mutex::new(writer)),
            },
            rx,
            reader: Some(reader),
        })
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
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}
