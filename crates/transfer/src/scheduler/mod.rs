//! The chunk scheduler: which bytes of which file each stream sends next.
//!
//! Files are cut into chunks of one size chosen from the path ([`chunk_size_for`]). A stream
//! that is free pulls the next [`WorkUnit`] ([`ChunkScheduler::next_work`]), so a slow
//! stream simply pulls less and never holds the transfer (dynamic balancing, not static
//! striping). A work unit is one chunk of a large file, or several whole small files batched
//! up to about one chunk of bytes, so a tree of many small files needs no round trip per
//! file. The receiver reports each chunk verified (its BLAKE3 matched and its data is synced)
//! or failed; a failed chunk, or every chunk in flight on a stream that died, goes back to
//! the front of the queue until it has failed `max_attempts` times. A file is complete when
//! all its chunks are verified, and only then.
//!
//! There are no endgame duplicates: every chunk is in flight on at most one stream. The
//! tail of a transfer is already bounded by dynamic pulling — when the queue runs dry each
//! stream holds at most the one unit it pulled last — and duplicating a chunk on a fast
//! path only re-sends bytes whose ack is a moment away.
//!
//! Sans-I/O: time is passed in (`now`) and only used to find chunks overdue on a stream.
//!
//! The scheduler's state ([`ChunkScheduler`]) lives here; the ids, chunks, outcomes and
//! configuration it works with are in `types`.

#[cfg(test)]
mod tests;
mod types;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::manifest::{chunk_count, MAX_CHUNKS, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES};

pub use types::{
    chunk_size_for, Chunk, ChunkId, FileCompleted, FileId, Retry, SchedulerConfig, StreamId,
    WorkUnit, MAX_PATH_CHUNK_BYTES, MIN_PATH_CHUNK_BYTES,
};

/// Most files one scheduler plans.
pub const MAX_FILES: usize = 1 << 24;
/// Most chunks one scheduler plans in total (one byte of state each).
pub const MAX_TOTAL_CHUNKS: u64 = 1 << 26;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    InFlight,
    Verified,
    GaveUp,
    /// Its file was dropped: neither sent nor waited for.
    Dropped,
}

#[derive(Debug)]
struct FilePlan {
    size: u64,
    states: Vec<State>,
    verified: u32,
    /// [`ChunkScheduler::drop_file`]: chunks that come back are not sent again.
    dropped: bool,
}

#[derive(Debug, Clone, Copy)]
struct Flight {
    stream: StreamId,
    since: Instant,
}

/// Assigns chunks to streams; see the module docs.
#[derive(Debug)]
pub struct ChunkScheduler {
    config: SchedulerConfig,
    files: Vec<FilePlan>,
    /// Next chunk in first-pass order (file, index); chunks before it were handed out or
    /// skipped at least once.
    cursor: ChunkId,
    retry: VecDeque<ChunkId>,
    /// The stream each chunk in flight is on, and since when.
    in_flight: HashMap<ChunkId, Flight>,
    by_stream: BTreeMap<StreamId, BTreeSet<ChunkId>>,
    attempts: HashMap<ChunkId, u32>,
    pending: u64,
    given_up: u64,
    total_bytes: u64,
    verified_bytes: u64,
}

