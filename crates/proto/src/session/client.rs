//! The client end of a control session: what it learned from the server
//! ([`ClientEvent`]) and the state machine that proves the token and drives a run.

use std::collections::VecDeque;

use super::{check_version, error_message, Wait};
use crate::auth::{data_mac, tags_equal, ChannelBinding, Nonce, SessionSecret, Token};
use crate::error::{ErrorCode, ProtoError};
use crate::message::*;
use crate::ticket::{Credential, RelayDone, RelayProgress, RelayPull, TicketGrant, TicketId};
use crate::{features, PROTOCOL_VERSION};

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
    /// The server's ticket ([`ClientSession::request_ticket`]); the session is over.
    TicketIssued(TicketGrant),
    /// A relayed pull's progress ([`ClientSession::request_relay`]).
    RelayProgress(RelayProgress),
    /// A relayed pull's end; the session is over.
    RelayDone(RelayDone),
    /// The answer to [`ClientSession::request_fs`]: one of `FsStat`, `FsEntries` (more
    /// may follow), `FsDone`, `FsChecksum`, `FsFailed`; all but `FsEntries` end the
    /// session.
    Fs(Message),
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
    /// The hello's proof was for another token of the server's; the rest follow.
    AwaitServerProofs,
    AwaitWelcome,
    Authenticated,
    AwaitReport,
    AwaitTicket,
    Relaying,
    AwaitFs,
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
    /// The ticket this session proves instead of a token (the server is then known by
    /// its pinned certificate, not by a proof).
    ticket: Option<TicketId>,
    nonce: Nonce,
    binding: ChannelBinding,
    state: ClientState,
    secret: SessionSecret,
    session_id: u64,
    /// The server accepted our proof (requests may go before, right behind it).
    welcomed: bool,
    /// The server's nonce, from its hello.
    server_nonce: Nonce,
    /// The hello announced [`Message::ServerProofs`], not yet received.
    more_proofs: bool,
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
        Self::proving(Credential::Token(token), nonce, binding, wanted)
    }

    /// Starts a session that proves `credential`, announcing `wanted`. With a ticket
    /// the server's proofs are not checked (they are of tokens this end does not hold):
    /// the caller must have pinned the server's certificate, as the ticket's issuer saw
    /// it.
    pub fn proving(
        credential: Credential,
        nonce: Nonce,
        binding: ChannelBinding,
        wanted: u64,
    ) -> Self {
        let ticket = match &credential {
            Credential::Ticket(g) => Some(g.id),
            Credential::Token(_) => None,
        };
        let token = credential.token();
        let wanted = wanted & features::ALL;
        let mut outbox = VecDeque::new();
        outbox.push_back(Message::ClientHello {
            version: PROTOCOL_VERSION,
            features: wanted,
            nonce,
        });
        let secret = token.session_secret(&binding);
        Self {
            session_id: binding.session_id(),
            token,
            ticket,
            nonce,
            binding,
            state: ClientState::AwaitServerHello,
            secret,
            welcomed: false,
            server_nonce: [0; 32],
            more_proofs: false,
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
    pub fn server_proved(&self) -> bool {
        !matches!(
            self.state,
            ClientState::AwaitServerHello | ClientState::AwaitServerProofs | ClientState::Failed
        )
    }

    /// Whether `proof` is the server's proof of our token for this connection's certificate.
    fn proves_our_token(&self, proof: &[u8; crate::auth::MAC_LEN]) -> bool {
        tags_equal(
            proof,
            &self
                .token
                .server_proof(&self.binding.cert, &self.server_nonce),
        )
    }

    /// The server proved our token (or, with a ticket, is pinned): our proof goes out.
    fn prove(&mut self) {
        let proof = self
            .token
            .client_proof(&self.binding, &self.nonce, &self.server_nonce);
        self.outbox.push_back(match self.ticket {
            Some(id) => Message::TicketProof { id, proof },
            None => Message::ClientProof { proof },
        });
        self.state = ClientState::AwaitWelcome;
    }

    /// Whether the server's hello announced proofs of its other tokens that have not
    /// arrived yet (they follow it in the same flight).
    pub fn awaits_proofs(&self) -> bool {
        self.more_proofs
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

    /// The set-up message this end waits for from the server, if any (see [`Wait`]):
    /// a driver blocks on it at most [`Wait::limit`].
    pub fn waiting(&self) -> Option<Wait> {
        use ClientState as S;
        match self.state {
            S::AwaitServerHello | S::AwaitServerProofs => Some(Wait::ServerHello),
            S::Failed => None,
            _ if !self.welcomed => Some(Wait::Welcome),
            S::AwaitReady => Some(Wait::BenchReady),
            S::AwaitStart => Some(Wait::Start),
            _ => None,
        }
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
                self.features &= features;
                self.server_nonce = nonce;
                self.more_proofs = features & features::MORE_PROOFS != 0;
                if self.ticket.is_some() {
                    if features & features::TICKETS == 0 {
                        return Err(ProtoError::InvalidField {
                            field: "features",
                            why: "the server takes no tickets: it runs an older longhaul \
                                  (third-party copies need both servers upgraded)"
                                .into(),
                        });
                    }
                    self.prove();
                    Ok(())
                } else if self.proves_our_token(&proof) {
                    self.prove();
                    Ok(())
                } else if self.more_proofs {
                    self.state = S::AwaitServerProofs;
                    Ok(())
                } else {
                    Err(ProtoError::AuthFailed)
                }
            }
            (S::AwaitServerProofs, Message::ServerProofs { proofs }) => {
                // Every proof is checked, so the time taken says nothing of which matched.
                let found = proofs
                    .iter()
                    .fold(false, |found, p| self.proves_our_token(p) | found);
                if !found {
                    return Err(ProtoError::AuthFailed);
                }
                self.more_proofs = false;
                self.prove();
                Ok(())
            }
            // Our token was the hello's: the others' proofs are nothing to us.
            (state, Message::ServerProofs { .. })
                if self.more_proofs && !matches!(state, S::AwaitServerHello | S::Failed) =>
            {
                self.more_proofs = false;
                Ok(())
            }
            (state, Message::Welcome { session_id })
                if !self.welcomed
                    && !matches!(
                        state,
                        S::AwaitServerHello | S::AwaitServerProofs | S::Failed
                    ) =>
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
                | S::AwaitTicket
                | S::Relaying
                | S::AwaitFs
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
            (S::AwaitTicket, Message::TicketIssued(grant)) if self.welcomed => {
                self.state = S::Reported;
                self.events.push_back(ClientEvent::TicketIssued(grant));
                Ok(())
            }
            (S::Relaying, Message::RelayProgress(p)) if self.welcomed => {
                self.events.push_back(ClientEvent::RelayProgress(p));
                Ok(())
            }
            (S::Relaying, Message::RelayDone(d)) if self.welcomed => {
                self.state = S::Reported;
                self.events.push_back(ClientEvent::RelayDone(d));
                Ok(())
            }
            (S::AwaitFs, Message::FsEntries(e)) if self.welcomed => {
                self.events
                    .push_back(ClientEvent::Fs(Message::FsEntries(e)));
                Ok(())
            }
            (
                S::AwaitFs,
                m @ (Message::FsStat(_)
                | Message::FsDone
                | Message::FsChecksum { .. }
                | Message::FsFailed { .. }),
            ) if self.welcomed => {
                self.state = S::Reported;
                self.events.push_back(ClientEvent::Fs(m));
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

    /// Instead of a run, asks the server for a ticket to `path` (wire form) valid for
    /// `lifetime_secs`; it arrives as [`ClientEvent::TicketIssued`] and ends the session.
    pub fn request_ticket(&mut self, path: Vec<u8>, lifetime_secs: u32) -> Result<(), ProtoError> {
        if !self.may_request() || self.ticket.is_some() {
            return Err(ProtoError::Unexpected {
                got: "TicketRequest (local)",
                state: client_state_name(self.state),
            });
        }
        crate::ticket::validate_lifetime(lifetime_secs)?;
        self.outbox.push_back(Message::TicketRequest {
            path,
            lifetime_secs,
        });
        self.state = ClientState::AwaitTicket;
        Ok(())
    }

    /// Instead of a run, one namespace operation on `path` (wire form); the answer
    /// arrives as [`ClientEvent::Fs`].
    pub fn request_fs(
        &mut self,
        op: crate::namespace::FsOp,
        path: Vec<u8>,
    ) -> Result<(), ProtoError> {
        if !self.may_request() || self.ticket.is_some() {
            return Err(ProtoError::Unexpected {
                got: "FsRequest (local)",
                state: client_state_name(self.state),
            });
        }
        self.outbox.push_back(Message::FsRequest { op, path });
        self.state = ClientState::AwaitFs;
        Ok(())
    }

    /// Instead of a run, asks the server to pull from another with a ticket (a
    /// third-party copy); its progress and end arrive as [`ClientEvent::RelayProgress`]
    /// and [`ClientEvent::RelayDone`].
    pub fn request_relay(&mut self, pull: RelayPull) -> Result<(), ProtoError> {
        if !self.may_request() || self.ticket.is_some() {
            return Err(ProtoError::Unexpected {
                got: "RelayPull (local)",
                state: client_state_name(self.state),
            });
        }
        if pull.share.is_some() && self.features & features::STRIPES == 0 {
            return Err(ProtoError::InvalidField {
                field: "features",
                why: "the destination server runs an older longhaul without striped copies \
                      (upgrade it, or copy without stripes)"
                    .into(),
            });
        }
        self.outbox.push_back(Message::RelayPull(Box::new(pull)));
        self.state = ClientState::Relaying;
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

fn client_state_name(s: ClientState) -> &'static str {
    match s {
        ClientState::AwaitServerHello => "waiting for the server's hello",
        ClientState::AwaitServerProofs => "waiting for the server's proofs of its other tokens",
        ClientState::AwaitWelcome => "waiting for the server to accept our proof",
        ClientState::Authenticated => "authenticated, before the parameters",
        ClientState::AwaitReport => "waiting for the server's host report",
        ClientState::AwaitTicket => "waiting for the server's ticket",
        ClientState::Relaying => "waiting for the relayed pull",
        ClientState::AwaitFs => "waiting for a namespace operation's answer",
        ClientState::Reported => "done after the server's answer",
        ClientState::AwaitReady => "waiting for the server to accept the parameters",
        ClientState::AwaitStart => "waiting for the data streams to attach",
        ClientState::Running => "running",
        ClientState::Transferring => "transferring files",
        ClientState::Failed => "failed",
    }
}
