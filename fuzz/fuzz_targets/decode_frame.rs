//! Fuzzes the frame decoder and both session state machines with arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::{decode_frame, ClientSession, ServerSession, Token};

fuzz_target!(|data: &[u8]| {
    let token = Token::new(b"fuzzing-token-0123456").expect("static token is long enough");
    let mut server = ServerSession::new(token.clone(), [1; 32], 1);
    let mut client = ClientSession::new(token, [2; 32]);
    let mut rest = data;
    while let Ok(Some((msg, used))) = decode_frame(rest) {
        assert!(used <= rest.len());
        rest = &rest[used..];
        let _ = server.handle(msg.clone());
        let _ = client.handle(msg);
        while server.poll_transmit().is_some() {}
        while client.poll_transmit().is_some() {}
    }
});
