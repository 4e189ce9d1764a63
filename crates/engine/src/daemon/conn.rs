//! One accepted connection of `longhaul serve`: TLS first (a connection without it may
//! only be a data stream of a session that agreed to `--encryption off`, or an older
//! client, told which version this server speaks); then its first message decides what it is —
//! a data stream attaching to a session ([`AttachTable`](crate::transport::attach::AttachTable)),
//! a control connection starting a session (bench run, transfer or host report), or
//! something to refuse. Until it proves the token (or its session's secret) it holds a
//! place at the server's door ([`PendingConn`]), which closes it when its pre-authentication
//! deadline passes or when it is the oldest in a full door.

use std::net::TcpStream;

use crate::transport::secure::SecureStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use longhaul_policy::Stage;
use longhaul_proto::{encode_frame, ChannelBinding, ErrorCode, Message, ProtoError, ServerSession};

use super::door::PendingConn;
use super::error::ServeError;
use super::metrics::Refusal;
use super::server::{LogFn, ServeConfig, Shared};
use super::session::{run_session, Proof};
use crate::transport::framed::{FramedConn, RecvError};

/// How long one read of the TLS handshake or the first message may take. Only a backstop:
/// the door closes the connection at its pre-authentication deadline (see
/// [`longhaul_policy::DoorLimits`]), which is shorter except for the data connections of
/// a source whose session waits for a slot.
const FIRST_MESSAGE_TIMEOUT: Duration = longhaul_proto::SERVER_WAIT;

