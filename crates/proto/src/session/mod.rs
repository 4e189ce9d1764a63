//! Control-session state machines for both ends, with no I/O.
//!
//! Each end feeds received messages to `handle`, drains `poll_transmit` for the messages to
//! send and `poll_event` for what happened. Local decisions (accept parameters, start the
//! run, send results) are method calls. On a protocol error the state machine queues an
//! [`Message::Error`] for the peer, moves to `Failed` and returns the error.

mod client;
mod data;
mod server;
mod wait;

pub use client::{ClientEvent, ClientSession};
pub use data::DataAttachments;
pub use server::{Access, ServerEvent, ServerSession};
pub use wait::{Wait, ANSWER_WAIT, ATTACH_WAIT, CLIENT_WAIT, SERVER_WAIT};

use crate::error::{ErrorCode, ProtoError};
use crate::message::Message;
use crate::{MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};

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
