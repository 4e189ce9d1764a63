//! Property test of zero-block detection: writing only the data ranges over zeros gives
//! back the chunk, the ranges are ordered, disjoint, block-aligned and never all zero.

use longhaul_transfer::sparse::data_ranges;
use proptest::prelude::*;

fn arb_chunk() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop_oneof![3 => Just(0u8), 1 => any::<u8>()], 0..3000)
        .prop_flat_map(|v| {
            let n = v.len();
            (Just(v), 0..=n, 0..=n)
        })
        .prop_map(|(mut v, a, b)| {
            // Long zero runs, as in real sparse files.
            let (a, b) = (a.min(b), a.max(b));
            v[a..b].fill(0);
            v
        })
}

proptest! {
    #[test]
    fn data_ranges_reconstruct(chunk in arb_chunk(), block in 1usize..300) {
        let ranges = data_ranges(&chunk, block);
        let mut rebuilt = vec![0u8; chunk.len()];
        let mut prev_end = None;
        for r in &ranges {
            prop_assert!(r.start < r.end && r.end <= chunk.len());
            prop_assert_eq!(r.start % block, 0);
            if let Some(e) = prev_end {
                prop_assert!(r.start > e, "ranges must be disjoint and merged");
            }
            prev_end = Some(r.end);
            prop_assert!(chunk[r.clone()].iter().any(|&x| x != 0));
            rebuilt[r.clone()].copy_from_slice(&chunk[r.clone()]);
        }
        prop_assert_eq!(rebuilt, chunk);
    }
}

proptest! {
    #[test]
    fn chunk_in_hole_matches_brute_force(
        cuts in proptest::collection::btree_set(0u64..500, 0..12),
        a in 0u64..520,
        len in 0u64..100,
    ) {
        // Sorted disjoint segments from pairs of cut points.
        let cuts: Vec<u64> = cuts.into_iter().collect();
        let segs: Vec<std::ops::Range<u64>> = cuts.chunks(2).filter(|p| p.len() == 2).map(|p| p[0]..p[1]).collect();
        let chunk = a..a + len;
        let brute = len > 0 && !(chunk.start..chunk.end).any(|x| segs.iter().any(|s| s.contains(&x)));
        prop_assert_eq!(longhaul_transfer::sparse::chunk_in_hole(&segs, chunk), brute);
    }
}
