//! A client's start, bench and cp alike: whether the run may jump-start, how many data
//! connections it opens and when, and the dial. The data connections leave
//!
//! - with the control connection's SYN, when `-P` gives the count or the user's path cache
//!   remembers the path (its record's RTT gives the count, and a jump where this end sends
//!   sets its route first: [`crate::jump::ClientStart`]);
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

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use longhaul_proto::{ClientSession, Credential};

use crate::jump::{ClientJump, ClientStart, JumpWish, PathNow};
use crate::transport::dial::{dial_with, DataDialer, DataPlan, Dialed, AUTO_STREAMS};
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
