//! The fixed 80-byte header before each chunk's bytes on a data stream: a check so a
//! stream that lost sync is caught at the next header, and a MAC under the session's
//! [`ChunkKey`] over every field, the chunk's BLAKE3 hash included — so with or without
//! TLS on the data stream, a chunk altered on the way is never accepted.

use crate::auth::{ChunkKey, CHUNK_MAC_LEN};
use crate::error::ProtoError;
use crate::wire::invalid;
use fnv_check::check32;

use super::{EntryId, MAX_CHUNK_BYTES, MAX_FILE_ID};

/// Flag bit of [`ChunkHeader::flags`]: the chunk is all zeros and no bytes follow.
pub const CHUNK_FLAG_HOLE: u32 = 1;
/// Flag bit of [`ChunkHeader::flags`] (sync): the chunk's hash equals the one the receiver
/// named for the same chunk of its own copy (`OldChunks`); no bytes follow, the receiver
/// takes them from that copy.
pub const CHUNK_FLAG_SAME: u32 = 2;
/// Flag bit of [`ChunkHeader::flags`], alone: a warm-up run ([`crate::features::WARMUP`]):
/// `len` bytes follow that belong to no file (file, index and offset 0, hash zeros); the
/// receiver reads and drops them. At most one per stream, before its first chunk, and at
/// most [`MAX_WARMUP_BYTES`].
pub const CHUNK_FLAG_WARMUP: u32 = 4;
/// Flag bit of [`ChunkHeader::flags`], alone ([`crate::features::HASH_AFTER`]): `len`
/// bytes follow, then a [`CHUNK_FLAG_TRAILER`] header that carries the chunk's hash; this
/// header's hash is zeros.
pub const CHUNK_FLAG_HASH_AFTER: u32 = 8;
/// Flag bit of [`ChunkHeader::flags`], alone: the header after a [`CHUNK_FLAG_HASH_AFTER`]
/// chunk's bytes, naming the same file, index, offset and length, with the chunk's hash
/// (under the same MAC as any header); no bytes follow it.
pub const CHUNK_FLAG_TRAILER: u32 = 16;
/// The longest warm-up run: a stream's initial window (10 segments of a 9000-byte MTU
/// are 90 KB) with room for a route's larger `initcwnd`.
pub const MAX_WARMUP_BYTES: u32 = 1 << 20;

/// Precedes each chunk's raw bytes on a data stream. Fixed 80 bytes, big-endian: the
/// fields (60 bytes), a 16-byte MAC of them under the session's chunk key, and a check
/// of its own so a desynchronised stream is caught at the next header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// The file's entry in the list.
    pub file: EntryId,
    /// Chunk index.
    pub index: u32,
    /// [`CHUNK_FLAG_HOLE`], [`CHUNK_FLAG_SAME`] or 0.
    pub flags: u32,
    /// Offset of the chunk in the file.
    pub offset: u64,
    /// Length of the chunk in bytes (the payload length unless it is a hole).
    pub len: u32,
    /// The chunk's hash: the BLAKE3 chaining value of its bytes as a subtree of the
    /// file (the file's BLAKE3 for a file of one chunk); see `longhaul_transfer::integrity`.
    pub hash: [u8; 32],
}

impl ChunkHeader {
    /// Encoded length.
    pub const LEN: usize = 80;
    const MAGIC: [u8; 4] = *b"LHCK";

    /// The header of a warm-up run of `len` bytes ([`CHUNK_FLAG_WARMUP`]).
    pub fn warmup(len: u32) -> Self {
        Self {
            file: EntryId(0),
            index: 0,
            flags: CHUNK_FLAG_WARMUP,
            offset: 0,
            len: len.min(MAX_WARMUP_BYTES),
            hash: [0; 32],
        }
    }

    /// Whether this is a warm-up run's header, not a chunk's.
    pub fn is_warmup(&self) -> bool {
        self.flags == CHUNK_FLAG_WARMUP
    }

    /// Whether the chunk's hash comes after its bytes, in a trailer
    /// ([`CHUNK_FLAG_HASH_AFTER`]).
    pub fn hash_after(&self) -> bool {
        self.flags == CHUNK_FLAG_HASH_AFTER
    }

