//! Property tests of the resume manifest: encode/parse round-trips, appended records
//! parse back, truncation loses at most the torn tail, and arbitrary or corrupted bytes
//! never panic nor invent a verified chunk.

use longhaul_transfer::manifest::{HEADER_LEN, RECORD_LEN};
use longhaul_transfer::{ResumeManifest, SourceIdentity};
use proptest::prelude::*;

fn arb_source() -> impl Strategy<Value = SourceIdentity> {
    (
        0u64..1 << 40,
        any::<i64>(),
        0u32..1_000_000_000,
        any::<u64>(),
    )
        .prop_map(
            |(size, mtime_secs, mtime_nanos, fingerprint)| SourceIdentity {
                size,
                mtime_secs,
                mtime_nanos,
                fingerprint,
            },
        )
}

fn build(src: SourceIdentity, picks: &[(u32, u64)]) -> (ResumeManifest, Vec<u8>) {
    let chunk = 64u64 << 20;
    let mut m = ResumeManifest::new(src, chunk).unwrap();
    let mut file = m.header_bytes().to_vec();
    let n = m.chunk_count();
    for &(i, h) in picks {
        let i = i % n;
        let mut hash = [0u8; 32];
        hash[..8].copy_from_slice(&h.to_le_bytes());
        let h = m.verified_hash(i).unwrap_or(hash);
        if let Some(rec) = m.record_verified(i, h).unwrap() {
            file.extend(rec);
        }
    }
    (m, file)
}

proptest! {
    #[test]
    fn round_trip(src in arb_source(), picks in proptest::collection::vec((any::<u32>(), any::<u64>()), 0..50)) {
        let (m, appended) = build(src, &picks);
        let loaded = ResumeManifest::parse(&appended).unwrap();
        prop_assert_eq!(&loaded.manifest, &m);
        prop_assert_eq!(loaded.valid_len, appended.len());
        let compact = ResumeManifest::parse(&m.encode()).unwrap();
        prop_assert_eq!(&compact.manifest, &m);
        // The runs cover exactly the verified chunks, in order, without touching.
        let mut from_runs = Vec::new();
        let mut prev_end: Option<u32> = None;
        for (first, count) in m.verified_runs() {
            prop_assert!(count > 0);
            if let Some(e) = prev_end {
                prop_assert!(first > e);
            }
            prev_end = Some(first + count);
            from_runs.extend(first..first + count);
        }
        prop_assert_eq!(from_runs, m.verified().map(|(i, _)| i).collect::<Vec<_>>());
    }

    #[test]
    fn truncation_loses_only_the_tail(src in arb_source(), picks in proptest::collection::vec((any::<u32>(), any::<u64>()), 1..30), cut in any::<prop::sample::Index>()) {
        let (m, file) = build(src, &picks);
        let len = cut.index(file.len() + 1);
        match ResumeManifest::parse(&file[..len]) {
            Err(_) => prop_assert!(len < HEADER_LEN),
            Ok(l) => {
                let whole_records = (len - HEADER_LEN) / RECORD_LEN;
                prop_assert_eq!(l.valid_len, HEADER_LEN + whole_records * RECORD_LEN);
                prop_assert_eq!(l.manifest.verified_count() as usize, whole_records);
                for (i, h) in l.manifest.verified() {
                    prop_assert_eq!(m.verified_hash(i), Some(h));
                }
            }
        }
    }

    #[test]
    fn corruption_never_invents_chunks(src in arb_source(), picks in proptest::collection::vec((any::<u32>(), any::<u64>()), 1..30), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let (m, mut file) = build(src, &picks);
        let at = at.index(file.len());
        file[at] ^= 1 << bit;
        if let Ok(l) = ResumeManifest::parse(&file) {
            prop_assert_eq!(l.manifest.source(), m.source());
            for (i, h) in l.manifest.verified() {
                prop_assert_eq!(m.verified_hash(i), Some(h));
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = ResumeManifest::parse(&bytes);
    }

    #[test]
    fn arbitrary_records_after_valid_header(src in arb_source(), tail in proptest::collection::vec(any::<u8>(), 0..300)) {
        let m = ResumeManifest::new(src, 4 << 20).unwrap();
        let mut file = m.header_bytes().to_vec();
        file.extend(tail);
        if let Ok(l) = ResumeManifest::parse(&file) {
            prop_assert!(l.valid_len <= file.len());
            prop_assert!(l.manifest.verified_count() <= l.manifest.chunk_count());
        }
    }
}
