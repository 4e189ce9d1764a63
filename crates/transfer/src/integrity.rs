//! Integrity helpers: a fast per-chunk checksum (xxh3-64) checked as each chunk arrives,
//! and a whole-file BLAKE3 digest compared end to end once a file is complete.
//!
//! xxh3 catches corruption on the wire or on disk at memory speed; BLAKE3 is the
//! cryptographic proof that the file the receiver renames into place is the sender's.
//! BLAKE3 here is fed in file order: the receiver computes it in one pass over the finished
//! partial file (warm in the page cache), the sender while it reads or in a separate pass.

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// The xxh3-64 checksum of one chunk held in memory.
pub fn chunk_hash(data: &[u8]) -> u64 {
    xxh3_64(data)
}

/// An incremental xxh3-64 checksum for a chunk that arrives in pieces; equal to
/// [`chunk_hash`] of the concatenated pieces.
#[derive(Clone, Default)]
pub struct ChunkHasher {
    state: Xxh3,
    bytes: u64,
}

impl ChunkHasher {
    /// A fresh hasher.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next piece of the chunk.
    pub fn update(&mut self, piece: &[u8]) {
        self.state.update(piece);
        self.bytes += piece.len() as u64;
    }

    /// Bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The checksum of everything fed so far.
    pub fn finish(&self) -> u64 {
        self.state.digest()
    }
}

/// A BLAKE3 digest of a whole file, fed in file order.
#[derive(Clone, Default)]
pub struct FileDigest {
    state: blake3::Hasher,
    bytes: u64,
}

/// A finished 32-byte BLAKE3 digest.
pub type Digest = [u8; 32];

impl FileDigest {
    /// A fresh digest.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes of the file (in order).
    pub fn update(&mut self, data: &[u8]) {
        self.state.update(data);
        self.bytes += data.len() as u64;
    }

    /// Feeds `len` zero bytes: a hole of a sparse file, without allocating it.
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

    /// The digest of everything fed so far.
    pub fn finish(&self) -> Digest {
        *self.state.finalize().as_bytes()
    }
}

/// Lower-case hex of a digest, for logs and JSON output.
pub fn digest_hex(d: &Digest) -> String {
    use std::fmt::Write;
    d.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
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
        let mut h = ChunkHasher::new();
        for piece in data.chunks(999) {
            h.update(piece);
        }
        assert_eq!(h.finish(), chunk_hash(&data));
        assert_eq!(h.bytes(), data.len() as u64);
        let mut flipped = data.clone();
        flipped[50_000] ^= 1;
        assert_ne!(chunk_hash(&flipped), chunk_hash(&data));
    }

    #[test]
    fn blake3_known_answer_and_zeros() {
        // BLAKE3 of the empty input (from the BLAKE3 specification's test vectors).
        assert_eq!(
            digest_hex(&FileDigest::new().finish()),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        let mut a = FileDigest::new();
        a.update(b"head");
        a.update_zeros(200_000);
        a.update(b"tail");
        let mut whole = b"head".to_vec();
        whole.extend(std::iter::repeat(0).take(200_000));
        whole.extend(b"tail");
        let mut b = FileDigest::new();
        b.update(&whole);
        assert_eq!(a.finish(), b.finish());
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
