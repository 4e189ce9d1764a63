//! Who may wait at the server's door, and for how long, with no I/O: the rules
//! `longhaul serve` applies to connections that have not yet proved the token
//! ([`Doorway`]) and to authenticated sessions waiting for a slot ([`SessionQueue`]).
//!
//! An unauthenticated connection costs the server a thread and a socket, so their number
//! is capped; but refusing newcomers when the cap is full lets a flood of idle
//! connections lock real clients out. Instead the **stalest** pending connection makes
//! room: a real client proves itself within a few round trips of connecting, an idle one
//! sits until it is the stalest and goes. The caps come in two steps, because a burst of
//! real clients (64 at once from one host, each with its data connections) may pass the
//! first while all are still in their handshakes: past the soft caps a newcomer makes
//! room only by evicting a connection that has not got further for
//! [`DoorLimits::grace`]; past the hard caps, whatever its age. The victim is the one
//! that has gone longest without getting further ([`Stage`]: said nothing, began TLS,
//! finished it, said hello), so a sustained flood of bare connections, or of handshakes
//! that stall, pushes out its own kind before a client moving through its handshake.
//! Connections that have said nothing go before all that have (stalest first among
//! them): a real client's first bytes leave with its TCP handshake's last packet (the
//! driver looks for them at accept, and again before it evicts one that looked silent:
//! [`Doorway::admit_checking`]), so a burst of bare connections, each newer than a
//! client's handshake step, evicts its own kind, not the client. Only a door full of
//! connections that spoke and stalled could push out a client in the instant between
//! its accept and its first bytes.
//!
//! Only the unauthenticated are ever victims. A connection that proved itself — a
//! control connection that proved the token, or a data connection whose hello holds
//! under its session's secret ([`Doorway::proved`]) — leaves the door at once, so no
//! number of strangers can push out a proven session's data. How many connections a
//! source holds does not choose the victim: a real client's control and data
//! connections make its address the busiest, and a flood of one bare connection from
//! each of many addresses (cheap with an IPv6 /64) would evict it first. Floods from one
//! source are held by caps of their own ([`DoorLimits::soft_per_source`],
//! [`DoorLimits::max_per_source`], below the whole door's): a source at its cap makes
//! room among its own, stalest first, so a real client that shares its address with a
//! flood still gets in, its connection being the newest there. Every pending connection
//! also has a deadline for the whole pre-authentication phase (TLS handshake, hello,
//! proof), longer for sources that already run an authenticated session (their data
//! connections may wait for that session's turn).
//!
//! The driver passes in `now`; nothing here reads a clock.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The caps and deadlines of the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoorLimits {
    /// Connections that have not yet proved anything, in all: past this many, each
    /// newcomer evicts one whatever its age (threads and sockets are bounded by it).
    pub max_pending: usize,
    /// Of those, from one source.
    pub max_per_source: usize,
    /// Past this many in all, each newcomer evicts one that has waited [`Self::grace`].
    pub soft_pending: usize,
    /// The same, from one source.
    pub soft_per_source: usize,
    /// How long a connection is spared by the soft caps: longer than a real client's
    /// handshake takes on a busy host.
    pub grace: Duration,
    /// How long a connection may take from accept to proof (TLS, hello, proof).
    pub preauth: Duration,
    /// The same, for a source with an authenticated session: its data connections may
    /// wait for a queued session's turn before they can say which session they join.
    pub preauth_known_source: Duration,
}

impl Default for DoorLimits {
    fn default() -> Self {
        Self {
            max_pending: 256,
            max_per_source: 192,
            soft_pending: 64,
            soft_per_source: 32,
            grace: Duration::from_secs(2),
            // A handshake takes two or three round trips; 5 s covers a 600 ms
            // geostationary path on a loaded host several times over.
            preauth: Duration::from_secs(5),
            preauth_known_source: Duration::from_secs(20),
        }
    }
}

impl DoorLimits {
    /// The default limits scaled to a hard cap of `max_pending` unauthenticated
    /// connections (`serve --max-pending`): from one source three quarters of it, the
    /// soft caps a quarter and an eighth, as in the defaults (256, 192, 64, 32).
    pub fn with_max_pending(max_pending: usize) -> Self {
        let max_pending = max_pending.max(1);
        Self {
            max_pending,
            max_per_source: (max_pending * 3 / 4).max(1),
            soft_pending: (max_pending / 4).max(1),
            soft_per_source: (max_pending / 8).max(1),
            ..Self::default()
        }
    }
}

/// Where connections come from, for per-source accounting: an IPv4 address, or the /64
/// of an IPv6 one (one host commonly holds a whole /64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// An IPv4 address (also when it arrived as an IPv4-mapped IPv6 address).
    V4([u8; 4]),
    /// The first 64 bits of an IPv6 address.
    V6Prefix([u8; 8]),
}