    /// The trailer of this [`CHUNK_FLAG_HASH_AFTER`] chunk, carrying its `hash`.
    pub fn trailer(&self, hash: [u8; 32]) -> Self {
        Self {
            flags: CHUNK_FLAG_TRAILER,
            hash,
            ..*self
        }
    }

    /// The chunk as if its hash had come first: this header with the `trailer`'s hash,
    /// when `trailer` is this chunk's ([`CHUNK_FLAG_TRAILER`], the same file, index,
    /// offset and length); `None` otherwise.
    pub fn with_trailer(&self, trailer: &Self) -> Option<Self> {
        let same = *trailer
            == Self {
                flags: CHUNK_FLAG_TRAILER,
                hash: trailer.hash,
                ..*self
            };
        (self.hash_after() && same).then_some(Self {
            flags: 0,
            hash: trailer.hash,
            ..*self
        })
    }

    /// Bytes of payload that follow this header.
    pub fn payload_len(&self) -> u64 {
        if self.flags & (CHUNK_FLAG_HOLE | CHUNK_FLAG_SAME | CHUNK_FLAG_TRAILER) != 0 {
            0
        } else {
            u64::from(self.len)
        }
    }

    /// The 80 header bytes, with the MAC under `key`.
    pub fn encode(&self, key: &ChunkKey) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&Self::MAGIC);
        b[4..8].copy_from_slice(&self.file.0.to_be_bytes());
        b[8..12].copy_from_slice(&self.index.to_be_bytes());
        b[12..16].copy_from_slice(&self.flags.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.len.to_be_bytes());
        b[28..60].copy_from_slice(&self.hash);
        let mac = key.mac(&b[..60]);
        b[60..60 + CHUNK_MAC_LEN].copy_from_slice(&mac);
        let c = check32(&b[..76]);
        b[76..].copy_from_slice(&c.to_be_bytes());
        b
    }

    /// Parses and checks 80 header bytes: the check, then the MAC under `key`, then
    /// the bounds.
    pub fn decode(b: &[u8; Self::LEN], key: &ChunkKey) -> Result<Self, ProtoError> {
        if b[..4] != Self::MAGIC {
            return Err(invalid(
                "chunk header",
                format!("bad magic {:02x?}: the data stream lost sync", &b[..4]),
            ));
        }
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let be64 = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(a)
        };
        if be32(76) != check32(&b[..76]) {
            return Err(invalid(
                "chunk header",
                "check mismatch: the data stream is corrupt".into(),
            ));
        }
        if !key.verify(&b[..60], &b[60..76]) {
            return Err(invalid(
                "chunk header",
                "its MAC does not match the session's key: the chunk was altered in transit \
                 (or comes from another session), so it is refused"
                    .into(),
            ));
        }
        let h = Self {
            file: EntryId(be32(4)),
            index: be32(8),
            flags: be32(12),
            offset: be64(16),
            len: be32(24),
            hash: b[28..60].try_into().expect("32 bytes"),
        };
        if h.flags & CHUNK_FLAG_WARMUP != 0 {
            if h != Self::warmup(h.len) || h.len > MAX_WARMUP_BYTES {
                return Err(invalid(
                    "chunk header",
                    format!("a warm-up run out of bounds: {h:?}"),
                ));
            }
            return Ok(h);
        }
        // Hash-after and trailer stand alone; hole and same do not go together.
        let alone = [CHUNK_FLAG_HASH_AFTER, CHUNK_FLAG_TRAILER];
        let flags_ok = alone.contains(&h.flags)
            || (h.flags & !(CHUNK_FLAG_HOLE | CHUNK_FLAG_SAME) == 0
                && h.flags != CHUNK_FLAG_HOLE | CHUNK_FLAG_SAME);
        if (h.flags == CHUNK_FLAG_HASH_AFTER && h.hash != [0; 32])
            || h.file.0 > MAX_FILE_ID
            || !flags_ok
            || u64::from(h.len) > MAX_CHUNK_BYTES
        {
            return Err(invalid("chunk header", format!("out of bounds: {h:?}")));
        }
        if h.offset.checked_add(u64::from(h.len)).is_none() {
            return Err(invalid(
                "chunk header",
                format!("offset {} + len {} overflows", h.offset, h.len),
            ));
        }
        Ok(h)
    }
}

