//! Property tests of peer-path validation: arbitrary bytes never panic, whatever is
//! accepted is relative, bounded and free of `..`/`.`/empty/NUL components, and valid
//! paths built from safe names are always accepted unchanged.

use longhaul_transfer::path::MAX_DEPTH;
use longhaul_transfer::{parse_peer_path, MAX_NAME_BYTES, MAX_PATH_BYTES};
use proptest::prelude::*;
use std::path::Component;

fn safe_name() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(1u8..=255, 1..40)
        .prop_map(|v| v.into_iter().filter(|&b| b != b'/').collect::<Vec<u8>>())
        .prop_filter("not empty, . or ..", |n| {
            !n.is_empty() && n.as_slice() != b"." && n.as_slice() != b".."
        })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_escape(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(p) = parse_peer_path(&bytes) {
            prop_assert!(p.as_bytes().len() <= MAX_PATH_BYTES);
            prop_assert!(p.depth() <= MAX_DEPTH);
            prop_assert!(!p.as_bytes().contains(&0));
            for c in p.components() {
                prop_assert!(!c.is_empty() && c != b"." && c != b"..");
                prop_assert!(c.len() <= MAX_NAME_BYTES);
            }
            for c in p.to_path_buf().components() {
                prop_assert!(matches!(c, Component::Normal(_)), "{:?}", c);
            }
        }
    }

    #[test]
    fn dotted_paths_never_accepted(
        pre in proptest::collection::vec(safe_name(), 0..4),
        post in proptest::collection::vec(safe_name(), 0..4),
        bad in prop::sample::select(vec![&b".."[..], b".", b""]),
    ) {
        let mut parts = pre.clone();
        parts.push(bad.to_vec());
        parts.extend(post);
        let joined = parts.join(&b'/');
        prop_assert!(parse_peer_path(&joined).is_err());
        let mut abs = b"/".to_vec();
        abs.extend(pre.join(&b'/'));
        prop_assert!(parse_peer_path(&abs).is_err());
    }

    #[test]
    fn safe_paths_accepted_unchanged(parts in proptest::collection::vec(safe_name(), 1..20)) {
        let joined = parts.join(&b'/');
        let p = parse_peer_path(&joined).unwrap();
        prop_assert_eq!(p.as_bytes(), &joined[..]);
        let back: Vec<Vec<u8>> = p.components().map(<[u8]>::to_vec).collect();
        prop_assert_eq!(back, parts);
    }
}
