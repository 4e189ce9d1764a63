//! Property tests of cp placement: whatever `place_entry` accepts obeys the peer-path
//! bounds, keeps the entry's names below the target, and has work files beside it that
//! are valid, distinct from it and marked as work names.

use longhaul_transfer::place::is_work_name;
use longhaul_transfer::{
    manifest_name, parse_peer_path, part_name, place_entry, Error, SafeRelPath,
};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(b'a'..=b'z', 1..12),
        proptest::collection::vec(1u8..=255, 200..=255),
    ]
    .prop_map(|v| {
        v.into_iter()
            .map(|b| if b == b'/' { b'_' } else { b })
            .collect::<Vec<u8>>()
    })
    .prop_filter("plain name", |n| {
        n.as_slice() != b"." && n.as_slice() != b".."
    })
}

fn rel_path(max_depth: usize) -> impl Strategy<Value = SafeRelPath> {
    proptest::collection::vec(name(), 1..max_depth).prop_filter_map("within bounds", |names| {
        parse_peer_path(&names.join(&b'/')).ok()
    })
}

proptest! {
    #[test]
    fn placed_paths_are_safe(
        target in proptest::option::of(rel_path(10)),
        entry in rel_path(20),
        dir in any::<bool>(),
        many in any::<bool>(),
    ) {
        match place_entry(target.as_ref(), dir, many, &entry) {
            Ok(placed) => {
                prop_assert!(parse_peer_path(placed.as_bytes()).is_ok());
                let tail: Vec<&[u8]> = match (&target, dir) {
                    (Some(_), false) => entry.components().skip(1).collect(),
                    _ => entry.components().collect(),
                };
                let got: Vec<&[u8]> = placed.components().collect();
                prop_assert!(got.ends_with(&tail));
                if let Some(t) = &target {
                    prop_assert!(placed.as_bytes().starts_with(t.as_bytes()));
                }
                for work in [part_name(&placed).unwrap(), manifest_name(&placed).unwrap()] {
                    prop_assert_eq!(work.parent(), placed.parent());
                    prop_assert!(is_work_name(work.file_name()));
                    prop_assert_ne!(&work, &placed);
                }
                prop_assert_ne!(part_name(&placed).unwrap(), manifest_name(&placed).unwrap());
            }
            // Without a target only a path at the very bound can fail (no room for the
            // work files); with one, a non-directory for several sources or the bounds.
            Err(e) => prop_assert!(
                target.is_some() || matches!(e, Error::NoRoomForWorkFile { .. }),
                "{:?}", e
            ),
        }
    }
}
