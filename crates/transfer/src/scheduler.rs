//! The chunk scheduler: which bytes of which file each stream sends next.
//!
//! Files are cut into chunks of one size chosen from the path ([`chunk_size_for`]). A stream
//! that is free pulls the next [`WorkUnit`] ([`ChunkScheduler::next_work`]), so a slow
//! stream simply pulls less and never holds the transfer (dynamic balancing, not static
//! striping). A work unit is one chunk of a large file, or several whole small files batched
//! up to about one chunk of bytes, so a tree of many small files needs no round trip per
//! file. The receiver reports each chunk verified (its xxh3 matched and its data is synced)
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

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::manifest::{chunk_count, MAX_CHUNKS, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES};

/// Index of a file in the transfer's file list.
pub type FileId = u32;
/// Identifier of a data stream (one TCP connection).
pub type StreamId = u32;

/// Smallest chunk size [`chunk_size_for`] chooses.
pub const MIN_PATH_CHUNK_BYTES: u64 = 4 << 20;
/// Largest chunk size [`chunk_size_for`] chooses.
pub const MAX_PATH_CHUNK_BYTES: u64 = 64 << 20;
/// Most files one scheduler plans.
pub const MAX_FILES: usize = 1 << 24;
/// Most chunks one scheduler plans in total (one byte of state each).
pub const MAX_TOTAL_CHUNKS: u64 = 1 << 26;

/// One chunk of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkId {
    /// The file.
    pub file: FileId,
    /// The chunk's index in the file.
    pub index: u32,
}

/// A chunk with its byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Which chunk.
    pub id: ChunkId,
    /// First byte in the file.
    pub offset: u64,
    /// Length in bytes (0 only for an empty file).
    pub len: u64,
}

/// What one stream sends next: one chunk, or several whole small files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkUnit {
    /// The chunks, in file order.
    pub chunks: Vec<Chunk>,
}

impl WorkUnit {
    /// Total bytes of the unit.
    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.len).sum()
    }
}

/// A file whose chunks are all verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileCompleted {
    /// The file.
    pub file: FileId,
    /// Its size in bytes.
    pub size: u64,
}

/// What happened to a failed chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Back at the front of the queue.
    Requeued {
        /// Failures so far.
        attempts: u32,
    },
    /// Failed `max_attempts` times: its file will not complete in this run.
    GaveUp {
        /// Failures so far.
        attempts: u32,
    },
    /// Its file was dropped ([`ChunkScheduler::drop_file`]): not sent again.
    Dropped,
}

/// How files are cut and batched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Chunk size in bytes.
    pub chunk_size: u64,
    /// Files of at most this many bytes are batched with their neighbours.
    pub small_file_bytes: u64,
    /// A batch of small files holds at most this many bytes...
    pub batch_bytes: u64,
    /// ...and at most this many files.
    pub batch_max_files: usize,
    /// A chunk that failed this many times is given up.
    pub max_attempts: u32,
}

impl SchedulerConfig {
    /// Defaults for a chunk size: small files up to half a chunk, batches up to one chunk
    /// and 1024 files, 5 attempts per chunk.
    pub fn for_chunk_size(chunk_size: u64) -> Self {
        Self {
            chunk_size,
            small_file_bytes: chunk_size / 2,
            batch_bytes: chunk_size,
            batch_max_files: 1024,
            max_attempts: 5,
        }
    }
}

