//! One share of a striped copy on the receiving end ([`RecvSession::with_share`];
//! `longhaul_proto::stripe` says how chunks are numbered and shared).
//!
//! - **Whole entries of another pair**: a one-chunk file (or an empty one) whose chunk is
//!   not this share's, and every symlink but in share 0, are answered `SkipFile
//!   OtherShare`: another pair's destination, writing into the same file system, makes
//!   them.
//! - **Files of several chunks** are written by every share into one part file at their
//!   offsets (the driver opens it shared, [`RecvEvent::Open`]'s `shared`), each share
//!   keeping its own manifest (`.NAME.2-of-3.longhaul-manifest`) of the chunks it verified.
//!   The answer to the list claims every chunk of the other shares (`HaveChunks`), so the
//!   sender sends only this share's; a chunk of another share that arrives anyway is a
//!   protocol error (it could overwrite bytes another host verified).
//! - **The commit**: once this share's chunks of a file are all recorded, the driver reads
//!   the other shares' manifests ([`RecvEvent::GatherShares`]). When they hold every
//!   other chunk (same source, same chunk size), their hashes are merged with this
//!   share's into the file's BLAKE3, which must equal the sender's digest of the whole
//!   file before the file is put in place, once: by the last share to finish. Otherwise
//!   the file is left to the shares still running (counted, not failed); a rerun of a
//!   share that died resumes from its manifest.
//!
//! A record in another share's manifest is trusted as that host verified it (it is not
//! hashed again here): that is what lets the hosts share the work.

use longhaul_proto::transfer::EntryId;
use std::path::PathBuf;

use longhaul_proto::stripe::Share;
use longhaul_proto::transfer::{EntryKind, SkipReason, TransferMessage};

use super::types::RecvEvent;
use super::{FileState, RecvFile, RecvSession};
use crate::manifest::{ResumeManifest, HEADER_LEN, RECORD_LEN};
use crate::path::SafeRelPath;
use crate::place::{manifest_name, share_manifest_name};
use crate::session::error::out_of_turn;
use crate::session::{LocalFailure, PeerMisbehaved, Refusal, SessionError};

/// A file's part in a striped copy.
#[derive(Debug, Default)]
pub(super) struct FileShare {
    /// The number of its chunk 0 across the copy.
    pub(super) first: u64,
    /// This share's chunks of it not yet recorded (files of several chunks).
    pub(super) own_left: u32,
    /// The other shares' manifests (files of several chunks).
    pub(super) others: Vec<PathBuf>,
    /// Finished with its commit left to another share.
    pub(super) left: bool,
}

impl RecvSession {
    /// A striped copy: this end receives `share` of the chunks (see the module docs).
    /// Not with sync, `--delete`, `--checksum-only` or a list answered ahead: the list is
    /// refused when one is set.
    pub fn with_share(mut self, share: Share) -> Self {
        self.share = Some(share);
        self
    }

    /// The striping rules, checked at the list's first entry.
    pub(super) fn check_share_rules(&self) -> Result<(), SessionError> {
        if self.share.is_none() {
            return Ok(());
        }
        let clash = [
            (self.sync_rules.is_some(), "sync"),
            (self.deletion.is_some(), "--delete"),
            (self.cfg.checksum_only, "--checksum-only"),
            (self.ahead, "a list answered ahead"),
        ];
        match clash.iter().find(|(set, _)| *set) {
            Some(&(_, what)) => Err(Refusal::NotStriped { what }.into()),
            None => Ok(()),
        }
    }

