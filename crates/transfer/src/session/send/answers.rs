//! The receiver's answers to the file list (files it skips, chunks it has, its old
//! copies' chunk hashes) and the start of sending they lead to: the chunks planned, those
//! already verified marked, and `sync -n`'s plan.

use longhaul_proto::transfer::EntryId;
use longhaul_proto::transfer::{EntryKind, SkipReason, TransferMessage};

use super::types::{SendEvent, WouldSend};
use super::{unexpected, Phase, SendFile, SendSession};
use crate::file_hashes::FileHashes;
use crate::manifest::chunk_count;
use crate::scheduler::{ChunkId, ChunkScheduler, FileId, SchedulerConfig};
use crate::session::{LocalFailure, PeerMisbehaved, SessionError};

impl SendSession {
    pub(super) fn handle_answer(&mut self, msg: TransferMessage) -> Result<(), SessionError> {
        match msg {
            TransferMessage::SkipFile { file, reason } => {
                self.check_entry(file)?;
                self.skipped.insert(file, reason);
                Ok(())
            }
            TransferMessage::HaveChunks { file, ranges } => {
                let chunks = self.check_file(file)?;
                let have = self.have.entry(file).or_default();
                // Runs come in order, disjoint, within the file (as a manifest's
                // `verified_runs` gives them): a file then holds at most `chunks` runs and
                // marking them costs one step per chunk, however the runs are framed.
                let mut next_free = have.last().map_or(0, |&(first, count)| first + count);
                for &(first, count) in &ranges {
                    let end = first.checked_add(count).filter(|&end| end <= chunks);
                    match end {
                        Some(end) if first >= next_free => next_free = end,
                        _ => {
                            return Err(PeerMisbehaved::ClaimOutOfOrder {
                                file,
                                first,
                                count,
                                chunks,
                            }
                            .into())
                        }
                    }
                }
                have.extend(ranges);
                Ok(())
            }
            TransferMessage::OldChunks {
                file,
                first,
                hashes,
            } => {
                let chunks = self.check_file(file)?;
                let old = self.old.entry(file).or_default();
                // In order, and never more than the file's chunks (bounded by the list).
                let fits = first as usize == old.len()
                    && (first as u64 + hashes.len() as u64) <= u64::from(chunks);
                if !fits {
                    return Err(PeerMisbehaved::OldHashesOutOfOrder {
                        file,
                        first,
                        count: hashes.len(),
                        chunks,
                    }
                    .into());
                }
                old.extend(hashes.into_iter().map(Some));
                Ok(())
            }
            TransferMessage::FileListEnd { deleted, .. } => {
                self.outcome.deleted = u64::from(deleted);
                self.start_sending()
            }
            other => Err(unexpected(
                &other,
                "while waiting for answers to the file list",
            )),
        }
    }

    /// The entry is a file, a symlink or a hard link of this transfer (what a `SkipFile`
    /// may name).
    pub(super) fn check_entry(&self, file: EntryId) -> Result<(), SessionError> {
        match self.entries.get(file.slot()) {
            Some(e) if matches!(e.kind, EntryKind::Symlink | EntryKind::HardLink) => Ok(()),
            _ => self.check_file(file).map(|_| ()),
        }
    }

    /// The entry is a file of this transfer; returns its chunk count.
    fn check_file(&self, file: EntryId) -> Result<u32, SessionError> {
        match self.entries.get(file.slot()) {
            Some(e) if e.kind == EntryKind::File => {
                Ok(chunk_count(e.size, self.cfg.chunk_size) as u32)
            }
            _ => Err(PeerMisbehaved::NotAFile { file }.into()),
        }
    }

