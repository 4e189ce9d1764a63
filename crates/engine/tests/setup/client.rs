//! The client's end of the set-up simulation, driven as `dial`, `start_session` and the
//! copy's and bench's drivers drive its machines: the data connections' schedule
//! ([`DataSchedule`]), proto's [`ClientSession`] (its hello, the server's proof, a
//! bench's request and start), the copy's [`CopyOpening`] (proof, request, rules and a
//! push's list in one flight), the data hellos ([`ClientSession::data_hello`]) and the
//! transfer session that sends or receives.

use std::collections::BTreeMap;
use std::time::Duration;

use longhaul_policy::data_start::{AtConnect, Count, DataSchedule, DataWish, Decided, PathBefore};
use longhaul_proto::transfer::{CopyDirection, TransferMessage, TransferOptions, TransferParams};
use longhaul_proto::{
    features, BenchParams, ChannelBinding, ClientEvent, ClientSession, Credential, Direction,
    JumpAsk, SendMode, Wait,
};
use longhaul_transfer::opening::{ControlFrame, CopyOpening};
use longhaul_transfer::session::{RecvConfig, RecvSession, SendConfig, SendSession};

use super::copy;
use super::net::{Conn, Packet, Side, Wire, RTT};
use super::{
    empty_destination, epoch, exporter, source, token, Case, Mode, Path, CERT, CONTROL_EXPORTER,
};

/// A data connection of the client's.
#[derive(Default)]
struct DataConn {
    connected: bool,
    tls_started: bool,
    tls_up: bool,
    hello_sent: bool,
}

/// The control connection's session: proto's alone until the server proved itself, then
/// a copy's opening or a bench's request.
enum Control {
    Dialing(ClientSession),
    Copy(CopyOpening),
    Bench(ClientSession),
    Gone,
}

/// The client.
pub struct Client {
    case: Case,
    schedule: DataSchedule,
    /// Data connections by stream, of the current generation.
    data: BTreeMap<u16, DataConn>,
    generation: u16,
    /// Streams to dial right behind the request.
    behind_request: u16,
    control: Control,
    send: Option<SendSession>,
    recv: Option<RecvSession>,
    /// When data connections were dialed (each generation).
    pub data_dialed: Vec<Duration>,
    /// When this end set its route for a jump.
    pub route_set_at: Option<Duration>,
    /// The run's first data byte: sent (push, bench) or received (pull, `bench -R`).
    pub first_byte: Option<Duration>,
    /// A copy's end, as this end sees it: every file committed (a push's sender heard
    /// so; a pull's receiver put them in place and heard the sender's end).
    pub committed: Option<Duration>,
    /// A machine's error, as the driver reports it.
    pub error: Option<String>,
}

impl Client {
    /// Files the copy put in place, as this end's session counts them.
    pub fn files_ok(&self) -> u64 {
        match (&self.send, &self.recv) {
            (Some(send), _) => send.outcome().files_ok,
            (_, Some(recv)) => recv.outcome().files_ok,
            _ => 0,
        }
    }
}

impl Client {
    /// A client for `case`.
    pub fn new(case: Case) -> Self {
        let binding = ChannelBinding {
            cert: CERT,
            exporter: CONTROL_EXPORTER,
        };
        let session = ClientSession::proving(
            Credential::Token(token()),
            [7; 32],
            binding,
            features::DEFAULT,
        );
        let schedule = DataSchedule::new(DataWish {
            user_streams: case.user_streams,
            receiving: case.mode.receiving(),
        });
        Self {
            case,
            schedule,
            data: BTreeMap::new(),
            generation: 0,
            behind_request: 0,
            control: Control::Dialing(session),
            send: None,
            recv: None,
            data_dialed: Vec::new(),
            route_set_at: None,
            first_byte: None,
            committed: None,
            error: None,
        }
    }

    /// What this end's set-up machine waits for from the server, if anything.
    pub fn waiting(&self) -> Option<Wait> {
        match &self.control {
            Control::Dialing(s) | Control::Bench(s) => s.waiting(),
            Control::Copy(opening) => opening.waiting(),
            Control::Gone => None,
        }
    }

    /// When the run's data connections left, as its schedule says.
    pub fn leave(&self) -> Option<longhaul_policy::data_start::Leave> {
        self.schedule.leave()
    }

