//! `longhaul serve` under load and abuse, over real loopback sockets with the server in
//! this process: floods of connections that never authenticate (bare TCP, stalled mid-TLS,
//! silent after TLS, and a sustained stream of new ones) do not lock out real bench and cp
//! clients from the same address; 64 concurrent clients on a server with 16 session slots
//! all finish (the rest wait in line); a full line is told "busy".

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use longhaul_engine::bench::report::{IntervalView, StartReport};
use longhaul_engine::bench::{run_bench, BenchConfig, BenchObserver};
use longhaul_engine::cp::client::{run_cp, CpJob};
use longhaul_engine::cp::Progress;
use longhaul_engine::daemon::ServeLimits;
use longhaul_engine::transport::dial::{dial, DataPlan};

const NO_DATA: DataPlan = DataPlan {
    streams: 0,
    receiving: false,
};
use longhaul_engine::transport::tls::{ClientTls, ServerTrust};
use longhaul_proto::SendMode;

mod support;

use support::{cp_config, pinned, server_tls, token, TestServer};

/// The file every cp client pulls, and its bytes.
const FILE: &str = "payload.bin";

fn payload() -> Vec<u8> {
    (0..3 << 20)
        .map(|i: u32| (i * 31 + i / 777) as u8)
        .collect()
}

/// A server on an ephemeral loopback port serving [`FILE`] with `limits`.
fn abuse_server(limits: ServeLimits) -> TestServer {
    TestServer::setup()
        .root(|root| std::fs::write(root.join(FILE), payload()).unwrap())
        .limits(limits)
        .start()
}

struct Quiet;

impl BenchObserver for Quiet {
    fn start(&mut self, _: &StartReport) {}
    fn interval(&mut self, _: &IntervalView) {}
}

fn bench(addr: SocketAddr, reverse: bool) -> BenchConfig {
    BenchConfig {
        target: addr.to_string(),
        streams: Some(2),
        duration: Duration::from_secs(10),
        bytes: Some(8 << 20),
        reverse,
        congestion: None,
        rate_bps: None,
        window: None,
        rx_rate_bps: None,
        interval: Duration::from_millis(500),
        send_mode: SendMode::Write,
        read_rate_bps: None,
        token: token(),
        security: pinned(),
        jump_start: false,
    }
}

/// Pulls [`FILE`] into a new directory and checks every byte.
fn cp_pull(addr: SocketAddr) -> Result<(), String> {
    let dest = tempfile::tempdir().unwrap();
    let job = CpJob::Pull {
        dest: dest.path().to_path_buf(),
    };
    let cfg = cp_config(&addr.to_string(), token().into(), FILE, job);
    let report =
        run_cp(cfg, Arc::new(Progress::default()), &mut |_| {}).map_err(|e| e.to_string())?;
    if report.files_ok != 1 || !report.failed.is_empty() {
        return Err(format!("{report:?}"));
    }
    let got = std::fs::read(dest.path().join(FILE)).map_err(|e| e.to_string())?;
    if got != payload() {
        return Err("the pulled file differs".into());
    }
    Ok(())
}

/// Whether the server closes this flood connection (EOF, reset or an alert) within
/// `wait`: the pre-authentication deadline is 5 s, the wait a bound well past it.
fn closed_by_server(s: &TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 64];
    match std::io::Read::read(&mut &*s, &mut b) {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn floods_that_never_authenticate_do_not_lock_out_real_clients_from_the_same_address() {
    let server = abuse_server(ServeLimits::default());
    let addr = server.addr;
    // 200 bare TCP connections that never send a byte.
    let mut raw: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // 50 that begin a TLS ClientHello (a record header promising 512 bytes) and stall.
    for _ in 0..50 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&[22, 3, 1, 2, 0, 1, 0, 1]).unwrap();
        raw.push(s);
    }
    // 50 that finish TLS and say nothing (a handshake may fail if the server evicted
    // the connection first: the flood does not care).
    let silent: Vec<_> = (0..50)
        .filter_map(|_| {
            let tcp = TcpStream::connect(addr).ok()?;
            let tls = ClientTls::new(
                "localhost",
                0,
                ServerTrust::Pinned(server_tls().fingerprint()),
            )
            .ok()?;
            tls.connect(tcp, "flood", Duration::from_secs(10)).ok()
        })
        .collect();
    assert!(!silent.is_empty(), "no flood connection finished TLS");
    // And a sustained flood of new bare connections while the clients run: bounded in
    // count, holding the newest 100 open.
    let flooding = Arc::new(AtomicBool::new(true));
    let sustained = {
        let flooding = flooding.clone();
        std::thread::spawn(move || {
            let mut held = std::collections::VecDeque::new();
            let mut opened = 0u32;
            while flooding.load(Ordering::Relaxed) && opened < 20_000 {
                if let Ok(s) = TcpStream::connect(addr) {
                    held.push_back(s);
                    if held.len() > 100 {
                        held.pop_front();
                    }
                }
                opened += 1;
            }
            opened
        })
    };

    // Real clients, from 127.0.0.1 like the flood, while all of it is still open.
    let end = run_bench(&bench(addr, false), &mut Quiet).expect("bench run during the flood");
    assert_eq!(end.summary.bytes, 8 << 20);
    let end = run_bench(&bench(addr, true), &mut Quiet).expect("reverse run during the flood");
    assert_eq!(end.summary.bytes, 8 << 20);
    cp_pull(addr).expect("cp pull during the flood");

    flooding.store(false, Ordering::Relaxed);
    let opened = sustained.join().unwrap();
    // Every flood connection goes: evicted to make room, or at its deadline.
    let open = raw
        .iter()
        .filter(|s| !closed_by_server(s, Duration::from_secs(30)))
        .count();
    assert_eq!(open, 0, "flood connections the server never closed");
    eprintln!("sustained flood: {opened} connections opened while the clients ran");
    drop(silent);
}