    /// Numbers an entry's chunks across the copy (`chunks` of a file, at least one; a
    /// symlink one) and returns its first, with the manifest name a file of several
    /// chunks keeps at `placed` (this share's own on a striped copy).
    pub(super) fn number_entry(
        &mut self,
        kind: EntryKind,
        chunks: u64,
        placed: &SafeRelPath,
    ) -> Result<(FileShare, Option<PathBuf>), SessionError> {
        let refused = Refusal::entry;
        let mut part = FileShare::default();
        let Some(share) = self.share else {
            let manifest = (chunks > 1)
                .then(|| manifest_name(placed).map(|m| m.to_path_buf()))
                .transpose()
                .map_err(refused)?;
            return Ok((part, manifest));
        };
        if kind == EntryKind::HardLink {
            return Err(Refusal::NotStriped {
                what: "hard links (sync -H)",
            }
            .into());
        }
        part.first = self.share_next;
        self.share_next = self.share_next.saturating_add(chunks.max(1));
        if chunks <= 1 {
            return Ok((part, None));
        }
        let mut manifest = None;
        for i in 0..share.count() {
            let s = Share::new(i, share.count()).map_err(|e| LocalFailure::Share(e.to_string()))?;
            let name = share_manifest_name(placed, s)
                .map_err(refused)?
                .to_path_buf();
            if s == share {
                manifest = Some(name);
            } else {
                part.others.push(name);
            }
        }
        Ok((part, manifest))
    }

    /// Whether `f` goes whole to another pair: a one-chunk (or empty) file whose chunk is
    /// not this share's, a symlink outside share 0.
    pub(super) fn other_share(&self, f: &RecvFile) -> bool {
        let Some(share) = self.share else {
            return false;
        };
        match f.entry.kind {
            EntryKind::Symlink => share.index() != 0,
            EntryKind::File => f.hashes.chunks() <= 1 && !share.holds(f.share.first),
            _ => false,
        }
    }

    /// Entry `id` goes whole to another pair: answered `SkipFile OtherShare` (whatever
    /// is at its destination is that pair's to look at).
    pub(super) fn leave_to_other_share(&mut self, id: EntryId) -> Option<Result<(), SessionError>> {
        if !self.file_ref(id).is_some_and(|f| self.other_share(f)) {
            return None;
        }
        self.outcome.files_to_other_shares += 1;
        let skip = vec![TransferMessage::SkipFile {
            file: id,
            reason: SkipReason::OtherShare,
        }];
        Some(self.decided(id, Some(skip), true))
    }

    /// Whether `f` is a file of several chunks that the shares write together.
    pub(super) fn is_shared(&self, f: &RecvFile) -> bool {
        self.share.is_some() && f.entry.kind == EntryKind::File && f.hashes.chunks() > 1
    }

    /// A shared file's answer: this share's chunks already verified (`own`, runs in
    /// order) and every chunk of the other shares, as ordered disjoint runs; counts
    /// this share's chunks still to come.
    pub(super) fn shared_have(&mut self, id: EntryId, own: &[(u32, u32)]) -> Vec<(u32, u32)> {
        let Some(share) = self.share else {
            return own.to_vec();
        };
        let Some(f) = self.file_mut(id) else {
            return own.to_vec();
        };
        let mut have_own = vec![false; f.hashes.chunks() as usize];
        for &(first, count) in own {
            for i in first..first.saturating_add(count).min(f.hashes.chunks()) {
                have_own[i as usize] = true;
            }
        }
        let mut runs: Vec<(u32, u32)> = Vec::new();
        let mut left = 0;
        for (i, &had) in have_own.iter().enumerate() {
            let ours = share.holds(f.share.first + i as u64);
            if ours && !had {
                left += 1;
                continue;
            }
            match runs.last_mut() {
                Some((first, count)) if *first + *count == i as u32 => *count += 1,
                _ => runs.push((i as u32, 1)),
            }
        }
        f.share.own_left = left;
        runs
    }

    /// A chunk header of file `f` must name one of this share's chunks (`share`: the
    /// session's).
    pub(super) fn check_share_chunk(
        share: Option<Share>,
        f: &RecvFile,
        index: u32,
    ) -> Result<(), SessionError> {
        match share {
            Some(share) if !share.holds(f.share.first + u64::from(index)) => {
                Err(PeerMisbehaved::OtherShare {
                    path: f.final_rel.display().to_string(),
                    index,
                    share: share.to_string(),
                }
                .into())
            }
            _ => Ok(()),
        }
    }

