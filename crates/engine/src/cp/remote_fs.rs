//! A daemon's files as a storage client sees them (the gfal2 plugin; see
//! `longhaul_proto::namespace`): stat, list, mkdir, unlink, rmdir and checksums, each one
//! authenticated session of one request and its answer.

use longhaul_proto::namespace::{ChecksumKind, FsEntry, FsErrorKind, FsOp, FsStat, MAX_FS_LISTING};
use longhaul_proto::{ClientEvent, Message, Token};
use longhaul_transfer::RequestedPath;

use crate::transport::dial::{dial, flush, recv, DataPlan, Dialed};
use crate::transport::tls::Security;
use crate::transport::BenchError;

/// A failed operation: what POSIX would call it, and why in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FsError {
    /// The kind (a storage client's errno).
    pub kind: FsErrorKind,
    /// What happened, with what to do.
    pub message: String,
}

impl From<BenchError> for FsError {
    fn from(e: BenchError) -> Self {
        let kind = match &e {
            BenchError::Proto(longhaul_proto::ProtoError::AuthFailed)
            | BenchError::Proto(longhaul_proto::ProtoError::Peer {
                code: longhaul_proto::ErrorCode::Auth,
                ..
            }) => FsErrorKind::Denied,
            _ => FsErrorKind::Other,
        };
        FsError {
            kind,
            message: e.to_string(),
        }
    }
}

/// One daemon, as `longhaul cp` reaches it.
#[derive(Clone)]
pub struct RemoteFs {
    /// `HOST:PORT` or `[V6]:PORT`.
    pub target: String,
    /// The shared token.
    pub token: Token,
    /// How the daemon's certificate is trusted.
    pub security: Security,
}

impl RemoteFs {
    /// The entry at `path` (as typed after the host: below the root, an area's name
    /// first), symlinks not followed.
    pub fn stat(&self, path: &[u8]) -> Result<FsStat, FsError> {
        match self.ask(FsOp::Stat, path)?.pop() {
            Some(Message::FsStat(s)) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// The entries of the directory at `path`.
    pub fn list(&self, path: &[u8]) -> Result<Vec<FsEntry>, FsError> {
        let mut out = Vec::new();
        for m in self.ask(FsOp::List, path)? {
            match m {
                Message::FsEntries(e) => out.extend(e),
                Message::FsDone => return Ok(out),
                other => return Err(unexpected(Some(other))),
            }
        }
        Err(unexpected(None))
    }

    /// Makes the directory `path` with `mode` (and its missing parents with `parents`).
    pub fn mkdir(&self, path: &[u8], mode: u32, parents: bool) -> Result<(), FsError> {
        self.done(FsOp::Mkdir { mode, parents }, path)
    }

    /// Removes the file or symlink `path`.
    pub fn unlink(&self, path: &[u8]) -> Result<(), FsError> {
        self.done(FsOp::Unlink, path)
    }

    /// Removes the empty directory `path`.
    pub fn rmdir(&self, path: &[u8]) -> Result<(), FsError> {
        self.done(FsOp::Rmdir, path)
    }

    /// The checksum `kind` of the file at `path` (32 bytes of BLAKE3, or 4 of ADLER32).
    pub fn checksum(&self, path: &[u8], kind: ChecksumKind) -> Result<Vec<u8>, FsError> {
        match self.ask(FsOp::Checksum(kind), path)?.pop() {
            Some(Message::FsChecksum { kind: k, value }) if k == kind => Ok(value),
            other => Err(unexpected(other)),
        }
    }

    fn done(&self, op: FsOp, path: &[u8]) -> Result<(), FsError> {
        match self.ask(op, path)?.pop() {
            Some(Message::FsDone) => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Runs `op` on `path` and returns the answer's frames (the last one ends it); a
    /// refusal is the error.
    fn ask(&self, op: FsOp, path: &[u8]) -> Result<Vec<Message>, FsError> {
        let wire = RequestedPath::from_typed(path)
            .map_err(|e| FsError {
                kind: FsErrorKind::Denied,
                message: format!("{}: {e}", String::from_utf8_lossy(path)),
            })?
            .to_wire();
        let no_data = DataPlan {
            streams: 0,
            receiving: false,
        };
        let mut control = dial(&self.target, &self.token, &self.security, no_data)?;
        if control.session.features() & longhaul_proto::features::NAMESPACE == 0 {
            return Err(FsError {
                kind: FsErrorKind::Other,
                message: format!(
                    "{} runs an older longhaul without namespace operations; upgrade it",
                    self.target
                ),
            });
        }
        let Dialed { conn, session, .. } = &mut control;
        session.request_fs(op, wire).map_err(BenchError::from)?;
        flush(session, conn)?;
        let (mut frames, mut entries) = (Vec::new(), 0usize);
        loop {
            let msg = recv(conn, "waiting for the namespace answer")?;
            session.handle(msg).map_err(BenchError::from)?;
            while let Some(ev) = session.poll_event() {
                match ev {
                    ClientEvent::Fs(Message::FsFailed { kind, message }) => {
                        return Err(FsError { kind, message })
                    }
                    ClientEvent::Fs(Message::FsEntries(e)) => {
                        entries += e.len();
                        if entries > MAX_FS_LISTING {
                            return Err(FsError {
                                kind: FsErrorKind::Other,
                                message: format!(
                                    "the listing holds more than {MAX_FS_LISTING} entries"
                                ),
                            });
                        }
                        frames.push(Message::FsEntries(e));
                    }
                    ClientEvent::Fs(last) => {
                        frames.push(last);
                        return Ok(frames);
                    }
                    _ => {}
                }
            }
        }
    }
}

fn unexpected(m: Option<Message>) -> FsError {
    FsError {
        kind: FsErrorKind::Other,
        message: format!(
            "the server answered {} to a namespace operation",
            m.map_or("nothing", |m| m.kind())
        ),
    }
}
