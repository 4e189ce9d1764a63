//! Admission of the file list: each entry's path checked and placed, directories
//! created, each file looked at and decided (already complete, `--no-clobber`,
//! `--checksum-only`, resume or start over), opened, and the answers sent in list order.
//! Symlink entries are placed and looked at like files, then decided in `links`.

use longhaul_proto::transfer::EntryId;
use longhaul_proto::transfer::{
    pack_have_chunks, pack_old_chunks, EntryKind, FileEntry, SkipReason, TransferMessage,
    MAX_FILE_ID,
};

use super::types::{DirFix, LookResult, OldCopy, OpenPlan, RecvEvent};
use super::{FileState, Phase, RecvFile, RecvSession};
use crate::file_hashes::FileHashes;
use crate::manifest::{chunk_count, HEADER_LEN, RECORD_LEN};
use crate::mode::received_mode;
use crate::path::{parse_peer_path, SafeRelPath};
use crate::place::{is_work_name, link_name, part_name, place_entry};
use crate::receiver::{FileReceiver, PartStart};
use crate::session::error::out_of_turn;
use crate::session::{show, LocalFailure, ProgressSnapshot, Refusal, SessionError};
use crate::SourceIdentity;

impl RecvSession {
    pub(super) fn accept_entries(
        &mut self,
        first_id: EntryId,
        entries: Vec<FileEntry>,
    ) -> Result<(), SessionError> {
        if first_id.slot() != self.files.len()
            || self.files.len() + entries.len() > MAX_FILE_ID as usize + 1
        {
            return Err(Refusal::EntriesOutOfOrder {
                first_id,
                expected: self.files.len(),
            }
            .into());
        }
        if self.files.is_empty() {
            self.check_share_rules()?;
        }
        for entry in entries {
            let id = EntryId(self.files.len() as u32);
            let file = self.accept(id, entry)?;
            self.files.push(file);
            self.check_caps(self.files.len() as u64)?;
        }
        Ok(())
    }

    /// Whether the sender may name this path at all: never a longhaul work file (a part
    /// file or manifest would be taken for this end's own), and on a pull only what was
    /// asked for ([`super::ExpectedList`]).
    fn admissible(&self, path: &SafeRelPath, kind: EntryKind) -> Result<(), SessionError> {
        let shown = show(path.as_bytes());
        if path.components().any(is_work_name) {
            return Err(Refusal::WorkFile { path: shown }.into());
        }
        let Some(expect) = &self.cfg.expect else {
            return Ok(());
        };
        let top = path.components().next().unwrap_or_default();
        let asked = match (&expect.top, &self.first_source) {
            (Some(t), _) => Some(t.as_slice()),
            (None, Some(first)) => Some(first.as_slice()),
            (None, None) => None,
        };
        if let Some(asked) = asked.filter(|a| *a != top) {
            return Err(Refusal::NotAsked {
                path: shown,
                asked: show(asked),
            }
            .into());
        }
        if !expect.recursive && (kind == EntryKind::Dir || path.depth() > 1) {
            return Err(Refusal::NotRecursive { path: shown }.into());
        }
        Ok(())
    }

    /// Where a sync puts an entry (rsync's rule, [`super::SyncRules`]): whether the
    /// target is to be taken as a directory, and the path to place (`None`: nothing to
    /// place). cp's rule (the target as it is found) otherwise.
    fn sync_place(
        &mut self,
        path: SafeRelPath,
        kind: EntryKind,
    ) -> Result<Option<(bool, SafeRelPath)>, SessionError> {
        let Some(rules) = self.sync_rules else {
            return Ok(Some((self.cfg.target_is_dir, path)));
        };
        if !rules.contents {
            // A directory source goes inside the destination; a file source keeps cp's
            // rule (`sync f dst` names the copy `dst` unless it is a directory).
            let tree = kind == EntryKind::Dir || path.depth() > 1;
            return Ok(Some((self.cfg.target_is_dir || tree, path)));
        }
        if self.multiple {
            return Err(Refusal::ContentsNotAlone.into());
        }
        if path.depth() == 1 && kind != EntryKind::Dir {
            return Err(Refusal::ContentsOfAFile {
                path: show(path.as_bytes()),
            }
            .into());
        }
        if self.cfg.target.is_some() {
            // The target is the source directory's new name (merged if it exists).
            return Ok(Some((false, path)));
        }
        // Into the top itself: the first component goes.
        let rest: Vec<&[u8]> = path.components().skip(1).collect();
        if rest.is_empty() {
            return Ok(None);
        }
        let stripped =
            parse_peer_path(&rest.join(&b'/')).map_err(|e| Refusal::ContentsPath(Box::new(e)))?;
        Ok(Some((true, stripped)))
    }

