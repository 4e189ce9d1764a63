//! The data streams' side: the next work for a free stream, what the driver needs to send
//! a chunk, chunk hashes merged into each file's digest (or, for `sync -n`, compared with
//! the old copy's), and a lost stream.

use longhaul_proto::transfer::EntryId;
use std::time::Instant;

use longhaul_proto::cut_at_char;
use longhaul_proto::transfer::{TransferMessage, MAX_REASON_BYTES};

use super::types::{SendEvent, Work};
use super::{Phase, SendSession};
use crate::integrity::{ChunkHash, ChunkHasher};
use crate::scheduler::{Chunk, FileId, StreamId};
use crate::session::{LocalFailure, SessionError};

impl SendSession {
    /// What data stream `stream` does next.
    pub fn next_work(&mut self, stream: StreamId, now: Instant) -> Work {
        if self.cfg.checksum_only
            || self.dry_run.is_some()
            || matches!(self.phase, Phase::Done | Phase::Failed)
        {
            return Work::Finished;
        }
        let Some(sched) = self.sched.as_mut() else {
            return Work::Wait;
        };
        if let Some(w) = sched.next_work(stream, now) {
            return Work::Send(w);
        }
        if sched.is_finished() {
            Work::Finished
        } else {
            Work::Wait
        }
    }

    /// The entry a chunk of the scheduler belongs to (for its header).
    pub fn entry_of(&self, chunk: &Chunk) -> EntryId {
        self.files[chunk.id.file.slot()].entry
    }

    /// The size of the file a chunk belongs to.
    pub fn file_size(&self, chunk: &Chunk) -> u64 {
        self.files[chunk.id.file.slot()].hashes.size()
    }

    /// A hasher for a chunk handed out by [`SendSession::next_work`].
    pub fn hasher(&self, chunk: &Chunk) -> ChunkHasher {
        self.files[chunk.id.file.slot()]
            .hashes
            .hasher(chunk.id.index)
    }

    /// Sync: the hash the receiver's old copy has for this chunk, if any (a chunk of the
    /// source with that hash goes as a header only, `CHUNK_FLAG_SAME`).
    pub fn old_hash(&self, chunk: &Chunk) -> Option<ChunkHash> {
        self.files[chunk.id.file.slot()]
            .old
            .get(chunk.id.index as usize)
            .copied()
            .flatten()
    }

    /// A chunk went out on a stream with this hash; `payload` bytes crossed (0 for a hole).
    pub(super) fn chunk_sent(&mut self, chunk: &Chunk, hash: ChunkHash, payload: u64) {
        self.outcome.sent_bytes += payload;
        self.offer(chunk.id.file, chunk.id.index, hash);
    }

    /// Sync: a chunk went out as equal to the receiver's old copy (no bytes).
    pub(super) fn chunk_reused(&mut self, chunk: &Chunk, hash: ChunkHash) {
        self.outcome.reused_bytes += chunk.len;
        self.offer(chunk.id.file, chunk.id.index, hash);
    }

    /// The answer to [`SendEvent::HashFromFile`] for one chunk.
    pub(super) fn hashed(&mut self, entry: EntryId, index: u32, hash: ChunkHash) {
        let Some(&s) = self.by_entry.get(&entry) else {
            return;
        };
        if self.dry_run.is_none() {
            self.offer(s, index, hash);
            return;
        }
        let f = &mut self.files[s.slot()];
        let (_, len) = f.hashes.chunk_range(index);
        let differs = f.old.get(index as usize).copied().flatten() != Some(hash);
        let complete = f.hashes.offer(index, hash).is_some();
        let Some((pending, differing)) = self.dry_run.as_mut() else {
            return;
        };
        let bytes = differing.entry(s).or_default();
        if differs {
            *bytes += len;
        }
        if complete {
            let bytes = *bytes;
            *pending = pending.saturating_sub(1);
            self.note_would_send(entry, bytes, true);
            self.maybe_done();
        }
    }

    fn offer(&mut self, s: FileId, index: u32, hash: ChunkHash) {
        let f = &mut self.files[s.slot()];
        let Some(blake3) = f
            .hashes
            .offer(index, hash)
            .filter(|_| !self.skipped.contains_key(&f.entry))
        else {
            return;
        };
        let entry = f.entry;
        match self
            .source_checks
            .as_mut()
            .filter(|_| self.dry_run.is_none())
        {
            Some(waiting) => {
                waiting.insert(entry, blake3);
                self.events.push_back(SendEvent::CheckSource { entry });
            }
            None => self.outbox.push_back(TransferMessage::FileDigest {
                file: entry,
                blake3,
            }),
        }
    }

    /// The answer to [`SendEvent::CheckSource`]: `changed` says how the source of `entry`
    /// differs from its list entry now (`None`: it does not). Its digest goes out, or
    /// `SourceChanged`.
    pub(super) fn source_checked(&mut self, entry: EntryId, changed: Option<String>) {
        let Some(blake3) = self.source_checks.as_mut().and_then(|w| w.remove(&entry)) else {
            return;
        };
        if self.skipped.contains_key(&entry) {
            return;
        }
        self.outbox.push_back(match changed {
            None => TransferMessage::FileDigest {
                file: entry,
                blake3,
            },
            Some(reason) => TransferMessage::SourceChanged {
                file: entry,
                reason: cut_at_char(&reason, MAX_REASON_BYTES).to_string(),
            },
        });
    }

    /// A data stream failed: its chunks go to the others. An error when it was the last.
    pub(super) fn stream_failed(
        &mut self,
        stream: StreamId,
        why: &str,
    ) -> Result<(), SessionError> {
        if let Some(s) = self.sched.as_mut() {
            s.stream_failed(stream);
        }
        self.live_streams = self.live_streams.saturating_sub(1);
        if self.live_streams == 0 && !matches!(self.phase, Phase::Done) {
            self.phase = Phase::Failed;
            return Err(LocalFailure::EveryStreamFailed {
                last: why.to_string(),
            }
            .into());
        }
        Ok(())
    }
}