/// Chooses a chunk size from the path: about one per-stream bandwidth-delay product
/// (so a chunk keeps a stream busy for at least an RTT and per-chunk overhead is small),
/// rounded up to a power of two within 4..=64 MiB, then halved (not below 4 MiB) until the
/// transfer has at least 4 chunks per stream, so the streams can balance at the end.
pub fn chunk_size_for(path_bdp_bytes: u64, streams: u32, total_bytes: u64) -> u64 {
    let streams = u64::from(streams.max(1));
    let per_stream = (path_bdp_bytes / streams).max(1);
    let mut size = per_stream
        .checked_next_power_of_two()
        .unwrap_or(MAX_PATH_CHUNK_BYTES)
        .clamp(MIN_PATH_CHUNK_BYTES, MAX_PATH_CHUNK_BYTES);
    while size > MIN_PATH_CHUNK_BYTES && total_bytes / size < 4 * streams {
        size /= 2;
    }
    size
}

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
            cursor: ChunkId { file: 0, index: 0 },
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
            .get(file as usize)
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
        match self.files[id.file as usize].states[id.index as usize] {
            State::Pending => {
                self.pending -= 1;
                self.retry.retain(|&c| c != id);
                Ok(self.set_verified(id))
            }
            State::Verified => Ok(None),
            State::InFlight | State::GaveUp | State::Dropped => Err(Error::NotInFlight {
                file: id.file,
                index: id.index,
                stream: u32::MAX,
            }),
        }
    }

    /// Stops sending `file` (the receiver will not take it, and said so after chunks
    /// began to flow): its pending chunks are never handed out, and its chunks in flight,
    /// when they come back failed or with their stream, are not sent again. A chunk in
    /// flight still lands as usual when the receiver acks it. Returns how many chunks were
    /// pending.
    pub fn drop_file(&mut self, file: FileId) -> Result<u32> {
        let f = self
            .files
            .get_mut(file as usize)
            .ok_or(Error::NoSuchChunk {
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
            s.files[c.id.file as usize].states.len() == 1
                && s.files[c.id.file as usize].size <= s.config.small_file_bytes
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
            self.files[c.id.file as usize].states[c.id.index as usize] = State::InFlight;
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
            .get(file as usize)
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
        match self.files.get(id.file as usize) {
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
        let f = &mut self.files[id.file as usize];
        f.states[id.index as usize] = State::Verified;
        f.verified += 1;
        self.verified_bytes += len;
        (f.verified as usize == f.states.len()).then_some(FileCompleted {
            file: id.file,
            size: f.size,
        })
    }

    fn requeue(&mut self, id: ChunkId) -> Retry {
        if self.files[id.file as usize].dropped {
            self.files[id.file as usize].states[id.index as usize] = State::Dropped;
            return Retry::Dropped;
        }
        let n = self.attempts.entry(id).or_insert(0);
        *n += 1;
        let attempts = *n;
        let state = &mut self.files[id.file as usize].states[id.index as usize];
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
            if self.files[id.file as usize].states[id.index as usize] == State::Pending {
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
            let f = self.files.get(self.cursor.file as usize)?;
            if self.cursor.index as usize >= f.states.len() {
                self.cursor = ChunkId {
                    file: self.cursor.file + 1,
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

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // One Instant to offset from; the scheduler never reads a clock.
mod tests {
    use super::*;

    const K4: u64 = 4096;

    #[test]
    fn chunk_size_from_path() {
        // 1 Gbit/s x 180 ms = 22.5 MB; 4 streams -> 5.6 MB each -> 8 MiB.
        assert_eq!(chunk_size_for(22_500_000, 4, 100 << 30), 8 << 20);
        // Tiny BDP: the floor.
        assert_eq!(chunk_size_for(1000, 1, 100 << 30), 4 << 20);
        // Huge BDP: the ceiling.
        assert_eq!(chunk_size_for(1 << 40, 1, 1 << 50), 64 << 20);
        // A 200 MiB file over 4 streams wants >= 16 chunks: 8 MiB, not 64.
        assert_eq!(chunk_size_for(1 << 40, 4, 200 << 20), 8 << 20);
        assert_eq!(chunk_size_for(0, 0, 0), 4 << 20);
    }

    #[test]
    fn a_dropped_file_is_neither_sent_nor_waited_for() {
        let cfg = SchedulerConfig::for_chunk_size(4 * K4);
        let mut s = ChunkScheduler::new(&[12 * K4, 8 * K4], cfg).unwrap();
        let now = Instant::now();
        let a = s.next_work(0, now).unwrap().chunks[0].id;
        let b = s.next_work(1, now).unwrap().chunks[0].id;
        assert_eq!((a.file, b.file), (0, 0));
        assert_eq!(
            s.drop_file(0).unwrap(),
            1,
            "one chunk of file 0 was pending"
        );
        // What was in flight: one lands verified, the other fails and is not sent again.
        s.chunk_verified(0, a).unwrap();
        assert_eq!(s.chunk_failed(1, b).unwrap(), Retry::Dropped);
        let rest: Vec<ChunkId> = std::iter::from_fn(|| s.next_work(2, now))
            .flat_map(|w| w.chunks)
            .map(|c| c.id)
            .collect();
        assert!(rest.iter().all(|c| c.file == 1), "{rest:?}");
        assert_eq!(rest.len(), 2);
        for id in rest {
            s.chunk_verified(2, id).unwrap();
        }
        assert!(s.is_finished());
        assert!(!s.is_complete(), "file 0 was dropped");
        assert!(s.drop_file(5).is_err());
    }

    #[test]
    fn holder_names_the_stream_a_chunk_is_in_flight_on() {
        let mut s =
            ChunkScheduler::new(&[40 * K4], SchedulerConfig::for_chunk_size(4 * K4)).unwrap();
        let now = Instant::now();
        let a = s.next_work(0, now).unwrap().chunks[0].id;
        let b = s.next_work(7, now).unwrap().chunks[0].id;
        assert_eq!(s.holder(a), Some(0));
        assert_eq!(s.holder(b), Some(7));
        s.chunk_verified(7, b).unwrap();
        assert_eq!(s.holder(b), None, "verified: no longer in flight");
        assert_eq!(s.holder(ChunkId { file: 0, index: 9 }), None, "never sent");
    }

    #[test]
    fn big_file_chunks_and_small_file_batches() {
        let cfg = SchedulerConfig {
            batch_max_files: 3,
            ..SchedulerConfig::for_chunk_size(4 * K4)
        };
        // file 0: 2.5 chunks; files 1..=5 small; file 6 empty.
        let mut s = ChunkScheduler::new(&[10 * K4, 100, 200, 300, 400, 500, 0], cfg).unwrap();
        let now = Instant::now();
        let u = s.next_work(0, now).unwrap();
        assert_eq!(u.chunks.len(), 1);
        assert_eq!((u.chunks[0].offset, u.chunks[0].len), (0, 4 * K4));
        assert_eq!(s.next_work(1, now).unwrap().chunks[0].offset, 4 * K4);
        assert_eq!(s.next_work(0, now).unwrap().chunks[0].len, 2 * K4);
        let b = s.next_work(1, now).unwrap();
        let files: Vec<_> = b.chunks.iter().map(|c| c.id.file).collect();
        assert_eq!(files, vec![1, 2, 3]);
        let b = s.next_work(1, now).unwrap();
        assert_eq!(
            b.chunks.iter().map(|c| c.id.file).collect::<Vec<_>>(),
            vec![4, 5, 6]
        );
        assert!(s.next_work(0, now).is_none());
        assert_eq!(s.in_flight_on(1).len(), 7);
        // Stream 1 dies: its chunks come back first, in order.
        let back = s.stream_failed(1);
        assert_eq!(back.len(), 7);
        assert!(back
            .iter()
            .all(|(_, r)| *r == Retry::Requeued { attempts: 1 }));
        let again = s.next_work(0, now).unwrap();
        assert_eq!(again.chunks[0].id, ChunkId { file: 0, index: 1 });
        assert!(!s.is_finished());
    }

    #[test]
    fn completion_only_when_all_verified() {
        let mut s =
            ChunkScheduler::new(&[8 * K4], SchedulerConfig::for_chunk_size(4 * K4)).unwrap();
        let now = Instant::now();
        let a = s.next_work(0, now).unwrap().chunks[0].id;
        let b = s.next_work(1, now).unwrap().chunks[0].id;
        assert!(s.chunk_verified(0, b).is_err(), "b is on stream 1, not 0");
        assert_eq!(s.chunk_verified(1, b).unwrap(), None);
        assert!(s.chunk_verified(1, b).is_err(), "verified twice");
        assert_eq!(
            s.chunk_failed(0, a).unwrap(),
            Retry::Requeued { attempts: 1 }
        );
        assert!(!s.is_file_complete(0));
        let a2 = s.next_work(1, now).unwrap().chunks[0].id;
        assert_eq!(a2, a);
        assert_eq!(
            s.chunk_verified(1, a).unwrap(),
            Some(FileCompleted {
                file: 0,
                size: 8 * K4
            })
        );
        assert!(s.is_complete());
        assert_eq!(s.verified_bytes(), 8 * K4);
    }

    #[test]
    fn no_duplicates_when_nothing_is_pending() {
        let mut s =
            ChunkScheduler::new(&[8 * K4], SchedulerConfig::for_chunk_size(4 * K4)).unwrap();
        let now = Instant::now();
        let slow = s.next_work(0, now).unwrap().chunks[0].id;
        let fast = s.next_work(1, now).unwrap().chunks[0].id;
        assert_eq!(s.chunk_verified(1, fast).unwrap(), None);
        // The queue is dry: the free stream waits for stream 0 instead of duplicating.
        assert!(s.next_work(1, now).is_none());
        assert_eq!(s.in_flight_chunks(), 1);
        assert_eq!(s.holder(slow), Some(0));
        // A failure requeues the chunk for any stream.
        assert_eq!(
            s.chunk_failed(0, slow).unwrap(),
            Retry::Requeued { attempts: 1 }
        );
        assert_eq!(s.next_work(1, now).unwrap().chunks[0].id, slow);
        assert!(s.chunk_verified(0, slow).is_err(), "now on stream 1");
        assert!(s.chunk_verified(1, slow).unwrap().is_some());
        assert!(s.is_complete());
    }

    #[test]
    fn gives_up_after_max_attempts() {
        let cfg = SchedulerConfig {
            max_attempts: 2,
            ..SchedulerConfig::for_chunk_size(4 * K4)
        };
        let mut s = ChunkScheduler::new(&[K4], cfg).unwrap();
        let now = Instant::now();
        let id = s.next_work(0, now).unwrap().chunks[0].id;
        assert_eq!(
            s.chunk_failed(0, id).unwrap(),
            Retry::Requeued { attempts: 1 }
        );
        s.next_work(0, now).unwrap();
        assert_eq!(
            s.chunk_failed(0, id).unwrap(),
            Retry::GaveUp { attempts: 2 }
        );
        assert!(s.next_work(0, now).is_none());
        assert!(s.is_finished() && !s.is_complete());
        assert_eq!(s.given_up_chunks(), 1);
    }

    #[test]
    fn resume_skips_verified_and_overdue_reports() {
        let mut s =
            ChunkScheduler::new(&[12 * K4, K4], SchedulerConfig::for_chunk_size(4 * K4)).unwrap();
        assert_eq!(
            s.mark_already_verified(ChunkId { file: 0, index: 1 })
                .unwrap(),
            None
        );
        assert_eq!(
            s.mark_already_verified(ChunkId { file: 1, index: 0 })
                .unwrap(),
            Some(FileCompleted { file: 1, size: K4 })
        );
        assert!(s
            .mark_already_verified(ChunkId { file: 1, index: 1 })
            .is_err());
        let t0 = Instant::now();
        let ids: Vec<_> = std::iter::from_fn(|| s.next_work(0, t0))
            .map(|u| u.chunks[0].id.index)
            .collect();
        assert_eq!(ids, vec![0, 2]);
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(s.overdue(t1, Duration::from_secs(5)).len(), 2);
        assert!(s.overdue(t1, Duration::from_secs(20)).is_empty());
    }

    #[test]
    fn bounds_refused() {
        assert!(ChunkScheduler::new(&[1], SchedulerConfig::for_chunk_size(10)).is_err());
        assert!(ChunkScheduler::new(&[u64::MAX], SchedulerConfig::for_chunk_size(4096)).is_err());
        let cfg = SchedulerConfig {
            max_attempts: 0,
            ..SchedulerConfig::for_chunk_size(4096)
        };
        assert!(ChunkScheduler::new(&[1], cfg).is_err());
    }
}
