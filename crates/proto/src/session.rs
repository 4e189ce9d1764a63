//! Control-session state machines for both ends, with no I/O.
//!
//! Each end feeds received messages to `handle`, drains `poll_transmit` for the messages to
//! send and `poll_event` for what happened. Local decisions (accept parameters, start the
//! run, send results) are method calls. On a protocol error the state machine queues an
//! [`Message::Error`] for the peer, moves to `Failed` and returns the error.

use std::collections::VecDeque;

use crate::auth::{data_mac, tags_equal, ChannelBinding, Nonce, SessionSecret, Token, MAC_LEN};
use crate::error::{ErrorCode, ProtoError};
use crate::message::*;
use crate::{features, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};

/// What the client side learned from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Both ends proved the token; data connections may now be opened.
    Authenticated {
        /// Session to name in every [`Message::DataHello`].
        session_id: u64,
        /// Features both ends support.
        features: u64,
    },
    /// Answer to [`ClientSession::ping`].
    Pong {
        /// Sequence number.
        seq: u32,
    },
    /// The server accepted the parameters.
    Ready(BenchReady),
    /// The server saw every data stream; the run begins.
    Started,
    /// The server's samples for one interval.
    PeerInterval(IntervalReport),
    /// The server's totals.
    PeerResults(Results),
    /// The verdict of the jump-start the server carried out as the sender.
    PeerJumpVerdict(JumpOutcome),
    /// The server's answer to [`ClientSession::request_host_report`]; the session is over.
    HostReport {
        /// The server's findings as JSON (schema of `longhaul-tune`), bounded by
        /// [`crate::limits::MAX_HOST_REPORT`].
        findings_json: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    AwaitServerHello,
    AwaitWelcome,
    Authenticated,
    AwaitReport,
    Reported,
    AwaitReady,
    AwaitStart,
    Running,
    /// A file transfer (`longhaul cp`) owns the connection; only pings and errors are
    /// bench messages from here on.
    Transferring,
    Failed,
}

/// The client end of a control session.
pub struct ClientSession {
    token: Token,
    nonce: Nonce,
    binding: ChannelBinding,
    state: ClientState,
    secret: SessionSecret,
    session_id: u64,
    /// The server accepted our proof (requests may go before, right behind it).
    welcomed: bool,
    features: u64,
    outbox: VecDeque<Message>,
    events: VecDeque<ClientEvent>,
}

impl ClientSession {
    /// Starts a session on the TLS connection `binding` describes, announcing
    /// [`features::DEFAULT`]; the hello is queued for sending at once (it carries no
    /// secret, and an older server answers it with its version).
    pub fn new(token: Token, nonce: Nonce, binding: ChannelBinding) -> Self {
        Self::with_features(token, nonce, binding, features::DEFAULT)
    }

    /// Starts a session announcing `wanted` (for example [`features::PLAIN_DATA`]).
    pub fn with_features(token: Token, nonce: Nonce, binding: ChannelBinding, wanted: u64) -> Self {
        let wanted = wanted & features::ALL;
        let mut outbox = VecDeque::new();
        outbox.push_back(Message::ClientHello {
            version: PROTOCOL_VERSION,
            features: wanted,
            nonce,
        });
        let secret = token.session_secret(&binding);
        Self {
            session_id: secret.session_id(),
            token,
            nonce,
            binding,
            state: ClientState::AwaitServerHello,
            secret,
            welcomed: false,
            features: wanted,
            outbox,
            events: VecDeque::new(),
        }
    }

    /// The session's chunk key, once the server has proved itself.
    pub fn chunk_key(&self) -> Option<crate::auth::ChunkKey> {
        self.server_proved().then(|| self.secret.chunk_key())
    }

    /// Whether the server's hello and proof have been checked.
    fn server_proved(&self) -> bool {
        !matches!(
            self.state,
            ClientState::AwaitServerHello | ClientState::Failed
        )
    }

