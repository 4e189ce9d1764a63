//! The server end of a control session: what it learned from the client
//! ([`ServerEvent`]) and the state machine that checks the client's proof and answers it.

use std::collections::VecDeque;

use super::{check_version, error_message, Wait};
use crate::auth::{data_mac, tags_equal, ChannelBinding, Keyring, Nonce, SessionSecret};
use crate::error::{ErrorCode, ProtoError};
use crate::message::*;
use crate::ticket::{
    validate_lifetime, RelayDone, RelayProgress, RelayPull, TicketGrant, TicketId,
};
use crate::{features, Token, PROTOCOL_VERSION};

/// What a client proved, and so what it may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A token of the server's: its place in the [`Keyring`].
    Token(usize),
    /// A ticket the server issued (see [`crate::ticket`]): one pull of its path.
    Ticket(TicketId),
}

/// What the server side learned from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// The client proved a token; data connections prove `secret`.
    Authenticated {
        /// Secret of this session.
        secret: SessionSecret,
        /// Which of the server's tokens the client holds (its place in the [`Keyring`]),
        /// or which ticket it proved, so the server knows what the client may reach.
        access: Access,
        /// Features both ends support.
        features: u64,
    },
    /// The client asks for a run; answer with `accept` or `reject`.
    Params(BenchParams),
    /// The client's samples for one interval.
    PeerInterval(IntervalReport),
    /// The client's totals.
    PeerResults(Results),
    /// The client proves a ticket (instead of a token): look it up and answer with
    /// [`ServerSession::ticket_found`] or [`ServerSession::ticket_refused`].
    TicketPresented {
        /// Which ticket.
        id: TicketId,
    },
    /// Instead of a run, the client asks for a ticket for `path` (checked against the
    /// limits); answer with [`ServerSession::send_ticket`] or refuse.
    TicketRequested {
        /// The path, wire form.
        path: Vec<u8>,
        /// Seconds it should stay valid.
        lifetime_secs: u32,
    },
    /// Instead of a run, the client asks this server to pull from another with a ticket
    /// (a third-party copy); report with [`ServerSession::send_relay_progress`] and end
    /// with [`ServerSession::send_relay_done`].
    RelayRequested(Box<RelayPull>),
    /// Instead of a run, one namespace operation (see [`crate::namespace`]); answer with
    /// [`ServerSession::send_fs`].
    FsRequested {
        /// What to do.
        op: crate::namespace::FsOp,
        /// On which path (wire form).
        path: Vec<u8>,
    },
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
    /// A ticket's proof arrived; the driver looks the ticket up.
    AwaitTicket,
    AwaitParams,
    /// A ticket was asked for; the driver issues it or refuses.
    Ticketing,
    /// A relayed pull runs.
    Relaying,
    /// A namespace operation runs.
    Namespacing,
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
    keyring: Keyring,
    nonce: Nonce,
    binding: ChannelBinding,
    client_nonce: Nonce,
    /// A ticket's id and proof, while the driver looks the ticket up.
    ticket_proof: Option<(TicketId, [u8; crate::auth::MAC_LEN])>,
    session_id: u64,
    features: u64,
    state: ServerState,
    outbox: VecDeque<Message>,
    events: VecDeque<ServerEvent>,
}

impl ServerSession {
    /// What a server sends on every TLS connection before it reads anything: 0.5-RTT
    /// data right behind its TLS Finished, proving each token of `keyring` for its
    /// certificate `cert` (SHA-256) with `nonce`, the one its [`ServerSession`] is then
    /// given. The hello proves the first token; with several, [`Message::ServerProofs`]
    /// follows with the others.
    pub fn hello(keyring: &Keyring, nonce: Nonce, cert: &[u8; 32]) -> Vec<Message> {
        let mut proofs = keyring.server_proofs(cert, &nonce);
        let rest = proofs.split_off(1);
        let more = if rest.is_empty() {
            0
        } else {
            features::MORE_PROOFS
        };
        let mut hello = vec![Message::ServerHello {
            version: PROTOCOL_VERSION,
            features: features::ALL | more,
            nonce,
            proof: proofs[0],
        }];
        if !rest.is_empty() {
            hello.push(Message::ServerProofs { proofs: rest });
        }
        hello
    }

