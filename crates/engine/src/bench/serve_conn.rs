//! One accepted connection of `longhaul serve`: TLS first (a connection without it may
//! only be a data stream of a session that agreed to `--encryption off`, or an older
//! client, told which version this server speaks); then its first message decides what it is —
//! a data stream attaching to a session ([`AttachTable`](crate::transport::attach::AttachTable)),
//! a control connection starting a session (bench run, transfer or host report), or
//! something to refuse — within [`FIRST_MESSAGE_TIMEOUT`].

use std::net::{SocketAddr, TcpStream};

use crate::transport::secure::SecureStream;
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
    tcp: TcpStream,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    cfg: &ServeConfig,
    log: &LogFn,
) -> Option<Result<(), ServeError>> {
    let _ = tcp.set_read_timeout(Some(FIRST_MESSAGE_TIMEOUT));
    let _ = tcp.set_nodelay(true);
    let mut first_byte = [0u8; 1];
    let stream = match tcp.peek(&mut first_byte) {
        Ok(1) if crate::transport::tls::starts_tls(first_byte[0]) => {
            match cfg.tls.accept(tcp, FIRST_MESSAGE_TIMEOUT) {
                Ok(s) => s,
                Err(e) => {
                    shared.pending.fetch_sub(1, Ordering::AcqRel);
                    log(&format!("{peer}: TLS handshake failed: {e}"));
                    return None;
                }
            }
        }
        Ok(1) => SecureStream::plain(tcp),
        other => {
            shared.pending.fetch_sub(1, Ordering::AcqRel);
            if let Err(e) = other {
                log(&format!("{peer}: no hello: {e}"));
            }
            return None;
        }
    };
    let tls = stream.is_tls();
    let mut conn = FramedConn::new(stream);
    let first = conn.recv();
    shared.pending.fetch_sub(1, Ordering::AcqRel);
    if let (false, Ok(Message::ClientHello { version, .. })) = (tls, &first) {
        let why = format!(
            "this server speaks longhaul protocol {}, which starts every connection with TLS; \
             the client speaks protocol {version} without TLS: install the same longhaul \
             version at both ends",
            longhaul_proto::PROTOCOL_VERSION
        );
        let _ = conn.send(&Message::Error {
            code: ErrorCode::Version,
            message: why.clone(),
        });
        log(&format!("{peer}: refused: {why}"));
        return None;
    }
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
