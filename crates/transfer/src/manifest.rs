//! The receiver's resume manifest: which chunks of one file are written, synced and
//! verified, and of which source they are.
//!
//! # Format (little-endian, version 2)
//! A 56-byte header, then 40-byte records appended one per verified chunk:
//!
//! | bytes  | header field                                   |
//! |--------|------------------------------------------------|
//! | 0..4   | magic `LHRM`                                   |
//! | 4..6   | version (2)                                    |
//! | 6..8   | reserved, 0                                    |
//! | 8..16  | source size in bytes                           |
//! | 16..24 | source mtime, seconds since the epoch (i64)    |
//! | 24..28 | source mtime, nanoseconds (< 10^9)             |
//! | 28..32 | reserved, 0                                    |
//! | 32..40 | source fingerprint (see [`crate::source_fingerprint`]) |
//! | 40..48 | chunk size in bytes                            |
//! | 48..56 | xxh3-64 of bytes 0..48 (the header check)      |
//!
//! | bytes  | record field                                   |
//! |--------|------------------------------------------------|
//! | 0..4   | chunk index (u32)                              |
//! | 4..36  | the chunk's hash ([`crate::integrity::chunk_hash`]) |
//! | 36..40 | low 32 bits of xxh3-64 of bytes 0..36 seeded with the header check |
//!
//! Records are appended only after the chunk's data is written and verified; a record may
//! still outlive its data after a power cut (neither is synced unless the user asks), so
//! the receiver re-hashes recorded chunks before it trusts them. Seeding each record's check with
//! the header check binds it to this header: a record left over from a manifest of an
//! older source does not validate.
//!
//! # Parsing
//! Defensive: nothing in the bytes can panic or allocate beyond what the bytes justify.
//! A partial record at the end, or a bad check on the *last* full record, is a torn append
//! after a crash: it is dropped and [`Loaded::valid_len`] says where to truncate before
//! appending again. Anything else wrong (header, an earlier record, an index out of range,
//! one chunk with two hashes) is corruption: an error, and the file is sent again.

use std::collections::BTreeMap;

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::error::{Error, Result};
use crate::integrity::ChunkHash;
use crate::le_bytes::{u16_at, u32_at, u64_at};

/// Header length in bytes.
pub const HEADER_LEN: usize = 56;
/// Record length in bytes.
pub const RECORD_LEN: usize = 40;
/// Smallest chunk size a manifest may name.
pub const MIN_CHUNK_BYTES: u64 = 4 * 1024;
/// Largest chunk size a manifest may name.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;
/// Most chunks one file may have (16 Mi: 64 TiB at 4 MiB chunks, 1 PiB at 64 MiB).
pub const MAX_CHUNKS: u64 = 1 << 24;

const MAGIC: &[u8; 4] = b"LHRM";
const VERSION: u16 = 2;

/// What identifies the source version of a file: if any field differs from the first
/// attempt, the chunks already received belong to another file and are sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceIdentity {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime_secs: i64,
    /// Modification time, nanoseconds part (< 10^9).
    pub mtime_nanos: u32,
    /// Fingerprint of the source's identity (device, inode, ctime).
    pub fingerprint: u64,
}

/// Verified chunks of one file, with their hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeManifest {
    source: SourceIdentity,
    chunk_size: u64,
    chunk_count: u32,
    header_check: u64,
    verified: BTreeMap<u32, ChunkHash>,
}

/// A manifest read back from bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The manifest.
    pub manifest: ResumeManifest,
    /// Length of the valid prefix: truncate the manifest file here before appending.
    pub valid_len: usize,
}

/// What to do with a file, given its stored manifest (if any) and its source now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeDecision {
    /// No manifest: send the whole file.
    Fresh,
    /// Same source, same chunk size: send only chunks not yet verified.
    Continue(ResumeManifest),
    /// Send the whole file again, for the reason given.
    StartOver(StartOverReason),
}

