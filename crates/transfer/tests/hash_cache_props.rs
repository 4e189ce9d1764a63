//! Property tests of the chunk-hash cache record: encode/decode round-trips; any bit
//! flip, truncation, extension or arbitrary input decodes to `None`, never a panic.

use longhaul_transfer::hash_cache::{decode, encode};
use longhaul_transfer::manifest::chunk_count;
use longhaul_transfer::{CachedHashes, FileIdentity};
use proptest::prelude::*;

fn arb_identity() -> impl Strategy<Value = FileIdentity> {
    (
        any::<u64>(),
        any::<u64>(),
        0u64..1 << 24,
        any::<i64>(),
        0u32..1_000_000_000,
        any::<i64>(),
        0u32..1_000_000_000,
    )
        .prop_map(
            |(dev, ino, size, mtime_secs, mtime_nanos, ctime_secs, ctime_nanos)| FileIdentity {
                dev,
                ino,
                size,
                mtime_secs,
                mtime_nanos,
                ctime_secs,
                ctime_nanos,
            },
        )
}

/// A record of an identity at a chunk size of 2^12..=2^16 (sizes up to 16 MiB: at most
/// 4 Ki hashes, enough to cross every boundary while staying quick).
fn arb_record() -> impl Strategy<Value = (CachedHashes, u64)> {
    (arb_identity(), 12u32..=16, any::<u64>()).prop_map(|(id, shift, seed)| {
        let chunk = 1u64 << shift;
        let n = chunk_count(id.size, chunk) as usize;
        let hashes = (0..n)
            .map(|i| *blake3::hash(&(seed ^ i as u64).to_le_bytes()).as_bytes())
            .collect();
        (CachedHashes::new(id, chunk, hashes).unwrap(), chunk)
    })
}

proptest! {
    #[test]
    fn round_trip((rec, chunk) in arb_record()) {
        let bytes = encode(&rec);
        prop_assert_eq!(decode(&bytes, rec.identity(), chunk), Some(rec.hashes().to_vec()));
    }

    #[test]
    fn any_bit_flip_misses((rec, chunk) in arb_record(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = encode(&rec);
        let i = at.index(bytes.len());
        bytes[i] ^= 1 << bit;
        prop_assert_eq!(decode(&bytes, rec.identity(), chunk), None);
    }

    #[test]
    fn any_truncation_or_extension_misses((rec, chunk) in arb_record(), cut in any::<prop::sample::Index>(), extra in prop::collection::vec(any::<u8>(), 1..64)) {
        let bytes = encode(&rec);
        let n = cut.index(bytes.len());
        prop_assert_eq!(decode(&bytes[..n], rec.identity(), chunk), None);
        let mut longer = bytes.clone();
        longer.extend(extra);
        prop_assert_eq!(decode(&longer, rec.identity(), chunk), None);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096), id in arb_identity(), shift in 0u32..40) {
        // Almost always None; what matters is that it returns.
        let _ = decode(&bytes, &id, 1u64 << shift);
    }
}
