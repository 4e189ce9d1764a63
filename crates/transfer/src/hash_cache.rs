//! The chunk-hash cache's record: a file's chunk hashes kept with the file's identity, so
//! that a sync does not re-read an unchanged huge file (no I/O here; the driver that
//! reads and writes cache files is `longhaul_engine::hash_cache`).
//!
//! A record is trusted only while the file is the very one it was made of: the same
//! device and inode, size, mtime and ctime (a rewrite in place that restores the mtime
//! still moves the ctime, which no unprivileged process can set back), and the same chunk
//! size (a chunk's hash depends on the chunk grid). `--checksum` ignores the cache.
//!
//! # Format (little-endian, version 1)
//!
//! | bytes            | field                                            |
//! |------------------|--------------------------------------------------|
//! | 0..4             | magic `LHHC`                                     |
//! | 4..6             | version (1)                                      |
//! | 6..8             | reserved, 0                                      |
//! | 8..16            | device (`st_dev`)                                |
//! | 16..24           | inode (`st_ino`)                                 |
//! | 24..32           | size in bytes                                    |
//! | 32..40           | mtime, seconds since the epoch (i64)             |
//! | 40..44           | mtime, nanoseconds (< 10^9)                      |
//! | 44..48           | ctime, nanoseconds (< 10^9)                      |
//! | 48..56           | ctime, seconds since the epoch (i64)             |
//! | 56..64           | chunk size in bytes (a power of two, 4 KiB ..= 1 GiB) |
//! | 64..68           | chunk count (u32) = `chunk_count(size, chunk size)` |
//! | 68..72           | reserved, 0                                      |
//! | 72..72+32n       | the n chunk hashes ([`crate::integrity::chunk_hash`]), in file order |
//! | last 32 bytes    | BLAKE3 of everything before it (the check)       |
//!
//! # Decoding
//! Defensive, as for the resume manifest: the length is checked against the stated bound
//! and the count before anything else, nothing in the bytes can panic or allocate beyond
//! [`MAX_RECORD_BYTES`], and any mismatch (format, check, identity, chunk size, a count
//! that does not fit the size) is simply a miss: the file is hashed again.

use crate::error::{Error, Result};
use crate::integrity::ChunkHash;
use crate::le_bytes::{u16_at, u32_at, u64_at};
use crate::manifest::{chunk_count, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES};

/// Header length in bytes.
pub const HEADER_LEN: usize = 72;
/// Length of the check at the end.
pub const CHECK_LEN: usize = 32;
/// Most chunk hashes one record holds (1 Mi: 4 TiB at 4 MiB chunks, 64 TiB at 64 MiB);
/// a file with more is not cached.
pub const MAX_CACHED_CHUNKS: u64 = 1 << 20;
/// Longest record: header, [`MAX_CACHED_CHUNKS`] hashes and the check (32 MiB + 104 B).
/// A decoder refuses anything longer without looking further.
pub const MAX_RECORD_BYTES: usize = HEADER_LEN + 32 * MAX_CACHED_CHUNKS as usize + CHECK_LEN;

const MAGIC: &[u8; 4] = b"LHHC";
const VERSION: u16 = 1;

/// Who a file is now, as `fstat` says (the one identity of a file; the engine builds it
/// from metadata in one place): a cached record belongs to a file while it still is; a
/// sync takes unchanged chunks from a destination copy only while it still is; and the
/// source's [`FileIdentity::fingerprint`] goes in the file list for the resume rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// Device (`st_dev`).
    pub dev: u64,
    /// Inode (`st_ino`).
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime_secs: i64,
    /// Modification time, nanoseconds part (< 10^9).
    pub mtime_nanos: u32,
    /// Status-change time, seconds since the epoch.
    pub ctime_secs: i64,
    /// Status-change time, nanoseconds part (< 10^9).
    pub ctime_nanos: u32,
}

impl FileIdentity {
    /// The source fingerprint of the resume rule (device, inode, ctime; see
    /// [`crate::source_fingerprint`]).
    pub fn fingerprint(&self) -> u64 {
        crate::integrity::source_fingerprint(self.dev, self.ino, self.ctime_secs, self.ctime_nanos)
    }
}

/// A file's chunk hashes with what they are valid for; built checked, so that encoding
/// cannot fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedHashes {
    identity: FileIdentity,
    chunk_size: u64,
    hashes: Vec<ChunkHash>,
}