    /// Files whose share was complete when opened (a rerun): their other shares are read
    /// once the list is answered (a file left to them must not be reported before).
    pub(super) fn gather_opened(&mut self) {
        let due: Vec<EntryId> = (0..self.files.len() as u32)
            .map(EntryId)
            .filter(|&id| {
                self.file_ref(id).is_some_and(|f| {
                    self.is_shared(f) && f.state == FileState::Open && f.share.own_left == 0
                })
            })
            .collect();
        for id in due {
            self.gather(id);
        }
    }

    /// One of this share's chunks of file `id` was recorded: after the last, the other
    /// shares' manifests are read.
    pub(super) fn share_chunk_recorded(&mut self, id: EntryId) {
        if !self.file_ref(id).is_some_and(|f| self.is_shared(f)) {
            return;
        }
        let last = self.file_mut(id).is_some_and(|f| {
            f.share.own_left = f.share.own_left.saturating_sub(1);
            f.share.own_left == 0
        });
        if last {
            self.gather(id);
        }
    }

    /// Asks the driver for the other shares' manifests of file `id` (its own share's
    /// chunks are all recorded).
    pub(super) fn gather(&mut self, id: EntryId) {
        let Some(f) = self.file_mut(id).filter(|f| f.state == FileState::Open) else {
            return;
        };
        let limit = HEADER_LEN as u64 + RECORD_LEN as u64 * (u64::from(f.hashes.chunks()) * 2 + 16);
        let ev = RecvEvent::GatherShares {
            id,
            manifests: f.share.others.clone(),
            limit,
        };
        self.events.push_back(ev);
    }

    /// The driver's answer to [`RecvEvent::GatherShares`]: each other share's manifest
    /// (in the event's order; `None` where there is none yet). Their records of their own
    /// chunks, for this source and chunk size, complete the file's digest and the file is
    /// committed (by this share) once it equals the sender's; otherwise the file is left
    /// to the shares still running.
    pub(super) fn shares_gathered(
        &mut self,
        id: EntryId,
        manifests: Vec<Option<Vec<u8>>>,
    ) -> Result<(), SessionError> {
        let Some(share) = self.share else {
            return Err(LocalFailure::NoStripes.into());
        };
        let Some(f) = self.file_mut(id).filter(|f| f.state == FileState::Open) else {
            return Err(out_of_turn("shares gathered", id));
        };
        let Some(rx) = f.receiver.as_mut() else {
            return Err(out_of_turn("shares gathered", id));
        };
        let ours = rx.manifest().header_bytes();
        for (k, bytes) in manifests.iter().enumerate() {
            // The other shares in order, skipping this one.
            let index = if k < usize::from(share.index()) {
                k
            } else {
                k + 1
            } as u16;
            let Some(loaded) = bytes.as_deref().and_then(|b| ResumeManifest::parse(b).ok()) else {
                continue;
            };
            let m = loaded.manifest;
            if m.header_bytes() != ours {
                continue; // of another source or chunk size: not this copy's
            }
            let theirs =
                Share::new(index, share.count()).map_err(|e| LocalFailure::Share(e.to_string()))?;
            for (i, hash) in m.verified() {
                if !theirs.holds(f.share.first + u64::from(i)) || rx.manifest().is_verified(i) {
                    continue;
                }
                let (offset, len) = f.hashes.chunk_range(i);
                if rx.check_chunk(i, offset, len, hash, hash).is_ok() {
                    // Recorded in that share's manifest, not this one's.
                    let _ = rx.chunk_durable(i, hash);
                    f.hashes.offer(i, hash);
                }
            }
        }
        if f.hashes.result().is_some() {
            self.try_commit(id);
            return Ok(());
        }
        f.share.left = true;
        self.finish(id, Ok(()));
        Ok(())
    }

    pub(super) fn file_ref(&self, id: EntryId) -> Option<&RecvFile> {
        self.files.get(id.slot()).and_then(Option::as_ref)
    }
}
