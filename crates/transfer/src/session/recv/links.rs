//! Symlink entries: placed and looked at like files (`list`), then decided here. A link
//! carries no data: no chunk, no digest. The quick check leaves a destination that is
//! already a symlink to the same target alone; `--no-clobber` leaves anything there;
//! `--checksum-only` compares targets. Otherwise the driver makes the link
//! ([`RecvEvent::MakeSymlink`]) once the room is checked and the list answered, and its
//! answer ([`RecvInput::SymlinkMade`]) finishes the entry like a file's commit: a
//! `FileCommitted` to the sender, the entry counted among the files done, and the last
//! one waits for the directories' times.
//!
//! The target is the sender's text, stored verbatim: it may point anywhere, out of the
//! root included, because making a link never follows it, and the receiver never writes
//! through a symlink (part files, manifests and directory modes are opened with
//! `O_NOFOLLOW`; a new file or link is renamed over the name, replacing the link itself).
//!
//! [`RecvInput::SymlinkMade`]: super::RecvInput::SymlinkMade

use longhaul_proto::transfer::EntryId;
use longhaul_proto::transfer::{SkipReason, TransferMessage};

use super::types::{LinkJob, LookResult, RecvEvent};
use super::{FileState, Phase, RecvSession};
use crate::session::SessionError;

impl RecvSession {
    /// Decides symlink entry `id` from what the driver found at its destination.
    pub(super) fn decide_link(
        &mut self,
        id: EntryId,
        found: LookResult,
    ) -> Result<(), SessionError> {
        let (checksum_only, no_clobber, sync) =
            (self.cfg.checksum_only, self.cfg.no_clobber, self.cfg.sync);
        let Some(f) = self.file_mut(id) else {
            return Ok(());
        };
        let same = found.link_target.as_deref() == Some(f.entry.link_target.as_slice());
        let skip = |reason| Some(vec![TransferMessage::SkipFile { file: id, reason }]);
        if same {
            // rsync's quick check for links: the same target is the same link.
            self.already += 1;
            return self.decided(id, skip(SkipReason::AlreadyComplete), true);
        }
        if checksum_only {
            let why = if found.existing.is_none() {
                "missing at the destination"
            } else {
                "differs from the source (not a symlink to the same target)"
            };
            let line = format!("{}: {why}", f.final_rel.display());
            self.missing.push(line);
            return self.decided(id, skip(SkipReason::Missing), true);
        }
        if found.existing.is_some() && no_clobber {
            self.outcome.files_skipped += 1;
            return self.decided(id, skip(SkipReason::Exists), true);
        }
        if self.sync_rules.is_some_and(|r| r.dry_run) {
            // `sync -n`: nothing is made.
            return self.decided(id, Some(Vec::new()), true);
        }
        let Some(f) = self.file_mut(id) else {
            return Ok(());
        };
        f.state = FileState::Linking;
        let job = LinkJob {
            id,
            final_rel: f.final_rel.clone(),
            temp_rel: f.part_rel.clone(),
            target: f.entry.link_target.clone(),
            mtime: (f.entry.mtime_secs, f.entry.mtime_nanos),
            sync,
        };
        self.need(0, 1);
        self.pending_links.push(RecvEvent::MakeSymlink(job));
        self.decided(id, Some(Vec::new()), false)
    }

    /// Asks the driver to make the held links once both the room is checked and the list
    /// answered (`FileListEnd` queued): before that a link's `FileCommitted` would reach
    /// the sender out of place, and a list that does not fit must leave nothing behind.
    pub(super) fn release_links(&mut self) {
        if self.opens_released && self.phase == Phase::Receiving {
            let links = std::mem::take(&mut self.pending_links);
            self.events.extend(links);
        }
        self.release_hard_links();
    }

    /// The driver's answer to [`RecvEvent::MakeSymlink`]: the link is in place, or why
    /// not (that entry fails alone; the transfer goes on).
    pub(super) fn symlink_made(&mut self, id: EntryId, result: Result<(), String>) {
        if self
            .file_mut(id)
            .is_some_and(|f| f.state == FileState::Linking)
        {
            self.finish(id, result);
        }
    }
}