    /// The session's id (derived from the connection, the same at the server).
    pub fn session_id(&self) -> u64 {
        self.session_id
    }

    /// The features both ends have: what this end announced, less what the server's
    /// hello lacked (before that hello: what this end announced).
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Feeds one message received from the server.
    pub fn handle(&mut self, msg: Message) -> Result<(), ProtoError> {
        let result = self.handle_inner(msg);
        if let Err(e) = &result {
            if !matches!(e, ProtoError::Peer { .. }) {
                self.outbox.push_back(error_message(e));
            }
            self.state = ClientState::Failed;
        }
        result
    }

    fn handle_inner(&mut self, msg: Message) -> Result<(), ProtoError> {
        use ClientState as S;
        match (self.state, msg) {
            (_, Message::Error { code, message }) => Err(ProtoError::Peer { code, message }),
            (
                S::AwaitServerHello,
                Message::ServerHello {
                    version,
                    features,
                    nonce,
                    proof,
                },
            ) => {
                check_version(version)?;
                if !tags_equal(&proof, &self.token.server_proof(&self.binding.cert, &nonce)) {
                    return Err(ProtoError::AuthFailed);
                }
                self.features &= features;
                self.outbox.push_back(Message::ClientProof {
                    proof: self.token.client_proof(&self.binding, &self.nonce, &nonce),
                });
                self.state = S::AwaitWelcome;
                Ok(())
            }
            (state, Message::Welcome { session_id })
                if !self.welcomed && !matches!(state, S::AwaitServerHello | S::Failed) =>
            {
                if session_id != self.session_id {
                    return Err(ProtoError::InvalidField {
                        field: "session_id",
                        why: format!(
                            "the server named session {session_id:#x}, not the {:#x} both ends \
                             derive from this connection",
                            self.session_id
                        ),
                    });
                }
                self.welcomed = true;
                if state == S::AwaitWelcome {
                    self.state = S::Authenticated;
                }
                self.events.push_back(ClientEvent::Authenticated {
                    session_id,
                    features: self.features,
                });
                Ok(())
            }
            (
                S::Authenticated
                | S::AwaitWelcome
                | S::AwaitReport
                | S::AwaitReady
                | S::AwaitStart
                | S::Running
                | S::Transferring,
                Message::Pong { seq },
            ) => {
                self.events.push_back(ClientEvent::Pong { seq });
                Ok(())
            }
            (S::AwaitReport, Message::HostReport { findings_json }) if self.welcomed => {
                self.state = S::Reported;
                self.events
                    .push_back(ClientEvent::HostReport { findings_json });
                Ok(())
            }
            (S::AwaitReady, Message::BenchReady(r)) if self.welcomed => {
                self.state = S::AwaitStart;
                self.events.push_back(ClientEvent::Ready(r));
                Ok(())
            }
            (S::AwaitStart, Message::Start) => {
                self.state = S::Running;
                self.events.push_back(ClientEvent::Started);
                Ok(())
            }
            (S::Running, Message::Interval(r)) => {
                self.events.push_back(ClientEvent::PeerInterval(r));
                Ok(())
            }
            (S::Running, Message::Results(r)) => {
                self.events.push_back(ClientEvent::PeerResults(r));
                Ok(())
            }
            (S::Running, Message::JumpVerdict { outcome })
                if self.features & features::JUMP_VERDICT != 0 =>
            {
                self.events.push_back(ClientEvent::PeerJumpVerdict(outcome));
                Ok(())
            }
            (state, msg) => Err(ProtoError::Unexpected {
                got: msg.kind(),
                state: client_state_name(state),
            }),
        }
    }

    /// Queues an RTT probe (allowed once the server proved itself).
    pub fn ping(&mut self, seq: u32) {
        if self.server_proved() {
            self.outbox.push_back(Message::Ping { seq });
        }
    }

