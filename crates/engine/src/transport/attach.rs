//! The server's side of the data connections, for bench and cp alike: sessions that
//! expect streams are registered in an [`AttachTable`]; an accepted connection whose
//! first frame is a `DataHello` is checked against its session's secret and handed to
//! that session; the session waits for all its streams ([`Expected::collect`]).
//!
//! A client sends its data hellos in the flight of its proof and request (see
//! docs/startup.md), so a hello may arrive before its session has read the request and
//! registered: it waits for the session to appear — at most [`EARLY_HELLO_GRACE`] for a
//! session no control connection has announced yet ([`AttachTable::announce`], as its
//! hello arrives), at most [`EARLY_HELLO_WAIT`] for an announced one. Once the control
//! connection has proved the token ([`AttachTable::prove`]), a waiting hello is checked
//! against the session's secret at once: one that holds is the proven session's data
//! and leaves the server's door (it can no longer be evicted by strangers), one that
//! does not is refused without waiting.

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::{DataAttachments, SessionSecret};

use super::framed::FramedConn;
use super::secure::SecureStream;

/// How long a session waits for its data streams.
pub const ATTACH_TIMEOUT: Duration = longhaul_proto::ATTACH_WAIT;

/// How often a wait for data streams looks whether its client is gone.
const GONE_CHECK: Duration = Duration::from_millis(50);
/// How long a data hello waits for an announced session to register (the request is
/// read and checked, a pull's tree walked, a slot waited for).
pub const EARLY_HELLO_WAIT: Duration = Duration::from_secs(15);
/// How long a data hello waits for a session nobody announced: its control connection's
/// hello is in flight at the same time. Shorter than the door's deadline for an unknown
/// source, so a hello naming no session is told so.
pub const EARLY_HELLO_GRACE: Duration = Duration::from_secs(2);

struct Pending {
    attach: DataAttachments,
    /// The session agreed to data streams without TLS (`--encryption off`).
    plain_data: bool,
    sink: mpsc::Sender<(u16, SecureStream)>,
}

/// The sessions waiting for data streams.
#[derive(Default)]
pub struct AttachTable {
    sessions: Mutex<HashMap<u64, Pending>>,
    /// Signalled when a session registers or is announced, for hellos that came first.
    registered: Condvar,
    /// Sessions whose control connection said hello but that have not registered yet,
    /// with their secret once the control connection proved the token.
    announced: Mutex<HashMap<u64, Option<SessionSecret>>>,
}

/// A session announced to early data hellos; dropping it withdraws the announcement.
pub struct Announced {
    table: Arc<AttachTable>,
    id: u64,
}

impl Drop for Announced {
    fn drop(&mut self) {
        if let Ok(mut a) = self.table.announced.lock() {
            a.remove(&self.id);
        }
    }
}

/// Why a data connection was refused (the text goes back to the peer), or why a
/// session did not get its data streams.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// No session with this id expects streams.
    #[error("unknown session")]
    UnknownSession,
    /// The stream's proof or index is wrong.
    #[error("{0}")]
    Refused(String),
    /// The table's lock was poisoned by a panic.
    #[error("the session table was poisoned by a panic")]
    Poisoned,
    /// Not every data stream arrived in time.
    #[error(
        "only {arrived} of {expected} data streams arrived within {} s; is a firewall blocking new connections to this port?",
        waited.as_secs()
    )]
    Timeout {
        /// Streams that attached.
        arrived: u16,
        /// Streams the session expected.
        expected: u16,
        /// How long the session waited.
        waited: Duration,
    },
    /// The session's control connection ended while its data streams attached (the
    /// client was stopped): nothing more will come.
    #[error("the client's control connection ended while {arrived} of {expected} data streams had attached")]
    ControlGone {
        /// Streams that attached.
        arrived: u16,
        /// Streams the session expected.
        expected: u16,
    },
    /// Streams were collected before the session said how many it expects.
    #[error("collecting data streams before expecting any")]
    NotExpecting,
}

impl AttachTable {
    /// A control connection for session `id` said hello: its data hellos may wait for it
    /// (up to [`EARLY_HELLO_WAIT`]) while it reads and checks its request.
    pub fn announce(self: &Arc<Self>, id: u64) -> Announced {
        if let Ok(mut a) = self.announced.lock() {
            a.insert(id, None);
        }
        self.registered.notify_all();
        Announced {
            table: self.clone(),
            id,
        }
    }

    /// The control connection of announced session `id` proved the token: its data
    /// hellos are checked against `secret` from now on, without waiting for the session
    /// to register.
    pub fn prove(&self, id: u64, secret: SessionSecret) {
        if let Ok(mut a) = self.announced.lock() {
            if let Some(s) = a.get_mut(&id) {
                *s = Some(secret);
            }
        }
        // Taken so that a hello between its look and its wait cannot miss the signal.
        let _sessions = self.sessions.lock();
        self.registered.notify_all();
    }

    /// Whether session `id` was announced, and its secret once proven.
    fn announcement(&self, id: u64) -> Option<Option<SessionSecret>> {
        self.announced.lock().ok()?.get(&id).cloned()
    }

