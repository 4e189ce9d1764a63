//! The scheduler's public types: file, stream and chunk ids, chunks and work units, what
//! became of a failed chunk or a finished file, the configuration, and the chunk size
//! chosen from the path.

#[cfg(doc)]
use super::ChunkScheduler;

/// A file as the scheduler numbers them: densely, in the order they were added (the
/// files of a list with data to send, not the list's entries: a sending session maps
/// the two, see `SendSession::entry_of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// A data stream (one TCP connection), by its index in the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u32);

impl FileId {
    /// Its place in a table of the scheduler's files.
    pub fn slot(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for FileId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Smallest chunk size [`chunk_size_for`] chooses.
pub const MIN_PATH_CHUNK_BYTES: u64 = 4 << 20;
/// Largest chunk size [`chunk_size_for`] chooses.
pub const MAX_PATH_CHUNK_BYTES: u64 = 64 << 20;

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
