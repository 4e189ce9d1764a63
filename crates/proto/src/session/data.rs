//! The server's check of each data connection's hello against the session secret
//! ([`DataAttachments`]).

use crate::auth::{data_mac, tags_equal, SessionSecret, MAC_LEN};
use crate::error::ProtoError;
use crate::session::Wait;

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

    /// The wait for the streams not yet attached, if any (see [`Wait::DataStreams`]).
    pub fn waiting(&self) -> Option<Wait> {
        let missing = self.attached.iter().filter(|a| !**a).count();
        (missing > 0).then(|| Wait::DataStreams {
            missing: u16::try_from(missing).unwrap_or(u16::MAX),
        })
    }

    /// Whether every expected stream is attached.
    pub fn complete(&self) -> bool {
        self.attached.iter().all(|a| *a)
    }
}
