//! Integrity: one BLAKE3 pass per end gives both the per-chunk check and the whole-file
//! digest.
//!
//! A chunk's hash is the BLAKE3 chaining value of its bytes as the subtree of the file's
//! BLAKE3 tree that it is (chunk sizes are powers of two, so every chunk is a whole
//! subtree; `blake3::hazmat`), or, for a file of one chunk, the file's BLAKE3 itself. The
//! receiver checks each chunk against the sender's hash as it arrives, and each end merges
//! its own chunk hashes into the file's BLAKE3 ([`file_digest`]), which is exactly
//! `b3sum` of the file: the cryptographic proof, compared end to end before the rename,
//! costs no second pass over the bytes, and every stream hashes its own chunks in parallel.

use blake3::hazmat::{merge_subtrees_non_root, merge_subtrees_root, HasherExt, Mode};
use xxhash_rust::xxh3::xxh3_64;

/// The hash of one chunk (see the module docs).
pub type ChunkHash = [u8; 32];

/// Hashes one chunk held in memory: `offset` is where it starts in the file (a multiple
/// of the power-of-two chunk size), `whole_file` that it is the file's only chunk.
pub fn chunk_hash(data: &[u8], offset: u64, whole_file: bool) -> ChunkHash {
    let mut h = ChunkHasher::new(offset, whole_file);
    h.update(data);
    h.finish()
}

/// An incremental [`chunk_hash`] for a chunk that arrives or is read in pieces.
#[derive(Clone)]
pub struct ChunkHasher {
    state: blake3::Hasher,
    whole_file: bool,
    bytes: u64,
    /// Most bytes the subtree at this offset can hold (`None`: no bound).
    limit: Option<u64>,
    overflow: bool,
}

impl ChunkHasher {
    /// A hasher for the chunk at `offset` (see [`chunk_hash`]).
    pub fn new(offset: u64, whole_file: bool) -> Self {
        let mut state = blake3::Hasher::new();
        let mut limit = None;
        if !whole_file {
            state.set_input_offset(offset);
            limit = blake3::hazmat::max_subtree_len(offset);
        }
        Self {
            state,
            whole_file,
            bytes: 0,
            limit,
            overflow: false,
        }
    }

    /// Feeds the next piece of the chunk.
    pub fn update(&mut self, piece: &[u8]) {
        self.bytes += piece.len() as u64;
        if self.limit.is_some_and(|l| self.bytes > l) {
            // More bytes than a chunk at this offset can have: not a chunk of this file.
            self.overflow = true;
        }
        if !self.overflow {
            self.state.update(piece);
        }
    }

    /// Feeds `len` zero bytes (a hole of a sparse file) without allocating them.
    pub fn update_zeros(&mut self, mut len: u64) {
        static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
        while len > 0 {
            let n = len.min(ZEROS.len() as u64) as usize;
            self.update(&ZEROS[..n]);
            len -= n as u64;
        }
    }

    /// Bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The chunk's hash; all `0xff` if more bytes were fed than a chunk at this offset can
    /// hold (the receiver refuses such a chunk for its length before comparing hashes).
    pub fn finish(&self) -> ChunkHash {
        if self.overflow {
            [0xff; 32]
        } else if self.whole_file {
            *self.state.finalize().as_bytes()
        } else {
            self.state.finalize_non_root()
        }
    }
}

/// The file's BLAKE3 from the hashes of all its chunks, in file order (one hash: the file
/// was one chunk and that hash is already its digest; none: the empty file).
pub fn file_digest(chunks: &[ChunkHash]) -> Digest {
    fn split(n: usize) -> usize {
        // BLAKE3's left subtree: the largest power of two that leaves the right non-empty.
        1 << (usize::BITS - 1 - (n - 1).leading_zeros())
    }
    fn subtree(h: &[ChunkHash]) -> ChunkHash {
        if h.len() == 1 {
            return h[0];
        }
        let (l, r) = h.split_at(split(h.len()));
        merge_subtrees_non_root(&subtree(l), &subtree(r), Mode::Hash)
    }
    match chunks.len() {
        0 => *blake3::hash(b"").as_bytes(),
        1 => chunks[0],
        n => {
            let (l, r) = chunks.split_at(split(n));
            *merge_subtrees_root(&subtree(l), &subtree(r), Mode::Hash).as_bytes()
        }
    }
}

/// A finished 32-byte BLAKE3 digest.
pub type Digest = [u8; 32];