    /// Places one entry: a directory is created at once; a file is looked at.
    fn accept(&mut self, id: EntryId, entry: FileEntry) -> Result<Option<RecvFile>, SessionError> {
        let path = parse_peer_path(&entry.path).map_err(|e| Refusal::Path {
            path: show(&entry.path),
            cause: Box::new(e),
        })?;
        self.admissible(&path, entry.kind)?;
        let link_of = match entry.kind {
            EntryKind::HardLink => Some(self.hard_link_target(&path, &entry.link_target)?),
            EntryKind::File => {
                self.file_ids.insert(path.as_bytes().to_vec(), id);
                None
            }
            EntryKind::Dir | EntryKind::Symlink => None,
        };
        let top = path.components().next().unwrap_or_default().to_vec();
        match &self.first_source {
            None => self.first_source = Some(top),
            Some(first) if *first != top => self.multiple = true,
            Some(_) => {}
        }
        let Some((target_is_dir, path)) = self.sync_place(path, entry.kind)? else {
            // `sync src/ .`: the source directory itself is the destination's top.
            self.plan_top_dir(&entry.path);
            return Ok(None);
        };
        let placed = place_entry(
            self.cfg.target.as_ref(),
            target_is_dir,
            self.multiple,
            &path,
        )
        .map_err(Refusal::entry)?;
        let final_rel = placed.to_path_buf();
        self.plan_entry(&entry.path, &placed, entry.kind == EntryKind::Dir);
        let mtime = (entry.mtime_secs, entry.mtime_nanos);
        if entry.kind == EntryKind::Dir {
            if !self.cfg.checksum_only && !self.dry_run() {
                // Created writable by its owner and without special bits; its own mode
                // is set once its contents are in place (FixDirs).
                self.events.push_back(RecvEvent::CreateDir {
                    rel: final_rel.clone(),
                    mode: 0o700 | (entry.mode & 0o777),
                });
                self.dirs_known.insert(final_rel.clone());
                self.need(0, 1);
                self.dirs.push(DirFix {
                    rel: final_rel,
                    depth: placed.depth(),
                    mode: Some(
                        received_mode(entry.mode, EntryKind::Dir, self.cfg.keep_setuid)
                            & !self.cfg.umask,
                    ),
                    mtime,
                });
            }
            return Ok(None);
        }
        if let Some(parent) = placed.parent() {
            let parent = parent.to_path_buf();
            if !self.cfg.checksum_only && !self.dry_run() && !self.dirs_known.contains(&parent) {
                self.events.push_back(RecvEvent::CreateDir {
                    rel: parent.clone(),
                    mode: 0o755,
                });
                self.dirs_known.insert(parent);
            }
        }
        // The sizes are the peer's word: a list whose total does not fit is refused, not
        // wrapped (found by fuzz/fuzz_targets/transfer_sessions.rs).
        self.outcome.total_bytes = self
            .outcome
            .total_bytes
            .checked_add(entry.size)
            .ok_or_else(|| Refusal::SizesOverflow {
                path: show(path.as_bytes()),
                size: entry.size,
            })?;
        let chunks = chunk_count(entry.size, self.cfg.chunk_size);
        let work = if matches!(entry.kind, EntryKind::Symlink | EntryKind::HardLink) {
            link_name(&placed)
        } else {
            part_name(&placed)
        };
        let part_rel = work.map_err(Refusal::entry)?.to_path_buf();
        let (share, manifest_rel) = self.number_entry(entry.kind, chunks, &placed)?;
        let lazy = chunks == 1 && !self.cfg.checksum_only && entry.kind == EntryKind::File;
        let want_manifest = !lazy && !self.cfg.checksum_only;
        self.looking += 1;
        self.events.push_back(RecvEvent::Look {
            id,
            final_rel: final_rel.clone(),
            part_rel: part_rel.clone(),
            manifest_rel: manifest_rel.clone().filter(|_| want_manifest),
            manifest_limit: HEADER_LEN as u64 + RECORD_LEN as u64 * (chunks * 2 + 16),
        });
        self.answers.push_back((id, None));
        if entry.kind == EntryKind::File {
            self.files_unfinished += 1;
        }
        Ok(Some(RecvFile {
            hashes: FileHashes::new(entry.size, self.cfg.chunk_size),
            entry,
            final_rel,
            part_rel,
            manifest_rel,
            state: FileState::Looking,
            lazy,
            created: false,
            receiver: None,
            theirs: None,
            resume_have: Vec::new(),
            look: None,
            old: None,
            reused: Vec::new(),
            in_place: false,
            link_of,
            kept_inode: None,
            failed: false,
            share,
        }))
    }

