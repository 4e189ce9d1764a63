//! The receiver's messages while chunks flow: chunk acks and refusals into the scheduler,
//! commits, and skips of files it answered ahead for.

use longhaul_proto::transfer::EntryId;
use longhaul_proto::transfer::{RejectReason, SkipReason, TransferMessage};

use super::{unexpected, SendSession};
use crate::scheduler::{ChunkId, ChunkScheduler, Retry};
use crate::session::{show, LocalFailure, PeerMisbehaved, SessionError};

impl SendSession {
    pub(super) fn handle_ack(&mut self, msg: TransferMessage) -> Result<(), SessionError> {
        match msg {
            TransferMessage::SkipFile { file, reason } if self.ahead.is_some() => {
                self.skip_while_sending(file, reason)
            }
            TransferMessage::FileListEnd { deleted, .. } if self.ahead == Some(false) => {
                self.ahead = Some(true);
                self.outcome.deleted = u64::from(deleted);
                Ok(())
            }
            TransferMessage::ChunkVerified { file, index } => {
                let id = self.chunk_id(file, index)?;
                let sched = self.sched_mut()?;
                if let Some(stream) = sched.holder(id) {
                    sched
                        .chunk_verified(stream, id)
                        .map_err(PeerMisbehaved::scheduler)?;
                    // Progress counts what the receiver verified, not what sits in
                    // socket buffers (a long path's window holds hundreds of MB).
                    let len = sched.chunk(id).map(|c| c.len).unwrap_or(0);
                    self.progress.done_bytes += len;
                }
                Ok(())
            }
            TransferMessage::ChunkRejected {
                file,
                index,
                reason,
            } => {
                self.outcome.rejected_chunks += 1;
                let id = self.chunk_id(file, index)?;
                let path = show(&self.entries[file.slot()].path);
                // Sent as equal to the receiver's copy and refused: send its bytes next.
                if let Some(old) = self
                    .files
                    .get_mut(id.file.slot())
                    .and_then(|f| f.old.get_mut(index as usize))
                {
                    *old = None;
                }
                let sched = self.sched_mut()?;
                if let Some(stream) = sched.holder(id) {
                    let retry = sched
                        .chunk_failed(stream, id)
                        .map_err(PeerMisbehaved::scheduler)?;
                    if let Retry::GaveUp { attempts } = retry {
                        return Err(LocalFailure::RefusedTooOften {
                            path,
                            index,
                            attempts,
                            reason: reject_text(reason).to_string(),
                        }
                        .into());
                    }
                }
                Ok(())
            }
            TransferMessage::FileCommitted { file, ok, reason } => {
                if self.skipped.contains_key(&file) {
                    return Err(PeerMisbehaved::CommittedSkipped { file }.into());
                }
                // A symlink is committed once; any other commit names a file sent.
                if !self.links.remove(&file) {
                    self.chunk_id(file, 0)?;
                }
                self.committed += 1;
                self.progress.files_done += 1;
                if ok {
                    self.outcome.files_ok += 1;
                } else {
                    let why = match (reason.is_empty(), self.cfg.checksum_only) {
                        (false, _) => reason,
                        (true, true) => "differs from the source (or is missing)".into(),
                        (true, false) => "the receiver could not put it in place".into(),
                    };
                    self.outcome
                        .failed
                        .push(format!("{}: {why}", show(&self.entries[file.slot()].path)));
                }
                self.maybe_done();
                Ok(())
            }
            other => Err(unexpected(&other, "while transferring")),
        }
    }

    /// A file or link the receiver answered ahead for, and now does not take: its chunks
    /// stop (those in flight are not sent again) and it counts as skipped.
    fn skip_while_sending(
        &mut self,
        file: EntryId,
        reason: SkipReason,
    ) -> Result<(), SessionError> {
        self.check_entry(file)?;
        if self.ahead == Some(true) || self.skipped.contains_key(&file) {
            return Err(PeerMisbehaved::SkippedLate { file }.into());
        }
        if !self.links.remove(&file) {
            let s = self.chunk_id(file, 0)?.file;
            self.sched_mut()?
                .drop_file(s)
                .map_err(PeerMisbehaved::scheduler)?;
        }
        self.skipped.insert(file, reason);
        self.committed += 1;
        self.progress.files_done += 1;
        self.maybe_done();
        Ok(())
    }

    fn sched_mut(&mut self) -> Result<&mut ChunkScheduler, SessionError> {
        self.sched
            .as_mut()
            .ok_or(PeerMisbehaved::AckBeforeAnswers.into())
    }

    /// The scheduler's id of chunk `index` of entry `file`.
    fn chunk_id(&self, file: EntryId, index: u32) -> Result<ChunkId, SessionError> {
        let s = (self.by_entry.get(&file).copied()).ok_or(PeerMisbehaved::AckedUnsent { file })?;
        Ok(ChunkId { file: s, index })
    }
}

fn reject_text(r: RejectReason) -> &'static str {
    match r {
        RejectReason::Checksum => "its hash did not match",
        RejectReason::WriteFailed => "the receiver could not write it",
        RejectReason::Unknown => "the receiver did not know it",
    }
}
