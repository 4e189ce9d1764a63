//! The server's door: drives the admission rules of [`longhaul_policy::admission`] with
//! real sockets and a real clock. The accept loop admits each connection (closing the
//! ones the rules evict) and expires the overdue on every wake; a connection's thread
//! holds a [`PendingConn`] until it proves itself; an authenticated session holds a
//! [`SessionSlot`] for as long as it runs, waiting in line for one when all are taken.
//!
//! An evicted or overdue connection is shut down from the accept loop (through a clone
//! of its socket), which ends whatever read or TLS handshake its thread is blocked in:
//! the per-read timeouts of the handshake only back this up.

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use longhaul_policy::{Arrival, DoorLimits, Doorway, PendingId, SessionQueue, Stage};

/// How many sessions run at once, how many wait for a slot, and the rules for connections
/// that have not proved anything yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// Pending (unauthenticated) connections: caps and deadlines.
    pub door: DoorLimits,
    /// Authenticated sessions running at once.
    pub max_sessions: usize,
    /// Authenticated sessions waiting for a slot; more are told "busy".
    pub max_waiting: usize,
    /// How long a session waits for a slot before it is told "busy". It must stay
    /// below the client's wait for an answer (`dial::HANDSHAKE_TIMEOUT`, 15 s).
    pub slot_wait: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            door: DoorLimits::default(),
            max_sessions: super::server::MAX_SESSIONS,
            max_waiting: 64,
            slot_wait: Duration::from_secs(12),
        }
    }
}

impl ServeLimits {
    /// The defaults with the door scaled to `max_pending` unauthenticated connections
    /// (`serve --max-pending`, see [`DoorLimits::with_max_pending`]).
    pub fn with_max_pending(max_pending: usize) -> Self {
        Self {
            door: DoorLimits::with_max_pending(max_pending),
            ..Self::default()
        }
    }
}

/// Connection threads still in the pre-authentication phase, evicted ones included until
/// they notice; past this many the accept loop drops newcomers (evicted threads end as
/// soon as their socket is shut down, so this is only reached if they cannot).
fn max_preauth_threads(limits: &ServeLimits) -> usize {
    2 * limits.door.max_pending.max(1)
}

/// The door: who is pending, and the session slots.
pub(super) struct Door {
    limits: ServeLimits,
    pending: Mutex<Pending>,
    slots: Mutex<SessionQueue>,
    slot_freed: Condvar,
    preauth_threads: AtomicUsize,
    /// Pending connections closed to make room for newcomers, and at their deadline.
    evicted: AtomicU64,
    expired: AtomicU64,
}

struct Pending {
    rules: Doorway,
    /// A clone of each pending connection's socket, to shut it down when evicted.
    sockets: HashMap<PendingId, TcpStream>,
}

/// Why a session got no slot.
#[derive(Debug, Clone, Copy)]
pub(super) enum NoSlot {
    /// The line was full.
    LineFull,
    /// It waited this long in line.
    Waited(Duration),
}

impl Door {
    pub(super) fn new(limits: ServeLimits) -> Self {
        Self {
            limits,
            pending: Mutex::new(Pending {
                rules: Doorway::new(limits.door),
                sockets: HashMap::new(),
            }),
            slots: Mutex::new(SessionQueue::new(limits.max_sessions, limits.max_waiting)),
            slot_freed: Condvar::new(),
            preauth_threads: AtomicUsize::new(0),
            evicted: AtomicU64::new(0),
            expired: AtomicU64::new(0),
        }
    }

    /// Pending connections closed so far: evicted for newcomers, and at their deadline.
    pub(super) fn closed(&self) -> (u64, u64) {
        (
            self.evicted.load(Ordering::Relaxed),
            self.expired.load(Ordering::Relaxed),
        )
    }

