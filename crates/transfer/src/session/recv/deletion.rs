//! `--delete` in the receiving session: the file list feeds a [`DeletePlan`] (the
//! directories the transfer sends, the names it puts in them and their work files); once
//! the list is settled and found to fit, the driver lists those directories
//! ([`RecvEvent::ListDest`]) and removes the extras ([`RecvEvent::Remove`]), and only then
//! is the list's `FileListEnd` answered (with the count), so every deletion is done before
//! any file is committed and before the directories' times are set (rsync's
//! `--delete-before`).

use std::path::Path;
use std::sync::Arc;

use super::types::RecvEvent;
use super::RecvSession;
use crate::delete::{DeletePlan, DestEntry, DestListing, Removal};
use crate::filter::{below_top, Filter};
use crate::path::SafeRelPath;
use crate::place::{manifest_name, part_name};

/// Where a session's `--delete` stands.
#[derive(Debug)]
pub(super) struct Deletion {
    plan: DeletePlan,
    /// The removals were asked for and not answered yet.
    removing: bool,
    /// Every removal is answered (or there was nothing to remove).
    pub(super) done: bool,
}

impl RecvSession {
    /// `--delete`: remove from the directories this transfer sends what the source lacks,
    /// keeping what `filter` excludes (see [`crate::delete`]). Ignored with
    /// `--checksum-only`, which writes nothing.
    pub fn with_delete(mut self, filter: Arc<Filter>) -> Self {
        if !self.cfg.checksum_only {
            self.deletion = Some(Deletion {
                plan: DeletePlan::new(filter),
                removing: false,
                done: false,
            });
        }
        self
    }

    /// Records an entry of the list in the plan: a directory as sent, every name (and a
    /// file's work files) as kept in its parent.
    pub(super) fn plan_entry(&mut self, entry_path: &[u8], placed: &SafeRelPath, dir: bool) {
        let Some(d) = self.deletion.as_mut() else {
            return;
        };
        let final_rel = placed.to_path_buf();
        let parent = final_rel.parent().unwrap_or(Path::new("")).to_path_buf();
        if dir {
            d.plan
                .sent_dir(&final_rel, below_top(entry_path).unwrap_or_default());
        }
        d.plan.keep(&parent, placed.file_name());
        if !dir {
            for work in [part_name(placed), manifest_name(placed)]
                .into_iter()
                .flatten()
            {
                d.plan.keep(&parent, work.file_name());
            }
        }
    }

    /// Sync into the top itself (`sync src/ DIR` where DIR is the receiver's top): the
    /// source directory's entry names no path here, but the top is the directory it sends.
    pub(super) fn plan_top_dir(&mut self, entry_path: &[u8]) {
        if let Some(d) = self.deletion.as_mut() {
            d.plan
                .sent_dir(Path::new(""), below_top(entry_path).unwrap_or_default());
        }
    }

    /// The list is settled and fits: the listings go out (nothing happens without
    /// `--delete`).
    pub(super) fn start_deletion(&mut self) {
        let Some(d) = self.deletion.as_mut() else {
            return;
        };
        d.plan.start();
        self.ask_deletion_work();
    }

    /// The driver's answer to [`RecvEvent::ListDest`]: the directory's entries as `lstat`
    /// sees them, or why it could not be listed (it is then left as it is).
    pub(super) fn dest_listed(
        &mut self,
        listing: &DestListing,
        found: Result<Vec<DestEntry>, String>,
    ) {
        if let Some(d) = self.deletion.as_mut() {
            d.plan.listed(listing, found);
        }
        self.ask_deletion_work();
    }

    /// The driver's answer to [`RecvEvent::Remove`]: each removal's result, in any order.
    pub(super) fn removed(&mut self, results: Vec<(Removal, Result<(), String>)>) {
        let Some(d) = self.deletion.as_mut() else {
            return;
        };
        if !d.removing {
            return;
        }
        d.removing = false;
        d.done = true;
        for (r, result) in results {
            match result {
                Ok(()) => self.outcome.deleted += 1,
                Err(why) => self
                    .outcome
                    .failed
                    .push(format!("{}: not deleted: {why}", r.path().display())),
            }
        }
        self.flush_answers();
    }

    /// Queues the next listings, or the removals once every listing is answered.
    fn ask_deletion_work(&mut self) {
        let Some(d) = self.deletion.as_mut() else {
            return;
        };
        if d.done || d.removing {
            return;
        }
        while let Some(l) = d.plan.next_listing() {
            self.events.push_back(RecvEvent::ListDest(l));
        }
        if !d.plan.is_settled() {
            return;
        }
        self.outcome
            .failed
            .extend(d.plan.problems().iter().cloned());
        let removals = d.plan.removals();
        if self.sync_rules.is_some_and(|r| r.dry_run) {
            // `sync -n`: said, not done.
            d.done = true;
            self.outcome.deleted = removals.len() as u64;
            self.outcome.would_delete = removals.iter().map(|r| r.path().to_path_buf()).collect();
            self.flush_answers();
            return;
        }
        if removals.is_empty() {
            d.done = true;
            self.flush_answers();
        } else {
            d.removing = true;
            self.events.push_back(RecvEvent::Remove(removals));
        }
    }

    /// No `--delete`, or every deletion is done: the list's end may be answered.
    pub(super) fn deletion_done(&self) -> bool {
        !matches!(&self.deletion, Some(d) if !d.done)
    }
}
