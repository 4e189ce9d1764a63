//! Chunks from the data streams (header check, hash check, write, manifest record, ack),
//! the digest gate before a file is put in place, each file's finish, and the directories'
//! times set before the last commit goes out.

use longhaul_proto::cut_at_char;
use longhaul_proto::transfer::EntryId;
use longhaul_proto::transfer::{
    ChunkHeader, EntryKind, RejectReason, TransferMessage, CHUNK_FLAG_HOLE, CHUNK_FLAG_SAME,
    MAX_REASON_BYTES,
};

use super::types::{Arrival, ChunkPlan, CommitJob, DirFix, RecvEvent, Reuse};
use super::{FileState, RecvSession, Theirs};
use crate::integrity::ChunkHash;
use crate::manifest::RECORD_LEN;
use crate::mode::received_mode;
use crate::receiver::ChunkCheck;
use crate::session::error::out_of_turn;
use crate::session::{LocalFailure, PeerMisbehaved, SessionError};
use crate::Error as TransferError;

impl RecvSession {
    /// A chunk header from a data stream: checks it names a chunk being received.
    pub fn chunk_header(&mut self, h: &ChunkHeader) -> Result<ChunkPlan, SessionError> {
        let cfg_chunk = self.cfg.chunk_size;
        let share = self.share;
        if self.cfg.checksum_only {
            return Err(PeerMisbehaved::ChunkInCheck.into());
        }
        let Some(f) = self
            .file_mut(h.file)
            .filter(|f| matches!(f.state, FileState::Open | FileState::Committing))
        else {
            return Err(PeerMisbehaved::ChunkNotReceived { file: h.file }.into());
        };
        let len = u64::from(h.len);
        if len > cfg_chunk || h.flags & !(CHUNK_FLAG_HOLE | CHUNK_FLAG_SAME) != 0 {
            return Err(PeerMisbehaved::ChunkMalformed {
                path: f.final_rel.display().to_string(),
                index: h.index,
                len,
                chunk_size: cfg_chunk,
                flags: h.flags,
            }
            .into());
        }
        // On the grid before anything is hashed: a chunk hasher of a multi-chunk file
        // given no bytes panics in blake3 (an empty subtree), and a hasher for an index
        // past the end hashes at a meaningless offset.
        let on_grid =
            h.index < f.hashes.chunks() && f.hashes.chunk_range(h.index) == (h.offset, len);
        if !on_grid {
            return Err(PeerMisbehaved::ChunkOffGrid {
                path: f.final_rel.display().to_string(),
                index: h.index,
                offset: h.offset,
                len,
                chunks: f.hashes.chunks(),
                chunk_size: cfg_chunk,
                size: f.hashes.size(),
            }
            .into());
        }
        Self::check_share_chunk(share, f, h.index)?;
        let same = h.flags & CHUNK_FLAG_SAME != 0;
        if same && !old_chunk_is(f.old.as_ref(), h, cfg_chunk) {
            return Err(PeerMisbehaved::ReuseUnnamed {
                path: f.final_rel.display().to_string(),
                index: h.index,
            }
            .into());
        }
        let hole = h.flags & CHUNK_FLAG_HOLE != 0;
        Ok(ChunkPlan {
            id: h.file,
            name: f.part_rel.clone(),
            payload: if hole || same { 0 } else { len },
            hole,
            same,
            hasher: f.hashes.hasher(h.index),
            lazy: (f.lazy && !f.created).then(|| (f.part_rel.clone(), f.entry.size)),
        })
    }