    /// Whether a request may be queued now: authenticated, or right behind our proof.
    fn may_request(&self) -> bool {
        matches!(
            self.state,
            ClientState::Authenticated | ClientState::AwaitWelcome
        )
    }

    /// Queues the run's parameters after checking them locally; allowed right behind our
    /// proof (the same flight), before the welcome.
    pub fn request(&mut self, params: BenchParams) -> Result<(), ProtoError> {
        if !self.may_request() {
            return Err(ProtoError::Unexpected {
                got: "BenchParams (local)",
                state: client_state_name(self.state),
            });
        }
        params.validate()?;
        self.outbox.push_back(Message::BenchParams(params));
        self.state = ClientState::AwaitReady;
        Ok(())
    }

    /// Instead of a run, asks the server for its own host findings for a path of `rate_bps`
    /// and `rtt_us` (allowed once authenticated, before any parameters). The answer arrives
    /// as [`ClientEvent::HostReport`] and ends the session.
    pub fn request_host_report(&mut self, rate_bps: u64, rtt_us: u32) -> Result<(), ProtoError> {
        if !self.may_request() {
            return Err(ProtoError::Unexpected {
                got: "HostReportRequest (local)",
                state: client_state_name(self.state),
            });
        }
        validate_report_request(rate_bps, rtt_us)?;
        self.outbox
            .push_back(Message::HostReportRequest { rate_bps, rtt_us });
        self.state = ClientState::AwaitReport;
        Ok(())
    }

    /// Hands the connection to a file transfer: the caller sends `TransferParams` next
    /// (see [`crate::transfer`]). Allowed once authenticated, before any bench
    /// parameters, or already right behind our proof (the server proved itself in its
    /// hello): the welcome then still arrives and is handled as usual.
    pub fn begin_transfer(&mut self) -> Result<(), ProtoError> {
        self.state = match self.state {
            ClientState::Authenticated | ClientState::AwaitWelcome => ClientState::Transferring,
            other => {
                return Err(ProtoError::Unexpected {
                    got: "TransferParams (local)",
                    state: client_state_name(other),
                })
            }
        };
        Ok(())
    }

    /// The [`Message::DataHello`] for data stream `stream` on a data connection whose
    /// exporter is `conn` (empty without TLS); `None` until the server proved itself. It
    /// needs no answer from the server: data connections attach in the flight of our
    /// proof.
    pub fn data_hello(&self, stream: u16, conn: &[u8]) -> Option<Message> {
        self.server_proved().then(|| Message::DataHello {
            session_id: self.session_id,
            stream,
            mac: data_mac(&self.secret, self.session_id, stream, conn),
        })
    }

    /// Queues this end's samples for one interval (only while running).
    pub fn send_interval(&mut self, report: IntervalReport) {
        if self.state == ClientState::Running {
            self.outbox.push_back(Message::Interval(report));
        }
    }

    /// Queues this end's totals (only while running).
    pub fn send_results(&mut self, results: Results) {
        if self.state == ClientState::Running {
            self.outbox.push_back(Message::Results(results));
        }
    }

    /// Queues an error for the server and fails the session.
    pub fn abort(&mut self, code: ErrorCode, message: String) {
        self.outbox.push_back(Message::Error { code, message });
        self.state = ClientState::Failed;
    }

    /// Next message to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Message> {
        self.outbox.pop_front()
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }
}

/// What the server side learned from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// The client proved the token; data connections prove `secret`.
    Authenticated {
        /// Secret of this session.
        secret: SessionSecret,
        /// Features both ends support.
        features: u64,
    },
    /// The client asks for a run; answer with `accept` or `reject`.
    Params(BenchParams),
    /// The client's samples for one interval.
    PeerInterval(IntervalReport),
    /// The client's totals.
    PeerResults(Results),
    /// Instead of a run, the client asks for this host's findings for a path of this rate
    /// and RTT (already checked against the limits); answer with
    /// [`ServerSession::send_host_report`].
    HostReportRequested {
        /// Rate one stream must reach, bit/s.
        rate_bps: u64,
        /// Round-trip time of the path, microseconds.
        rtt_us: u32,
    },
}