/// Why a stored manifest cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOverReason {
    /// The manifest could not be read.
    Corrupt(Error),
    /// The source changed since the first attempt.
    SourceChanged {
        /// Identity recorded at the first attempt.
        recorded: SourceIdentity,
        /// Identity now.
        current: SourceIdentity,
    },
    /// The chunk size changed (e.g. another path chose another size).
    ChunkSizeChanged {
        /// Chunk size recorded.
        recorded: u64,
        /// Chunk size now.
        current: u64,
    },
}

/// Number of chunks of a file of `size` bytes cut in `chunk_size` pieces; an empty file
/// has one (empty) chunk so that its completion is tracked like any other.
pub fn chunk_count(size: u64, chunk_size: u64) -> u64 {
    if size == 0 {
        1
    } else {
        size.div_ceil(chunk_size)
    }
}

impl ResumeManifest {
    /// An empty manifest for `source` cut in chunks of `chunk_size` bytes.
    pub fn new(source: SourceIdentity, chunk_size: u64) -> Result<Self> {
        if !(MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&chunk_size)
            || !chunk_size.is_power_of_two()
        {
            return Err(Error::ManifestField {
                field: "chunk_size",
                value: chunk_size,
                bound: "a power of two in 4 KiB ..= 1 GiB",
            });
        }
        if source.mtime_nanos >= 1_000_000_000 {
            return Err(Error::ManifestField {
                field: "mtime_nanos",
                value: source.mtime_nanos.into(),
                bound: "< 10^9",
            });
        }
        let count = chunk_count(source.size, chunk_size);
        if count > MAX_CHUNKS {
            return Err(Error::ManifestField {
                field: "chunk_count",
                value: count,
                bound: "at most 2^24 chunks per file; use a larger chunk size",
            });
        }
        let mut m = Self {
            source,
            chunk_size,
            chunk_count: count as u32,
            header_check: 0,
            verified: BTreeMap::new(),
        };
        m.header_check = xxh3_64(&m.header_body());
        Ok(m)
    }

    /// The source this manifest belongs to.
    pub fn source(&self) -> &SourceIdentity {
        &self.source
    }

    /// Chunk size in bytes.
    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    /// Number of chunks of the file.
    pub fn chunk_count(&self) -> u32 {
        self.chunk_count
    }

    /// Length in bytes of chunk `index` (the last one may be short; 0 for an empty file).
    pub fn chunk_len(&self, index: u32) -> u64 {
        let start = u64::from(index) * self.chunk_size;
        self.source.size.saturating_sub(start).min(self.chunk_size)
    }

    /// Records chunk `index` as verified with `hash`. Returns the bytes to append to the
    /// manifest file, or `None` if it was already recorded with the same hash.
    pub fn record_verified(
        &mut self,
        index: u32,
        hash: ChunkHash,
    ) -> Result<Option<[u8; RECORD_LEN]>> {
        if index >= self.chunk_count {
            return Err(Error::ManifestField {
                field: "chunk_index",
                value: index.into(),
                bound: "below the file's chunk count",
            });
        }
        match self.verified.get(&index) {
            Some(&h) if h == hash => Ok(None),
            Some(_) => Err(Error::ManifestConflict { index }),
            None => {
                self.verified.insert(index, hash);
                Ok(Some(self.record_bytes(index, hash)))
            }
        }
    }

    /// Whether chunk `index` is verified.
    pub fn is_verified(&self, index: u32) -> bool {
        self.verified.contains_key(&index)
    }

    /// The recorded hash of chunk `index`, if verified.
    pub fn verified_hash(&self, index: u32) -> Option<ChunkHash> {
        self.verified.get(&index).copied()
    }