    /// A chunk's payload was read and hashed: whether to write it.
    pub fn chunk_arrived(
        &mut self,
        h: &ChunkHeader,
        computed: ChunkHash,
    ) -> Result<Arrival, SessionError> {
        let Some(f) = self.file_mut(h.file) else {
            return Err(PeerMisbehaved::ChunkNotReceived { file: h.file }.into());
        };
        let len = u64::from(h.len);
        let Some(rx) = f.receiver.as_mut() else {
            return Err(PeerMisbehaved::ChunkBeforeOpen { file: h.file }.into());
        };
        let check = rx.check_chunk(h.index, h.offset, len, h.hash, computed);
        let name = f.final_rel.display().to_string();
        if h.flags & CHUNK_FLAG_HOLE == 0 {
            self.outcome.received_bytes += len;
        }
        match check {
            Err(TransferError::ChunkHashMismatch { .. }) => {
                self.outbox.push_back(TransferMessage::ChunkRejected {
                    file: h.file,
                    index: h.index,
                    reason: RejectReason::Checksum,
                });
                Ok(Arrival::Rejected)
            }
            Err(cause) => Err(PeerMisbehaved::ChunkRefused {
                path: name,
                index: h.index,
                cause: Box::new(cause),
            }
            .into()),
            Ok(ChunkCheck::Duplicate) => {
                self.outbox.push_back(TransferMessage::ChunkVerified {
                    file: h.file,
                    index: h.index,
                });
                Ok(Arrival::Duplicate)
            }
            Ok(ChunkCheck::Write) => Ok(Arrival::Write),
        }
    }

    /// Sync: a chunk the sender found equal to this end's old copy (a header with
    /// `CHUNK_FLAG_SAME`, accepted by [`RecvSession::chunk_header`]): it is verified now and
    /// copied from the old copy when the file is committed. No manifest record: after an
    /// interruption the old copy is still there and is compared again.
    pub fn chunk_reused(&mut self, h: &ChunkHeader) -> Result<Arrival, SessionError> {
        let len = u64::from(h.len);
        let Some(f) = self.file_mut(h.file) else {
            return Err(PeerMisbehaved::ChunkNotReceived { file: h.file }.into());
        };
        let name = f.final_rel.display().to_string();
        let Some(rx) = f.receiver.as_mut() else {
            return Err(PeerMisbehaved::ChunkBeforeOpen { file: h.file }.into());
        };
        let check = rx
            .check_chunk(h.index, h.offset, len, h.hash, h.hash)
            .map_err(|cause| PeerMisbehaved::ChunkRefused {
                path: name,
                index: h.index,
                cause: Box::new(cause),
            })?;
        let fresh = check != ChunkCheck::Duplicate;
        if fresh {
            // Marked verified in memory only; the record it returns is not written.
            rx.chunk_durable(h.index, h.hash)
                .map_err(LocalFailure::record)?;
            f.reused.push(h.index);
            f.hashes.offer(h.index, h.hash);
        }
        self.outbox.push_back(TransferMessage::ChunkVerified {
            file: h.file,
            index: h.index,
        });
        if !fresh {
            return Ok(Arrival::Duplicate);
        }
        self.outcome.reused_bytes += len;
        self.progress.done_bytes += len;
        self.try_commit(h.file);
        Ok(Arrival::Reused)
    }

    /// The chunk's bytes are written: returns the manifest record to append (files of
    /// several chunks) before [`RecvInput::ChunkRecorded`].
    ///
    /// [`RecvInput::ChunkRecorded`]: super::RecvInput::ChunkRecorded
    pub fn chunk_written(
        &mut self,
        file: EntryId,
        index: u32,
        hash: ChunkHash,
    ) -> Result<Option<[u8; RECORD_LEN]>, SessionError> {
        let Some(f) = self.file_mut(file) else {
            return Err(out_of_turn("a written chunk", file));
        };
        f.created = true;
        let Some(rx) = f.receiver.as_mut() else {
            return Err(out_of_turn("a written chunk", file));
        };
        let record = rx
            .chunk_durable(index, hash)
            .map_err(LocalFailure::record)?;
        Ok(record.filter(|_| f.manifest_rel.is_some()))
    }

    /// Writing a chunk failed (the driver stops the transfer with its own error).
    pub(super) fn chunk_write_failed(&mut self, file: EntryId, index: u32) {
        if let Some(rx) = self.file_mut(file).and_then(|f| f.receiver.as_mut()) {
            rx.chunk_abandoned(index);
        }
    }

    /// The chunk and its record are written: ack it, and commit the file if this
    /// completed it.
    pub(super) fn chunk_recorded(&mut self, file: EntryId, index: u32, hash: ChunkHash, len: u64) {
        self.outbox
            .push_back(TransferMessage::ChunkVerified { file, index });
        self.progress.done_bytes += len;
        if let Some(f) = self.file_mut(file) {
            f.hashes.offer(index, hash);
        }
        self.share_chunk_recorded(file);
        self.try_commit(file);
    }