    pub(super) fn limits(&self) -> ServeLimits {
        self.limits
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves the maps consistent (no method panics
        // midway), so a poisoned lock is still usable.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn slots(&self) -> MutexGuard<'_, SessionQueue> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a connection accepted now would get a thread (see [`max_preauth_threads`]):
    /// when not, the accept loop leaves it in the listen backlog until evicted threads
    /// have ended, rather than accept and drop it (which could be a real client's).
    pub(super) fn has_thread_room(&self) -> bool {
        self.preauth_threads.load(Ordering::Acquire) < max_preauth_threads(&self.limits)
    }

    /// Lets `tcp` in, closing the connections evicted to make room. `None` when the
    /// connection cannot get a thread now (see [`max_preauth_threads`]).
    pub(super) fn admit(
        self: &Arc<Self>,
        tcp: &TcpStream,
        peer: SocketAddr,
    ) -> Option<PendingConn> {
        if self.preauth_threads.load(Ordering::Acquire) >= max_preauth_threads(&self.limits) {
            return None;
        }
        let handle = tcp.try_clone().ok()?;
        // A real client's first bytes arrive with its handshake's last packet: one that
        // already spoke is not taken for a bare connection of a flood.
        let spoke = longhaul_sys::socket::has_unread_bytes(tcp);
        let mut p = self.pending();
        let now = Instant::now();
        let Pending { rules, sockets } = &mut *p;
        // One that looked silent may have spoken since, before its thread looked.
        let admitted = rules.admit_checking(now, peer.ip(), |id| {
            sockets
                .get(&id)
                .is_some_and(longhaul_sys::socket::has_unread_bytes)
        });
        if spoke {
            p.rules.progress(admitted.id, Stage::Handshaking, now);
        }
        for id in admitted.evicted {
            if let Some(s) = p.sockets.remove(&id) {
                let _ = s.shutdown(Shutdown::Both);
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        p.sockets.insert(admitted.id, handle);
        drop(p);
        self.preauth_threads.fetch_add(1, Ordering::AcqRel);
        Some(PendingConn {
            door: self.clone(),
            id: admitted.id,
            peer,
            counted: true,
        })
    }

    /// Shuts down the pending connections past their deadline; returns when the next is
    /// due.
    pub(super) fn expire(&self) -> Option<Instant> {
        let mut p = self.pending();
        for id in p.rules.expire(Instant::now()) {
            if let Some(s) = p.sockets.remove(&id) {
                let _ = s.shutdown(Shutdown::Both);
                self.expired.fetch_add(1, Ordering::Relaxed);
            }
        }
        p.rules.next_deadline()
    }

    /// A slot for an authenticated session from `peer`: at once, or after waiting in
    /// line (at most [`ServeLimits::slot_wait`]).
    pub(super) fn session_slot(self: &Arc<Self>, peer: SocketAddr) -> Result<SessionSlot, NoSlot> {
        // While it waits or runs, its source's data connections may take longer.
        self.pending().rules.session_began(peer.ip());
        let began = Instant::now();
        let mut q = self.slots();
        let granted = match q.arrive() {
            Arrival::Run => Ok(()),
            Arrival::Refuse => Err(NoSlot::LineFull),
            Arrival::Wait(ticket) => {
                let until = began + self.limits.slot_wait;
                loop {
                    if q.try_start(ticket) {
                        // The next in line may also fit.
                        self.slot_freed.notify_all();
                        break Ok(());
                    }
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        q.give_up(ticket);
                        // Whoever was behind may head the line now.
                        self.slot_freed.notify_all();
                        break Err(NoSlot::Waited(began.elapsed()));
                    }
                    q = self
                        .slot_freed
                        .wait_timeout(q, left)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0);
                }
            }
        };
        drop(q);
        match granted {
            Ok(()) => Ok(SessionSlot {
                door: self.clone(),
                peer,
            }),
            Err(e) => {
                self.pending().rules.session_ended(peer.ip());
                Err(e)
            }
        }
    }
}

/// A connection that has not proved anything yet; dropping it (or [`PendingConn::proved`])
/// takes it off the door's list.
pub(super) struct PendingConn {
    door: Arc<Door>,
    id: PendingId,
    peer: SocketAddr,
    counted: bool,
}

impl PendingConn {
    /// The peer proved the token (or a data stream's session secret): it no longer counts
    /// against the caps nor runs against the pre-authentication deadline.
    pub(super) fn proved(&mut self) {
        if self.counted {
            self.counted = false;
            let mut p = self.door.pending();
            p.rules.proved(self.id);
            p.sockets.remove(&self.id);
            drop(p);
            self.door.preauth_threads.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The connection got as far as `stage`: it is evicted after those that did not.
    pub(super) fn reached(&self, stage: Stage) {
        if self.counted {
            self.door
                .pending()
                .rules
                .progress(self.id, stage, Instant::now());
        }
    }

    /// The door this connection came through.
    pub(super) fn door(&self) -> &Arc<Door> {
        &self.door
    }

    /// The client's address.
    pub(super) fn peer(&self) -> SocketAddr {
        self.peer
    }
}

impl Drop for PendingConn {
    fn drop(&mut self) {
        self.proved();
    }
}

/// A running session's slot, freed on drop.
pub(super) struct SessionSlot {
    door: Arc<Door>,
    peer: SocketAddr,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.door.slots().finish();
        self.door.slot_freed.notify_all();
        self.door.pending().rules.session_ended(self.peer.ip());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session thread that panics gives its slot back as it unwinds: the next session
    /// gets it at once instead of waiting in line.
    #[test]
    fn a_panicking_session_frees_its_slot() {
        let door = Arc::new(Door::new(ServeLimits {
            max_sessions: 1,
            max_waiting: 1,
            slot_wait: Duration::from_millis(300),
            ..ServeLimits::default()
        }));
        let peer: SocketAddr = "192.0.2.7:4000".parse().unwrap();
        let d = door.clone();
        let died = std::thread::spawn(move || {
            let _slot = d.session_slot(peer).expect("the only slot is free");
            panic!("a bug in a session");
        })
        .join();
        assert!(died.is_err(), "the session thread panicked");
        // Were it still taken, this would wait 300 ms in line and be told "busy".
        let _slot = door
            .session_slot(peer)
            .unwrap_or_else(|_| panic!("the slot was not freed by the panic"));
    }
}
