//! The whole-file BLAKE3 digest, merged from chunk hashes that arrive in any order.
//!
//! Each chunk's hash is the BLAKE3 chaining value of its subtree ([`crate::integrity`]),
//! computed by whichever stream handles the chunk, on bytes still in cache. A file
//! collects its chunk hashes here; the last one in merges them into the file's BLAKE3,
//! which equals `b3sum` of the file. Chunks already in place (resumed, or the whole file
//! in `--checksum-only`) are marked *ready*: the driver hashes them from the file
//! ([`FileHashes::take_ready`]) and offers the result like any other.

use std::collections::{BTreeMap, BTreeSet};

use crate::grid::ChunkGrid;
use crate::integrity::{file_digest, ChunkHash, ChunkHasher, Digest};

/// The chunk hashes of one file, and its digest once all are in.
#[derive(Debug, Clone)]
pub struct FileHashes {
    grid: ChunkGrid,
    hashes: BTreeMap<u32, ChunkHash>,
    ready: BTreeSet<u32>,
    result: Option<Digest>,
}

impl FileHashes {
    /// For a file of `size` bytes cut into `chunk_size` chunks (a power of two).
    pub fn new(size: u64, chunk_size: u64) -> Self {
        Self {
            grid: ChunkGrid::new(size, chunk_size),
            hashes: BTreeMap::new(),
            ready: BTreeSet::new(),
            result: None,
        }
    }

    /// The file's chunk grid.
    pub fn grid(&self) -> &ChunkGrid {
        &self.grid
    }

    /// Offset and length of chunk `index` ([`ChunkGrid::chunk_range`]).
    pub fn chunk_range(&self, index: u32) -> (u64, u64) {
        self.grid.chunk_range(index)
    }

    /// The file is one chunk: that chunk's hash is the file's digest.
    pub fn whole_file(&self) -> bool {
        self.grid.whole_file()
    }

    /// A hasher for chunk `index` ([`ChunkGrid::hasher`]).
    pub fn hasher(&self, index: u32) -> ChunkHasher {
        self.grid.hasher(index)
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.grid.size()
    }

    /// Number of chunks.
    pub fn chunks(&self) -> u32 {
        self.grid.chunks()
    }

    /// The digest, once every chunk is in.
    pub fn result(&self) -> Option<Digest> {
        self.result
    }

    /// Adds chunk `index`'s hash. Returns the digest if this completed the file (once).
    pub fn offer(&mut self, index: u32, hash: ChunkHash) -> Option<Digest> {
        if index >= self.chunks() || self.result.is_some() {
            return None;
        }
        self.ready.remove(&index);
        self.hashes.insert(index, hash);
        if self.hashes.len() as u32 != self.chunks() {
            return None;
        }
        let all: Vec<ChunkHash> = self.hashes.values().copied().collect();
        let digest = file_digest(&all);
        self.result = Some(digest);
        self.hashes.clear();
        Some(digest)
    }

    /// Marks chunks whose bytes are in the file already: the driver hashes them.
    pub fn mark_ready(&mut self, indices: impl IntoIterator<Item = u32>) {
        let chunks = self.chunks();
        self.ready
            .extend(indices.into_iter().filter(|&i| i < chunks));
    }

    /// The chunks marked ready and not yet hashed (taken: asked for once).
    pub fn take_ready(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.ready).into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrity::chunk_hash;

    fn whole(data: &[u8]) -> [u8; 32] {
        chunk_hash(data, 0, true)
    }

    fn hash_of(d: &FileHashes, data: &[u8], i: u32) -> ChunkHash {
        let (off, len) = d.chunk_range(i);
        let mut h = d.hasher(i);
        h.update(&data[off as usize..(off + len) as usize]);
        h.finish()
    }

    #[test]
    fn any_offer_order_gives_the_files_blake3() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for order in [
            vec![0u32, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            vec![9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
            vec![3, 0, 9, 1, 2, 8, 4, 7, 5, 6],
        ] {
            let mut d = FileHashes::new(data.len() as u64, 1024);
            let mut result = None;
            for i in order {
                let h = hash_of(&d, &data, i);
                if let Some(r) = d.offer(i, h) {
                    assert!(result.is_none(), "finished twice");
                    result = Some(r);
                }
            }
            assert_eq!(result, Some(whole(&data)));
            assert_eq!(d.offer(0, [0; 32]), None, "a late offer changes nothing");
            assert_eq!(d.result(), Some(whole(&data)));
        }
    }

    #[test]
    fn ready_chunks_are_handed_out_once_and_empty_files_finish() {
        let data = vec![5u8; 4096 * 3 + 10];
        let mut d = FileHashes::new(data.len() as u64, 4096);
        d.mark_ready([0, 2, 3, 99]);
        assert_eq!(d.take_ready(), vec![0, 2, 3]);
        assert!(d.take_ready().is_empty());
        for i in [0, 2, 3] {
            let h = hash_of(&d, &data, i);
            assert_eq!(d.offer(i, h), None);
        }
        let h = hash_of(&d, &data, 1);
        assert_eq!(d.offer(1, h), Some(whole(&data)));

        let mut e = FileHashes::new(0, 4096);
        assert!(e.whole_file());
        let h = e.hasher(0).finish();
        assert_eq!(e.offer(0, h), Some(whole(&[])));
    }
}
