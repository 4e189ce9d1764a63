//! One accepted connection of `longhaul serve`: its first message decides what it is —
//! a data stream attaching to a session ([`AttachTable`](crate::transport::attach::AttachTable)),
//! a control connection starting a session (bench run, transfer or host report), or
//! something to refuse — within [`FIRST_MESSAGE_TIMEOUT`].

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use longhaul_proto::{ErrorCode, Message, ProtoError};

use super::serve_error::ServeError;
use super::server::{run_session, LogFn, ServeConfig, Shared, MAX_SESSIONS};
use crate::transport::framed::{FramedConn, RecvError};

/// How long an accepted connection may take to send its first message.
pub const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handles one accepted connection; returns a session outcome for control connections.
pub(super) fn handle_connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    cfg: &ServeConfig,
    log: &LogFn,
) -> Option<Result<(), ServeError>> {
    let _ = stream.set_read_timeout(Some(FIRST_MESSAGE_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let mut conn = FramedConn::new(stream);
    let first = conn.recv();
    shared.pending.fetch_sub(1, Ordering::AcqRel);
    match first {
        Ok(Message::DataHello {
            session_id,
            stream,
            mac,
        }) => {
            attach_data(conn, session_id, stream, &mac, shared, peer, log);
            None
        }
        Ok(hello @ Message::ClientHello { .. }) => {
            if shared.active.fetch_add(1, Ordering::AcqRel) >= MAX_SESSIONS {
                shared.active.fetch_sub(1, Ordering::AcqRel);
                let _ = conn.send(&Message::Error {
                    code: ErrorCode::Busy,
                    message: format!(
                        "the server already runs {MAX_SESSIONS} sessions; try again later"
                    ),
                });
                log(&format!(
                    "{peer}: refused, {MAX_SESSIONS} sessions already running"
                ));
                return Some(Err(ServeError::Busy));
            }
            let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
            let outcome = run_session(conn, hello, id, peer, shared, cfg, log);
            shared.active.fetch_sub(1, Ordering::AcqRel);
            match &outcome {
                Ok(summary) => log(&format!("session {id} from {peer}: {summary}")),
                Err(e) => log(&format!("session {id} from {peer}: error: {e}")),
            }
            Some(outcome.map(|_| ()))
        }
        Ok(other) => {
            let e = ProtoError::Unexpected {
                got: other.kind(),
                state: "waiting for a hello",
            };
            let _ = conn.send(&Message::Error {
                code: ErrorCode::Protocol,
                message: e.to_string(),
            });
            log(&format!("{peer}: {e}"));
            None
        }
        Err(RecvError::Proto(e)) => {
            let _ = conn.send(&Message::Error {
                code: ErrorCode::Protocol,
                message: format!("{e}; is this a longhaul client?"),
            });
            log(&format!("{peer}: malformed first message: {e}"));
            None
        }
        Err(e) => {
            log(&format!("{peer}: no hello: {e}"));
            None
        }
    }
}

fn attach_data(
    conn: FramedConn,
    session_id: u64,
    stream: u16,
    mac: &[u8; 32],
    shared: &Shared,
    peer: SocketAddr,
    log: &LogFn,
) {
    let reply = conn.stream().try_clone();
    if let Err(e) = shared.attach.attach(conn, session_id, stream, mac) {
        log(&format!("{peer}: data connection refused: {e}"));
        if let Ok(sock) = reply {
            let _ = FramedConn::new(sock).send(&Message::Error {
                code: ErrorCode::Auth,
                message: e.to_string(),
            });
        }
    }
}
