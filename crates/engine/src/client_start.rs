//! A client's start, bench and cp alike: whether the run may jump-start, how many data
//! connections it opens and when, and the dial. The data connections leave
//!
//! - with the control connection's SYN, when `-P` gives the count or the user's path cache
//!   remembers the path (its record's RTT gives the count, and a jump where this end sends
//!   sets its route first: [`ClientStart`]);
//! - at the control connection's connect, when the count waits for the RTT (a path not
//!   remembered);
//! - right behind the request, when the server sends and jumps (`bench --reverse`, a
//!   pull): its route's initial window must exist when their handshakes complete at the
//!   server (the kernel reads it for the child socket at the client's ACK), and the
//!   server sets it as it reads the request, a round trip before those ACKs arrive
//!   ([`DataConnections::after_request`]; the server counts connections that missed it
//!   in its log).
//!
//! docs/startup.md counts the round trips of each case.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use longhaul_policy::data_start::{AtConnect, DataSchedule, DataWish, Decided, PathBefore};
use longhaul_policy::jump_start;
use longhaul_proto::{ClientSession, Credential};

use crate::jump::{decide_client, lookup, ClientJump, JumpWish, PathNow, RouteWhen};
use crate::path_cache::{now_unix, PathRecord};
use crate::transport::dial::{
    dial_with, Count, DataDialer, DataPlan, DataStart, Dialed, AUTO_STREAMS,
};
use crate::transport::framed::FramedConn;
use crate::transport::tls::{ClientTls, Fingerprint, Security};
use crate::transport::BenchError;

/// What a client's start needs to know.
pub struct StartPlan<'a> {
    /// The server (`HOST`, `HOST:PORT`, `[V6]:PORT`).
    pub target: &'a str,
    /// What this end proves: the token the server must prove too, or a ticket of the
    /// server's (its certificate pinned).
    pub token: &'a Credential,
    /// How the server's certificate is trusted, and whether data connections use TLS.
    pub security: &'a Security,
    /// `-P`: the user's stream count.
    pub user_streams: Option<u16>,
    /// Jump-start allowed (`--no-jump-start` not given).
    pub jump_start: bool,
    /// The rate probe runs (no `--rate`, no fixed window).
    pub probing: bool,
    /// This end receives on the data connections (a pull, `bench --reverse`): the server
    /// sends, and jumps with its own route.
    pub receiving: bool,
}

/// A control connection whose server proved the token, with the run's jump, its stream
/// count and its data connections.
pub struct Started {
    /// The framed control connection.
    pub conn: FramedConn,
    /// The client's session state machine (its proof queued).
    pub session: ClientSession,
    /// The server's address that answered.
    pub addr: SocketAddr,
    /// The RTT the control connection's handshake measured.
    pub rtt: Duration,
    /// The server's certificate, when this contact pinned it.
    pub pinned_now: Option<Fingerprint>,
    /// Both ends' addresses (peer, local): the path's identity in the path cache.
    pub ends: Option<(IpAddr, IpAddr)>,
    /// The control connection's MSS (0: unknown).
    pub mss: u32,
    /// The run's jump-start (its plan, report and route).
    pub jump: ClientJump,
    /// The data connections the run uses.
    pub streams: u16,
    /// The data connections: on their way, or to open behind the request.
    pub data: DataConnections,
}

/// A run's data connections, as [`start_session`] left them.
pub enum DataConnections {
    /// On their way since the start (or the connect).
    Dialing(DataDialer),
    /// To open right behind the request: the server sends and jumps, and its route must
    /// be set first.
    BehindRequest(LateData),
}

impl DataConnections {
    /// Their dialer, once the request has left: those that waited for it open now.
    pub fn after_request(self) -> DataDialer {
        match self {
            Self::Dialing(d) => d,
            Self::BehindRequest(late) => late.open(),
        }
    }
}

/// What opening the data connections behind the request needs.
pub struct LateData {
    addr: SocketAddr,
    streams: u16,
    receiving: bool,
    token: Credential,
    data_tls: Option<ClientTls>,
}