impl CachedHashes {
    /// The hashes of every chunk of the file `identity` names, cut in `chunk_size` chunks.
    /// Refused: a chunk size that is not a power of two in 4 KiB ..= 1 GiB, nanoseconds
    /// out of range, a hash count other than the file's chunk count, or more than
    /// [`MAX_CACHED_CHUNKS`].
    pub fn new(identity: FileIdentity, chunk_size: u64, hashes: Vec<ChunkHash>) -> Result<Self> {
        if !chunk_size_ok(chunk_size) {
            return Err(Error::HashCacheField {
                field: "chunk_size",
                value: chunk_size,
                bound: "must be a power of two in 4 KiB ..= 1 GiB",
            });
        }
        for (field, nanos) in [
            ("mtime_nanos", identity.mtime_nanos),
            ("ctime_nanos", identity.ctime_nanos),
        ] {
            if nanos >= 1_000_000_000 {
                return Err(Error::HashCacheField {
                    field,
                    value: nanos.into(),
                    bound: "must be < 10^9",
                });
            }
        }
        let want = chunk_count(identity.size, chunk_size);
        if want > MAX_CACHED_CHUNKS {
            return Err(Error::HashCacheField {
                field: "chunk_count",
                value: want,
                bound: "at most 2^20 chunks are cached per file",
            });
        }
        if hashes.len() as u64 != want {
            return Err(Error::HashCacheField {
                field: "hash_count",
                value: hashes.len() as u64,
                bound: "must equal the file's chunk count",
            });
        }
        Ok(Self {
            identity,
            chunk_size,
            hashes,
        })
    }

    /// The file the hashes belong to.
    pub fn identity(&self) -> &FileIdentity {
        &self.identity
    }

    /// The chunk size they were computed for.
    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    /// The chunk hashes, in file order.
    pub fn hashes(&self) -> &[ChunkHash] {
        &self.hashes
    }
}

/// The record's bytes (see the module docs).
pub fn encode(record: &CachedHashes) -> Vec<u8> {
    let n = record.hashes.len();
    let mut out = Vec::with_capacity(HEADER_LEN + 32 * n + CHECK_LEN);
    let id = &record.identity;
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&id.dev.to_le_bytes());
    out.extend_from_slice(&id.ino.to_le_bytes());
    out.extend_from_slice(&id.size.to_le_bytes());
    out.extend_from_slice(&id.mtime_secs.to_le_bytes());
    out.extend_from_slice(&id.mtime_nanos.to_le_bytes());
    out.extend_from_slice(&id.ctime_nanos.to_le_bytes());
    out.extend_from_slice(&id.ctime_secs.to_le_bytes());
    out.extend_from_slice(&record.chunk_size.to_le_bytes());
    // The count fits: `new` bounds it by MAX_CACHED_CHUNKS (2^20).
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for h in &record.hashes {
        out.extend_from_slice(h);
    }
    let check = blake3::hash(&out);
    out.extend_from_slice(check.as_bytes());
    out
}

/// The chunk hashes in `bytes` if they are a well-formed record of exactly the file
/// `expected` at exactly `chunk_size`; `None` otherwise (a miss: hash the file).
pub fn decode(bytes: &[u8], expected: &FileIdentity, chunk_size: u64) -> Option<Vec<ChunkHash>> {
    if bytes.len() < HEADER_LEN + CHECK_LEN || bytes.len() > MAX_RECORD_BYTES {
        return None;
    }
    if &bytes[..4] != MAGIC || u16_at(bytes, 4) != VERSION || u16_at(bytes, 6) != 0 {
        return None;
    }
    if u32_at(bytes, 68) != 0 || !chunk_size_ok(chunk_size) {
        return None;
    }
    let found = FileIdentity {
        dev: u64_at(bytes, 8),
        ino: u64_at(bytes, 16),
        size: u64_at(bytes, 24),
        mtime_secs: u64_at(bytes, 32) as i64,
        mtime_nanos: u32_at(bytes, 40),
        ctime_nanos: u32_at(bytes, 44),
        ctime_secs: u64_at(bytes, 48) as i64,
    };
    if found != *expected || u64_at(bytes, 56) != chunk_size {
        return None;
    }
    let count = u64::from(u32_at(bytes, 64));
    if count != chunk_count(found.size, chunk_size) || count > MAX_CACHED_CHUNKS {
        return None;
    }
    // Bounded above, so this cannot overflow: count <= 2^20.
    let body = HEADER_LEN + 32 * count as usize;
    if bytes.len() != body + CHECK_LEN {
        return None;
    }
    if blake3::hash(&bytes[..body]).as_bytes() != &bytes[body..] {
        return None;
    }
    let hashes = bytes[HEADER_LEN..body]
        .chunks_exact(32)
        .map(|h| {
            let mut a = [0u8; 32];
            a.copy_from_slice(h);
            a
        })
        .collect();
    Some(hashes)
}

/// The cache file's name for a file (`dev`, `ino`) at `chunk_size`: 32 hex digits of a
/// BLAKE3 of the three, so that one file at two chunk sizes has two records and a file
/// replaced by another inode does not read the old one's record (it would miss anyway).
pub fn cache_key(dev: u64, ino: u64, chunk_size: u64) -> String {
    let mut b = [0u8; 24];
    b[..8].copy_from_slice(&dev.to_le_bytes());
    b[8..16].copy_from_slice(&ino.to_le_bytes());
    b[16..].copy_from_slice(&chunk_size.to_le_bytes());
    let h = blake3::hash(&b);
    crate::integrity::digest_hex(h.as_bytes())[..32].to_string()
}