    /// The answer to [`RecvEvent::HashFromFile`] for one chunk.
    pub(super) fn hashed(&mut self, id: EntryId, index: u32, hash: ChunkHash) {
        if let Some(f) = self.file_mut(id) {
            f.hashes.offer(index, hash);
        }
        self.try_commit(id);
    }

    /// Both digests known: compare; put the file in place or report it.
    pub(super) fn try_commit(&mut self, id: EntryId) {
        let checksum_only = self.cfg.checksum_only;
        let (replace, sync) = (!self.cfg.no_clobber, self.cfg.sync);
        let (keep_setuid, umask) = (self.cfg.keep_setuid, self.cfg.umask);
        let Some(f) = self.file_mut(id).filter(|f| f.state == FileState::Open) else {
            return;
        };
        let (Some(ours), Some(theirs)) = (f.hashes.result(), f.theirs.as_ref()) else {
            return;
        };
        f.state = FileState::Committing;
        let theirs = match theirs {
            Theirs::Digest(digest) => *digest,
            Theirs::Changed(what) => {
                // Every chunk is in (none is still on its way to a removed file).
                let why = format!(
                    "the source changed while it was read ({what}); nothing of it was \
                     committed: copy it again"
                );
                self.fail_unplaced(id, why);
                return;
            }
        };
        if checksum_only {
            let verdict = (ours == theirs)
                .then_some(())
                .ok_or_else(|| "differs from the source".to_string());
            self.finish(id, verdict);
            return;
        }
        let verdict = f
            .receiver
            .as_ref()
            .map(|rx| rx.verify_digest(&ours, &theirs));
        if let Some(Err(e)) = verdict {
            // Its chunks disagree with the source as a whole.
            self.fail_unplaced(id, e.to_string());
            return;
        }
        let in_place = f.in_place;
        let reuse = f
            .old
            .as_ref()
            .filter(|_| !f.reused.is_empty() || in_place)
            .map(|(old_size, old)| {
                let mut idx = f.reused.clone();
                idx.sort_unstable();
                let mut runs: Vec<(u64, u64)> = Vec::new();
                for i in idx {
                    let (off, len) = f.hashes.chunk_range(i);
                    match runs.last_mut() {
                        Some((o, l)) if *o + *l == off => *l += len,
                        _ => runs.push((off, len)),
                    }
                }
                let keep_old = *old_size == f.entry.size
                    && f.reused.len() as u64 == u64::from(f.hashes.chunks());
                Reuse {
                    from: f.final_rel.clone(),
                    identity: old.identity,
                    runs: if in_place { Vec::new() } else { runs },
                    keep_old,
                    in_place: in_place.then_some(f.entry.size),
                }
            });
        let job = CommitJob {
            reuse,
            id,
            final_rel: f.final_rel.clone(),
            part_rel: f.part_rel.clone(),
            manifest_rel: f.manifest_rel.clone(),
            mode: received_mode(f.entry.mode, EntryKind::File, keep_setuid) & !umask,
            mtime: (f.entry.mtime_secs, f.entry.mtime_nanos),
            replace,
            sync,
            other_manifests: f.share.others.clone(),
        };
        self.events.push_back(RecvEvent::Commit(job));
    }

    /// The driver's answer to [`RecvEvent::Commit`].
    pub(super) fn placed(&mut self, id: EntryId, result: Result<(), String>) {
        if self
            .file_mut(id)
            .is_some_and(|f| f.state == FileState::Committing)
        {
            self.finish(id, result);
        }
    }

    /// The driver's answer to [`RecvEvent::Commit`] of a striped copy's file that another
    /// share put in place first (the last two shares to finish may both find every chunk
    /// recorded): finished, and counted as left to that share, not placed twice.
    pub(super) fn placed_by_another_share(&mut self, id: EntryId) {
        if let Some(f) = self.file_mut(id).filter(|f| !f.share.others.is_empty()) {
            f.share.left = true;
        }
        self.placed(id, Ok(()));
    }