impl From<IpAddr> for Source {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Source::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source::V4(v4.octets()),
                None => {
                    let o = v6.octets();
                    let mut p = [0u8; 8];
                    p.copy_from_slice(&o[..8]);
                    Source::V6Prefix(p)
                }
            },
        }
    }
}

/// A pending connection's number; numbers grow with arrival, so the smallest is the oldest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PendingId(pub u64);

/// A connection let in: its number, and the pending connections to close to make room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The new connection's number.
    pub id: PendingId,
    /// Connections evicted to make room (closed by the driver at once).
    pub evicted: Vec<PendingId>,
}

/// How far a pending connection got; the least far are evicted first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Stage {
    /// Accepted; nothing received yet.
    #[default]
    Connected,
    /// Its first bytes began a TLS handshake (or a plain frame).
    Handshaking,
    /// TLS is up; no hello yet.
    Secured,
    /// It said hello; the proof is outstanding.
    Hello,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    source: Source,
    since: Instant,
    stage: Stage,
    /// When it last got further (its accept, at first).
    moved: Instant,
}

/// The set of connections that have not yet proved the token.
#[derive(Debug, Default)]
pub struct Doorway {
    limits: DoorLimits,
    next: u64,
    pending: BTreeMap<PendingId, Entry>,
    per_source: HashMap<Source, usize>,
    /// Authenticated sessions alive, per source.
    sessions: HashMap<Source, usize>,
}

impl Doorway {
    /// An empty door with these limits.
    pub fn new(limits: DoorLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> DoorLimits {
        self.limits
    }

    /// Connections pending now.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Lets in a connection from `ip` accepted at `now`. When its source is at a cap, one
    /// of the source's connections makes room; when the whole set is, the stalest of all,
    /// whatever its source. The newcomer is never refused.
    pub fn admit(&mut self, now: Instant, ip: IpAddr) -> Admitted {
        self.admit_checking(now, ip, |_| false)
    }

    /// [`Doorway::admit`], asking the driver before it evicts a connection that has said
    /// nothing so far whether it has spoken since (`spoke`: its first bytes wait unread
    /// on the socket). Its thread marks it [`Stage::Handshaking`] when it looks, but on a
    /// loaded host that may be long after the bytes came, while a flood of bare
    /// connections keeps arriving; one that has spoken is marked now and spared, and the
    /// next silent one looked at. Each connection is asked about at most once.
    pub fn admit_checking(
        &mut self,
        now: Instant,
        ip: IpAddr,
        mut spoke: impl FnMut(PendingId) -> bool,
    ) -> Admitted {
        let source = Source::from(ip);
        let l = self.limits;
        let mut evicted = Vec::new();
        let mut make_room = |door: &mut Self, of: Option<Source>, hard: bool| {
            let id = loop {
                let id = door.victim(now, of, hard)?;
                let silent = door
                    .pending
                    .get(&id)
                    .is_some_and(|e| e.stage == Stage::Connected);
                if silent && spoke(id) {
                    door.progress(id, Stage::Handshaking, now);
                    continue;
                }
                break id;
            };
            door.leave(id);
            evicted.push(id);
            Some(id)
        };
        let here = self.per_source.get(&source).copied().unwrap_or(0);
        if here >= l.max_per_source.max(1) {
            make_room(self, Some(source), true);
        } else if here >= l.soft_per_source.max(1) {
            make_room(self, Some(source), false);
        }
        while self.pending.len() >= l.max_pending.max(1) {
            if make_room(self, None, true).is_none() {
                break;
            }
        }
        if self.pending.len() >= l.soft_pending.max(1) {
            make_room(self, None, false);
        }
        let id = PendingId(self.next);
        self.next += 1;
        self.pending.insert(
            id,
            Entry {
                source,
                since: now,
                stage: Stage::Connected,
                moved: now,
            },
        );
        *self.per_source.entry(source).or_default() += 1;
        Admitted { id, evicted }
    }

    /// The connection got as far as `stage` at `now` (a connection never goes back).
    pub fn progress(&mut self, id: PendingId, stage: Stage, now: Instant) {
        if let Some(e) = self.pending.get_mut(&id) {
            if stage > e.stage {
                e.stage = stage;
                e.moved = e.moved.max(now);
            }
        }
    }

    /// The connection proved itself: the token (a control connection), or its session's
    /// secret (a data connection, which may still wait for its session to take it). It
    /// leaves the door for good: it no longer counts against the caps, runs against no
    /// deadline, and is never evicted to make room for anyone. False when it was no longer
    /// pending (evicted or expired before).
    pub fn proved(&mut self, id: PendingId) -> bool {
        self.leave(id)
    }

    /// The connection ended (or proved itself, see [`Doorway::proved`]): it no longer
    /// counts. False when it was no longer pending (evicted or expired before).
    pub fn leave(&mut self, id: PendingId) -> bool {
        match self.pending.remove(&id) {
            Some(e) => {
                self.forget_one(e.source);
                true
            }
            None => false,
        }
    }

    /// Removes and returns the connections past their deadline at `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<PendingId> {
        let late: Vec<PendingId> = self
            .pending
            .iter()
            .filter(|(_, e)| now >= self.deadline_of(e))
            .map(|(id, _)| *id)
            .collect();
        for id in &late {
            self.leave(*id);
        }
        late
    }