    /// The driver's answer to [`RecvEvent::Look`]: decides what to do with the file
    /// (once every file is decided, the room is checked and the files opened).
    pub(super) fn looked(&mut self, id: EntryId, found: LookResult) -> Result<(), SessionError> {
        self.decide(id, found)?;
        self.release_opens()
    }

    fn decide(&mut self, id: EntryId, found: LookResult) -> Result<(), SessionError> {
        let cfg = self.cfg.clone();
        let delta = self.sync_rules.map(|r| r.checksum);
        let dry = self.dry_run();
        let ahead = self.answered_ahead();
        if !self
            .file_mut(id)
            .is_some_and(|f| f.state == FileState::Looking)
        {
            return Err(out_of_turn("a look", id));
        }
        self.looking = self.looking.saturating_sub(1);
        if let Some(left) = self.leave_to_other_share(id) {
            return left;
        }
        let Some(f) = self.file_mut(id) else {
            return Ok(());
        };
        // Never written into (a FIFO would block) nor replaced: what it is matters to
        // whoever made it there.
        if let Some(what) = found.existing.and_then(|m| m.special) {
            return Err(Refusal::SpecialDestination {
                path: f.final_rel.display().to_string(),
                what,
            }
            .into());
        }
        let e = &f.entry;
        if e.kind == EntryKind::Symlink {
            return self.decide_link(id, found);
        }
        if e.kind == EntryKind::HardLink {
            return self.decide_hard_link(id, found);
        }
        // A one-chunk file whose name a directory holds fails alone, at its commit; a
        // larger one is refused before its part file is made next to the directory.
        if found.existing.is_some_and(|m| m.is_dir) && !f.lazy {
            return Err(Refusal::DirectoryInTheWay {
                path: f.final_rel.display().to_string(),
            }
            .into());
        }
        let existing = found.existing;
        let source = source_of(e);
        let size = e.size;
        let skip = |reason| Some(vec![TransferMessage::SkipFile { file: id, reason }]);
        // Already in place from an earlier run (same size and mtime, which a commit
        // copies from the source): nothing to send (rsync's quick check).
        let compare_all = delta == Some(true);
        if !cfg.checksum_only
            && !compare_all
            && !ahead
            && existing.is_some_and(|m| {
                m.is_file
                    && m.len == size
                    && m.mtime_secs == e.mtime_secs
                    && m.mtime_nanos == i64::from(e.mtime_nanos)
            })
        {
            // A hard link of it that already is this inode stays as it is.
            f.kept_inode = found.inode;
            // rsync -a keeps permissions current on files whose data did not change.
            let mode = received_mode(e.mode, EntryKind::File, cfg.keep_setuid) & !cfg.umask;
            let set_mode = (delta.is_some() && !dry && existing.is_some_and(|m| m.mode != mode))
                .then(|| RecvEvent::SetMode {
                    rel: f.final_rel.clone(),
                    mode,
                });
            // A commit killed between its rename and the manifest's removal.
            let orphan = f
                .manifest_rel
                .clone()
                .filter(|_| found.part.is_none() && found.manifest.is_some())
                .map(|manifest_rel| RecvEvent::DropOrphanManifest {
                    part_rel: f.part_rel.clone(),
                    manifest_rel,
                });
            self.events.extend(set_mode);
            self.events.extend(orphan);
            self.already += 1;
            self.outcome.resumed_bytes += size;
            self.outcome.unchanged_bytes += size;
            return self.decided(id, skip(SkipReason::AlreadyComplete), true);
        }
        if cfg.checksum_only {
            // Nothing is changed: a hard link of it is checked against this inode.
            f.kept_inode = found.inode;
            let why = match existing {
                None => Some("missing at the destination"),
                Some(m) if m.len != size || !m.is_file => Some("differs in size from the source"),
                Some(_) => None,
            };
            if let Some(why) = why {
                let line = format!("{}: {why}", f.final_rel.display());
                self.missing.push(line);
                return self.decided(id, skip(SkipReason::Missing), true);
            }
            let opened =
                FileReceiver::open(source, cfg.chunk_size, None).map_err(Refusal::entry)?;
            f.receiver = Some(opened.receiver);
            return self.open(id, OpenPlan::Existing);
        }
        if existing.is_some() && cfg.no_clobber {
            self.outcome.files_skipped += 1;
            return self.decided(id, skip(SkipReason::Exists), true);
        }
        if let Some(m) = existing.filter(|m| m.is_file && delta.is_some()) {
            // Sync: hash the copy there first; its chunks that equal the source's are
            // not sent.
            f.state = FileState::HashingOld;
            f.look = Some(found);
            let ev = RecvEvent::HashOld {
                id,
                final_rel: f.final_rel.clone(),
                size: m.len,
                trust_cache: delta != Some(true),
            };
            self.looking += 1;
            self.events.push_back(ev);
            return Ok(());
        }
        self.plan_data(id, found)
    }