/// A small checksum for headers (64-bit FNV-1a folded to 32 bits); not cryptographic: it catches a
/// stream that lost sync (told apart from tampering, which the MAC catches).
mod fnv_check {
    pub fn check32(b: &[u8]) -> u32 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &x in b {
            h ^= u64::from(x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        (h ^ (h >> 32)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warmup_run_round_trips_and_only_its_own_shape_decodes() {
        let key = ChunkKey::from_bytes([7; 32]);
        let w = ChunkHeader::warmup(44_180);
        assert!(w.is_warmup());
        assert_eq!(w.payload_len(), 44_180);
        assert_eq!(ChunkHeader::decode(&w.encode(&key), &key).unwrap(), w);
        // The longest run is clamped where it is made.
        assert_eq!(ChunkHeader::warmup(u32::MAX).len, MAX_WARMUP_BYTES);
        // A warm-up flag on anything else than a warm-up's shape is refused (a MAC'd
        // header from a broken or hostile sender): with a file, an offset, a hash, another
        // flag, or more than the bound.
        let odd = [
            ChunkHeader {
                file: EntryId(3),
                ..w
            },
            ChunkHeader { offset: 9, ..w },
            ChunkHeader { hash: [1; 32], ..w },
            ChunkHeader {
                flags: CHUNK_FLAG_WARMUP | CHUNK_FLAG_HOLE,
                ..w
            },
            ChunkHeader {
                len: MAX_WARMUP_BYTES + 1,
                ..w
            },
        ];
        for h in odd {
            let e = ChunkHeader::decode(&h.encode(&key), &key).unwrap_err();
            assert!(e.to_string().contains("warm-up"), "{h:?}: {e}");
        }
    }

    #[test]
    fn a_hash_after_chunk_takes_only_its_own_trailer() {
        let key = ChunkKey::from_bytes([9; 32]);
        let h = ChunkHeader {
            file: EntryId(4),
            index: 2,
            flags: CHUNK_FLAG_HASH_AFTER,
            offset: 8 << 20,
            len: 4 << 20,
            hash: [0; 32],
        };
        assert!(h.hash_after());
        assert_eq!(h.payload_len(), 4 << 20);
        let t = h.trailer([5; 32]);
        assert_eq!(t.payload_len(), 0);
        for x in [h, t] {
            assert_eq!(ChunkHeader::decode(&x.encode(&key), &key).unwrap(), x);
        }
        // The chunk as if its hash had come first.
        let whole = h.with_trailer(&t).unwrap();
        assert_eq!((whole.flags, whole.hash), (0, [5; 32]));
        // Another chunk's trailer, or a header that is none, is no answer.
        let others = [
            ChunkHeader { index: 3, ..t },
            ChunkHeader { offset: 0, ..t },
            ChunkHeader { len: 1, ..t },
            ChunkHeader {
                file: EntryId(5),
                ..t
            },
            ChunkHeader { flags: 0, ..t },
        ];
        for o in others {
            assert_eq!(h.with_trailer(&o), None, "{o:?}");
        }
        assert_eq!(ChunkHeader { flags: 0, ..h }.with_trailer(&t), None);
        // Hash-after with a hash, or with another flag, does not decode.
        let odd = [
            ChunkHeader { hash: [1; 32], ..h },
            ChunkHeader {
                flags: CHUNK_FLAG_HASH_AFTER | CHUNK_FLAG_HOLE,
                ..h
            },
            ChunkHeader {
                flags: CHUNK_FLAG_TRAILER | CHUNK_FLAG_SAME,
                ..t
            },
        ];
        for o in odd {
            assert!(ChunkHeader::decode(&o.encode(&key), &key).is_err(), "{o:?}");
        }
    }
}
