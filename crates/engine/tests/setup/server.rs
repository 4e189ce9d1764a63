//! The server's end of the set-up simulation, driven as the daemon drives its machines:
//! proto's [`ServerSession`] (the 0.5-RTT hello on every connection, the client's proof,
//! a bench's parameters and start), the copy's [`CopyAnswering`] with the request rules of
//! [`longhaul_transfer::request`], the data connections' [`DataAttachments`] (a hello
//! that comes before its session read the request waits for it), and the transfer
//! session that sends or receives. A jump's route is set as the request is read.

use std::collections::{BTreeMap, BTreeSet};

use longhaul_proto::transfer::{CopyDirection, TransferMessage};
use longhaul_proto::{
    BenchReady, ChannelBinding, DataAttachments, Direction, HostFacts, Message, ServerEvent,
    ServerSession, Wait,
};
use longhaul_transfer::answering::CopyAnswering;
use longhaul_transfer::opening::ControlFrame;
use longhaul_transfer::request::{answer_chunk_size, check_request};
use longhaul_transfer::session::{RecvConfig, RecvSession, SendConfig, SendInput, SendSession};

use super::copy;
use super::net::{Conn, Packet, Side, Wire};
use super::{
    empty_destination, epoch, exporter, source, token, CERT, CONTROL_EXPORTER, SOURCE_BYTES,
};

/// What the server does with a request.
enum Run {
    /// Nothing read yet.
    None,
    /// A copy: its opening, then its session.
    Copy(Box<CopyRun>),
    /// A bench run: `reverse` when the server sends.
    Bench { reverse: bool },
}

/// A copy on the server's side.
struct CopyRun {
    answering: CopyAnswering,
    /// A pull's sending session (its list follows the answer), once answered.
    send: Option<SendSession>,
    /// A push's receiving session, once answered.
    recv: Option<RecvSession>,
}

/// The server.
pub struct Server {
    session: ServerSession,
    /// The session's id and data secret, once the client proved the token.
    secret: Option<(u64, longhaul_proto::SessionSecret)>,
    run: Run,
    /// The session's data connections, once it read the request (it registers then).
    attach: Option<DataAttachments>,
    /// Data connections whose TLS is up, and their stream once attached.
    data: BTreeMap<Conn, Option<u16>>,
    /// Hellos that came before their session registered.
    early: Vec<(Conn, Message)>,
    started: bool,
    /// Streams whose first chunk left.
    sent: BTreeSet<u16>,
    /// When the request's jump set the route toward the client.
    pub route_set_at: Option<std::time::Duration>,
    /// When each data connection's handshake completed here (its ACK).
    pub accepted: Vec<(Conn, std::time::Duration)>,
    /// A machine's error, as the daemon would log it.
    pub error: Option<String>,
    /// The data connections have TLS.
    data_tls: bool,
}

impl Server {
    /// A server holding the test's token; `data_tls`: its data connections have TLS.
    pub fn new(data_tls: bool) -> Self {
        let binding = ChannelBinding {
            cert: CERT,
            exporter: CONTROL_EXPORTER,
        };
        Self {
            session: ServerSession::new(token().into(), [9; 32], binding),
            secret: None,
            run: Run::None,
            attach: None,
            data: BTreeMap::new(),
            early: Vec::new(),
            started: false,
            sent: BTreeSet::new(),
            route_set_at: None,
            accepted: Vec::new(),
            error: None,
            data_tls,
        }
    }