    /// The driver's answer to [`RecvEvent::HashOld`]: the old copy's chunk hashes, or why
    /// it could not be read (the file is then sent whole).
    pub(super) fn old_hashed(
        &mut self,
        id: EntryId,
        old: Result<OldCopy, String>,
    ) -> Result<(), SessionError> {
        let chunk_size = self.cfg.chunk_size;
        let Some(f) = self
            .file_mut(id)
            .filter(|f| f.state == FileState::HashingOld)
        else {
            return Err(out_of_turn("old chunk hashes", id));
        };
        f.state = FileState::Looking;
        let found = f.look.take().unwrap_or_default();
        let mut compared = false;
        if let Ok(mut old) = old {
            // Only chunks the new file has; the rest could never be equal.
            let new_chunks = chunk_count(f.entry.size, chunk_size) as usize;
            old.hashes.truncate(new_chunks);
            compared = !old.hashes.is_empty();
            f.old = Some((old.identity.size, old));
        }
        self.outcome.files_compared += u64::from(compared);
        self.looking = self.looking.saturating_sub(1);
        self.plan_data(id, found)?;
        self.release_opens()
    }

    /// How the file's data is received: a one-chunk file created when its chunk comes, a
    /// resumed part file, or a new one.
    fn plan_data(&mut self, id: EntryId, found: LookResult) -> Result<(), SessionError> {
        let cfg = self.cfg.clone();
        let inplace = self.sync_rules.is_some_and(|r| r.inplace);
        let dry_run = self.dry_run();
        let ahead = self.answered_ahead();
        let Some(f) = self.file_mut(id) else {
            return Ok(());
        };
        let e = &f.entry;
        let source = source_of(e);
        let size = e.size;
        if dry_run {
            // Nothing is opened; the sender learns what the copy holds and reports.
            let answer = match &f.old {
                Some((_, old)) => pack_old_chunks(id, &old.hashes),
                None => Vec::new(),
            };
            return self.decided(id, Some(answer), true);
        }
        if let Some((old_size, _)) = f.old.as_ref().filter(|_| !f.lazy && inplace) {
            // The destination file is the data file; no part file, no manifest.
            let grows = size.saturating_sub(*old_size);
            let opened =
                FileReceiver::open(source, cfg.chunk_size, None).map_err(Refusal::entry)?;
            f.receiver = Some(opened.receiver);
            f.in_place = true;
            f.manifest_rel = None;
            self.need(grows, 0);
            return self.open(id, OpenPlan::InPlace);
        }
        if f.lazy {
            let opened =
                FileReceiver::open(source, cfg.chunk_size, None).map_err(Refusal::entry)?;
            f.receiver = Some(opened.receiver);
            self.need(size, 1);
            return self.open(id, OpenPlan::Lazy);
        }
        // A stored manifest counts only if the part file is there, regular, of full size.
        // (Not when the list was answered ahead: the sender sends every chunk.)
        let part_ok = found.part.is_some_and(|m| m.is_file && m.len == size) && !ahead;
        let stored = found.manifest.as_deref().filter(|_| part_ok);
        let opened =
            FileReceiver::open(source, cfg.chunk_size, stored).map_err(|e| Refusal::Data {
                path: f.final_rel.display().to_string(),
                cause: Box::new(e),
            })?;
        let (plan, needs) = match opened.start {
            PartStart::Resume { manifest_len } => {
                let m = opened.receiver.manifest();
                let held: u64 = opened
                    .have
                    .iter()
                    .flat_map(|&(first, count)| first..first.saturating_add(count))
                    .map(|i| m.chunk_len(i))
                    .sum();
                f.resume_have = opened.have;
                let plan = OpenPlan::Resume {
                    manifest_len,
                    verify: m.verified().collect(),
                };
                (plan, (size.saturating_sub(held), 0))
            }
            PartStart::Fresh {
                manifest_header, ..
            } => {
                let manifest = f.manifest_rel.is_some();
                let plan = OpenPlan::Fresh {
                    manifest_header: manifest.then_some(manifest_header),
                };
                (plan, (size, 1 + u64::from(manifest)))
            }
        };
        f.receiver = Some(opened.receiver);
        self.need(needs.0, needs.1);
        self.open(id, plan)
    }