/// Dials the server as `plan` says (see the module docs for when the data connections
/// leave).
pub fn start_session(plan: &StartPlan) -> Result<Started, BenchError> {
    let wish = JumpWish {
        enabled: plan.jump_start,
        user_streams: plan.user_streams,
        probing: plan.probing,
    };
    let mut start = ClientStart::new(wish, plan.receiving);
    let Dialed {
        conn,
        session,
        addr,
        rtt,
        data,
        data_tls,
        pinned_now,
    } = dial_with(
        plan.target,
        plan.token,
        plan.security,
        DataPlan {
            streams: AUTO_STREAMS,
            receiving: plan.receiving,
        },
        &mut start,
    )?;
    let tcp = conn.stream().tcp();
    let ends = match (tcp.peer_addr(), tcp.local_addr()) {
        (Ok(p), Ok(l)) => Some((p.ip(), l.ip())),
        _ => None,
    };
    let mss = longhaul_sys::tcp_info::tcp_info(tcp).map_or(0, |i| i.snd_mss);
    // The count opened, or (a run whose server may jump) to open: the user's, or the
    // path's, or a jump's.
    let (mut jump, streams) = match start.decided() {
        Some(decided) => decided,
        None => {
            let (peer, local) = ends.unwrap_or((addr.ip(), Ipv4Addr::UNSPECIFIED.into()));
            let path = PathNow { peer, local, rtt };
            let now = crate::jump::RouteWhen::Now;
            crate::jump::decide_client(&wish, data.streams(), path, path.record(), now)
        }
    };
    // A receiving run's route, decided at the connect, is set now, behind the control
    // connection's TLS and before the data connections leave behind the request.
    jump.set_route();
    let late = LateData {
        addr,
        streams,
        receiving: plan.receiving,
        token: plan.token.clone(),
        data_tls,
    };
    // Without a jump the data connections are on their way since the start (dial), or,
    // if dial held them back for a jump that did not happen, they open now; a jump whose
    // server sends opens them behind the request, which sets the server's route.
    let data = match (data.streams(), jump.plan.is_some()) {
        (0, false) => DataConnections::Dialing(late.open()),
        (0, true) => DataConnections::BehindRequest(late),
        _ => DataConnections::Dialing(data),
    };
    Ok(Started {
        conn,
        session,
        addr,
        rtt,
        pinned_now,
        ends,
        mss,
        jump,
        streams,
        data,
    })
}

impl LateData {
    /// Opens the run's data connections now.
    fn open(&self) -> DataDialer {
        let d = DataDialer::start(
            self.addr,
            DataPlan {
                streams: self.streams,
                receiving: self.receiving,
            },
            self.token.clone(),
        );
        d.give_tls(self.data_tls.clone());
        d
    }
}

/// How a client's data connections start, bench and cp alike (`dial_with`'s
/// [`DataStart`]; the count is the user's, or chosen here). The path's record in the
/// user's cache (less than a day old) is read once, before the connect:
///
/// - a path remembered: its RTT gives the stream count, and the jump with its route when
///   this end sends, so the data connections go with the control connection's SYN and
///   data flows after 3 round trips, not 4. If the RTT measured at the connect does not
///   match the record (or the connection left from another address), the guess is
///   dropped (its connections and route with it) and decided again: that run pays the
///   round trip.
/// - a path remembered whose server sends and may jump (this end may set routes): the
///   data connections wait, to leave behind the request (the server's route first,
///   [`start_session`]); the jump is decided at the connect.
/// - a path not remembered: the user's count goes at once; without one, as many as the
///   longest path needs ([`longhaul_policy::MAX_PATH_STREAMS`]) go at once, and the RTT
///   measured at the connect keeps the path's count of them.
pub struct ClientStart {
    wish: JumpWish,
    /// This end receives on the data connections.
    receiving: bool,
    /// When the data connections leave, and how many (the pure schedule).
    schedule: DataSchedule,
    /// The path looked up before the connect (peer, local) and its record, fresh or not.
    looked_up: Option<((IpAddr, IpAddr), Option<PathRecord>)>,
    guess: Option<Guess>,
    decided: Option<(ClientJump, u16)>,
}

/// A decision made before the connect, from the path's record.
struct Guess {
    path: PathNow,
    decided: (ClientJump, u16),
}

impl ClientStart {
    /// `receiving`: this end receives on the data connections (the server sends, and
    /// jumps with its own route).
    pub fn new(wish: JumpWish, receiving: bool) -> Self {
        let schedule = DataSchedule::new(DataWish {
            user_streams: wish.user_count(),
            receiving,
        });
        Self {
            wish,
            receiving,
            schedule,
            looked_up: None,
            guess: None,
            decided: None,
        }
    }

    /// The jump and the count decided (`None` when the connection's addresses could not
    /// be read).
    pub fn decided(self) -> Option<(ClientJump, u16)> {
        self.decided
    }
}