fn chunk_size_ok(chunk_size: u64) -> bool {
    (MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&chunk_size) && chunk_size.is_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> FileIdentity {
        FileIdentity {
            dev: 2049,
            ino: 1_234_567,
            size: 10 * 1024 * 1024 + 5,
            mtime_secs: 1_700_000_000,
            mtime_nanos: 123_456_789,
            ctime_secs: 1_700_000_100,
            ctime_nanos: 5,
        }
    }

    fn hashes(n: usize) -> Vec<ChunkHash> {
        (0..n).map(|i| [i as u8 ^ 0x5a; 32]).collect()
    }

    #[test]
    fn round_trip_and_exact_layout() {
        let rec = CachedHashes::new(id(), 4 << 20, hashes(3)).unwrap();
        let bytes = encode(&rec);
        assert_eq!(bytes.len(), HEADER_LEN + 3 * 32 + CHECK_LEN);
        assert_eq!(&bytes[..4], b"LHHC");
        assert_eq!(u64_at(&bytes, 16), 1_234_567);
        assert_eq!(u32_at(&bytes, 64), 3);
        assert_eq!(decode(&bytes, &id(), 4 << 20), Some(hashes(3)));
    }

    #[test]
    fn another_file_or_chunk_size_misses() {
        let bytes = encode(&CachedHashes::new(id(), 4 << 20, hashes(3)).unwrap());
        let changed = [
            FileIdentity { dev: 1, ..id() },
            FileIdentity { ino: 1, ..id() },
            FileIdentity {
                size: id().size + 1,
                ..id()
            },
            FileIdentity {
                mtime_secs: 1,
                ..id()
            },
            FileIdentity {
                mtime_nanos: 1,
                ..id()
            },
            FileIdentity {
                ctime_secs: 1,
                ..id()
            },
            FileIdentity {
                ctime_nanos: 6,
                ..id()
            },
        ];
        for other in changed {
            assert_eq!(decode(&bytes, &other, 4 << 20), None, "{other:?}");
        }
        assert_eq!(decode(&bytes, &id(), 8 << 20), None);
        assert_eq!(decode(&bytes, &id(), 3 << 20), None);
    }

    #[test]
    fn construction_is_bounded() {
        assert!(CachedHashes::new(id(), 4 << 20, hashes(2)).is_err());
        assert!(CachedHashes::new(id(), 4 << 20, hashes(4)).is_err());
        assert!(CachedHashes::new(id(), 1000, hashes(3)).is_err());
        assert!(CachedHashes::new(id(), 2 << 30, hashes(1)).is_err());
        let bad_ns = FileIdentity {
            ctime_nanos: 1_000_000_000,
            ..id()
        };
        assert!(CachedHashes::new(bad_ns, 4 << 20, hashes(3)).is_err());
        let huge = FileIdentity {
            size: (MAX_CACHED_CHUNKS + 1) * 4096,
            ..id()
        };
        assert!(matches!(
            CachedHashes::new(huge, 4096, Vec::new()),
            Err(Error::HashCacheField {
                field: "chunk_count",
                ..
            })
        ));
        let empty = FileIdentity { size: 0, ..id() };
        let rec = CachedHashes::new(empty, 4096, hashes(1)).unwrap();
        assert_eq!(decode(&encode(&rec), &empty, 4096), Some(hashes(1)));
    }

    #[test]
    fn a_count_that_does_not_fit_the_size_is_refused_even_with_a_good_check() {
        // Forge a record whose count disagrees with its size, with a valid check.
        let mut bytes = encode(&CachedHashes::new(id(), 4 << 20, hashes(3)).unwrap());
        bytes.truncate(HEADER_LEN + 2 * 32);
        bytes[64..68].copy_from_slice(&2u32.to_le_bytes());
        let check = blake3::hash(&bytes);
        bytes.extend_from_slice(check.as_bytes());
        assert_eq!(decode(&bytes, &id(), 4 << 20), None);
        // Over the stated limit: refused on length alone.
        assert_eq!(decode(&vec![0; MAX_RECORD_BYTES + 1], &id(), 4 << 20), None);
    }

    #[test]
    fn keys_differ_per_file_and_chunk_size() {
        let k = cache_key(1, 2, 4 << 20);
        assert_eq!(k.len(), 32);
        assert!(k.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(k, cache_key(1, 2, 8 << 20));
        assert_ne!(k, cache_key(1, 3, 4 << 20));
        assert_ne!(k, cache_key(9, 2, 4 << 20));
        assert_eq!(k, cache_key(1, 2, 4 << 20));
    }
}
