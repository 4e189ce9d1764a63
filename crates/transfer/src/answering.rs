//! A copy's opening on the server's control connection, with no I/O: the other end of
//! [`crate::opening`]. The request (`TransferParams`) has come and the control session
//! handed the connection over; the filter rules must follow it at once. Then the driver
//! does the work a request asks for (where it lands, the served tree's walk, the memory
//! budget) and answers ([`CopyAnswering::answer`]) or refuses
//! ([`CopyAnswering::refuse`]); while it works, a keepalive leaves every
//! [`KEEPALIVE`] ([`CopyAnswering::poll_timeout`], [`CopyAnswering::handle_timeout`]): the
//! client waits for the answer with a read timeout of 15 s, and a large tree takes longer
//! to walk.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use longhaul_proto::transfer::{TransferMessage, TransferParams};
use longhaul_proto::{ErrorCode, Message};

use crate::opening::ControlFrame;
use crate::Filter;

/// How often a keepalive leaves while the request is worked on: well inside the client's
/// 15 s wait for an answer.
pub const KEEPALIVE: Duration = Duration::from_secs(5);

/// Why the server's opening ended without an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnsweringError {
    /// The server refused the request; the client was sent these words.
    #[error("{0}")]
    Refused(String),
}

#[derive(Debug)]
enum State {
    /// The request came; its rules come next.
    AwaitRules,
    /// The driver works on the request; the next keepalive is due then.
    Working { keepalive: Instant },
    /// Answered or refused.
    Done,
}

/// The server's opening of a copy (see the module docs).
#[derive(Debug)]
pub struct CopyAnswering {
    params: TransferParams,
    filter: Option<Filter>,
    state: State,
    outbox: VecDeque<ControlFrame>,
}

impl CopyAnswering {
    /// The opening of a copy whose request `params` came.
    pub fn new(params: TransferParams) -> Self {
        Self {
            params,
            filter: None,
            state: State::AwaitRules,
            outbox: VecDeque::new(),
        }
    }

    /// The request.
    pub fn params(&self) -> &TransferParams {
        &self.params
    }

    /// Takes a frame the client sent at `now`: the rules behind the request. Anything
    /// else there is refused (the refusal is queued for the client).
    pub fn handle(&mut self, frame: ControlFrame, now: Instant) -> Result<(), AnsweringError> {
        if !matches!(self.state, State::AwaitRules) {
            // Behind the rules come a push's list and the data streams' work: the
            // transfer's, not the opening's.
            return Ok(());
        }
        let kind = match frame {
            ControlFrame::Transfer(TransferMessage::FilterRules { rules }) => {
                return match Filter::new(rules) {
                    Ok(f) => {
                        self.filter = Some(f);
                        self.state = State::Working {
                            keepalive: now + KEEPALIVE,
                        };
                        Ok(())
                    }
                    Err(e) => Err(self.refuse(e.to_string())),
                };
            }
            ControlFrame::Transfer(other) => other.kind(),
            ControlFrame::Session(m) => m.kind(),
        };
        Err(self.refuse(format!(
            "expected FilterRules after the request, got {kind}"
        )))
    }

    /// The rules, once they came (the driver's walk applies them).
    pub fn filter(&self) -> Option<&Filter> {
        self.filter.as_ref()
    }

    /// The request's answer: the chunk size, and what was done with a jump ask.
    pub fn answer(&mut self, chunk_size: u64, jump_start_bps: u64, jump_note: String) {
        self.outbox
            .push_back(ControlFrame::Transfer(TransferMessage::TransferReady {
                chunk_size,
                jump_start_bps,
                jump_note,
            }));
        self.state = State::Done;
    }

    /// Refuses the request for `why` (sent to the client as it is); returns the error to
    /// end the session with.
    pub fn refuse(&mut self, why: String) -> AnsweringError {
        self.outbox.push_back(ControlFrame::Session(Message::Error {
            code: ErrorCode::Params,
            message: why.clone(),
        }));
        self.state = State::Done;
        AnsweringError::Refused(why)
    }