    fn open(&mut self, id: EntryId, plan: OpenPlan) -> Result<(), SessionError> {
        let shared = self.file_ref(id).is_some_and(|f| self.is_shared(f));
        let Some(f) = self.file_mut(id) else {
            return Ok(());
        };
        f.state = FileState::Opening;
        let ev = RecvEvent::Open {
            shared,
            id,
            final_rel: f.final_rel.clone(),
            part_rel: f.part_rel.clone(),
            manifest_rel: f.manifest_rel.clone(),
            size: f.entry.size,
            plan,
        };
        self.open_when_settled(ev);
        Ok(())
    }

    /// The driver's answer to [`RecvEvent::Open`]: `intact` is whether every recorded
    /// chunk of a resumed part file still has its hash (always true otherwise). A resume
    /// whose records do not hold starts the file over.
    pub(super) fn opened(&mut self, id: EntryId, intact: bool) -> Result<(), SessionError> {
        let cfg = self.cfg.clone();
        let Some(f) = self.file_mut(id).filter(|f| f.state == FileState::Opening) else {
            return Err(out_of_turn("an open", id));
        };
        if cfg.checksum_only {
            let chunks = f.hashes.chunks();
            f.hashes.mark_ready(0..chunks);
            f.state = FileState::Open;
            self.events.push_back(RecvEvent::HashFromFile {
                id,
                chunks: (0..chunks).collect(),
            });
            return self.decided(id, Some(Vec::new()), false);
        }
        if !intact {
            // A power cut can keep a record whose data never reached the disk: start over.
            let e = &f.entry;
            let source = source_of(e);
            let opened =
                FileReceiver::open(source, cfg.chunk_size, None).map_err(Refusal::entry)?;
            let PartStart::Fresh {
                manifest_header, ..
            } = opened.start
            else {
                return Err(LocalFailure::FreshStartResumed.into());
            };
            f.receiver = Some(opened.receiver);
            f.resume_have.clear();
            let plan = OpenPlan::Fresh {
                manifest_header: f.manifest_rel.is_some().then_some(manifest_header),
            };
            return self.open(id, plan);
        }
        f.state = FileState::Open;
        let have = std::mem::take(&mut f.resume_have);
        let mut resumed = 0;
        if let Some(rx) = &f.receiver {
            let m = rx.manifest();
            for &(first, count) in &have {
                for i in first..first.saturating_add(count) {
                    resumed += m.chunk_len(i);
                    // Re-hashed against the part file when it was opened.
                    if let Some(hash) = m.verified_hash(i) {
                        f.hashes.offer(i, hash);
                    }
                }
            }
        }
        self.outcome.resumed_bytes += resumed;
        let have = self.shared_have(id, &have);
        let mut answer = pack_have_chunks(id, &have);
        if let Some((_, old)) = self.file_mut(id).and_then(|f| f.old.as_ref()) {
            answer.extend(pack_old_chunks(id, &old.hashes));
        }
        self.decided(id, Some(answer), false)
    }

