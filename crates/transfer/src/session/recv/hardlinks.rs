//! Hard link entries (`sync -H`): another name of an earlier file entry of the same list,
//! placed and looked at like a file but carrying no data. The quick check leaves a
//! destination that already is its target's inode (the target itself left as found)
//! alone (`--checksum-only` checks just that); `--no-clobber` leaves anything there. Otherwise the link waits until every file
//! of the list is finished (committed, found complete or failed), then the driver makes it
//! ([`RecvEvent::MakeHardLink`]) and its answer ([`RecvInput::HardLinkMade`]) finishes
//! the entry like a file's commit (so the last one still waits for the directories'
//! times). A link whose target failed fails alone, with a message naming the target.
//!
//! The target is an entry path, checked like every path from the peer
//! ([`parse_peer_path`]); one that names no earlier file entry of this list is a protocol
//! error: a link can only ever be made to a file this transfer placed.
//!
//! [`parse_peer_path`]: crate::path::parse_peer_path
//!
//! [`RecvInput::HardLinkMade`]: super::RecvInput::HardLinkMade

use longhaul_proto::transfer::EntryId;
use longhaul_proto::transfer::{SkipReason, TransferMessage};

use super::types::{HardLinkJob, LookResult, RecvEvent};
use super::{FileState, Phase, RecvSession};
use crate::path::{parse_peer_path, SafeRelPath};
use crate::session::{show, PeerMisbehaved, SessionError};

impl RecvSession {
    /// The id of the earlier file entry that hard link entry `path` names with `target`.
    pub(super) fn hard_link_target(
        &self,
        path: &SafeRelPath,
        target: &[u8],
    ) -> Result<EntryId, SessionError> {
        let named = parse_peer_path(target).map_err(|cause| PeerMisbehaved::HardLinkTarget {
            link: show(path.as_bytes()),
            target: show(target),
            cause: Box::new(cause),
        })?;
        let earlier = self.file_ids.get(named.as_bytes()).copied();
        Ok(earlier.ok_or_else(|| PeerMisbehaved::HardLinkNotEarlier {
            link: show(path.as_bytes()),
            target: show(target),
        })?)
    }

    /// Decides hard link entry `id` from what the driver found at its destination.
    pub(super) fn decide_hard_link(
        &mut self,
        id: EntryId,
        found: LookResult,
    ) -> Result<(), SessionError> {
        let (checksum_only, no_clobber) = (self.cfg.checksum_only, self.cfg.no_clobber);
        let dry_run = self.dry_run();
        let Some(target) = self.file_mut(id).and_then(|f| f.link_of) else {
            return Ok(());
        };
        let kept = self.file_mut(target).and_then(|t| t.kept_inode);
        let Some(f) = self.file_mut(id) else {
            return Ok(());
        };
        let skip = |reason| Some(vec![TransferMessage::SkipFile { file: id, reason }]);
        let is_file = found.existing.is_some_and(|m| m.is_file);
        if is_file && kept.is_some() && found.inode == kept {
            // Already the target's inode, and the target stays as it is.
            self.already += 1;
            return self.decided(id, skip(SkipReason::AlreadyComplete), true);
        }
        if checksum_only {
            let line = format!(
                "{}: not a hard link of its source's first name",
                f.final_rel.display()
            );
            self.missing.push(line);
            return self.decided(id, skip(SkipReason::Missing), true);
        }
        if found.existing.is_some() && no_clobber {
            self.outcome.files_skipped += 1;
            return self.decided(id, skip(SkipReason::Exists), true);
        }
        if dry_run {
            // `sync -n`: nothing is made.
            return self.decided(id, Some(Vec::new()), true);
        }
        f.state = FileState::HardLinking;
        self.pending_hardlinks.push(id);
        self.decided(id, Some(Vec::new()), false)
    }

    /// Asks the driver to make the held hard links once the list is answered, the room
    /// checked and every file entry finished (a link of a file not yet in place would
    /// name the old copy or nothing). A link whose target failed fails here.
    pub(super) fn release_hard_links(&mut self) {
        let ready =
            self.opens_released && self.phase == Phase::Receiving && self.files_unfinished == 0;
        if !ready || self.pending_hardlinks.is_empty() {
            return;
        }
        let sync = self.cfg.sync;
        for id in std::mem::take(&mut self.pending_hardlinks) {
            let Some((final_rel, temp_rel, target)) = self
                .file_mut(id)
                .and_then(|f| Some((f.final_rel.clone(), f.part_rel.clone(), f.link_of?)))
            else {
                continue;
            };
            let Some((target_rel, failed)) = self
                .file_mut(target)
                .map(|t| (t.final_rel.clone(), t.failed))
            else {
                continue;
            };
            if failed {
                let why = format!("not linked: {} failed", target_rel.display());
                self.finish(id, Err(why));
                continue;
            }
            self.events.push_back(RecvEvent::MakeHardLink(HardLinkJob {
                id,
                final_rel,
                temp_rel,
                target_rel,
                sync,
            }));
        }
    }

    /// The driver's answer to [`RecvEvent::MakeHardLink`]: the link is in place, or why
    /// not (that entry fails alone; the transfer goes on).
    pub(super) fn hardlink_made(&mut self, id: EntryId, result: Result<(), String>) {
        if self
            .file_mut(id)
            .is_some_and(|f| f.state == FileState::HardLinking)
        {
            self.finish(id, result);
        }
    }
}
