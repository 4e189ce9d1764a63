//! The whole-file BLAKE3 digest, merged from chunk hashes that arrive in any order.
//!
//! Each chunk's hash is the BLAKE3 chaining value of its subtree
//! (`longhaul_transfer::integrity`), computed by whichever stream handles the chunk, on
//! bytes still in cache. A file collects its chunk hashes here; the last one in merges
//! them into the file's BLAKE3, which equals `b3sum` of the file. No thread waits for
//! another and no byte is read twice. Chunks that are already in place (resumed, or the
//! whole file in `--checksum-only`) are marked and hashed from the file by
//! [`FileHashes::advance`], on a helper thread.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Mutex;

use longhaul_sys::aligned::AlignedBuf;
use longhaul_transfer::integrity::{file_digest, ChunkHash, ChunkHasher, Digest};
use longhaul_transfer::manifest::chunk_count;

/// Bytes read and hashed at a time: small enough to stay in the L2 cache between the
/// copy and the hash.
pub const PIECE: usize = 256 * 1024;

struct State {
    hashes: BTreeMap<u32, ChunkHash>,
    /// Chunks to hash from the file (see [`FileHashes::mark_ready`]).
    ready: BTreeSet<u32>,
    result: Option<Digest>,
}

/// The chunk hashes of one file, and its digest once all are in.
pub struct FileHashes {
    size: u64,
    chunk_size: u64,
    chunks: u32,
    state: Mutex<State>,
}

impl FileHashes {
    /// For a file of `size` bytes cut into `chunk_size` chunks (a power of two).
    pub fn new(size: u64, chunk_size: u64) -> Self {
        Self {
            size,
            chunk_size,
            chunks: chunk_count(size, chunk_size) as u32,
            state: Mutex::new(State {
                hashes: BTreeMap::new(),
                ready: BTreeSet::new(),
                result: None,
            }),
        }
    }

    /// Offset and length of chunk `index`.
    pub fn chunk_range(&self, index: u32) -> (u64, u64) {
        let off = u64::from(index) * self.chunk_size;
        (off, self.chunk_size.min(self.size.saturating_sub(off)))
    }

    /// The file is one chunk: that chunk's hash is the file's digest.
    pub fn whole_file(&self) -> bool {
        self.chunks == 1
    }

    /// A hasher for chunk `index`.
    pub fn hasher(&self, index: u32) -> ChunkHasher {
        ChunkHasher::new(self.chunk_range(index).0, self.whole_file())
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The digest, once every chunk is in.
    pub fn result(&self) -> Option<Digest> {
        self.state.lock().ok()?.result
    }

    /// Adds chunk `index`'s hash. Returns the digest if this completed the file (once).
    pub fn offer(&self, index: u32, hash: ChunkHash) -> io::Result<Option<Digest>> {
        let mut st = self.state.lock().map_err(|_| poisoned())?;
        if index >= self.chunks || st.result.is_some() {
            return Ok(None);
        }
        st.ready.remove(&index);
        st.hashes.insert(index, hash);
        if st.hashes.len() as u32 != self.chunks {
            return Ok(None);
        }
        let all: Vec<ChunkHash> = st.hashes.values().copied().collect();
        let digest = file_digest(&all);
        st.result = Some(digest);
        Ok(Some(digest))
    }

    /// Marks chunks whose bytes are in the file already (verified in an earlier run, or
    /// the copy `--checksum-only` compares): [`FileHashes::advance`] hashes them.
    pub fn mark_ready(&self, indices: impl IntoIterator<Item = u32>) {
        if let Ok(mut st) = self.state.lock() {
            let chunks = self.chunks;
            st.ready.extend(indices.into_iter().filter(|&i| i < chunks));
        }
    }

    /// Hashes the chunks marked ready, reading them with `read_at`. Returns the digest if
    /// this completed the file.
    pub fn advance(
        &self,
        read_at: &dyn Fn(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<Option<Digest>> {
        let ready = std::mem::take(&mut self.state.lock().map_err(|_| poisoned())?.ready);
        let mut buf = AlignedBuf::new();
        let mut done = None;
        for index in ready {
            let hash = self.hash_from_file(index, read_at, &mut buf)?;
            if let Some(d) = self.offer(index, hash)? {
                done = Some(d);
            }
        }
        Ok(done)
    }
}

impl FileHashes {
    /// Hashes chunk `index` as it is in the file, read with `read_at` in [`PIECE`]s
    /// through `buf`.
    pub fn hash_from_file(
        &self,
        index: u32,
        read_at: &dyn Fn(u64, &mut [u8]) -> io::Result<()>,
        buf: &mut AlignedBuf,
    ) -> io::Result<ChunkHash> {
        let (off, len) = self.chunk_range(index);
        let mut h = self.hasher(index);
        let mut at = 0;
        while at < len {
            let n = (PIECE as u64).min(len - at) as usize;
            buf.resize(n);
            read_at(off + at, buf)?;
            h.update(buf);
            at += n as u64;
        }
        Ok(h.finish())
    }
}

fn poisoned() -> io::Error {
    io::Error::other("digest state poisoned by a panicked thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(data: &[u8]) -> [u8; 32] {
        longhaul_transfer::chunk_hash(data, 0, true)
    }

    #[test]
    fn any_offer_order_gives_the_files_blake3() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let cs = 1024u64;
        for order in [
            vec![0u32, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            vec![9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
            vec![3, 0, 9, 1, 2, 8, 4, 7, 5, 6],
        ] {
            let d = FileHashes::new(data.len() as u64, cs);
            let mut result = None;
            for i in order {
                let (off, len) = d.chunk_range(i);
                let mut h = d.hasher(i);
                h.update(&data[off as usize..(off + len) as usize]);
                let r = d.offer(i, h.finish()).unwrap();
                if r.is_some() {
                    assert!(result.is_none(), "finished twice");
                    result = r;
                }
            }
            assert_eq!(result, Some(whole(&data)));
            assert_eq!(
                d.offer(0, [0; 32]).unwrap(),
                None,
                "a late offer changes nothing"
            );
            assert_eq!(d.result(), Some(whole(&data)));
        }
    }

    #[test]
    fn marked_chunks_are_read_back_and_empty_files_finish() {
        let data = vec![5u8; 4096 * 3 + 10];
        let read = |off: u64, buf: &mut [u8]| -> io::Result<()> {
            buf.copy_from_slice(&data[off as usize..off as usize + buf.len()]);
            Ok(())
        };
        let d = FileHashes::new(data.len() as u64, 4096);
        d.mark_ready([0, 2, 3, 99]);
        assert_eq!(d.advance(&read).unwrap(), None);
        let mut h = d.hasher(1);
        h.update(&data[4096..8192]);
        assert_eq!(d.offer(1, h.finish()).unwrap(), Some(whole(&data)));

        let e = FileHashes::new(0, 4096);
        assert!(e.whole_file());
        assert_eq!(e.offer(0, e.hasher(0).finish()).unwrap(), Some(whole(&[])));
        let z = FileHashes::new(8192, 4096);
        let hole = |i: u32| {
            let mut h = z.hasher(i);
            h.update_zeros(4096);
            h.finish()
        };
        assert_eq!(z.offer(1, hole(1)).unwrap(), None);
        assert_eq!(z.offer(0, hole(0)).unwrap(), Some(whole(&[0u8; 8192])));
    }
}