    /// A file's answer is decided; `finished`: nothing will be received for it.
    pub(super) fn decided(
        &mut self,
        id: EntryId,
        answer: Option<Vec<TransferMessage>>,
        finished: bool,
    ) -> Result<(), SessionError> {
        if let Some(slot) = self.answers.iter_mut().find(|(i, _)| *i == id) {
            slot.1 = Some(answer.unwrap_or_default());
        }
        if finished {
            if let Some(f) = self.file_mut(id) {
                let was = std::mem::replace(&mut f.state, FileState::Finished);
                if f.entry.kind == EntryKind::File && was != FileState::Finished {
                    self.files_unfinished = self.files_unfinished.saturating_sub(1);
                }
            }
            self.release_hard_links();
        } else {
            self.uncommitted += 1;
        }
        self.flush_answers();
        Ok(())
    }

    /// Sends the answers decided so far, in list order; after the last, `FileListEnd`.
    pub(super) fn flush_answers(&mut self) {
        while let Some((_, Some(_))) = self.answers.front() {
            if let Some((_, Some(msgs))) = self.answers.pop_front() {
                self.outbox.extend(msgs);
            }
        }
        if self.list_ended
            && self.answers.is_empty()
            && self.phase == Phase::Listing
            && self.deletion_done()
        {
            self.outbox.push_back(TransferMessage::FileListEnd {
                files: self.files.len() as u32,
                bytes: self.outcome.total_bytes,
                deleted: self.outcome.deleted.min(u64::from(u32::MAX)) as u32,
            });
            self.phase = Phase::Receiving;
            self.release_links();
            self.gather_opened();
            self.progress = ProgressSnapshot {
                done_bytes: self.outcome.resumed_bytes,
                total_bytes: self.outcome.total_bytes,
                files_done: 0,
                files_total: self.uncommitted,
                listed: true,
            };
            if self.uncommitted == 0 && !self.cfg.checksum_only && !self.dry_run() {
                // Nothing will be committed (only directories, or all skipped): the tree
                // is final now, before the sender hears it is done.
                let dirs = self.take_dirs();
                self.dirs_unfixed = true;
                self.events.push_back(RecvEvent::FixDirs(dirs));
            }
        }
    }
}

/// Who the source of an entry is, for the resume rule.
fn source_of(e: &FileEntry) -> SourceIdentity {
    SourceIdentity {
        size: e.size,
        mtime_secs: e.mtime_secs,
        mtime_nanos: e.mtime_nanos,
        fingerprint: e.fingerprint,
    }
}

#[cfg(test)]
mod tests {
    use longhaul_proto::transfer::{EntryId, EntryKind, FileEntry, TransferMessage};

    use crate::session::{RecvConfig, RecvSession, Refusal, SessionError};

    fn file(path: &str, size: u64) -> FileEntry {
        FileEntry {
            path: path.as_bytes().to_vec(),
            kind: EntryKind::File,
            size,
            mtime_secs: 1,
            mtime_nanos: 0,
            mode: 0o644,
            fingerprint: 0,
            link_target: Vec::new(),
        }
    }

    /// Regression (fuzz target `transfer_sessions`): two entries of 2^63 bytes overflowed
    /// the list's total (a panic with overflow checks, a wrapped total without).
    #[test]
    fn sizes_that_overflow_the_total_are_refused() {
        let mut rx = RecvSession::new(RecvConfig::into_directory(4096));
        let r = rx.handle(TransferMessage::FileEntries {
            first_id: EntryId(0),
            entries: vec![file("a", 1 << 63), file("b", 1 << 63)],
        });
        let Err(SessionError::Refused(why)) = r else {
            panic!("accepted: {r:?}")
        };
        let Refusal::SizesOverflow { path, .. } = &why else {
            panic!("{why}")
        };
        assert_eq!(path, "b");
        assert!(why.to_string().contains("add up to more than"), "{why}");
    }
}
