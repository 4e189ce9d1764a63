//! The chunk grid of one file: where each chunk starts, how long it is, and the hasher
//! that gives its place in the file's BLAKE3 tree. Written once, for every end that cuts
//! a file into chunks (the sender, the store, sync's old copies, a dry run, the tests).

use crate::integrity::ChunkHasher;
use crate::manifest::chunk_count;

/// A file of `size` bytes cut into chunks of `chunk_size` bytes (a power of two); an
/// empty file is one empty chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkGrid {
    size: u64,
    chunk_size: u64,
    chunks: u32,
}

impl ChunkGrid {
    /// The grid of a file of `size` bytes in chunks of `chunk_size` bytes.
    pub fn new(size: u64, chunk_size: u64) -> Self {
        Self {
            size,
            chunk_size,
            chunks: chunk_count(size, chunk_size) as u32,
        }
    }

    /// Offset and length of chunk `index`.
    pub fn chunk_range(&self, index: u32) -> (u64, u64) {
        let off = u64::from(index) * self.chunk_size;
        (off, self.chunk_size.min(self.size.saturating_sub(off)))
    }

    /// A hasher for chunk `index`.
    pub fn hasher(&self, index: u32) -> ChunkHasher {
        ChunkHasher::new(self.chunk_range(index).0, self.whole_file())
    }

    /// The file is one chunk: that chunk's hash is the file's digest.
    pub fn whole_file(&self) -> bool {
        self.chunks == 1
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The chunk size.
    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    /// Number of chunks.
    pub fn chunks(&self) -> u32 {
        self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_chunk_is_short_and_an_empty_file_is_one_empty_chunk() {
        let g = ChunkGrid::new(10_000, 4096);
        assert_eq!(g.chunks(), 3);
        assert_eq!(g.chunk_range(0), (0, 4096));
        assert_eq!(g.chunk_range(2), (8192, 10_000 - 8192));
        assert_eq!(g.chunk_range(3), (12_288, 0), "past the end: empty");
        assert!(!g.whole_file());
        let empty = ChunkGrid::new(0, 4096);
        assert_eq!((empty.chunks(), empty.chunk_range(0)), (1, (0, 0)));
        assert!(empty.whole_file());
    }
}