    /// A session on the TLS connection `binding` describes, whose [`ServerSession::hello`]
    /// (with `nonce`) is already sent, waiting for the client's hello.
    pub fn new(keyring: Keyring, nonce: Nonce, binding: ChannelBinding) -> Self {
        let session_id = binding.session_id();
        Self {
            keyring,
            nonce,
            binding,
            client_nonce: [0; 32],
            ticket_proof: None,
            session_id,
            features: 0,
            state: ServerState::AwaitHello,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// The set-up message this end waits for from the client, if any (see [`Wait`]):
    /// a driver blocks on it at most [`Wait::limit`].
    pub fn waiting(&self) -> Option<Wait> {
        match self.state {
            ServerState::AwaitHello => Some(Wait::ClientHello),
            ServerState::AwaitProof => Some(Wait::ClientProof),
            ServerState::AwaitParams => Some(Wait::Request),
            _ => None,
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
                let Some(token) =
                    self.keyring
                        .prover(&proof, &self.binding, &self.client_nonce, &self.nonce)
                else {
                    return Err(ProtoError::AuthFailed);
                };
                self.outbox.push_back(Message::Welcome {
                    session_id: self.session_id,
                });
                self.state = S::AwaitParams;
                self.events.push_back(ServerEvent::Authenticated {
                    secret: self.keyring.tokens()[token].session_secret(&self.binding),
                    access: Access::Token(token),
                    features: self.features,
                });
                Ok(())
            }
            (S::AwaitProof, Message::TicketProof { id, proof }) => {
                self.ticket_proof = Some((id, proof));
                self.state = S::AwaitTicket;
                self.events.push_back(ServerEvent::TicketPresented { id });
                Ok(())
            }
            (
                S::AwaitParams,
                Message::TicketRequest {
                    path,
                    lifetime_secs,
                },
            ) => {
                validate_lifetime(lifetime_secs)?;
                self.state = S::Ticketing;
                self.events.push_back(ServerEvent::TicketRequested {
                    path,
                    lifetime_secs,
                });
                Ok(())
            }
            (S::AwaitParams, Message::FsRequest { op, path }) => {
                self.state = S::Namespacing;
                self.events.push_back(ServerEvent::FsRequested { op, path });
                Ok(())
            }
            (S::AwaitParams, Message::RelayPull(p)) => {
                self.state = S::Relaying;
                self.events.push_back(ServerEvent::RelayRequested(p));
                Ok(())
            }
            (
                S::AwaitParams
                | S::Reporting
                | S::Deciding
                | S::AwaitStart
                | S::Running
                | S::Transferring
                | S::Relaying,
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

    /// The ticket of [`ServerEvent::TicketPresented`] is valid and its secret is
    /// `secret`: the client's proof is checked with it. A proof that fails is
    /// [`ProtoError::AuthFailed`], as a wrong token's.
    pub fn ticket_found(&mut self, secret: &Token) -> Result<(), ProtoError> {
        let result = match (self.state, self.ticket_proof.take()) {
            (ServerState::AwaitTicket, Some((id, proof))) => {
                let expected = secret.client_proof(&self.binding, &self.client_nonce, &self.nonce);
                if tags_equal(&proof, &expected) {
                    self.outbox.push_back(Message::Welcome {
                        session_id: self.session_id,
                    });
                    self.state = ServerState::AwaitParams;
                    self.events.push_back(ServerEvent::Authenticated {
                        secret: secret.session_secret(&self.binding),
                        access: Access::Ticket(id),
                        features: self.features,
                    });
                    Ok(())
                } else {
                    Err(ProtoError::AuthFailed)
                }
            }
            (state, _) => Err(ProtoError::Unexpected {
                got: "a ticket's secret (local)",
                state: server_state_name(state),
            }),
        };
        if let Err(e) = &result {
            self.outbox.push_back(error_message(e));
            self.state = ServerState::Failed;
        }
        result
    }

    /// The ticket of [`ServerEvent::TicketPresented`] is unknown, used or expired:
    /// `why` tells the client (what to do: ask for a new one).
    pub fn ticket_refused(&mut self, why: String) {
        self.ticket_proof = None;
        self.abort(ErrorCode::Auth, why);
    }

    /// Answers a [`ServerEvent::TicketRequested`]; the session is over afterwards.
    pub fn send_ticket(&mut self, grant: TicketGrant) {
        if self.state == ServerState::Ticketing {
            self.outbox.push_back(Message::TicketIssued(grant));
            self.state = ServerState::Reported;
        }
    }

    /// Queues a namespace operation's answer (only while one runs): `FsEntries` frames
    /// keep it running; `FsStat`, `FsDone`, `FsChecksum` and `FsFailed` end the session.
    pub fn send_fs(&mut self, answer: Message) {
        if self.state != ServerState::Namespacing {
            return;
        }
        match answer {
            Message::FsEntries(_) => {}
            Message::FsStat(_)
            | Message::FsDone
            | Message::FsChecksum { .. }
            | Message::FsFailed { .. } => self.state = ServerState::Reported,
            // Not an answer: nothing is sent.
            _ => return,
        }
        self.outbox.push_back(answer);
    }

    /// Queues a relayed pull's progress (only while it runs).
    pub fn send_relay_progress(&mut self, progress: RelayProgress) {
        if self.state == ServerState::Relaying {
            self.outbox.push_back(Message::RelayProgress(progress));
        }
    }

    /// Queues a relayed pull's end; the session is over afterwards.
    pub fn send_relay_done(&mut self, done: RelayDone) {
        if self.state == ServerState::Relaying {
            self.outbox.push_back(Message::RelayDone(done));
            self.state = ServerState::Reported;
        }
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

fn server_state_name(s: ServerState) -> &'static str {
    match s {
        ServerState::AwaitHello => "waiting for the client's hello",
        ServerState::AwaitProof => "waiting for the client's proof",
        ServerState::AwaitTicket => "looking up the client's ticket",
        ServerState::Ticketing => "issuing a ticket",
        ServerState::Relaying => "running a relayed pull",
        ServerState::Namespacing => "running a namespace operation",
        ServerState::AwaitParams => "waiting for the parameters",
        ServerState::Reporting => "preparing the host report",
        ServerState::Reported => "done after its answer",
        ServerState::Deciding => "deciding on the parameters",
        ServerState::AwaitStart => "waiting for the data streams",
        ServerState::Running => "running",
        ServerState::Transferring => "transferring files",
        ServerState::Failed => "failed",
    }
}
