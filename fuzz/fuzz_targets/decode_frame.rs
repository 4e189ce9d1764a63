//! Fuzzes the bench/session frame decoder (`decode_frame`) with the shared frame checks
//! (self-delimiting, decode -> encode -> decode round trip), then feeds what decoded to
//! both session state machines, which must not panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fuzz::{check_frames, BENCH_FRAMES};
use longhaul_proto::{ChannelBinding, ClientSession, Keyring, ServerSession, Token};

fuzz_target!(|data: &[u8]| {
    let token =
        Token::new(b"22028884e920bde9a9867497f16bee30").expect("static token is long enough");
    let binding = ChannelBinding {
        cert: [3; 32],
        exporter: [4; 32],
    };
    // The server holds two tokens, the client the second: its hello is followed by the
    // other proof (a ServerProofs), so both hello paths are reachable.
    let first =
        Token::new(b"9f1c0d2e7a6b5843c1d0e9f8a7b6c5d4").expect("static token is long enough");
    let keyring = Keyring::new(vec![first, token.clone()]).expect("two tokens");
    let mut server = ServerSession::new(keyring.clone(), [1; 32], binding);
    let mut client = ClientSession::new(token, [2; 32], binding);
    // Past the server's (valid) hello and proofs on odd inputs: the fuzzer then reaches
    // the states after it, where requests go before the welcome.
    if data.len() % 2 == 1 {
        for m in ServerSession::hello(&keyring, [1; 32], &binding.cert) {
            let _ = client.handle(m);
        }
    }
    for msg in check_frames(&BENCH_FRAMES, data) {
        let _ = server.handle(msg.clone());
        let _ = client.handle(msg);
        while server.poll_transmit().is_some() {}
        while client.poll_transmit().is_some() {}
    }
});
