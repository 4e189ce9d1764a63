//! The whole-file BLAKE3 digest, computed in file order while chunks arrive out of order.
//!
//! BLAKE3 must see the bytes in order, but streams finish chunks in any order. Each file
//! keeps a frontier: the chunk that comes next. A thread that holds chunk `next` in memory
//! hashes it right there (the bytes are still in cache); chunks that are ready out of order
//! are only marked, and whoever moves the frontier past them reads them back (page cache)
//! and hashes them. One thread hashes a file at a time; the others never wait for it.

use std::io;
use std::sync::Mutex;

use longhaul_sys::aligned::AlignedBuf;
use longhaul_transfer::integrity::FileDigest;
use longhaul_transfer::manifest::chunk_count;

/// What a chunk holds when offered.
pub enum ChunkBytes<'a> {
    /// The chunk's bytes.
    Data(&'a [u8]),
    /// The chunk is all zeros (a hole); nothing to read.
    Zeros,
}

struct State {
    next: u32,
    /// `None` while a thread is hashing.
    hasher: Option<FileDigest>,
    /// Chunks ready out of order; `true` for a chunk that is all zeros (a hole).
    ready: std::collections::BTreeMap<u32, bool>,
    result: Option<[u8; 32]>,
}

/// In-order digest of one file.
pub struct OrderedDigest {
    size: u64,
    chunk_size: u64,
    chunks: u32,
    state: Mutex<State>,
}

impl OrderedDigest {
    /// A digest for a file of `size` bytes cut into `chunk_size` chunks.
    pub fn new(size: u64, chunk_size: u64) -> Self {
        Self {
            size,
            chunk_size,
            chunks: chunk_count(size, chunk_size) as u32,
            state: Mutex::new(State {
                next: 0,
                hasher: Some(FileDigest::new()),
                ready: Default::default(),
                result: None,
            }),
        }
    }

