//! What the server answers on the control connection while the copy is set up: the
//! welcome and its `TransferReady` (the chunk size, and what it did with a jump ask), or
//! its refusal.

use std::time::Duration;

use longhaul_proto::transfer::TransferMessage;
use longhaul_proto::{ClientSession, Message};

use super::CpError;
use crate::transport::framed::{Frame, FramedConn};

/// The server's `TransferReady`: the chunk size (checked against the request's by
/// `longhaul_transfer::request::check_answer`), and what it did with a jump ask.
pub(super) struct Ready {
    pub(super) chunk_size: u64,
    pub(super) jump_start_bps: u64,
    pub(super) jump_note: String,
}

/// Waits for the welcome (our proof accepted) and the server's `TransferReady`.
pub(super) fn await_ready(
    conn: &mut FramedConn,
    session: &mut ClientSession,
) -> Result<Ready, CpError> {
    let mut welcomed = false;
    loop {
        match conn.recv_any() {
            Ok(Frame::Bench(Message::Error { message, .. })) => {
                return Err(CpError::Refused(message))
            }
            Ok(Frame::Bench(m)) => {
                session.handle(m).map_err(|e| CpError::Setup(e.into()))?;
                while let Some(ev) = session.poll_event() {
                    if matches!(ev, longhaul_proto::ClientEvent::Authenticated { .. }) {
                        welcomed = true;
                    }
                }
            }
            Ok(Frame::Transfer(TransferMessage::TransferReady {
                chunk_size,
                jump_start_bps,
                jump_note,
            })) => {
                if !welcomed {
                    return Err(CpError::Protocol("TransferReady before the welcome".into()));
                }
                return Ok(Ready {
                    chunk_size,
                    jump_start_bps,
                    jump_note,
                });
            }
            Ok(Frame::Transfer(other)) => {
                return Err(CpError::Protocol(format!(
                    "expected TransferReady, got {}",
                    other.kind()
                )))
            }
            Err(e) => return Err(CpError::Lost(format!("waiting for the server: {e}"))),
        }
    }
}

/// The server's error message, if one is waiting on the control connection.
pub(super) fn server_refusal(conn: &mut crate::transport::framed::FramedConn) -> Option<CpError> {
    let _ = conn.stream().set_read_timeout(Some(Duration::from_secs(2)));
    match conn.recv_any() {
        Ok(crate::transport::framed::Frame::Bench(longhaul_proto::Message::Error {
            message,
            ..
        })) => Some(CpError::Refused(message)),
        _ => None,
    }
}