    /// When the next keepalive is due, while the request is worked on.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Working { keepalive } => Some(keepalive),
            _ => None,
        }
    }

    /// Time has come to `now`: a keepalive (a `Pong`, which a client in a transfer takes
    /// at any time) is queued when one is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let State::Working { keepalive } = &mut self.state {
            if now >= *keepalive {
                self.outbox
                    .push_back(ControlFrame::Session(Message::Pong { seq: 0 }));
                *keepalive = now + KEEPALIVE;
            }
        }
    }

    /// The next frame to send.
    pub fn poll_transmit(&mut self) -> Option<ControlFrame> {
        self.outbox.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::disallowed_methods)] // Some instant to offset from; the code never reads it.
    fn epoch() -> Instant {
        Instant::now()
    }

    fn params() -> TransferParams {
        TransferParams {
            direction: longhaul_proto::transfer::CopyDirection::Pull,
            streams: 4,
            chunk_size: 1 << 22,
            rate_bps: 0,
            window_bytes: 0,
            rtt_us: 100_000,
            options: Default::default(),
            congestion: String::new(),
            path: b"data".to_vec(),
            jump: None,
        }
    }

    fn rules() -> ControlFrame {
        ControlFrame::Transfer(TransferMessage::FilterRules {
            rules: vec![(false, b"*.tmp".to_vec())],
        })
    }

    #[test]
    fn keepalives_leave_every_interval_while_the_request_is_worked_on() {
        let t0 = epoch();
        let mut a = CopyAnswering::new(params());
        assert_eq!(a.poll_timeout(), None, "no keepalive before the rules");
        a.handle(rules(), t0).unwrap();
        assert!(a.filter().is_some());
        assert_eq!(a.poll_timeout(), Some(t0 + KEEPALIVE));
        // Early: nothing.
        a.handle_timeout(t0 + KEEPALIVE / 2);
        assert_eq!(a.poll_transmit(), None);
        a.handle_timeout(t0 + KEEPALIVE);
        assert_eq!(
            a.poll_transmit(),
            Some(ControlFrame::Session(Message::Pong { seq: 0 }))
        );
        assert_eq!(a.poll_timeout(), Some(t0 + KEEPALIVE * 2));
        a.answer(1 << 20, 0, String::new());
        assert_eq!(a.poll_timeout(), None, "no keepalive after the answer");
        assert!(matches!(
            a.poll_transmit(),
            Some(ControlFrame::Transfer(TransferMessage::TransferReady {
                chunk_size: 1048576,
                ..
            }))
        ));
    }

    #[test]
    fn anything_but_the_rules_behind_the_request_is_refused_in_words() {
        let mut a = CopyAnswering::new(params());
        let list_end = ControlFrame::Transfer(TransferMessage::FileListEnd {
            files: 0,
            bytes: 0,
            deleted: 0,
        });
        let e = a.handle(list_end, epoch()).unwrap_err();
        assert_eq!(
            e,
            AnsweringError::Refused(
                "expected FilterRules after the request, got FileListEnd".into()
            )
        );
        assert!(matches!(
            a.poll_transmit(),
            Some(ControlFrame::Session(Message::Error {
                code: ErrorCode::Params,
                ..
            }))
        ));
        assert_eq!(a.poll_timeout(), None);
    }

    #[test]
    fn rules_that_do_not_compile_are_refused() {
        let mut a = CopyAnswering::new(params());
        let empty_pattern = ControlFrame::Transfer(TransferMessage::FilterRules {
            rules: vec![(true, Vec::new())],
        });
        assert!(a.handle(empty_pattern, epoch()).is_err());
        assert!(matches!(
            a.poll_transmit(),
            Some(ControlFrame::Session(Message::Error { .. }))
        ));
    }
}