    fn chunk_range(&self, index: u32) -> (u64, u64) {
        let off = u64::from(index) * self.chunk_size;
        (off, self.chunk_size.min(self.size.saturating_sub(off)))
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The digest, once every chunk went through.
    pub fn result(&self) -> Option<[u8; 32]> {
        self.state.lock().ok()?.result
    }

    /// Marks chunks as readable from the file without offering their bytes (verified in an
    /// earlier run); call [`OrderedDigest::advance`] afterwards.
    pub fn mark_ready(&self, indices: impl IntoIterator<Item = u32>) {
        if let Ok(mut st) = self.state.lock() {
            st.ready.extend(indices.into_iter().map(|i| (i, false)));
        }
    }

    /// Offers chunk `index` with its bytes. Returns the digest if this finished the file.
    /// `read_at` reads bytes of the file for chunks that were only marked ready.
    pub fn offer(
        &self,
        index: u32,
        bytes: ChunkBytes<'_>,
        read_at: &dyn Fn(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<Option<[u8; 32]>> {
        let hasher = {
            let mut st = self.state.lock().map_err(|_| poisoned())?;
            if index != st.next || st.hasher.is_none() {
                if index >= st.next {
                    st.ready.insert(index, matches!(bytes, ChunkBytes::Zeros));
                }
                drop(st);
                // The holder may have put the hasher back just before our insert.
                return self.advance(read_at);
            }
            st.hasher.take()
        };
        let Some(mut hasher) = hasher else {
            return Ok(None);
        };
        match bytes {
            ChunkBytes::Data(d) => hasher.update(d),
            ChunkBytes::Zeros => hasher.update_zeros(self.chunk_range(index).1),
        }
        self.run(hasher, read_at)
    }

    /// Moves the frontier over chunks marked ready, reading them from the file. Returns
    /// the digest if this finished the file. Does nothing if another thread is hashing.
    pub fn advance(
        &self,
        read_at: &dyn Fn(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<Option<[u8; 32]>> {
        let hasher = {
            let mut st = self.state.lock().map_err(|_| poisoned())?;
            if st.result.is_some() || st.hasher.is_none() {
                return Ok(None);
            }
            let next = st.next;
            let Some(zeros) = st.ready.remove(&next) else {
                return Ok(None);
            };
            (st.hasher.take(), next, zeros)
        };
        let (Some(mut hasher), next, zeros) = hasher else {
            return Ok(None);
        };
        // Hash the chunk taken from `ready` above, then continue.
        if let Err(e) = self.hash_ready(&mut hasher, next, zeros, read_at) {
            self.put_back(hasher, Some((next, zeros)));
            return Err(e);
        }
        self.run(hasher, read_at)
    }

    /// The frontier chunk was hashed into `hasher`: step past it and every ready chunk.
    fn run(
        &self,
        mut hasher: FileDigest,
        read_at: &dyn Fn(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<Option<[u8; 32]>> {
        loop {
            let next = {
                let mut st = self.state.lock().map_err(|_| poisoned())?;
                st.next += 1;
                if st.next >= self.chunks {
                    let digest: [u8; 32] = hasher.finish();
                    st.result = Some(digest);
                    st.hasher = Some(hasher);
                    return Ok(Some(digest));
                }
                let next = st.next;
                let Some(zeros) = st.ready.remove(&next) else {
                    st.hasher = Some(hasher);
                    return Ok(None);
                };
                (next, zeros)
            };
            let (next, zeros) = next;
            if let Err(e) = self.hash_ready(&mut hasher, next, zeros, read_at) {
                // Leave the chunk ready so a later call retries it.
                self.put_back(hasher, Some((next, zeros)));
                return Err(e);
            }
        }
    }

    fn put_back(&self, hasher: FileDigest, ready_again: Option<(u32, bool)>) {
        if let Ok(mut st) = self.state.lock() {
            st.hasher = Some(hasher);
            if let Some((i, zeros)) = ready_again {
                st.ready.insert(i, zeros);
            }
        }
    }

    fn hash_ready(
        &self,
        hasher: &mut FileDigest,
        index: u32,
        zeros: bool,
        read_at: &dyn Fn(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        const PIECE: u64 = 1 << 20;
        let (off, len) = self.chunk_range(index);
        if zeros {
            hasher.update_zeros(len);
            return Ok(());
        }
        let mut buf = AlignedBuf::zeroed(PIECE.min(len) as usize);
        let mut done = 0;
        while done < len {
            let n = PIECE.min(len - done) as usize;
            read_at(off + done, &mut buf[..n])?;
            hasher.update(&buf[..n]);
            done += n as u64;
        }
        Ok(())
    }
}

fn poisoned() -> io::Error {
    io::Error::other("digest state poisoned by a panicked thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(data: &[u8]) -> [u8; 32] {
        let mut d = FileDigest::new();
        d.update(data);
        d.finish()
    }

    #[test]
    fn any_offer_order_gives_the_in_order_digest() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let cs = 1024u64;
        let read = |off: u64, buf: &mut [u8]| -> io::Result<()> {
            buf.copy_from_slice(&data[off as usize..off as usize + buf.len()]);
            Ok(())
        };
        for order in [
            vec![0u32, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            vec![9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
            vec![3, 0, 9, 1, 2, 8, 4, 7, 5, 6],
        ] {
            let d = OrderedDigest::new(data.len() as u64, cs);
            let mut result = None;
            for i in order {
                let (off, len) = d.chunk_range(i);
                let r = d
                    .offer(
                        i,
                        ChunkBytes::Data(&data[off as usize..(off + len) as usize]),
                        &read,
                    )
                    .unwrap();
                if r.is_some() {
                    assert!(result.is_none(), "finished twice");
                    result = r;
                }
            }
            assert_eq!(result, Some(whole(&data)));
        }
    }

    #[test]
    fn resumed_chunks_are_read_back_and_empty_files_finish() {
        let data = vec![5u8; 4096 * 3 + 10];
        let read = |off: u64, buf: &mut [u8]| -> io::Result<()> {
            buf.copy_from_slice(&data[off as usize..off as usize + buf.len()]);
            Ok(())
        };
        let d = OrderedDigest::new(data.len() as u64, 4096);
        d.mark_ready([0, 1, 2, 3]);
        assert_eq!(d.advance(&read).unwrap(), Some(whole(&data)));

        let e = OrderedDigest::new(0, 4096);
        assert_eq!(
            e.offer(0, ChunkBytes::Data(&[]), &read).unwrap(),
            Some(whole(&[]))
        );
        let z = OrderedDigest::new(8192, 4096);
        assert_eq!(z.offer(1, ChunkBytes::Zeros, &read).unwrap(), None);
        assert_eq!(
            z.offer(0, ChunkBytes::Zeros, &read).unwrap(),
            Some(whole(&[0u8; 8192]))
        );
    }
}