impl DataStart for ClientStart {
    fn before_connect(&mut self, peer: SocketAddr) -> u16 {
        let Some(local) = longhaul_sys::route::source_toward(peer) else {
            // Nothing to look up: the schedule decides nothing with a record.
            let no_record = |_| Decided {
                streams: 0,
                jumps: false,
            };
            return self
                .schedule
                .before_connect(PathBefore::Unroutable, no_record);
        };
        let record = lookup(peer.ip(), local);
        self.looked_up = Some(((peer.ip(), local), record));
        let fresh = record.filter(|r| r.memory(now_unix()).age <= jump_start::MAX_AGE);
        let known = match fresh {
            None => PathBefore::NotRemembered,
            Some(r) => {
                let rtt = Duration::from_micros(r.min_rtt_us);
                let path = PathNow {
                    peer: peer.ip(),
                    local,
                    rtt,
                };
                // Whether a run from the record would jump (no route is touched): a
                // receiving run then holds its data connections for the server's route.
                // A sending run's guess below decides its jump itself.
                let streams = self
                    .wish
                    .user_count()
                    .unwrap_or(longhaul_policy::JUMP_STREAMS);
                let would_jump = self.receiving
                    && ClientJump::decide(&self.wish, path, streams, Some(&r)).is_ok();
                PathBefore::Remembered { rtt, would_jump }
            }
        };
        let (wish, mut guess) = (self.wish, None);
        let n = self.schedule.before_connect(known, |rtt| {
            let path = PathNow {
                peer: peer.ip(),
                local,
                rtt,
            };
            let decided = decide_client(&wish, 0, path, fresh, RouteWhen::Now);
            let d = Decided {
                streams: decided.1,
                jumps: decided.0.plan.is_some(),
            };
            guess = Some(Guess { path, decided });
            d
        });
        self.guess = guess;
        n
    }

    fn at_connect(&mut self, rtt: Duration, tcp: &TcpStream, opened: u16) -> Count {
        let ends = (tcp.peer_addr(), tcp.local_addr());
        let same_path = match (&self.guess, &ends) {
            (Some(g), (Ok(p), Ok(l))) => p.ip() == g.path.peer && l.ip() == g.path.local,
            _ => false,
        };
        let (wish, looked_up) = (self.wish, self.looked_up);
        // A run that holds its data connections for the server's route sets its own
        // behind the control connection's TLS, not before it.
        let route = match self.schedule.holds_for_request() {
            true => RouteWhen::BehindRequest,
            false => RouteWhen::Now,
        };
        let mut guess = self.guess.take();
        let mut decided = None;
        let at = AtConnect {
            rtt,
            opened,
            same_path,
        };
        let (count, held) = self.schedule.at_connect(at, |opened| {
            // A guess not kept takes its route with it before a new one is set.
            drop(guess.take());
            let (jump, n) = decide_at_connect(&wish, looked_up, rtt, &ends, opened, route);
            let jumps = jump.as_ref().is_some_and(|j| j.plan.is_some());
            decided = jump.map(|j| (j, n));
            Decided { streams: n, jumps }
        });
        self.decided = match held {
            true => guess.map(|g| g.decided),
            false => decided,
        };
        count
    }
}

/// [`decide_client`] at the control connection's connect, whose `ends` (peer, local)
/// name the path: `None` for the jump when they cannot be read (the count is then the
/// user's or the path's). `looked_up` is the record read before the connect, used when
/// it was this path's.
fn decide_at_connect(
    wish: &JumpWish,
    looked_up: Option<((IpAddr, IpAddr), Option<PathRecord>)>,
    rtt: Duration,
    ends: &(std::io::Result<SocketAddr>, std::io::Result<SocketAddr>),
    opened: u16,
    route: RouteWhen,
) -> (Option<ClientJump>, u16) {
    let (Ok(peer), Ok(local)) = ends else {
        let n = match opened {
            0 => wish
                .user_count()
                .unwrap_or_else(|| longhaul_policy::streams_for_path(rtt)),
            n => n,
        };
        return (None, n);
    };
    let path = PathNow {
        peer: peer.ip(),
        local: local.ip(),
        rtt,
    };
    let record = match looked_up {
        Some((key, record)) if key == (path.peer, path.local) => record,
        _ => path.record(),
    };
    let (jump, n) = decide_client(wish, opened, path, record, route);
    (Some(jump), n)
}