    /// Takes one packet on `conn`.
    pub fn on(&mut self, conn: Conn, packet: Packet, wire: &mut Wire) {
        let to = |wire: &mut Wire, p| wire.send(Side::Client, conn, p);
        match packet {
            Packet::Syn => to(wire, Packet::SynAck),
            Packet::Ack => {
                if conn != Conn::Control {
                    self.accepted.push((conn, wire.now()));
                }
            }
            Packet::ClientHello => {
                to(wire, Packet::ServerFlight);
                // Every TLS connection opens with the server's hello (0.5-RTT data).
                for m in ServerSession::hello(&token().into(), [9; 32], &CERT) {
                    to(wire, Packet::session(m));
                }
            }
            Packet::Finished => {}
            Packet::Frame(frame) if conn == Conn::Control => self.control(frame, wire),
            Packet::Frame(ControlFrame::Session(hello)) => {
                self.early.push((conn, hello));
                self.attach_early();
            }
            Packet::Chunk(Some(chunk)) if matches!(self.data.get(&conn), Some(Some(_))) => {
                let Run::Copy(copy) = &mut self.run else {
                    panic!("a copy's chunk in a bench run");
                };
                let Some(recv) = copy.recv.as_mut() else {
                    panic!("a chunk for a pull's server");
                };
                if let Err(e) = copy::receive(recv, &chunk) {
                    self.error.get_or_insert(e);
                }
            }
            other => panic!("the server got {} on {conn:?}", other.name()),
        }
        self.flush(wire);
    }

    /// A frame on the control connection.
    fn control(&mut self, frame: ControlFrame, wire: &mut Wire) {
        if let Err(e) = self.control_frame(frame, wire) {
            self.error.get_or_insert(e);
        }
    }

    fn control_frame(&mut self, frame: ControlFrame, wire: &mut Wire) -> Result<(), String> {
        let now = epoch() + wire.now();
        match (&mut self.run, frame) {
            (Run::None, ControlFrame::Transfer(TransferMessage::TransferParams(p))) => {
                self.session.begin_transfer().map_err(|e| e.to_string())?;
                self.register(p.streams, p.jump.is_some(), wire);
                self.run = Run::Copy(Box::new(CopyRun {
                    answering: CopyAnswering::new(p),
                    send: None,
                    recv: None,
                }));
            }
            (Run::None, ControlFrame::Session(m)) => {
                self.session.handle(m).map_err(|e| e.to_string())?;
                while let Some(ev) = self.session.poll_event() {
                    match ev {
                        ServerEvent::Authenticated { secret, .. } => {
                            self.secret = Some((self.session.session_id(), secret));
                        }
                        ServerEvent::Params(p) => {
                            self.register(p.streams, p.jump.is_some(), wire);
                            self.session.accept(BenchReady {
                                facts: HostFacts::default(),
                                rcvbuf_bytes: 0,
                                sndbuf_bytes: 0,
                                rx_rate_bps: 0,
                                jump_start_bps: p.jump.map_or(0, |j| j.start_bps),
                                jump_note: String::new(),
                            });
                            self.run = Run::Bench {
                                reverse: p.direction == Direction::ServerToClient,
                            };
                        }
                        other => return Err(format!("unexpected {other:?}")),
                    }
                }
            }
            (Run::Copy(copy), frame) if copy.send.is_none() && copy.recv.is_none() => {
                copy.answering
                    .handle(frame, now)
                    .map_err(|e| e.to_string())?;
                let p = copy.answering.params().clone();
                if let Err(why) = check_request(&p) {
                    copy.answering.refuse(why.to_string());
                    return Ok(());
                }
                // The walk takes no time here: the answer goes at once.
                let chunk = answer_chunk_size(&p, SOURCE_BYTES);
                copy.answering.answer(chunk, 0, String::new());
                match p.direction {
                    CopyDirection::Pull => {
                        let mut send = SendSession::new(
                            source(),
                            SendConfig {
                                chunk_size: chunk,
                                checksum_only: false,
                                streams: p.streams,
                            },
                        )
                        .map_err(|e| e.to_string())?;
                        if p.options.answered_ahead {
                            send.handle(SendInput::AnsweredAhead)
                                .map_err(|e| e.to_string())?;
                        }
                        copy.send = Some(send);
                    }
                    CopyDirection::Push => {
                        copy.recv = Some(RecvSession::new(RecvConfig::into_directory(chunk)))
                    }
                }
            }
            (Run::Copy(copy), ControlFrame::Transfer(m)) => {
                let r = match (&mut copy.send, &mut copy.recv) {
                    (Some(send), _) => send.handle(m),
                    (_, Some(recv)) => recv.handle(m),
                    _ => unreachable!("answered"),
                };
                r.map_err(|e| e.to_string())?;
            }
            (_, frame) => return Err(format!("unexpected {frame:?}")),
        }
        Ok(())
    }