    /// The streams this run decides on, and whether it jumps.
    fn decided(&self, opened: u16) -> Decided {
        decided(&self.case, opened)
    }

    /// t = 0: the control connection's SYN, and the data connections the schedule sends
    /// with it.
    pub fn start(&mut self, wire: &mut Wire) {
        let known = match self.case.path {
            Path::NotRemembered => PathBefore::NotRemembered,
            Path::Remembered => PathBefore::Remembered {
                rtt: RTT,
                would_jump: false,
            },
            Path::RememberedJump => PathBefore::Remembered {
                rtt: RTT,
                would_jump: true,
            },
        };
        let decided = self.decided(0);
        let n = self.schedule.before_connect(known, |_| decided);
        if decided.jumps && n > 0 {
            // This end sends and jumps: its route before any data connection.
            self.route_set_at = Some(wire.now());
        }
        wire.send(Side::Server, Conn::Control, Packet::Syn);
        self.dial(n, wire);
    }

    /// Dials `n` data connections (a new generation).
    fn dial(&mut self, n: u16, wire: &mut Wire) {
        if n == 0 {
            return;
        }
        self.generation += 1;
        self.data = (0..n).map(|s| (s, DataConn::default())).collect();
        self.data_dialed.push(wire.now());
        for s in 0..n {
            wire.send(Side::Server, Conn::Data(self.generation, s), Packet::Syn);
        }
    }

    /// Takes one packet on `conn`.
    pub fn on(&mut self, conn: Conn, packet: Packet, wire: &mut Wire) {
        let to = |wire: &mut Wire, p| wire.send(Side::Server, conn, p);
        match (conn, packet) {
            (Conn::Control, Packet::SynAck) => {
                to(wire, Packet::Ack);
                to(wire, Packet::ClientHello);
                self.at_connect(wire);
            }
            (Conn::Data(g, s), Packet::SynAck) if g == self.generation => {
                to(wire, Packet::Ack);
                let (tls, early_tls) = (self.case.encrypted_data, !self.case.first_contact);
                if let Some(d) = self.data.get_mut(&s) {
                    d.connected = true;
                    // Without TLS its hello may follow the ACK.
                    d.tls_up = !tls;
                    if tls && early_tls {
                        d.tls_started = true;
                        to(wire, Packet::ClientHello);
                    }
                }
            }
            // A connection the schedule dropped: closed before its TLS.
            (Conn::Data(..), Packet::SynAck) => {}
            (Conn::Control, Packet::ServerFlight) => {
                to(wire, Packet::Finished);
                // Our hello goes at once, behind TLS's Finished.
                if let Control::Dialing(session) = &mut self.control {
                    while let Some(m) = session.poll_transmit() {
                        to(wire, Packet::session(m));
                    }
                }
                // First contact: the certificate is pinned now; the data connections'
                // TLS starts.
                for (s, d) in self.data.iter_mut() {
                    if d.connected && !d.tls_started && self.case.encrypted_data {
                        d.tls_started = true;
                        wire.send(
                            Side::Server,
                            Conn::Data(self.generation, *s),
                            Packet::ClientHello,
                        );
                    }
                }
            }
            (Conn::Data(g, s), Packet::ServerFlight) if g == self.generation => {
                to(wire, Packet::Finished);
                if let Some(d) = self.data.get_mut(&s) {
                    d.tls_up = true;
                }
            }
            (Conn::Control, Packet::Frame(frame)) => {
                if let Err(e) = self.control_frame(frame, wire) {
                    self.error.get_or_insert(e);
                }
            }
            // The server's hello on a data connection (the real client checks its proof).
            (Conn::Data(..), Packet::Frame(_)) => {}
            (Conn::Data(..), Packet::Chunk(chunk)) => {
                self.first_byte.get_or_insert(wire.now());
                if let (Some(recv), Some(chunk)) = (self.recv.as_mut(), chunk) {
                    if let Err(e) = copy::receive(recv, &chunk) {
                        self.error.get_or_insert(e);
                    }
                }
            }
            (conn, other) => panic!("the client got {} on {conn:?}", other.name()),
        }
        self.flush(wire);
    }

