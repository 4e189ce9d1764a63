//! A copy's opening on the client's control connection, with no I/O: the first step of
//! the set-up as a state machine (issue 30). The dial has left the client's proof queued
//! in its [`ClientSession`]; the opening sends it, the request and its filter rules in one
//! flight (a push's file list may follow in the same flight, [`CopyOpening::queue`]), then
//! takes the server's welcome (the proof accepted) and its `TransferReady`: the chunk size
//! and what it did with a jump ask. The driver moves the frames
//! ([`CopyOpening::poll_transmit`], [`CopyOpening::handle`]) and reads the answer
//! ([`CopyOpening::answer`]).
//!
//! Round trips (docs/startup.md): the flight leaves with the TLS handshake's last one,
//! and the answer comes one round trip later, welcome and `TransferReady` together (the
//! server answers a pull's request after walking its source; a keepalive meanwhile is a
//! ping the session answers).

use std::collections::VecDeque;

use longhaul_proto::transfer::{TransferMessage, TransferParams};
use longhaul_proto::{ClientEvent, ClientSession, Message, ProtoError, Wait};

/// A frame on the control connection: the control session's or the transfer's.
#[derive(Debug, Clone, PartialEq)]
pub enum ControlFrame {
    /// A control-session message (hello, proof, welcome, ping, error).
    Session(Message),
    /// A transfer message (request, rules, list, answer).
    Transfer(TransferMessage),
}

/// The server's `TransferReady`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAnswer {
    /// The chunk size it chose (check it with [`crate::request::check_answer`]).
    pub chunk_size: u64,
    /// A pull's jump: the rate its sender starts at (0: no jump).
    pub jump_start_bps: u64,
    /// What the server did with the jump ask, in words.
    pub jump_note: String,
}

/// Why the opening failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpeningError {
    /// The server said no (its error message: the token, the path, its limits).
    #[error("{0}")]
    Refused(String),
    /// The control session broke (the server's proof, an out-of-place message).
    #[error(transparent)]
    Session(#[from] ProtoError),
    /// The server answered before it accepted our proof.
    #[error("the server sent TransferReady before its welcome")]
    ReadyBeforeWelcome,
    /// A transfer message other than the answer.
    #[error("expected TransferReady, got {0}")]
    Unexpected(&'static str),
}

/// The client's opening of a copy (see the module docs).
pub struct CopyOpening {
    session: ClientSession,
    outbox: VecDeque<ControlFrame>,
    welcomed: bool,
    answer: Option<ServerAnswer>,
}

impl CopyOpening {
    /// The opening of a copy that asks for `params`, with the filter `rules` (a
    /// [`TransferMessage::FilterRules`]) behind it, on `session` (dialed, its proof
    /// queued). Refused by the session when it is not at that point.
    pub fn new(
        mut session: ClientSession,
        params: TransferParams,
        rules: TransferMessage,
    ) -> Result<Self, OpeningError> {
        session.begin_transfer()?;
        let mut outbox: VecDeque<ControlFrame> = std::iter::from_fn(|| session.poll_transmit())
            .map(ControlFrame::Session)
            .collect();
        outbox.push_back(ControlFrame::Transfer(TransferMessage::TransferParams(
            params,
        )));
        outbox.push_back(ControlFrame::Transfer(rules));
        Ok(Self {
            session,
            outbox,
            welcomed: false,
            answer: None,
        })
    }

    /// Queues `frame` behind the request, in the same flight (a push's file list).
    pub fn queue(&mut self, frame: TransferMessage) {
        self.outbox.push_back(ControlFrame::Transfer(frame));
    }

    /// The next frame to send.
    pub fn poll_transmit(&mut self) -> Option<ControlFrame> {
        if let Some(m) = self.session.poll_transmit() {
            return Some(ControlFrame::Session(m));
        }
        self.outbox.pop_front()
    }

    /// Takes a frame the server sent.
    pub fn handle(&mut self, frame: ControlFrame) -> Result<(), OpeningError> {
        match frame {
            ControlFrame::Session(Message::Error { message, .. }) => {
                Err(OpeningError::Refused(message))
            }
            ControlFrame::Session(m) => {
                self.session.handle(m)?;
                while let Some(ev) = self.session.poll_event() {
                    if matches!(ev, ClientEvent::Authenticated { .. }) {
                        self.welcomed = true;
                    }
                }
                Ok(())
            }
            ControlFrame::Transfer(TransferMessage::TransferReady {
                chunk_size,
                jump_start_bps,
                jump_note,
            }) => {
                if !self.welcomed {
                    return Err(OpeningError::ReadyBeforeWelcome);
                }
                self.answer = Some(ServerAnswer {
                    chunk_size,
                    jump_start_bps,
                    jump_note,
                });
                Ok(())
            }
            ControlFrame::Transfer(other) => Err(OpeningError::Unexpected(other.kind())),
        }
    }

    /// What the opening waits for from the server, until its answer came: the session's
    /// welcome, then `TransferReady` (see [`Wait`]).
    pub fn waiting(&self) -> Option<Wait> {
        if self.answer.is_some() {
            return None;
        }
        self.session.waiting().or(Some(Wait::TransferReady))
    }

    /// The server's answer, once it came.
    pub fn answer(&self) -> Option<&ServerAnswer> {
        self.answer.as_ref()
    }

    /// The control session (for the data connections' hellos and the chunk key).
    pub fn session(&self) -> &ClientSession {
        &self.session
    }

    /// The control session, once the opening is over.
    pub fn into_session(self) -> ClientSession {
        self.session
    }
}