    /// Registers session `id` (with `secret`) as expecting `streams` data streams, over
    /// TLS unless the session agreed to `plain_data`.
    pub fn expect(
        self: &Arc<Self>,
        id: u64,
        secret: SessionSecret,
        streams: u16,
        plain_data: bool,
    ) -> Result<Expected, AttachError> {
        let (sink, rx) = mpsc::channel();
        self.sessions
            .lock()
            .map_err(|_| AttachError::Poisoned)?
            .insert(
                id,
                Pending {
                    attach: DataAttachments::new(id, secret, streams),
                    plain_data,
                    sink,
                },
            );
        self.registered.notify_all();
        Ok(Expected {
            table: self.clone(),
            id,
            rx,
            streams,
        })
    }

    /// A data connection said `DataHello{session_id, stream, mac}`: hands it to its
    /// session if the proof (bound to the connection's exporter `conn`, empty without
    /// TLS) holds, waiting for a session not registered yet (see [`EARLY_HELLO_GRACE`]
    /// and [`EARLY_HELLO_WAIT`]). `vouched` is called once, as soon as the proof is
    /// known to hold: at once when the session is registered or proven, else when it is.
    pub fn attach(
        &self,
        conn: FramedConn,
        session_id: u64,
        stream: u16,
        mac: &[u8; 32],
        binding: &[u8],
        vouched: &mut dyn FnMut(),
    ) -> Result<(), AttachError> {
        let sink = {
            let began = Instant::now();
            let mut sessions = self.sessions.lock().map_err(|_| AttachError::Poisoned)?;
            let mut checked = false;
            // Bounded: every pass waits for a registration or the deadline.
            while !sessions.contains_key(&session_id) {
                let announced = self.announcement(session_id);
                if let (false, Some(Some(secret))) = (checked, &announced) {
                    if !secret.vouches_for(session_id, stream, mac, binding) {
                        return Err(AttachError::Refused(
                            longhaul_proto::ProtoError::AuthFailed.to_string(),
                        ));
                    }
                    checked = true;
                    vouched();
                }
                let wait = if announced.is_some() {
                    EARLY_HELLO_WAIT
                } else {
                    EARLY_HELLO_GRACE
                };
                let left = (began + wait).saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(AttachError::UnknownSession);
                }
                sessions = self
                    .registered
                    .wait_timeout(sessions, left)
                    .map_err(|_| AttachError::Poisoned)?
                    .0;
            }
            let p = sessions
                .get_mut(&session_id)
                .ok_or(AttachError::UnknownSession)?;
            if !conn.stream().is_tls() && !p.plain_data {
                return Err(AttachError::Refused(
                    "a data connection without TLS for a session that encrypts its data".into(),
                ));
            }
            p.attach
                .attach(session_id, stream, mac, binding)
                .map_err(|e| AttachError::Refused(e.to_string()))?;
            if !checked {
                vouched();
            }
            p.sink.clone()
        };
        let (sock, _) = conn.into_parts();
        let _ = sock.set_read_timeout(None);
        let _ = sink.send((stream, sock));
        Ok(())
    }

    fn forget(&self, id: u64) {
        if let Ok(mut s) = self.sessions.lock() {
            s.remove(&id);
        }
    }
}

/// A session's registration: its streams arrive here. Dropping it unregisters.
pub struct Expected {
    table: Arc<AttachTable>,
    id: u64,
    rx: mpsc::Receiver<(u16, SecureStream)>,
    streams: u16,
}

impl Expected {
    /// Waits (at most [`ATTACH_TIMEOUT`]) for every data stream; stream `i` is `[i]`.
    pub fn collect(self) -> Result<Vec<SecureStream>, AttachError> {
        self.collect_unless(&|| false)
    }

    /// [`Expected::collect`], giving up as soon as `gone()` says the client is gone (its
    /// control connection ended): a session waiting for the streams of a client that was
    /// killed would otherwise hold what it opened (a push's part files, locked) for the
    /// whole [`ATTACH_TIMEOUT`], and the client's rerun would find them taken.
    pub fn collect_unless(self, gone: &dyn Fn() -> bool) -> Result<Vec<SecureStream>, AttachError> {
        let streams = self.streams;
        let mut sockets: Vec<Option<SecureStream>> = (0..streams).map(|_| None).collect();
        let deadline = Instant::now() + ATTACH_TIMEOUT;
        let mut attached = 0;
        while attached < streams {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left.min(GONE_CHECK)) {
                Ok((i, s)) => {
                    if let Some(slot @ None) = sockets.get_mut(i as usize) {
                        *slot = Some(s);
                        attached += 1;
                    }
                }
                Err(_) if gone() => {
                    return Err(AttachError::ControlGone {
                        arrived: attached,
                        expected: streams,
                    })
                }
                Err(_) if !left.is_zero() => {}
                Err(_) => {
                    return Err(AttachError::Timeout {
                        arrived: attached,
                        expected: streams,
                        waited: ATTACH_TIMEOUT,
                    })
                }
            }
        }
        Ok(sockets.into_iter().flatten().collect())
    }
}

impl Drop for Expected {
    fn drop(&mut self) {
        self.table.forget(self.id);
    }
}
