//! Fuzzes a control connection as the engine reads it (`FramedConn::recv_any`): each
//! frame goes to the transfer or the bench decoder by its type byte
//! (`is_transfer_frame`), so a stream mixing both families is checked frame by frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fuzz::{check_frames, BENCH_FRAMES, TRANSFER_FRAMES};
use longhaul_proto::transfer::is_transfer_frame;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    loop {
        let used = match is_transfer_frame(rest) {
            Some(true) => match longhaul_proto::transfer::decode_transfer_frame(rest) {
                Ok(Some((_, used))) => {
                    check_frames(&TRANSFER_FRAMES, &rest[..used]);
                    used
                }
                _ => break,
            },
            _ => match longhaul_proto::decode_frame(rest) {
                Ok(Some((_, used))) => {
                    check_frames(&BENCH_FRAMES, &rest[..used]);
                    used
                }
                _ => break,
            },
        };
        rest = &rest[used..];
    }
});
