//! Blocking framed I/O over a connection (plain or TLS, [`SecureStream`]): read and write whole protocol messages, bench
//! messages ([`Message`]) and file-transfer messages ([`TransferMessage`]) alike.

use std::io::{self, Read, Write};

use super::secure::SecureStream;

use longhaul_proto::transfer::{
    decode_transfer_frame, encode_transfer_frame, is_transfer_frame, TransferMessage,
};
use longhaul_proto::{decode_frame, encode_frame, Message, ProtoError};
use longhaul_transfer::opening::ControlFrame;

/// Why reading a message failed.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// The socket failed or timed out.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection.
    #[error("the peer closed the connection")]
    Closed,
    /// The peer sent something that is not a valid frame.
    #[error("{0}")]
    Proto(#[from] ProtoError),
}

/// One received frame of either message family.
#[derive(Debug)]
pub enum Frame {
    /// A bench/session message.
    Bench(Message),
    /// A file-transfer message.
    Transfer(TransferMessage),
}

impl From<Frame> for ControlFrame {
    fn from(frame: Frame) -> Self {
        match frame {
            Frame::Bench(m) => ControlFrame::Session(m),
            Frame::Transfer(m) => ControlFrame::Transfer(m),
        }
    }
}

/// A connection carrying protocol frames.
pub struct FramedConn {
    stream: SecureStream,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl FramedConn {
    /// Wraps a connected stream.
    pub fn new(stream: SecureStream) -> Self {
        Self {
            stream,
            buf: Vec::with_capacity(4096),
            out: Vec::with_capacity(4096),
        }
    }

    /// Wraps a stream with bytes already read from it (see [`FramedConn::into_parts`]).
    pub fn with_buffer(stream: SecureStream, buf: Vec<u8>) -> Self {
        Self {
            stream,
            buf,
            out: Vec::with_capacity(4096),
        }
    }

    /// The underlying stream.
    pub fn stream(&self) -> &SecureStream {
        &self.stream
    }

    /// Gives the stream back, with any bytes read past the last message.
    pub fn into_parts(self) -> (SecureStream, Vec<u8>) {
        (self.stream, self.buf)
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &Message) -> io::Result<()> {
        self.out.clear();
        encode_frame(msg, &mut self.out);
        self.stream.write_all(&self.out)
    }

    /// Sends one file-transfer message.
    pub fn send_transfer(&mut self, msg: &TransferMessage) -> io::Result<()> {
        self.out.clear();
        encode_transfer_frame(msg, &mut self.out)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        self.stream.write_all(&self.out)
    }

    /// Receives one bench message; a file-transfer frame here is a protocol error.
    pub fn recv(&mut self) -> Result<Message, RecvError> {
        match self.recv_any()? {
            Frame::Bench(m) => Ok(m),
            Frame::Transfer(m) => Err(ProtoError::Unexpected {
                got: m.kind(),
                state: "a bench session",
            }
            .into()),
        }
    }

    /// Sends a frame of either family.
    pub fn send_control(&mut self, frame: &ControlFrame) -> io::Result<()> {
        match frame {
            ControlFrame::Session(m) => self.send(m),
            ControlFrame::Transfer(m) => self.send_transfer(m),
        }
    }

    /// Receives one frame of either family, reading only as many bytes as the frame needs
    /// so a data connection's payload stays in the socket.
    pub fn recv_any(&mut self) -> Result<Frame, RecvError> {
        loop {
            if is_transfer_frame(&self.buf) == Some(true) {
                if let Some((msg, used)) = decode_transfer_frame(&self.buf)? {
                    self.buf.drain(..used);
                    return Ok(Frame::Transfer(msg));
                }
            } else if let Some((msg, used)) = decode_frame(&self.buf)? {
                self.buf.drain(..used);
                return Ok(Frame::Bench(msg));
            }
            let want = match self.buf.len() {
                n if n < longhaul_proto::FRAME_HEADER_LEN => longhaul_proto::FRAME_HEADER_LEN - n,
                _ => {
                    let len =
                        u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                            as usize;
                    longhaul_proto::FRAME_HEADER_LEN + len - self.buf.len()
                }
            };
            let start = self.buf.len();
            self.buf.resize(start + want, 0);
            let n = match self.stream.read(&mut self.buf[start..]) {
                Ok(n) => n,
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(e.into());
                }
            };
            self.buf.truncate(start + n);
            if n == 0 {
                return Err(RecvError::Closed);
            }
        }
    }
}