    /// The session read its request: its data connections may attach, and a jump's route
    /// is set toward the client.
    fn register(&mut self, streams: u16, jumps: bool, wire: &mut Wire) {
        if let Some((id, secret)) = self.secret.clone() {
            self.attach = Some(DataAttachments::new(id, secret, streams));
        }
        if jumps {
            self.route_set_at = Some(wire.now());
        }
        self.attach_early();
    }

    /// Attaches the hellos that came before their session registered.
    fn attach_early(&mut self) {
        let Some(attach) = self.attach.as_mut() else {
            return;
        };
        for (conn, hello) in std::mem::take(&mut self.early) {
            let Message::DataHello {
                session_id,
                stream,
                mac,
            } = hello
            else {
                self.error = Some(format!("{} on a data connection", hello.kind()));
                continue;
            };
            match attach.attach(session_id, stream, &mac, &exporter(conn, self.data_tls)) {
                Ok(()) => {
                    self.data.insert(conn, Some(stream));
                }
                Err(e) => self.error = Some(e.to_string()),
            }
        }
    }

    /// What this end's set-up machines wait for from the client, if anything: the
    /// session's next message, else its data connections, else (a pull's sender) the
    /// answer to its list.
    pub fn waiting(&self) -> Option<Wait> {
        let sender = || match &self.run {
            Run::Copy(copy) => copy.send.as_ref().and_then(SendSession::waiting),
            _ => None,
        };
        self.session
            .waiting()
            .or_else(|| self.attach.as_ref().and_then(DataAttachments::waiting))
            .or_else(sender)
    }

    /// What the machines queued, and the data a run sends once it may.
    fn flush(&mut self, wire: &mut Wire) {
        let complete = self.attach.as_ref().is_some_and(|a| a.complete());
        if let Run::Bench { .. } = self.run {
            if complete && !self.started {
                self.started = true;
                self.session.start();
            }
        }
        while let Some(m) = self.session.poll_transmit() {
            wire.send(Side::Client, Conn::Control, Packet::session(m));
        }
        let streams: Vec<(Conn, u16)> = self
            .data
            .iter()
            .filter_map(|(c, s)| s.map(|s| (*c, s)))
            .collect();
        match &mut self.run {
            Run::Copy(copy) => {
                while let Some(f) = copy.answering.poll_transmit() {
                    wire.send(Side::Client, Conn::Control, Packet::Frame(f));
                }
                if let Some(recv) = copy.recv.as_mut() {
                    empty_destination(recv);
                    while let Some(m) = recv.poll_transmit() {
                        wire.send(
                            Side::Client,
                            Conn::Control,
                            Packet::Frame(ControlFrame::Transfer(m)),
                        );
                    }
                }
                // The daemon runs the session once every data stream is attached.
                if let Some(send) = copy.send.as_mut() {
                    if complete {
                        let now = epoch() + wire.now();
                        if let Err(e) = copy::send_ready(send, &streams, now, wire, Side::Client) {
                            self.error.get_or_insert(e);
                        }
                    }
                    while let Some(m) = send.poll_transmit() {
                        wire.send(
                            Side::Client,
                            Conn::Control,
                            Packet::Frame(ControlFrame::Transfer(m)),
                        );
                    }
                }
            }
            Run::Bench { reverse: true } if self.started => {
                for (conn, s) in streams {
                    if self.sent.insert(s) {
                        wire.send(Side::Client, conn, Packet::Chunk(None));
                    }
                }
            }
            _ => {}
        }
    }
}