impl PartialEq for SessionSecret {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (data_mac(self, 0, 0, &[]), data_mac(other, 0, 0, &[]));
        tags_equal(&a, &b)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    AwaitHello,
    AwaitProof,
    AwaitParams,
    Reporting,
    Reported,
    Deciding,
    AwaitStart,
    Running,
    /// A file transfer owns the connection (see [`ServerSession::begin_transfer`]).
    Transferring,
    Failed,
}

/// The server end of a control session.
pub struct ServerSession {
    token: Token,
    nonce: Nonce,
    binding: ChannelBinding,
    client_nonce: Nonce,
    session_id: u64,
    features: u64,
    state: ServerState,
    outbox: VecDeque<Message>,
    events: VecDeque<ServerEvent>,
}

impl ServerSession {
    /// The hello a server sends on every TLS connection before it reads anything: 0.5-RTT
    /// data right behind its TLS Finished, proving the token for its certificate `cert`
    /// (SHA-256) with `nonce`, the one its [`ServerSession`] is then given.
    pub fn hello(token: &Token, nonce: Nonce, cert: &[u8; 32]) -> Message {
        Message::ServerHello {
            version: PROTOCOL_VERSION,
            features: features::ALL,
            nonce,
            proof: token.server_proof(cert, &nonce),
        }
    }

