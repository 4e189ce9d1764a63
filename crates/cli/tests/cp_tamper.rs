//! An active attacker on the path: a relay between `longhaul cp` and `longhaul serve`
//! (real TCP on loopback, every connection through it) flips one byte of a data stream
//! and fixes nothing else up. With TLS on every connection the record fails
//! authentication; with `--encryption off` the chunk's hash or its header's MAC does.
//! Either way no wrong file is ever committed, the error says what happened, and a rerun
//! (the relay honest again) completes with the right bytes.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use support::*;

/// Forwards every connection to `to`; while `armed`, flips one byte at offset `at` of
/// the first client-to-server stream that gets that far (then disarms itself).
struct Relay {
    addr: SocketAddr,
    armed: Arc<AtomicBool>,
    flips: Arc<AtomicU64>,
}

impl Relay {
    fn start(to: SocketAddr, at: u64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let armed = Arc::new(AtomicBool::new(true));
        let flips = Arc::new(AtomicU64::new(0));
        let (a2, f2) = (armed.clone(), flips.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { return };
                let Ok(server) = TcpStream::connect(to) else {
                    continue;
                };
                let (a3, f3) = (a2.clone(), f2.clone());
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pipe(&s2, &c2, None));
                std::thread::spawn(move || pipe(&client, &server, Some((at, a3, f3))));
            }
        });
        Self { addr, armed, flips }
    }

    fn disarm(&self) {
        self.armed.store(false, Ordering::SeqCst);
    }
}

fn pipe(from: &TcpStream, to: &TcpStream, flip: Option<(u64, Arc<AtomicBool>, Arc<AtomicU64>)>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut seen = 0u64;
    loop {
        let n = match (&*from).read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((at, armed, flips)) = &flip {
            if seen <= *at && *at < seen + n as u64 && armed.swap(false, Ordering::SeqCst) {
                buf[(*at - seen) as usize] ^= 0x10;
                flips.fetch_add(1, Ordering::SeqCst);
            }
        }
        seen += n as u64;
        if (&*to).write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// `must_stop`: the first run has to fail (TLS: an altered record ends the stream);
/// otherwise it may also complete after re-sending the chunk whose hash failed.
fn tampered_push_is_refused_then_rerun_completes(
    extra: &[&str],
    want_in_error: &[&str],
    must_stop: bool,
) {
    run_tampered(extra, want_in_error, must_stop, 5 << 20);
}

/// A flip at `at` that must stop the transfer.
fn tampered_push_is_refused_then_rerun_completes_at(extra: &[&str], want: &[&str], at: u64) {
    run_tampered(extra, want, true, at);
}

fn run_tampered(extra: &[&str], want_in_error: &[&str], must_stop: bool, at: u64) {
    let s = Scratch::new("tamper");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.join("big.bin");
    // 24 MiB in 1 MiB chunks: the flip at 5 MiB lands inside a data stream, well past
    // the control connection's few kilobytes.
    let data: Vec<u8> = (0..24 << 20).map(|i: u32| (i % 251) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let server = Server::start(&home, &root);
    let relay = Relay::start(server.addr.parse().unwrap(), at);
    let target = format!("longhaul://{}/big.bin", relay.addr);
    let push = || {
        let mut c = cp_command(&home);
        c.args(["--chunk", "1MiB", "-P", "1"])
            .args(extra)
            .arg(&src)
            .arg(&target);
        run(&mut c, CP_LIMIT)
    };
    let first = push();
    assert_eq!(
        relay.flips.load(Ordering::SeqCst),
        1,
        "{}",
        first.describe()
    );
    let committed = root.join("big.bin");
    if !must_stop && first.code() == Some(0) {
        // Only acceptable if the altered chunk was caught and sent again.
        assert_eq!(
            std::fs::read(&committed).unwrap(),
            data,
            "{}",
            first.describe()
        );
    } else {
        assert!(
            !must_stop || first.code() != Some(0),
            "the altered stream went unnoticed: {}",
            first.describe()
        );
        assert!(
            !committed.exists() || std::fs::read(&committed).unwrap() == data,
            "a wrong file was committed: {}",
            first.describe()
        );
        let all = format!("{}{}", first.stderr, server.log());
        assert!(
            want_in_error.iter().any(|w| all.contains(w)),
            "the error should say the data was altered: {}\nserver: {}",
            first.describe(),
            server.log()
        );
    }
    relay.disarm();
    let again = push();
    again.assert_ok();
    assert_eq!(std::fs::read(&committed).unwrap(), data);
}

#[test]
fn a_flipped_byte_under_tls_stops_the_transfer_and_a_rerun_completes() {
    tampered_push_is_refused_then_rerun_completes(&[], &["altered in transit"], true);
}

#[test]
fn a_flipped_byte_without_data_encryption_is_caught_by_the_chunk_checks() {
    tampered_push_is_refused_then_rerun_completes(
        &["--encryption", "off"],
        &["altered in transit", "hash", "corrupt"],
        false,
    );
}

#[test]
fn a_flipped_chunk_header_without_data_encryption_fails_its_mac() {
    // 24 MiB file, 1 MiB chunks, one stream: after the stream's hello, the second chunk
    // header starts 80 + 1 MiB in; a byte of its offset field is flipped. Its check
    // (a plain checksum) then fails too; an attacker would fix that up, but not the
    // MAC (crates/proto/tests/transfer_props.rs has that case).
    let mut hello = Vec::new();
    longhaul_proto::encode_frame(
        &longhaul_proto::Message::DataHello {
            session_id: 0,
            stream: 0,
            mac: [0; 32],
        },
        &mut hello,
    );
    let second_header = (hello.len() + 80 + (1 << 20)) as u64;
    tampered_push_is_refused_then_rerun_completes_at(
        &["--encryption", "off"],
        &["altered in transit", "corrupt"],
        second_header + 20,
    );
}