/// Lower-case hex of a digest, for logs and JSON output.
pub fn digest_hex(d: &Digest) -> String {
    use std::fmt::Write;
    d.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The first 8 bytes of a hash in hex, for error messages.
pub fn short_hex(h: &[u8; 32]) -> String {
    digest_hex(h)[..16].to_string()
}

/// A 64-bit fingerprint of a source file's identity beyond size and mtime: the sender
/// derives it from what changes whenever the file is rewritten (device, inode, ctime).
/// A file replaced by another of the same size and mtime (e.g. `cp -p`) gets a new inode
/// or ctime and so a new fingerprint.
pub fn source_fingerprint(dev: u64, ino: u64, ctime_secs: i64, ctime_nanos: u32) -> u64 {
    let mut buf = [0u8; 28];
    buf[..8].copy_from_slice(&dev.to_le_bytes());
    buf[8..16].copy_from_slice(&ino.to_le_bytes());
    buf[16..24].copy_from_slice(&ctime_secs.to_le_bytes());
    buf[24..].copy_from_slice(&ctime_nanos.to_le_bytes());
    xxh3_64(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_equals_one_shot() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut h = ChunkHasher::new(1 << 17, false);
        for piece in data.chunks(999) {
            h.update(piece);
        }
        assert_eq!(h.finish(), chunk_hash(&data, 1 << 17, false));
        assert_eq!(h.bytes(), data.len() as u64);
        let mut flipped = data.clone();
        flipped[50_000] ^= 1;
        assert_ne!(
            chunk_hash(&flipped, 1 << 17, false),
            chunk_hash(&data, 1 << 17, false)
        );
        assert_ne!(
            chunk_hash(&data, 1 << 17, false),
            chunk_hash(&data, 1 << 18, false),
            "the same bytes at another offset hash differently"
        );
    }

    #[test]
    fn chunk_hashes_merge_to_the_files_blake3() {
        // Sizes around chunk and tree boundaries, chunk sizes from 1 KiB to 16 KiB.
        let data: Vec<u8> = (0..140_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for chunk in [1024usize, 4096, 16384] {
            for size in [
                0,
                1,
                1023,
                1024,
                1025,
                chunk - 1,
                chunk,
                chunk + 1,
                3 * chunk,
                5 * chunk + 7,
                8 * chunk,
                8 * chunk + 1,
                140_000,
            ] {
                let file = &data[..size.min(data.len())];
                let n = file.len().div_ceil(chunk).max(1);
                let hashes: Vec<ChunkHash> = (0..n)
                    .map(|i| {
                        let piece =
                            &file[(i * chunk).min(file.len())..((i + 1) * chunk).min(file.len())];
                        chunk_hash(piece, (i * chunk) as u64, n == 1)
                    })
                    .collect();
                assert_eq!(
                    file_digest(&hashes),
                    *blake3::hash(file).as_bytes(),
                    "size {size} chunk {chunk}"
                );
            }
        }
        let mut z = ChunkHasher::new(4096, false);
        z.update_zeros(4096);
        assert_eq!(z.finish(), chunk_hash(&[0; 4096], 4096, false));
        // Too many bytes for the subtree at that offset: no panic, a hash nothing matches.
        assert_eq!(chunk_hash(&[1; 4097], 4096, false), [0xff; 32]);
    }

    #[test]
    fn blake3_known_answer_and_zeros() {
        // BLAKE3 of the empty input (from the BLAKE3 specification's test vectors).
        assert_eq!(
            digest_hex(&file_digest(&[])),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(file_digest(&[]), chunk_hash(b"", 0, true));
        let mut a = ChunkHasher::new(0, true);
        a.update(b"head");
        a.update_zeros(200_000);
        a.update(b"tail");
        let mut whole = b"head".to_vec();
        whole.extend(std::iter::repeat(0).take(200_000));
        whole.extend(b"tail");
        assert_eq!(a.finish(), chunk_hash(&whole, 0, true));
        assert_eq!(a.bytes(), whole.len() as u64);
    }

    #[test]
    fn fingerprint_changes_with_each_field() {
        let base = source_fingerprint(1, 2, 3, 4);
        assert_ne!(base, source_fingerprint(9, 2, 3, 4));
        assert_ne!(base, source_fingerprint(1, 9, 3, 4));
        assert_ne!(base, source_fingerprint(1, 2, 9, 4));
        assert_ne!(base, source_fingerprint(1, 2, 3, 9));
        assert_eq!(base, source_fingerprint(1, 2, 3, 4));
    }
}