    /// A session on the TLS connection `binding` describes, whose [`ServerSession::hello`]
    /// (with `nonce`) is already sent, waiting for the client's hello.
    pub fn new(token: Token, nonce: Nonce, binding: ChannelBinding) -> Self {
        let session_id = token.session_secret(&binding).session_id();
        Self {
            token,
            nonce,
            binding,
            client_nonce: [0; 32],
            session_id,
            features: 0,
            state: ServerState::AwaitHello,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Feeds one message received from the client.
    pub fn handle(&mut self, msg: Message) -> Result<(), ProtoError> {
        let result = self.handle_inner(msg);
        if let Err(e) = &result {
            if !matches!(e, ProtoError::Peer { .. }) {
                self.outbox.push_back(error_message(e));
            }
            self.state = ServerState::Failed;
        }
        result
    }

    fn handle_inner(&mut self, msg: Message) -> Result<(), ProtoError> {
        use ServerState as S;
        match (self.state, msg) {
            (_, Message::Error { code, message }) => Err(ProtoError::Peer { code, message }),
            (
                S::AwaitHello,
                Message::ClientHello {
                    version,
                    features,
                    nonce,
                },
            ) => {
                check_version(version)?;
                self.client_nonce = nonce;
                self.features = features & features::ALL;
                self.state = S::AwaitProof;
                Ok(())
            }
            (S::AwaitProof, Message::ClientProof { proof }) => {
                let expected: [u8; MAC_LEN] =
                    self.token
                        .client_proof(&self.binding, &self.client_nonce, &self.nonce);
                if !tags_equal(&proof, &expected) {
                    return Err(ProtoError::AuthFailed);
                }
                self.outbox.push_back(Message::Welcome {
                    session_id: self.session_id,
                });
                self.state = S::AwaitParams;
                self.events.push_back(ServerEvent::Authenticated {
                    secret: self.token.session_secret(&self.binding),
                    features: self.features,
                });
                Ok(())
            }
            (
                S::AwaitParams
                | S::Reporting
                | S::Deciding
                | S::AwaitStart
                | S::Running
                | S::Transferring,
                Message::Ping { seq },
            ) => {
                self.outbox.push_back(Message::Pong { seq });
                Ok(())
            }
            (S::AwaitParams, Message::HostReportRequest { rate_bps, rtt_us }) => {
                validate_report_request(rate_bps, rtt_us)?;
                self.state = S::Reporting;
                self.events
                    .push_back(ServerEvent::HostReportRequested { rate_bps, rtt_us });
                Ok(())
            }
            (S::AwaitParams, Message::BenchParams(p)) => {
                p.validate()?;
                self.state = S::Deciding;
                self.events.push_back(ServerEvent::Params(p));
                Ok(())
            }
            (S::Running, Message::Interval(r)) => {
                self.events.push_back(ServerEvent::PeerInterval(r));
                Ok(())
            }
            (S::Running, Message::Results(r)) => {
                self.events.push_back(ServerEvent::PeerResults(r));
                Ok(())
            }
            (state, msg) => Err(ProtoError::Unexpected {
                got: msg.kind(),
                state: server_state_name(state),
            }),
        }
    }

    /// The session's id (derived from the connection: the client's data hellos name it).
    pub fn session_id(&self) -> u64 {
        self.session_id
    }

    /// The client sent `TransferParams` (a file transfer) instead of bench parameters:
    /// allowed only once authenticated and before anything else; the transfer driver owns
    /// the connection from here on.
    pub fn begin_transfer(&mut self) -> Result<(), ProtoError> {
        if self.state != ServerState::AwaitParams {
            let e = ProtoError::Unexpected {
                got: "TransferParams",
                state: server_state_name(self.state),
            };
            self.outbox.push_back(error_message(&e));
            self.state = ServerState::Failed;
            return Err(e);
        }
        self.state = ServerState::Transferring;
        Ok(())
    }

    /// Accepts the client's parameters with this end's preparations.
    pub fn accept(&mut self, ready: BenchReady) {
        if self.state == ServerState::Deciding {
            self.outbox.push_back(Message::BenchReady(ready));
            self.state = ServerState::AwaitStart;
        }
    }

    /// Refuses the client's parameters; the message says what to change.
    pub fn reject(&mut self, message: String) {
        self.abort(ErrorCode::Params, message);
    }

    /// Answers a [`ServerEvent::HostReportRequested`] with this host's findings as JSON; the
    /// session is over afterwards. Text beyond [`crate::limits::MAX_HOST_REPORT`] is cut by
    /// the codec, so the caller keeps the JSON within that bound.
    pub fn send_host_report(&mut self, findings_json: String) {
        if self.state == ServerState::Reporting {
            self.outbox.push_back(Message::HostReport { findings_json });
            self.state = ServerState::Reported;
        }
    }

    /// Whether the session has nothing left to do after a host report.
    pub fn is_reported(&self) -> bool {
        self.state == ServerState::Reported
    }

    /// Every data stream is attached: tells the client to begin.
    pub fn start(&mut self) {
        if self.state == ServerState::AwaitStart {
            self.outbox.push_back(Message::Start);
            self.state = ServerState::Running;
        }
    }

    /// Queues this end's samples for one interval (only while running).
    pub fn send_interval(&mut self, report: IntervalReport) {
        if self.state == ServerState::Running {
            self.outbox.push_back(Message::Interval(report));
        }
    }

    /// Queues the verdict of the jump-start this end carried out as the sender (only while
    /// running, and only to a client that announced [`features::JUMP_VERDICT`]).
    pub fn send_jump_verdict(&mut self, outcome: JumpOutcome) {
        if self.state == ServerState::Running && self.features & features::JUMP_VERDICT != 0 {
            self.outbox.push_back(Message::JumpVerdict { outcome });
        }
    }

    /// Whether the client takes [`Message::JumpVerdict`] (it announced the feature).
    pub fn takes_jump_verdict(&self) -> bool {
        self.features & features::JUMP_VERDICT != 0
    }

    /// Queues this end's totals (only while running).
    pub fn send_results(&mut self, results: Results) {
        if self.state == ServerState::Running {
            self.outbox.push_back(Message::Results(results));
        }
    }

    /// Queues an error for the client and fails the session.
    pub fn abort(&mut self, code: ErrorCode, message: String) {
        self.outbox.push_back(Message::Error { code, message });
        self.state = ServerState::Failed;
    }

    /// Next message to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Message> {
        self.outbox.pop_front()
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }
}

/// The server's record of which data streams of one session have proved the secret.
/// Each stream index is accepted once, so a replayed hello cannot attach a second socket.
pub struct DataAttachments {
    session_id: u64,
    secret: SessionSecret,
    attached: Vec<bool>,
}

impl DataAttachments {
    /// Expects `streams` data connections for session `session_id`.
    pub fn new(session_id: u64, secret: SessionSecret, streams: u16) -> Self {
        Self {
            session_id,
            secret,
            attached: vec![false; streams as usize],
        }
    }