    /// Verified chunks in index order, with their hashes.
    pub fn verified(&self) -> impl Iterator<Item = (u32, ChunkHash)> + '_ {
        self.verified.iter().map(|(&i, &h)| (i, h))
    }

    /// Chunks not yet verified, in index order.
    pub fn missing(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.chunk_count).filter(|i| !self.verified.contains_key(i))
    }

    /// Verified chunks as `(first, count)` runs in index order: what the receiver tells
    /// the sender it already has (`HaveChunks` on the wire).
    pub fn verified_runs(&self) -> Vec<(u32, u32)> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for &i in self.verified.keys() {
            match runs.last_mut() {
                Some((first, count)) if *first + *count == i => *count += 1,
                _ => runs.push((i, 1)),
            }
        }
        runs
    }

    /// Number of verified chunks.
    pub fn verified_count(&self) -> u32 {
        self.verified.len() as u32
    }

    /// Bytes of the file covered by verified chunks.
    pub fn verified_bytes(&self) -> u64 {
        self.verified.keys().map(|&i| self.chunk_len(i)).sum()
    }

    /// Whether every chunk is verified.
    pub fn is_complete(&self) -> bool {
        self.verified.len() as u64 == u64::from(self.chunk_count)
    }

    /// The 56-byte header, the start of a manifest file.
    pub fn header_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..48].copy_from_slice(&self.header_body());
        out[48..].copy_from_slice(&self.header_check.to_le_bytes());
        out
    }

    /// The whole manifest, compacted: header plus one record per verified chunk.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + RECORD_LEN * self.verified.len());
        out.extend_from_slice(&self.header_bytes());
        for (i, h) in self.verified() {
            out.extend_from_slice(&self.record_bytes(i, h));
        }
        out
    }

    /// Reads a manifest back; see the module docs for what is tolerated.
    pub fn parse(bytes: &[u8]) -> Result<Loaded> {
        if bytes.len() < HEADER_LEN {
            return Err(Error::ManifestTruncated {
                len: bytes.len(),
                need: HEADER_LEN,
            });
        }
        if &bytes[..4] != MAGIC || u16_at(bytes, 4) != VERSION {
            return Err(Error::ManifestFormat {
                found: bytes[..6].to_vec(),
            });
        }
        if xxh3_64(&bytes[..48]) != u64_at(bytes, 48) {
            return Err(Error::ManifestChecksum {
                part: "header",
                offset: 0,
            });
        }
        if u16_at(bytes, 6) != 0 || u32_at(bytes, 28) != 0 {
            return Err(Error::ManifestField {
                field: "reserved",
                value: 1,
                bound: "must be 0",
            });
        }
        let source = SourceIdentity {
            size: u64_at(bytes, 8),
            mtime_secs: u64_at(bytes, 16) as i64,
            mtime_nanos: u32_at(bytes, 24),
            fingerprint: u64_at(bytes, 32),
        };
        let mut manifest = Self::new(source, u64_at(bytes, 40))?;
        let records = &bytes[HEADER_LEN..];
        let full = records.len() / RECORD_LEN;
        let mut valid_len = HEADER_LEN;
        for n in 0..full {
            let rec = &records[n * RECORD_LEN..(n + 1) * RECORD_LEN];
            let offset = HEADER_LEN + n * RECORD_LEN;
            let check = xxh3_64_with_seed(&rec[..36], manifest.header_check) as u32;
            if check != u32_at(rec, 36) {
                if n + 1 == full {
                    break; // a torn last append: dropped
                }
                return Err(Error::ManifestChecksum {
                    part: "record",
                    offset,
                });
            }
            manifest.record_verified(u32_at(rec, 0), rec[4..36].try_into().expect("32 bytes"))?;
            valid_len = offset + RECORD_LEN;
        }
        Ok(Loaded {
            manifest,
            valid_len,
        })
    }

    fn header_body(&self) -> [u8; 48] {
        let mut b = [0u8; 48];
        b[..4].copy_from_slice(MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[8..16].copy_from_slice(&self.source.size.to_le_bytes());
        b[16..24].copy_from_slice(&self.source.mtime_secs.to_le_bytes());
        b[24..28].copy_from_slice(&self.source.mtime_nanos.to_le_bytes());
        b[32..40].copy_from_slice(&self.source.fingerprint.to_le_bytes());
        b[40..48].copy_from_slice(&self.chunk_size.to_le_bytes());
        b
    }

    fn record_bytes(&self, index: u32, hash: ChunkHash) -> [u8; RECORD_LEN] {
        let mut r = [0u8; RECORD_LEN];
        r[..4].copy_from_slice(&index.to_le_bytes());
        r[4..36].copy_from_slice(&hash);
        let check = xxh3_64_with_seed(&r[..36], self.header_check) as u32;
        r[36..].copy_from_slice(&check.to_le_bytes());
        r
    }
}