    pub(super) fn start_sending(&mut self) -> Result<(), SessionError> {
        let to_send: Vec<EntryId> = self
            .entry_ids()
            .filter(|i| {
                self.entries[i.slot()].kind == EntryKind::File && !self.skipped.contains_key(i)
            })
            .collect();
        let sizes: Vec<u64> = to_send
            .iter()
            .map(|i| self.entries[i.slot()].size)
            .collect();
        let config = SchedulerConfig::for_chunk_size(self.cfg.chunk_size);
        let mut sched = ChunkScheduler::new(&sizes, config).map_err(LocalFailure::planning)?;
        let mut resumed = 0;
        for (s, &e) in to_send.iter().enumerate() {
            let size = self.entries[e.slot()].size;
            let mut hashes = FileHashes::new(size, self.cfg.chunk_size);
            let chunks = hashes.chunks();
            if self.cfg.checksum_only {
                hashes.mark_ready(0..chunks);
            }
            for (first, count) in self.have.remove(&e).unwrap_or_default() {
                let end = first
                    .checked_add(count)
                    .filter(|&end| end <= chunks)
                    .ok_or(PeerMisbehaved::ClaimPastEnd {
                        first,
                        count,
                        chunks,
                    })?;
                for index in first..end {
                    let id = ChunkId {
                        file: FileId(s as u32),
                        index,
                    };
                    let chunk = sched.chunk(id).map_err(PeerMisbehaved::scheduler)?;
                    if !self.cfg.checksum_only {
                        sched
                            .mark_already_verified(id)
                            .map_err(PeerMisbehaved::scheduler)?;
                    }
                    resumed += chunk.len;
                }
                hashes.mark_ready(first..end);
            }
            let ready = hashes.take_ready();
            if !ready.is_empty() {
                self.events.push_back(SendEvent::HashFromFile {
                    entry: e,
                    chunks: ready,
                });
            }
            self.by_entry.insert(e, FileId(s as u32));
            let old = self.old.remove(&e).unwrap_or_default();
            if !old.is_empty() {
                self.outcome.files_compared += 1;
            }
            self.files.push(SendFile {
                entry: e,
                hashes,
                old,
            });
        }
        self.outcome.resumed_bytes = resumed;
        self.links = self
            .entry_ids()
            .filter(|i| {
                matches!(
                    self.entries[i.slot()].kind,
                    EntryKind::Symlink | EntryKind::HardLink
                ) && !self.skipped.contains_key(i)
            })
            .collect();
        self.links_total = self.links.len() as u64;
        let complete: u64 = self
            .skipped
            .iter()
            .filter(|(_, r)| **r == SkipReason::AlreadyComplete)
            .map(|(f, _)| self.entries[f.slot()].size)
            .sum();
        self.progress.done_bytes = resumed + complete;
        self.progress.files_total = to_send.len() as u64 + self.links_total;
        self.progress.listed = true;
        self.sched = Some(sched);
        self.phase = Phase::Sending;
        if self.dry_run.is_some() {
            self.plan_dry_run();
        }
        self.maybe_done();
        Ok(())
    }

    /// `sync -n`: new files would send everything; the others are hashed first.
    fn plan_dry_run(&mut self) {
        // Hash events for resumed chunks are not wanted: every file starts afresh here.
        self.events.clear();
        let mut pending = 0;
        for s in 0..self.files.len() {
            let (entry, compared, chunks) = {
                let f = &self.files[s];
                (f.entry, !f.old.is_empty(), f.hashes.chunks())
            };
            if compared {
                pending += 1;
                self.events.push_back(SendEvent::HashFromFile {
                    entry,
                    chunks: (0..chunks).collect(),
                });
            } else {
                let size = self.entries[entry.slot()].size;
                self.note_would_send(entry, size, false);
            }
        }
        if let Some((p, _)) = self.dry_run.as_mut() {
            *p = pending;
        }
    }

    pub(super) fn note_would_send(&mut self, entry: EntryId, bytes: u64, compared: bool) {
        let e = &self.entries[entry.slot()];
        self.outcome.would_send.push(WouldSend {
            path: e.path.clone(),
            size: e.size,
            bytes,
            compared,
        });
        self.outbox
            .push_back(TransferMessage::WouldSend { file: entry, bytes });
    }
}
