//! Fuzzes the bench/session frame decoder (`decode_frame`) with the shared frame checks
//! (self-delimiting, decode -> encode -> decode round trip), then feeds what decoded to
//! both session state machines, which must not panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fuzz::{check_frames, BENCH_FRAMES};
use longhaul_proto::{ChannelBinding, ClientSession, ServerSession, Token};

fuzz_target!(|data: &[u8]| {
    let token =
        Token::new(b"22028884e920bde9a9867497f16bee30").expect("static token is long enough");
    let binding = ChannelBinding {
        cert: [3; 32],
        exporter: [4; 32],
    };
    let mut server = ServerSession::new(token.clone(), [1; 32], binding);
    let mut client = ClientSession::new(token.clone(), [2; 32], binding);
    // Past the server's (valid) hello on odd inputs: the fuzzer then reaches the states
    // after it, where requests go before the welcome.
    if data.len() % 2 == 1 {
        let _ = client.handle(ServerSession::hello(&token, [1; 32], &binding.cert));
    }
    for msg in check_frames(&BENCH_FRAMES, data) {
        let _ = server.handle(msg.clone());
        let _ = client.handle(msg);
        while server.poll_transmit().is_some() {}
        while client.poll_transmit().is_some() {}
    }
});