impl ChunkScheduler {
    /// Plans a transfer of files with these sizes (file id = index in `sizes`).
    pub fn new(sizes: &[u64], config: SchedulerConfig) -> Result<Self> {
        if !(MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&config.chunk_size)
            || !config.chunk_size.is_power_of_two()
        {
            return Err(Error::ScheduleBounds {
                what: "chunk_size",
                value: config.chunk_size,
                bound: "a power of two in 4 KiB ..= 1 GiB",
            });
        }
        if config.max_attempts == 0 || config.batch_max_files == 0 {
            return Err(Error::ScheduleBounds {
                what: "max_attempts/batch_max_files",
                value: 0,
                bound: "at least 1",
            });
        }
        if sizes.len() > MAX_FILES {
            return Err(Error::ScheduleBounds {
                what: "files",
                value: sizes.len() as u64,
                bound: "at most 2^24 per transfer; split the transfer",
            });
        }
        let mut total_chunks = 0u64;
        let mut total_bytes = 0u64;
        for &size in sizes {
            let n = chunk_count(size, config.chunk_size);
            total_chunks += n;
            total_bytes = total_bytes.saturating_add(size);
            if n > MAX_CHUNKS || total_chunks > MAX_TOTAL_CHUNKS {
                return Err(Error::ScheduleBounds {
                    what: "chunks",
                    value: total_chunks.max(n),
                    bound: "at most 2^24 per file and 2^26 per transfer; use larger chunks",
                });
            }
        }
        let files = sizes
            .iter()
            .map(|&size| FilePlan {
                size,
                states: vec![State::Pending; chunk_count(size, config.chunk_size) as usize],
                verified: 0,
                dropped: false,
            })
            .collect();
        Ok(Self {
            config,
            files,
            cursor: ChunkId {
                file: FileId(0),
                index: 0,
            },
            retry: VecDeque::new(),
            in_flight: HashMap::new(),
            by_stream: BTreeMap::new(),
            attempts: HashMap::new(),
            pending: total_chunks,
            given_up: 0,
            total_bytes,
            verified_bytes: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// Number of chunks of `file` (0 for an unknown file).
    pub fn chunk_count(&self, file: FileId) -> u32 {
        self.files
            .get(file.slot())
            .map_or(0, |f| f.states.len() as u32)
    }

    /// The byte range of a chunk.
    pub fn chunk(&self, id: ChunkId) -> Result<Chunk> {
        let f = self.file(id)?;
        let offset = u64::from(id.index) * self.config.chunk_size;
        Ok(Chunk {
            id,
            offset,
            len: (f.size - offset).min(self.config.chunk_size),
        })
    }

    /// Marks a chunk verified in an earlier run (from the resume manifest) so it is never
    /// sent. Only for chunks still pending; returns the file if that completed it.
    pub fn mark_already_verified(&mut self, id: ChunkId) -> Result<Option<FileCompleted>> {
        self.file(id)?;
        match self.files[id.file.slot()].states[id.index as usize] {
            State::Pending => {
                self.pending -= 1;
                self.retry.retain(|&c| c != id);
                Ok(self.set_verified(id))
            }
            State::Verified => Ok(None),
            State::InFlight | State::GaveUp | State::Dropped => Err(Error::NotInFlight {
                file: id.file,
                index: id.index,
                stream: StreamId(u32::MAX),
            }),
        }
    }

    /// Stops sending `file` (the receiver will not take it, and said so after chunks
    /// began to flow): its pending chunks are never handed out, and its chunks in flight,
    /// when they come back failed or with their stream, are not sent again. A chunk in
    /// flight still lands as usual when the receiver acks it. Returns how many chunks were
    /// pending.
    pub fn drop_file(&mut self, file: FileId) -> Result<u32> {
        let f = self.files.get_mut(file.slot()).ok_or(Error::NoSuchChunk {
            file,
            index: 0,
            chunks: 0,
        })?;
        f.dropped = true;
        let mut n = 0;
        for state in f.states.iter_mut().filter(|s| **s == State::Pending) {
            *state = State::Dropped;
            n += 1;
        }
        self.pending -= u64::from(n);
        self.retry.retain(|c| c.file != file);
        Ok(n)
    }

    /// The next work for a free `stream`, or `None` when nothing is pending (chunks may
    /// still be in flight on other streams).
    pub fn next_work(&mut self, stream: StreamId, now: Instant) -> Option<WorkUnit> {
        let first = self.take_next()?;
        let mut chunks = vec![first];
        let batchable = |s: &Self, c: &Chunk| {
            s.files[c.id.file.slot()].states.len() == 1
                && s.files[c.id.file.slot()].size <= s.config.small_file_bytes
        };
        if batchable(self, &first) {
            let mut bytes = first.len;
            while chunks.len() < self.config.batch_max_files && self.retry.is_empty() {
                let Some(next) = self.peek_cursor() else {
                    break;
                };
                if !batchable(self, &next) || bytes + next.len > self.config.batch_bytes {
                    break;
                }
                self.advance_cursor();
                bytes += next.len;
                chunks.push(next);
            }
        }
        for c in &chunks {
            self.files[c.id.file.slot()].states[c.id.index as usize] = State::InFlight;
            self.in_flight.insert(c.id, Flight { stream, since: now });
            self.by_stream.entry(stream).or_default().insert(c.id);
        }
        self.pending -= chunks.len() as u64;
        Some(WorkUnit { chunks })
    }

    /// The receiver verified `id` (hash matched, data synced). Returns the file if this
    /// completed it.
    pub fn chunk_verified(
        &mut self,
        stream: StreamId,
        id: ChunkId,
    ) -> Result<Option<FileCompleted>> {
        self.land(stream, id)?;
        Ok(self.set_verified(id))
    }

    /// `id` failed on `stream` (bad hash, write error): it is sent again unless it has
    /// failed `max_attempts` times.
    pub fn chunk_failed(&mut self, stream: StreamId, id: ChunkId) -> Result<Retry> {
        self.land(stream, id)?;
        Ok(self.requeue(id))
    }

    /// `stream` died: every chunk in flight on it is requeued (or given up).
    pub fn stream_failed(&mut self, stream: StreamId) -> Vec<(ChunkId, Retry)> {
        let held = self.by_stream.remove(&stream).unwrap_or_default();
        let mut out = Vec::with_capacity(held.len());
        // Requeue in reverse so the lowest chunk ends up first in the queue.
        for id in held.into_iter().rev() {
            self.in_flight.remove(&id);
            out.push((id, self.requeue(id)));
        }
        out.reverse();
        out
    }

    /// Streams holding a chunk for longer than `timeout` at `now`, with that chunk; the
    /// driver decides whether to declare the stream failed.
    pub fn overdue(&self, now: Instant, timeout: Duration) -> Vec<(StreamId, ChunkId)> {
        let mut v: Vec<_> = self
            .in_flight
            .iter()
            .filter(|(_, f)| now.saturating_duration_since(f.since) > timeout)
            .map(|(&id, f)| (f.stream, id))
            .collect();
        v.sort();
        v
    }

    /// The stream `id` is in flight on, for acks that do not say which stream carried
    /// them.
    pub fn holder(&self, id: ChunkId) -> Option<StreamId> {
        self.in_flight.get(&id).map(|f| f.stream)
    }

    /// Chunks in flight on `stream`, in order.
    pub fn in_flight_on(&self, stream: StreamId) -> Vec<ChunkId> {
        self.by_stream
            .get(&stream)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Chunks waiting to be sent.
    pub fn pending_chunks(&self) -> u64 {
        self.pending
    }

    /// Chunks in flight on any stream.
    pub fn in_flight_chunks(&self) -> usize {
        self.in_flight.len()
    }

    /// Chunks given up after `max_attempts` failures.
    pub fn given_up_chunks(&self) -> u64 {
        self.given_up
    }

    /// Bytes of all files.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Bytes in verified chunks.
    pub fn verified_bytes(&self) -> u64 {
        self.verified_bytes
    }

    /// Whether file `file` has every chunk verified.
    pub fn is_file_complete(&self, file: FileId) -> bool {
        self.files
            .get(file.slot())
            .is_some_and(|f| f.verified as usize == f.states.len())
    }

    /// Nothing pending and nothing in flight (some chunks may have been given up).
    pub fn is_finished(&self) -> bool {
        self.pending == 0 && self.in_flight.is_empty()
    }

    /// Every chunk of every file verified.
    pub fn is_complete(&self) -> bool {
        self.is_finished() && self.given_up == 0 && !self.files.iter().any(|f| f.dropped)
    }

    fn file(&self, id: ChunkId) -> Result<&FilePlan> {
        match self.files.get(id.file.slot()) {
            Some(f) if (id.index as usize) < f.states.len() => Ok(f),
            f => Err(Error::NoSuchChunk {
                file: id.file,
                index: id.index,
                chunks: f.map_or(0, |f| f.states.len() as u32),
            }),
        }
    }

    /// Takes a chunk in flight on `stream` off the books, or says it was not there.
    fn land(&mut self, stream: StreamId, id: ChunkId) -> Result<()> {
        if self.in_flight.get(&id).map(|f| f.stream) != Some(stream) {
            return Err(Error::NotInFlight {
                file: id.file,
                index: id.index,
                stream,
            });
        }
        self.in_flight.remove(&id);
        self.unhold(stream, id);
        Ok(())
    }

    fn unhold(&mut self, stream: StreamId, id: ChunkId) {
        if let Some(set) = self.by_stream.get_mut(&stream) {
            set.remove(&id);
            if set.is_empty() {
                self.by_stream.remove(&stream);
            }
        }
    }

    fn set_verified(&mut self, id: ChunkId) -> Option<FileCompleted> {
        let len = self.chunk(id).map_or(0, |c| c.len);
        let f = &mut self.files[id.file.slot()];
        f.states[id.index as usize] = State::Verified;
        f.verified += 1;
        self.verified_bytes += len;
        (f.verified as usize == f.states.len()).then_some(FileCompleted {
            file: id.file,
            size: f.size,
        })
    }

    fn requeue(&mut self, id: ChunkId) -> Retry {
        if self.files[id.file.slot()].dropped {
            self.files[id.file.slot()].states[id.index as usize] = State::Dropped;
            return Retry::Dropped;
        }
        let n = self.attempts.entry(id).or_insert(0);
        *n += 1;
        let attempts = *n;
        let state = &mut self.files[id.file.slot()].states[id.index as usize];
        if attempts >= self.config.max_attempts {
            *state = State::GaveUp;
            self.given_up += 1;
            Retry::GaveUp { attempts }
        } else {
            *state = State::Pending;
            self.pending += 1;
            self.retry.push_front(id);
            Retry::Requeued { attempts }
        }
    }

    fn take_next(&mut self) -> Option<Chunk> {
        while let Some(id) = self.retry.pop_front() {
            if self.files[id.file.slot()].states[id.index as usize] == State::Pending {
                return self.chunk(id).ok();
            }
        }
        let c = self.peek_cursor()?;
        self.advance_cursor();
        Some(c)
    }

    /// The next pending chunk at or after the cursor (moving the cursor past chunks
    /// already verified, e.g. from a resume manifest).
    fn peek_cursor(&mut self) -> Option<Chunk> {
        loop {
            let f = self.files.get(self.cursor.file.slot())?;
            if self.cursor.index as usize >= f.states.len() {
                self.cursor = ChunkId {
                    file: FileId(self.cursor.file.0 + 1),
                    index: 0,
                };
                continue;
            }
            if f.states[self.cursor.index as usize] == State::Pending {
                return self.chunk(self.cursor).ok();
            }
            self.cursor.index += 1;
        }
    }

    fn advance_cursor(&mut self) {
        self.cursor.index += 1;
    }
}
