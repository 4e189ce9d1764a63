//! The driver of a copy's opening on the control connection
//! ([`longhaul_transfer::opening::CopyOpening`]): sends its flight (proof, request, rules, a
//! push's list) and waits for the server's welcome and `TransferReady`, or its refusal.

use std::time::Duration;

use longhaul_transfer::opening::{CopyOpening, OpeningError, ServerAnswer};

use super::CpError;
use crate::transport::framed::{Frame, FramedConn, RecvError};
use crate::transport::setup::{read_until, ReadFailed, SetupError};

/// Sends every frame the opening has queued; `what` names them for an error. A write that
/// fails may be the server refusing our proof and closing: its reason beats our error.
pub(super) fn send_flight(
    conn: &mut FramedConn,
    opening: &mut CopyOpening,
    what: &str,
) -> Result<(), CpError> {
    while let Some(frame) = opening.poll_transmit() {
        if let Err(e) = conn.send_control(&frame) {
            return Err(server_refusal(conn).unwrap_or_else(|| CpError::io(what, e)));
        }
    }
    Ok(())
}

/// Waits for the welcome (our proof accepted) and the server's `TransferReady`; the
/// keepalives of a long walk (unsolicited `Pong`s) are taken by the session and need no
/// answer.
pub(super) fn await_answer(
    conn: &mut FramedConn,
    opening: &mut CopyOpening,
) -> Result<ServerAnswer, CpError> {
    // Each read waits as long as the opening's wait allows (a long walk's keepalives
    // restart it).
    read_until(conn, opening, |o| o.answer().is_some()).map_err(|e| match e {
        SetupError::Machine(e) => opening_error(e),
        SetupError::Read(r) => CpError::Lost(lost_text(&r)),
    })?;
    opening
        .answer()
        .cloned()
        .ok_or_else(|| CpError::Protocol("no TransferReady was read".into()))
}

/// What a copy reports when the read for its answer failed.
fn lost_text(r: &ReadFailed) -> String {
    let what = r.wait.what();
    match &r.cause {
        _ if r.timed_out() => format!(
            "the server sent nothing for {} s while {what}",
            r.wait.limit().as_secs()
        ),
        RecvError::Closed => format!("the server closed the connection while {what}"),
        RecvError::Proto(e) => e.to_string(),
        RecvError::Io(e) => format!("{what}: {e}"),
    }
}

/// A failed opening as the copy reports it.
pub(super) fn opening_error(e: OpeningError) -> CpError {
    match e {
        OpeningError::Refused(message) => CpError::Refused(message),
        OpeningError::Session(e) => CpError::Setup(e.into()),
        other => CpError::Protocol(other.to_string()),
    }
}

/// The server's error message, if one is waiting on the control connection.
pub(super) fn server_refusal(conn: &mut FramedConn) -> Option<CpError> {
    let _ = conn.stream().set_read_timeout(Some(Duration::from_secs(2)));
    match conn.recv_any() {
        Ok(Frame::Bench(longhaul_proto::Message::Error { message, .. })) => {
            Some(CpError::Refused(message))
        }
        _ => None,
    }
}
