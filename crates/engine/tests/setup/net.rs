//! The network of the set-up simulation: one link whose every packet takes half a round
//! trip either way, in order, and what the kernels and TLS put on it. The model:
//!
//! - **TCP**: a SYN is answered by the server's kernel at once (SYN-ACK); the client's
//!   ACK completes the handshake at the server, which is when Linux gives the accepted
//!   socket its route (and a jump's initial window).
//! - **TLS 1.3** (rustls, no session tickets): the client's ClientHello right behind its
//!   ACK; the server's flight (ServerHello to Finished) with its 0.5-RTT data behind it;
//!   the client's Finished, then its application data. Each is one packet here: the
//!   flights' sizes do not matter at the rates of a set-up.
//!
//! Nothing is lost unless a test says so ([`Wire::lose`]).

use std::collections::VecDeque;
use std::time::Duration;

use longhaul_proto::transfer::ChunkHeader;
use longhaul_proto::Message;
use longhaul_transfer::opening::ControlFrame;

/// The simulated path's round trip.
pub const RTT: Duration = Duration::from_millis(100);

/// One of a run's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Conn {
    /// The control connection.
    Control,
    /// Data connection `n` (its generation, then its stream index: a replaced
    /// connection is another one).
    Data(u16, u16),
}

/// Which end a packet goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client.
    Client,
    /// The server.
    Server,
}

/// What crosses the link.
#[derive(Debug, Clone)]
pub enum Packet {
    /// TCP's SYN.
    Syn,
    /// TCP's SYN-ACK.
    SynAck,
    /// TCP's ACK that completes the handshake.
    Ack,
    /// TLS's first flight.
    ClientHello,
    /// The server's TLS flight.
    ServerFlight,
    /// The client's TLS Finished.
    Finished,
    /// A control frame, or a connection's session hello (the server's proof, a data
    /// hello), inside TLS.
    Frame(ControlFrame),
    /// A chunk on a data connection: a copy's (its header and bytes), or bench's
    /// (`None`: its bytes are nothing to the machines).
    Chunk(Option<Box<CopyChunk>>),
}

/// A copy's chunk as a data stream carries it.
#[derive(Debug, Clone)]
pub struct CopyChunk {
    /// Its header.
    pub header: ChunkHeader,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl Packet {
    /// A session message as a frame.
    pub fn session(m: Message) -> Self {
        Self::Frame(ControlFrame::Session(m))
    }

    /// A name for losing it and for the trace.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Syn => "SYN",
            Self::SynAck => "SYN-ACK",
            Self::Ack => "ACK",
            Self::ClientHello => "ClientHello",
            Self::ServerFlight => "ServerFlight",
            Self::Finished => "Finished",
            Self::Frame(ControlFrame::Session(m)) => m.kind(),
            Self::Frame(ControlFrame::Transfer(m)) => m.kind(),
            Self::Chunk(_) => "chunk",
        }
    }
}

/// A packet on its way.
struct InFlight {
    at: Duration,
    to: Side,
    conn: Conn,
    packet: Packet,
}

/// The link and the simulation's clock.
pub struct Wire {
    now: Duration,
    /// In arrival order: every packet takes the same time, and time only goes on.
    flight: VecDeque<InFlight>,
    /// A test's losses: `(to, conn, packet name)` to drop, each once.
    lose: Vec<(Side, Option<Conn>, &'static str)>,
    /// What was dropped, and when it was sent.
    pub lost: Vec<(Duration, Side, Conn, &'static str)>,
    /// Every delivery, for a failing test's message.
    pub trace: Vec<String>,
}

impl Wire {
    /// A link at t = 0 that loses what `lose` names (`None` for the connection: on any).
    pub fn new(lose: Vec<(Side, Option<Conn>, &'static str)>) -> Self {
        Self {
            now: Duration::ZERO,
            flight: VecDeque::new(),
            lose,
            lost: Vec::new(),
            trace: Vec::new(),
        }
    }

    /// The simulation's time.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Sends `packet` on `conn` to `to`; it arrives half a round trip later.
    pub fn send(&mut self, to: Side, conn: Conn, packet: Packet) {
        let name = packet.name();
        let hit = self
            .lose
            .iter()
            .position(|(s, c, n)| *s == to && (c.is_none() || *c == Some(conn)) && *n == name);
        if let Some(i) = hit {
            self.lose.remove(i);
            self.lost.push((self.now, to, conn, name));
            return;
        }
        self.flight.push_back(InFlight {
            at: self.now + RTT / 2,
            to,
            conn,
            packet,
        });
    }

    /// The next packet to arrive, the clock moved to its arrival.
    pub fn next(&mut self) -> Option<(Side, Conn, Packet)> {
        let p = self.flight.pop_front()?;
        self.now = p.at;
        self.trace.push(format!(
            "{:.2} RTT: {:?} <- {} on {:?}",
            rtts(p.at),
            p.to,
            p.packet.name(),
            p.conn
        ));
        Some((p.to, p.conn, p.packet))
    }
}

/// `t` in round trips.
pub fn rtts(t: Duration) -> f64 {
    // Whole nanoseconds either side: a whole number of half round trips comes out exact.
    t.as_nanos() as f64 / RTT.as_nanos() as f64
}
