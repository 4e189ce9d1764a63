//! Fuzzes the file-transfer frame decoder (`decode_transfer_frame`) with the shared frame
//! checks: self-delimiting, and decode -> encode -> decode gives the same message and the
//! same bytes (the codec is canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fuzz::{check_frames, TRANSFER_FRAMES};

fuzz_target!(|data: &[u8]| {
    check_frames(&TRANSFER_FRAMES, data);
});