/// Handles one accepted connection; returns a session outcome for a control connection
/// whose client proved the token. Whatever fails before the proof (TLS, the hello, a
/// wrong token) is logged and has no outcome, so that a stranger who reaches the port
/// cannot end `serve --once` or `ssh-server`.
pub(super) fn handle_connection(
    tcp: TcpStream,
    pending: PendingConn,
    shared: &Arc<Shared>,
    cfg: &ServeConfig,
    log: &LogFn,
) -> Option<Result<(), ServeError>> {
    let peer = pending.peer();
    let _ = tcp.set_read_timeout(Some(FIRST_MESSAGE_TIMEOUT));
    let _ = tcp.set_nodelay(true);
    let mut first_byte = [0u8; 1];
    let mut server_nonce = [0u8; 32];
    if let Err(e) = getrandom::getrandom(&mut server_nonce) {
        shared.refuse(
            log,
            Refusal::NoHello,
            &format!("{peer}: no random nonce: {e}"),
        );
        return None;
    }
    let peeked = tcp.peek(&mut first_byte);
    if let Ok(1) = peeked {
        pending.reached(Stage::Handshaking);
    }
    let stream = match peeked {
        Ok(1) if crate::transport::tls::starts_tls(first_byte[0]) => {
            // Our hello leaves in the flight of the TLS Finished, before we know whether
            // this is a control or a data connection (a data connection's client reads
            // past it).
            let mut early = Vec::new();
            for m in ServerSession::hello(&cfg.keyring, server_nonce, &cfg.tls.fingerprint().0) {
                encode_frame(&m, &mut early);
            }
            match cfg.tls.accept(tcp, FIRST_MESSAGE_TIMEOUT, &early) {
                Ok(s) => {
                    pending.reached(Stage::Secured);
                    s
                }
                Err(e) => {
                    shared.refuse(
                        log,
                        Refusal::Tls,
                        &format!("{peer}: TLS handshake failed: {e}"),
                    );
                    return None;
                }
            }
        }
        Ok(1) => SecureStream::plain(tcp),
        other => {
            shared.metrics.refused(Refusal::NoHello);
            if let Err(e) = other {
                shared.log_conn(log, &format!("{peer}: no hello: {e}"));
            }
            return None;
        }
    };
    let tls = stream.is_tls();
    let mut conn = FramedConn::new(stream);
    let first = conn.recv();
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
        shared.refuse(
            log,
            Refusal::OldProtocol,
            &format!("{peer}: refused: {why}"),
        );
        return None;
    }
    match first {
        Ok(Message::DataHello {
            session_id,
            stream,
            mac,
        }) => {
            pending.reached(Stage::Hello);
            // Checked against the session's secret as soon as its control connection
            // proved the token (it leaves the door then), and handed over when the session
            // registers (it may still be reading the request); the thread ends after.
            attach_data(conn, session_id, stream, &mac, pending, shared, log);
            None
        }
        Ok(hello @ Message::ClientHello { .. }) => {
            pending.reached(Stage::Hello);
            shared.next_id.fetch_add(1, Ordering::Relaxed);
            let Some(exporter) = conn.stream().exporter() else {
                shared.refuse(
                    log,
                    Refusal::Protocol,
                    &format!("{peer}: a control connection without TLS"),
                );
                return None;
            };
            let binding = ChannelBinding {
                cert: cfg.tls.fingerprint().0,
                exporter,
            };
            let session = ServerSession::new(cfg.keyring.clone(), server_nonce, binding);
            let id = session.session_id();
            // Its data hellos, in flight at the same time, wait for it.
            let _announced = shared.attach.announce(id);
            // The session takes a slot once the client proved the token (waiting in line
            // for one when all are taken), and leaves the door then.
            let mut proved = Proof::Nothing;
            let outcome = run_session(conn, hello, session, pending, shared, cfg, &mut proved);
            let m = &shared.metrics;
            match (&outcome, proved != Proof::Nothing) {
                (Err(ServeError::Busy), _) => m.refused(Refusal::Busy),
                (Ok(_), true) => _ = m.sessions_ok.fetch_add(1, Ordering::Relaxed),
                (Err(_), true) => _ = m.sessions_failed.fetch_add(1, Ordering::Relaxed),
                (_, false) => m.refused(Refusal::Auth),
            }
            match &outcome {
                Err(ServeError::Busy) => {
                    shared.log_conn(log, &format!("{peer}: refused, no session slot free"));
                }
                Ok(summary) => {
                    shared.log_always(log, &format!("session {id} from {peer}: {summary}"))
                }
                Err(e) => shared.log_conn(log, &format!("session {id} from {peer}: error: {e}")),
            }
            // A ticket issued is not the session `once` waits for: its pull comes next.
            (proved == Proof::Session).then(|| outcome.map(|_| ()))
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
            shared.refuse(log, Refusal::Protocol, &format!("{peer}: {e}"));
            None
        }
        Err(RecvError::Proto(e)) => {
            let _ = conn.send(&Message::Error {
                code: ErrorCode::Protocol,
                message: format!("{e}; is this a longhaul client?"),
            });
            shared.refuse(
                log,
                Refusal::Protocol,
                &format!("{peer}: malformed first message: {e}"),
            );
            None
        }
        Err(e) => {
            shared.refuse(log, Refusal::NoHello, &format!("{peer}: no hello: {e}"));
            None
        }
    }
}

fn attach_data(
    conn: FramedConn,
    session_id: u64,
    stream: u16,
    mac: &[u8; 32],
    mut pending: PendingConn,
    shared: &Shared,
    log: &LogFn,
) {
    let peer = pending.peer();
    let reply = conn.stream().try_clone();
    let binding = conn.stream().exporter();
    let binding: &[u8] = binding.as_ref().map_or(&[], |b| b);
    let mut vouched = || pending.proved();
    match shared
        .attach
        .attach(conn, session_id, stream, mac, binding, &mut vouched)
    {
        Ok(()) => {}
        Err(e) => {
            shared.refuse(
                log,
                Refusal::DataAuth,
                &format!("{peer}: data connection refused: {e}"),
            );
            if let Ok(sock) = reply {
                let _ = FramedConn::new(sock).send(&Message::Error {
                    code: ErrorCode::Auth,
                    message: e.to_string(),
                });
            }
        }
    }
}