    /// File `id` fails without being placed: its part file and manifests go, so the next
    /// run starts it over (a file written in place is the destination itself: it stays,
    /// and the next run compares it again; `--checksum-only` made none).
    fn fail_unplaced(&mut self, id: EntryId, why: String) {
        let checksum_only = self.cfg.checksum_only;
        let discard = self
            .file_mut(id)
            .filter(|f| !f.in_place && !checksum_only)
            .map(|f| RecvEvent::Discard {
                id,
                part_rel: f.part_rel.clone(),
                manifest_rel: f.manifest_rel.clone(),
                other_manifests: f.share.others.clone(),
            });
        self.events.extend(discard);
        self.finish(id, Err(why));
    }

    pub(super) fn finish(&mut self, id: EntryId, verdict: Result<(), String>) {
        let Some(f) = self.file_mut(id) else { return };
        let was = std::mem::replace(&mut f.state, FileState::Finished);
        let unfinished_file = f.entry.kind == EntryKind::File && was != FileState::Finished;
        let left = f.share.left;
        f.receiver = None;
        f.failed = verdict.is_err();
        let name = f.final_rel.display().to_string();
        let (ok, reason) = match verdict {
            Ok(()) => (true, String::new()),
            Err(why) => {
                self.outcome.failed.push(format!("{name}: {why}"));
                (false, cut_at_char(&why, MAX_REASON_BYTES).to_string())
            }
        };
        match (ok, left) {
            (true, true) => self.outcome.files_left_to_shares += 1,
            (true, false) => self.outcome.files_ok += 1,
            (false, _) => {}
        }
        self.progress.files_done += 1;
        self.uncommitted = self.uncommitted.saturating_sub(1);
        let msg = TransferMessage::FileCommitted {
            file: id,
            ok,
            reason,
        };
        if self.uncommitted == 0 && !self.cfg.checksum_only {
            // The last file: the tree is final (directory times set) before the sender
            // hears of this commit and reports success.
            self.held_commit = Some(msg);
            let dirs = self.take_dirs();
            self.dirs_unfixed = true;
            self.events.push_back(RecvEvent::FixDirs(dirs));
        } else {
            self.outbox.push_back(msg);
        }
        if unfinished_file {
            self.files_unfinished = self.files_unfinished.saturating_sub(1);
            self.release_hard_links();
        }
    }

    /// The driver's answer to [`RecvEvent::FixDirs`]: the held last commit goes out.
    pub(super) fn dirs_fixed(&mut self) {
        self.dirs_unfixed = false;
        if let Some(m) = self.held_commit.take() {
            self.outbox.push_back(m);
        }
        if std::mem::take(&mut self.done_held) {
            self.answer_done();
        }
    }

    /// The driver's answer to [`RecvEvent::CreateDir`]: the directories it created (those
    /// that existed before keep their mode; only their times are set, as a rerun after
    /// an interruption finds the directories the first run made).
    pub(super) fn dirs_created(&mut self, made: Vec<std::path::PathBuf>) {
        self.dirs_made.extend(made);
    }

    /// Directories not yet fixed, a mode only for those this transfer created (after a
    /// failure: the driver sets them anyway).
    pub fn take_dirs(&mut self) -> Vec<DirFix> {
        let mut dirs = std::mem::take(&mut self.dirs);
        for d in &mut dirs {
            if !self.dirs_made.contains(&d.rel) {
                d.mode = None;
            }
        }
        dirs
    }
}

/// Whether the old copy has chunk `h.index` with `h`'s hash, over exactly `h`'s range
/// (a chunk of another length or offset could never be the same bytes).
fn old_chunk_is(
    old: Option<&(u64, super::types::OldCopy)>,
    h: &ChunkHeader,
    chunk_size: u64,
) -> bool {
    let Some((old_size, old)) = old else {
        return false;
    };
    let start = u64::from(h.index) * chunk_size;
    let old_len = old_size.saturating_sub(start).min(chunk_size);
    old.hashes.get(h.index as usize) == Some(&h.hash)
        && start == h.offset
        && old_len == u64::from(h.len)
}