    /// The control connection's connect: the RTT is measured, the schedule decides.
    fn at_connect(&mut self, wire: &mut Wire) {
        let at = AtConnect {
            rtt: RTT,
            opened: self.data.len() as u16,
            same_path: true,
        };
        let case = &self.case;
        let (count, _) = self.schedule.at_connect(at, |opened| decided(case, opened));
        match count {
            Count::Keep => {}
            Count::Trim(n) => self.data.retain(|s, _| *s < n),
            Count::New(0) => self.behind_request = self.decided(0).streams,
            Count::New(n) => self.dial(n, wire),
        }
        if self.decided(0).jumps && self.route_set_at.is_none() && !self.case.mode.receiving() {
            self.route_set_at = Some(wire.now());
        }
    }

    fn control_frame(&mut self, frame: ControlFrame, wire: &mut Wire) -> Result<(), String> {
        match (&mut self.control, frame) {
            (Control::Dialing(session), ControlFrame::Session(m)) => {
                session.handle(m).map_err(|e| e.to_string())?;
                if session.server_proved() && !session.awaits_proofs() {
                    self.request(wire)?;
                }
            }
            (Control::Copy(opening), frame) if opening.answer().is_none() => {
                opening.handle(frame).map_err(|e| e.to_string())?;
                if let (Some(answer), Mode::Pull | Mode::PullAhead) =
                    (opening.answer(), self.case.mode)
                {
                    let recv = RecvSession::new(RecvConfig::into_directory(answer.chunk_size));
                    self.recv = Some(match self.case.mode {
                        Mode::PullAhead => recv.with_answered_ahead(),
                        _ => recv,
                    });
                }
            }
            (Control::Copy(_), ControlFrame::Transfer(m)) => {
                let r = match (&mut self.send, &mut self.recv) {
                    (Some(send), _) => send.handle(m),
                    (_, Some(recv)) => recv.handle(m),
                    _ => return Err(format!("{} with no session", m.kind())),
                };
                r.map_err(|e| e.to_string())?;
            }
            (Control::Bench(session), ControlFrame::Session(m)) => {
                session.handle(m).map_err(|e| e.to_string())?;
                while let Some(ev) = session.poll_event() {
                    if ev == ClientEvent::Started && self.case.mode == Mode::Bench {
                        self.first_byte.get_or_insert(wire.now());
                    }
                }
            }
            (_, frame) => return Err(format!("unexpected {frame:?}")),
        }
        Ok(())
    }

    /// The server proved itself: our proof, the request (and a push's list) in one
    /// flight; the data connections that waited for the request leave behind it.
    fn request(&mut self, wire: &mut Wire) -> Result<(), String> {
        let Control::Dialing(session) = std::mem::replace(&mut self.control, Control::Gone) else {
            unreachable!("dialing");
        };
        let jumps = self.decided(0).jumps;
        let ask = jumps.then_some(JumpAsk {
            start_bps: 900_000_000,
            remembered_bps: 1_000_000_000,
            init_cwnd: 100,
            init_rwnd: 100,
        });
        let streams = self.data.len().max(usize::from(self.behind_request)) as u16;
        let rtt_us = RTT.as_micros() as u32;
        self.control = match self.case.mode {
            Mode::Bench | Mode::BenchReverse => {
                let mut session = session;
                let direction = match self.case.mode {
                    Mode::Bench => Direction::ClientToServer,
                    _ => Direction::ServerToClient,
                };
                session
                    .request(BenchParams {
                        streams,
                        duration_ms: 10_000,
                        bytes: 0,
                        direction,
                        congestion: String::new(),
                        rate_bps: 0,
                        window_bytes: 0,
                        window_fixed: false,
                        rx_rate_bps: 0,
                        read_rate_bps: 0,
                        rtt_us,
                        interval_ms: 1000,
                        send_mode: SendMode::Write,
                        jump: ask,
                    })
                    .map_err(|e| e.to_string())?;
                Control::Bench(session)
            }
            mode => {
                let direction = match mode {
                    Mode::Push => CopyDirection::Push,
                    _ => CopyDirection::Pull,
                };
                let params = TransferParams {
                    direction,
                    streams,
                    chunk_size: 1 << 24,
                    rate_bps: 0,
                    window_bytes: 0,
                    rtt_us,
                    options: TransferOptions {
                        auto_chunk: true,
                        answered_ahead: mode == Mode::PullAhead,
                        ..TransferOptions::default()
                    },
                    congestion: String::new(),
                    path: b"data".to_vec(),
                    jump: ask,
                };
                let rules = TransferMessage::FilterRules { rules: Vec::new() };
                let mut opening =
                    CopyOpening::new(session, params, rules).map_err(|e| e.to_string())?;
                if mode == Mode::Push {
                    let config = SendConfig {
                        chunk_size: 1 << 24,
                        checksum_only: false,
                        streams,
                    };
                    let mut send = SendSession::new(source(), config).map_err(|e| e.to_string())?;
                    while let Some(m) = send.poll_transmit() {
                        opening.queue(m);
                    }
                    self.send = Some(send);
                }
                Control::Copy(opening)
            }
        };
        self.flush(wire);
        let n = std::mem::take(&mut self.behind_request);
        self.dial(n, wire);
        Ok(())
    }