/// The resume rule. `stored` is the parsed manifest (or why it could not be parsed),
/// `None` when there is none; `current` is the source now, `chunk_size` the size chosen
/// for this attempt. A source that changed since the first attempt is sent again.
pub fn decide_resume(
    stored: Option<Result<ResumeManifest>>,
    current: &SourceIdentity,
    chunk_size: u64,
) -> ResumeDecision {
    match stored {
        None => ResumeDecision::Fresh,
        Some(Err(e)) => ResumeDecision::StartOver(StartOverReason::Corrupt(e)),
        Some(Ok(m)) if m.source != *current => {
            ResumeDecision::StartOver(StartOverReason::SourceChanged {
                recorded: m.source,
                current: *current,
            })
        }
        Some(Ok(m)) if m.chunk_size != chunk_size => {
            ResumeDecision::StartOver(StartOverReason::ChunkSizeChanged {
                recorded: m.chunk_size,
                current: chunk_size,
            })
        }
        Some(Ok(m)) => ResumeDecision::Continue(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hh(n: u64) -> ChunkHash {
        let mut h = [0u8; 32];
        h[..8].copy_from_slice(&n.to_le_bytes());
        h
    }

    fn src() -> SourceIdentity {
        SourceIdentity {
            size: 10 * 1024 * 1024 + 5,
            mtime_secs: 1_700_000_000,
            mtime_nanos: 123_456_789,
            fingerprint: 0xfeed_beef,
        }
    }

    #[test]
    fn append_then_parse() {
        let mut m = ResumeManifest::new(src(), 4 << 20).unwrap();
        assert_eq!(m.chunk_count(), 3);
        assert_eq!(m.chunk_len(2), 2 * 1024 * 1024 + 5);
        let mut file = m.header_bytes().to_vec();
        file.extend(m.record_verified(2, hh(77)).unwrap().unwrap());
        assert_eq!(m.record_verified(2, hh(77)).unwrap(), None);
        assert_eq!(
            m.record_verified(2, hh(78)),
            Err(Error::ManifestConflict { index: 2 })
        );
        file.extend(m.record_verified(0, hh(11)).unwrap().unwrap());
        let loaded = ResumeManifest::parse(&file).unwrap();
        assert_eq!(loaded.valid_len, file.len());
        assert_eq!(loaded.manifest, m);
        assert_eq!(m.missing().collect::<Vec<_>>(), vec![1]);
        assert_eq!(m.verified_runs(), vec![(0, 1), (2, 1)]);
        assert_eq!(m.verified_bytes(), (4 << 20) + 2 * 1024 * 1024 + 5);
        assert!(!m.is_complete());
        m.record_verified(1, hh(5)).unwrap();
        assert!(m.is_complete());
        assert_eq!(m.verified_runs(), vec![(0, 3)]);
        assert!(m.record_verified(3, hh(1)).is_err());
    }

    #[test]
    fn torn_tail_dropped_corrupt_middle_refused() {
        let mut m = ResumeManifest::new(src(), 4 << 20).unwrap();
        let mut file = m.header_bytes().to_vec();
        for i in 0..3 {
            file.extend(m.record_verified(i, hh(u64::from(i) * 3)).unwrap().unwrap());
        }
        // Partial last record.
        let loaded = ResumeManifest::parse(&file[..file.len() - 5]).unwrap();
        assert_eq!(loaded.manifest.verified_count(), 2);
        assert_eq!(loaded.valid_len, HEADER_LEN + 2 * RECORD_LEN);
        // Zeroed last record (extended but not written before a crash).
        let mut zeroed = file.clone();
        let n = zeroed.len();
        zeroed[n - RECORD_LEN..].fill(0);
        assert_eq!(
            ResumeManifest::parse(&zeroed)
                .unwrap()
                .manifest
                .verified_count(),
            2
        );
        // A flipped bit in an earlier record is corruption.
        let mut bad = file.clone();
        bad[HEADER_LEN + 5] ^= 1;
        assert!(matches!(
            ResumeManifest::parse(&bad),
            Err(Error::ManifestChecksum { part: "record", .. })
        ));
        // A flipped bit in the header too.
        let mut bad = file.clone();
        bad[10] ^= 1;
        assert!(matches!(
            ResumeManifest::parse(&bad),
            Err(Error::ManifestChecksum { part: "header", .. })
        ));
        assert!(matches!(
            ResumeManifest::parse(&file[..20]),
            Err(Error::ManifestTruncated { .. })
        ));
    }

    #[test]
    fn records_of_another_source_do_not_validate() {
        let mut old = ResumeManifest::new(src(), 4 << 20).unwrap();
        let rec = old.record_verified(0, hh(1)).unwrap().unwrap();
        let newer = ResumeManifest::new(
            SourceIdentity {
                mtime_secs: 1,
                ..src()
            },
            4 << 20,
        )
        .unwrap();
        let mut file = newer.header_bytes().to_vec();
        file.extend(rec);
        file.extend(rec); // not last: must be refused
        assert!(ResumeManifest::parse(&file).is_err());
    }

    #[test]
    fn resume_rule() {
        let m = ResumeManifest::new(src(), 4 << 20).unwrap();
        assert_eq!(decide_resume(None, &src(), 4 << 20), ResumeDecision::Fresh);
        assert_eq!(
            decide_resume(Some(Ok(m.clone())), &src(), 4 << 20),
            ResumeDecision::Continue(m.clone())
        );
        let changed = SourceIdentity { size: 1, ..src() };
        assert!(matches!(
            decide_resume(Some(Ok(m.clone())), &changed, 4 << 20),
            ResumeDecision::StartOver(StartOverReason::SourceChanged { .. })
        ));
        let touched = SourceIdentity {
            fingerprint: 1,
            ..src()
        };
        assert!(matches!(
            decide_resume(Some(Ok(m.clone())), &touched, 4 << 20),
            ResumeDecision::StartOver(StartOverReason::SourceChanged { .. })
        ));
        assert!(matches!(
            decide_resume(Some(Ok(m)), &src(), 8 << 20),
            ResumeDecision::StartOver(StartOverReason::ChunkSizeChanged { .. })
        ));
        assert!(matches!(
            decide_resume(
                Some(ResumeManifest::parse(b"junk").map(|l| l.manifest)),
                &src(),
                4 << 20
            ),
            ResumeDecision::StartOver(StartOverReason::Corrupt(_))
        ));
    }

    #[test]
    fn bounds() {
        assert!(ResumeManifest::new(src(), 100).is_err());
        assert!(ResumeManifest::new(
            SourceIdentity {
                size: u64::MAX,
                ..src()
            },
            4096
        )
        .is_err());
        assert!(ResumeManifest::new(
            SourceIdentity {
                mtime_nanos: 1_000_000_000,
                ..src()
            },
            4096
        )
        .is_err());
        let empty = ResumeManifest::new(SourceIdentity { size: 0, ..src() }, 4096).unwrap();
        assert_eq!(empty.chunk_count(), 1);
        assert_eq!(empty.chunk_len(0), 0);
    }
}