    /// When the next pending connection runs out of time.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|e| self.deadline_of(e)).min()
    }

    /// An authenticated session from `ip` began: its source's pending connections get
    /// [`DoorLimits::preauth_known_source`].
    pub fn session_began(&mut self, ip: IpAddr) {
        *self.sessions.entry(Source::from(ip)).or_default() += 1;
    }

    /// A session counted by [`Doorway::session_began`] ended.
    pub fn session_ended(&mut self, ip: IpAddr) {
        let source = Source::from(ip);
        if let Some(n) = self.sessions.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                self.sessions.remove(&source);
            }
        }
    }

    fn deadline_of(&self, e: &Entry) -> Instant {
        let patience = if self.sessions.contains_key(&e.source) {
            self.limits.preauth_known_source.max(self.limits.preauth)
        } else {
            self.limits.preauth
        };
        e.since + patience
    }

    /// Who makes room: a connection of `of` (any source when `None`): one that has said
    /// nothing if there is one, and of those the one that has gone longest without
    /// getting further (then the least far, then the oldest); past
    /// a soft cap (`hard` false) only one that has not got further for
    /// [`DoorLimits::grace`]. Only pending (unauthenticated) connections are candidates,
    /// and how many its source holds plays no part.
    fn victim(&self, now: Instant, of: Option<Source>, hard: bool) -> Option<PendingId> {
        self.pending
            .iter()
            .filter(|(_, e)| of.map_or(true, |s| s == e.source))
            .filter(|(_, e)| hard || now.saturating_duration_since(e.moved) >= self.limits.grace)
            // Ids grow with age: the smallest is the oldest.
            .min_by_key(|(id, e)| (e.stage != Stage::Connected, e.moved, e.stage, **id))
            .map(|(id, _)| *id)
    }

    fn forget_one(&mut self, source: Source) {
        if let Some(n) = self.per_source.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&source);
            }
        }
    }
}

/// What became of a session asking for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// A slot was free: run now.
    Run,
    /// Every slot is taken: wait in line with this ticket ([`SessionQueue::try_start`]).
    Wait(Ticket),
    /// Every slot is taken and the line is full: refuse ("busy").
    Refuse,
}

/// A place in the line for a session slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket(u64);

/// Slots for authenticated sessions, and a bounded first-come-first-served line for
/// those that find every slot taken. How long one waits is the driver's business (it must
/// stay below what the client waits for an answer); a session that gives up calls
/// [`SessionQueue::give_up`].
#[derive(Debug)]
pub struct SessionQueue {
    max_running: usize,
    max_waiting: usize,
    running: usize,
    next: u64,
    line: VecDeque<Ticket>,
}

impl SessionQueue {
    /// At most `max_running` sessions at once, `max_waiting` more in line.
    pub fn new(max_running: usize, max_waiting: usize) -> Self {
        Self {
            max_running: max_running.max(1),
            max_waiting,
            running: 0,
            next: 0,
            line: VecDeque::new(),
        }
    }

    /// Sessions running now.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Sessions waiting now.
    pub fn waiting(&self) -> usize {
        self.line.len()
    }

    /// A session asks for a slot. Nobody overtakes the line.
    pub fn arrive(&mut self) -> Arrival {
        if self.line.is_empty() && self.running < self.max_running {
            self.running += 1;
            return Arrival::Run;
        }
        if self.line.len() >= self.max_waiting {
            return Arrival::Refuse;
        }
        let t = Ticket(self.next);
        self.next += 1;
        self.line.push_back(t);
        Arrival::Wait(t)
    }

    /// The holder of `t` may start if it heads the line and a slot is free; it then runs.
    pub fn try_start(&mut self, t: Ticket) -> bool {
        if self.line.front() == Some(&t) && self.running < self.max_running {
            self.line.pop_front();
            self.running += 1;
            true
        } else {
            false
        }
    }

    /// The holder of `t` stops waiting (its time ran out, or its client left).
    pub fn give_up(&mut self, t: Ticket) {
        self.line.retain(|x| *x != t);
    }

    /// A running session ended; its slot is free.
    pub fn finish(&mut self) {
        self.running = self.running.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests;