    /// What the machines queued: control frames, data hellos, a push's first chunk.
    fn flush(&mut self, wire: &mut Wire) {
        let session = match &mut self.control {
            Control::Copy(opening) => {
                while let Some(f) = opening.poll_transmit() {
                    wire.send(Side::Server, Conn::Control, Packet::Frame(f));
                }
                Some(opening.session())
            }
            Control::Bench(session) => {
                while let Some(m) = session.poll_transmit() {
                    wire.send(Side::Server, Conn::Control, Packet::session(m));
                }
                Some(&*session)
            }
            Control::Dialing(_) | Control::Gone => None,
        };
        if let Some(session) = session {
            for (s, d) in self.data.iter_mut() {
                let conn = Conn::Data(self.generation, *s);
                if !d.tls_up || d.hello_sent {
                    continue;
                }
                let conn_exporter = exporter(conn, self.case.encrypted_data);
                if let Some(hello) = session.data_hello(*s, &conn_exporter) {
                    d.hello_sent = true;
                    wire.send(Side::Server, conn, Packet::session(hello));
                }
            }
        }
        if let Some(recv) = self.recv.as_mut() {
            empty_destination(recv);
            while let Some(m) = recv.poll_transmit() {
                wire.send(
                    Side::Server,
                    Conn::Control,
                    Packet::Frame(ControlFrame::Transfer(m)),
                );
            }
        }
        if let Some(send) = self.send.as_mut() {
            let ready: Vec<(Conn, u16)> = self
                .data
                .iter()
                .filter(|(_, d)| d.hello_sent)
                .map(|(s, _)| (Conn::Data(self.generation, *s), *s))
                .collect();
            let now = epoch() + wire.now();
            match copy::send_ready(send, &ready, now, wire, Side::Server) {
                Ok(true) => _ = self.first_byte.get_or_insert(wire.now()),
                Ok(false) => {}
                Err(e) => _ = self.error.get_or_insert(e),
            }
            // Once the opening is answered, the sender's messages go on their own.
            if let Control::Copy(opening) = &self.control {
                if opening.answer().is_some() {
                    while let Some(m) = send.poll_transmit() {
                        wire.send(
                            Side::Server,
                            Conn::Control,
                            Packet::Frame(ControlFrame::Transfer(m)),
                        );
                    }
                }
            }
        }
        let done = self.send.as_ref().is_some_and(SendSession::is_done)
            || self.recv.as_ref().is_some_and(RecvSession::is_settled);
        if done {
            self.committed.get_or_insert(wire.now());
        }
    }
}

/// The streams a run of `case` decides on with `opened` data connections standing, and
/// whether it jumps: the engine's `jump::decide_client` on a path of [`RTT`] whose
/// record, when the case has one, jumps or not as the case says.
fn decided(case: &Case, opened: u16) -> Decided {
    let auto = longhaul_policy::streams_for_path(RTT);
    let jumps = case.path == Path::RememberedJump && opened == 0;
    let streams = match (opened, case.user_streams, jumps) {
        (n @ 1.., _, _) => n,
        (0, Some(n), _) => n,
        (0, None, true) => longhaul_policy::JUMP_STREAMS.min(auto),
        (0, None, false) => auto,
    };
    Decided { streams, jumps }
}