    /// Checks a data connection's hello (`conn`: that connection's exporter, empty
    /// without TLS); on success the stream counts as attached.
    pub fn attach(
        &mut self,
        session_id: u64,
        stream: u16,
        mac: &[u8; MAC_LEN],
        conn: &[u8],
    ) -> Result<(), ProtoError> {
        if session_id != self.session_id
            || !tags_equal(mac, &data_mac(&self.secret, session_id, stream, conn))
        {
            return Err(ProtoError::AuthFailed);
        }
        match self.attached.get_mut(stream as usize) {
            None => Err(ProtoError::InvalidField {
                field: "stream",
                why: format!(
                    "index {stream} but the session has {} streams",
                    self.attached.len()
                ),
            }),
            Some(true) => Err(ProtoError::InvalidField {
                field: "stream",
                why: format!("stream {stream} is already attached"),
            }),
            Some(slot) => {
                *slot = true;
                Ok(())
            }
        }
    }

    /// Whether every expected stream is attached.
    pub fn complete(&self) -> bool {
        self.attached.iter().all(|a| *a)
    }
}

fn check_version(theirs: u16) -> Result<(), ProtoError> {
    if (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&theirs) {
        Ok(())
    } else {
        Err(ProtoError::VersionMismatch {
            ours_min: MIN_PROTOCOL_VERSION,
            ours_max: PROTOCOL_VERSION,
            theirs,
        })
    }
}

fn error_message(e: &ProtoError) -> Message {
    let code = match e {
        ProtoError::VersionMismatch { .. } => ErrorCode::Version,
        ProtoError::AuthFailed => ErrorCode::Auth,
        ProtoError::InvalidField { .. } => ErrorCode::Params,
        _ => ErrorCode::Protocol,
    };
    Message::Error {
        code,
        message: e.to_string(),
    }
}

fn client_state_name(s: ClientState) -> &'static str {
    match s {
        ClientState::AwaitServerHello => "waiting for the server's hello",
        ClientState::AwaitWelcome => "waiting for the server to accept our proof",
        ClientState::Authenticated => "authenticated, before the parameters",
        ClientState::AwaitReport => "waiting for the server's host report",
        ClientState::Reported => "done after the host report",
        ClientState::AwaitReady => "waiting for the server to accept the parameters",
        ClientState::AwaitStart => "waiting for the data streams to attach",
        ClientState::Running => "running",
        ClientState::Transferring => "transferring files",
        ClientState::Failed => "failed",
    }
}

fn server_state_name(s: ServerState) -> &'static str {
    match s {
        ServerState::AwaitHello => "waiting for the client's hello",
        ServerState::AwaitProof => "waiting for the client's proof",
        ServerState::AwaitParams => "waiting for the parameters",
        ServerState::Reporting => "preparing the host report",
        ServerState::Reported => "done after the host report",
        ServerState::Deciding => "deciding on the parameters",
        ServerState::AwaitStart => "waiting for the data streams",
        ServerState::Running => "running",
        ServerState::Transferring => "transferring files",
        ServerState::Failed => "failed",
    }
}
