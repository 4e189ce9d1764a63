//! Fuzz the emulator's super-packet analysis and splitting with arbitrary TUN reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_linkem::gso::{cut_run, Layout};

fuzz_target!(|data: &[u8]| {
    let (sel, pkt) = data.split_at(data.len().min(2));
    let layout = Layout::of(pkt);
    assert!(layout.segments >= 1);
    let first = u32::from(*sel.first().unwrap_or(&0)) % (layout.segments + 1);
    let count = u32::from(*sel.get(1).unwrap_or(&1)) % (layout.segments + 1);
    let mut out = Vec::new();
    if cut_run(pkt, &layout, first, count, &mut out) {
        // A cut run is itself a well-formed packet of `count` segments.
        assert_eq!(Layout::of(&out).segments, count);
    }
});
