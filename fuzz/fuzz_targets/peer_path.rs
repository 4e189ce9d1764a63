//! Fuzzes `parse_peer_path`, the check of every path a peer names (file-list entries, a
//! transfer's path): what it accepts is the input unchanged, parses again to itself, and
//! is plain names only; placing it (`place_entry`) under a target taken from the input
//! leaves room for the receiver's work files, as its docs promise. A transfer request's
//! path (`RequestedPath::from_wire`) has one canonical form, which reads the same typed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_transfer::path::MAX_DEPTH;
use longhaul_transfer::{
    manifest_name, parse_peer_path, part_name, place_entry, RequestedPath, MAX_PATH_BYTES,
};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, data)) = data.split_first() else {
        return;
    };
    if let Ok(p) = parse_peer_path(data) {
        assert_eq!(p.as_bytes(), data, "parse_peer_path changed the path");
        assert_eq!(parse_peer_path(p.as_bytes()).as_ref(), Ok(&p));
        assert!(p.as_bytes().len() <= MAX_PATH_BYTES && p.depth() <= MAX_DEPTH);
        for c in p.components() {
            assert!(!c.is_empty() && c != b"." && c != b"..", "component {c:?}");
            assert!(!c.contains(&0) && !c.contains(&b'/'));
        }
        if let Some(parent) = p.parent() {
            let rejoined = [parent.as_bytes(), p.file_name()].join(&b'/');
            assert_eq!(rejoined, data);
        }
    }
    if let Ok(r) = RequestedPath::from_wire(data) {
        assert_eq!(r.to_wire(), data, "{r:?} has two wire forms");
        assert_eq!(RequestedPath::from_typed(data).as_ref(), Ok(&r));
    }
    // `TARGET\nENTRY`: where an entry lands, with the work files beside it.
    let mut halves = data.splitn(2, |&b| b == b'\n');
    let (target, entry) = (halves.next().unwrap_or_default(), halves.next());
    let Some(entry) = entry.and_then(|e| parse_peer_path(e).ok()) else {
        return;
    };
    let target = parse_peer_path(target).ok();
    if let Ok(placed) = place_entry(target.as_ref(), flags & 1 != 0, flags & 2 != 0, &entry) {
        assert!(part_name(&placed).is_ok() && manifest_name(&placed).is_ok());
        assert_eq!(parse_peer_path(placed.as_bytes()).as_ref(), Ok(&placed));
    }
});