#[test]
fn sixty_four_concurrent_clients_all_finish_on_sixteen_slots() {
    let server = abuse_server(ServeLimits {
        max_sessions: 16,
        ..ServeLimits::default()
    });
    let addr = server.addr;
    // 56 bench runs (half reversed) and 8 cp pulls, all at once.
    let clients: Vec<JoinHandle<Result<String, String>>> = (0..64)
        .map(|i| {
            std::thread::spawn(move || {
                if i % 8 == 7 {
                    cp_pull(addr).map(|()| "cp".into())
                } else {
                    run_bench(&bench(addr, i % 2 == 1), &mut Quiet)
                        .map(|e| format!("{} bytes", e.summary.bytes))
                        .map_err(|e| e.to_string())
                }
            })
        })
        .collect();
    let outcomes: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let failed: Vec<_> = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.as_ref().err().map(|e| format!("client {i}: {e}")))
        .collect();
    assert!(failed.is_empty(), "{} failed: {failed:#?}", failed.len());
}

#[test]
fn a_full_line_is_told_busy_and_an_unproved_connection_holds_no_slot() {
    let server = abuse_server(ServeLimits {
        max_sessions: 1,
        max_waiting: 0,
        ..ServeLimits::default()
    });
    let addr = server.addr;
    let security = pinned();
    // Said hello but never proved the token: holds no slot.
    let unproved = dial(&addr.to_string(), &token(), &security, NO_DATA).unwrap();
    run_bench(&bench(addr, false), &mut Quiet).expect("a run beside an unproved client");
    // Proved the token: holds the only slot until it goes.
    // The run before may still hold the slot for a moment after its client returned
    // (the server ends the session after the client's last read): retry while "busy".
    let mut tries = 0;
    let holder = loop {
        let mut c = dial(&addr.to_string(), &token(), &security, NO_DATA).unwrap();
        match c.authenticate() {
            Ok(_) => break c,
            Err(e) if e.to_string().contains("try again later") && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("the slot never came free: {e}"),
        }
    };
    let err = run_bench(&bench(addr, false), &mut Quiet).unwrap_err();
    assert!(err.to_string().contains("try again later"), "{err}");
    drop((holder, unproved));
}

/// Slow-loris clients: 80 connections from the client's own address, each trickling a
/// TLS ClientHello one byte a second, as a per-read timeout would let them do forever.
/// The one pre-authentication deadline (5 s for TLS, hello and proof together) closes
/// every one of them long before its 20th byte, and a real cp runs meanwhile.
#[test]
fn slow_loris_clients_are_cut_at_the_deadline_and_hold_nothing() {
    let server = abuse_server(ServeLimits::default());
    let addr = server.addr;
    let lorises: Vec<_> = (0..80)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                // A TLS handshake record promising 512 bytes, then a byte a second.
                let mut hello = vec![22u8, 3, 1, 2, 0];
                hello.resize(20, 1);
                for (sent, b) in hello.iter().enumerate() {
                    if s.write_all(&[*b]).is_err() {
                        return sent;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
                // Writes can succeed into a closed peer's buffer once: check the socket.
                if closed_by_server(&s, Duration::from_millis(100)) {
                    hello.len() - 1
                } else {
                    hello.len()
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    cp_pull(addr).expect("cp pull while slow-loris clients trickle");
    let sent: Vec<usize> = lorises.into_iter().map(|h| h.join().unwrap()).collect();
    // Cut at the 5 s deadline: about 6 bytes in, never all 20 (a write or two may land
    // in the buffer before the close is seen).
    assert!(
        sent.iter().all(|&n| n < 12),
        "slow-loris bytes sent before the server cut them: {sent:?}"
    );
}
