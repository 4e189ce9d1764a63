//! The server's door under a spread flood (issue 28, item 3): bare TCP connections from
//! hundreds of loopback addresses (each flood socket bound to its own 127.1.x.y before it
//! connects) keep `longhaul serve --max-pending 32` at and past its hard cap, reconnecting
//! as the door closes them, while a real `longhaul cp` push and pull run from 127.0.0.1.
//! Both must finish with every byte in place: the client's connections, its address the
//! busiest at the door, were the ones evicted before.
//!
//! The copies' times with and without the flood are printed (run with `--nocapture`),
//! never asserted.

#[macro_use]
mod support;

use std::io::{ErrorKind, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use support::*;

/// The server's hard cap on unauthenticated connections.
const CAP: u32 = 32;
/// Flood addresses, one bare connection each at a time: well past the cap.
const FLOOD: u32 = 320;
/// How long the flood waits between its rounds of reconnecting what the door closed.
const ROUND: Duration = Duration::from_millis(50);
/// The flood's rounds, at most (a bound on its loop; the test stops it long before).
const MAX_ROUNDS: u32 = 20 * 60 * 5;
/// Size of the file pushed and pulled.
const SIZE: usize = 24 << 20;

/// The `i`th flood address: 127.1.0.1, 127.1.0.2, ... (never 127.0.0.1, the client's).
fn flood_ip(i: u32) -> Ipv4Addr {
    Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 1) as u8)
}

/// One bare connection from `ip` to `server`, or `None` when the connect failed.
fn bare_connection(ip: Ipv4Addr, server: SocketAddr) -> Option<TcpStream> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).ok()?;
    s.bind(&SockAddr::from(SocketAddrV4::new(ip, 0))).ok()?;
    s.connect_timeout(&SockAddr::from(server), Duration::from_secs(1))
        .ok()?;
    s.set_nonblocking(true).ok()?;
    Some(s.into())
}

/// Whether the server closed (or reset) this connection; it never sends anything to a
/// connection that said nothing.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        // End of stream; a byte would be a protocol error the door never sends.
        Ok(0 | 1..) => true,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

/// The flood: a thread holding one bare connection per address, reconnecting every
/// [`ROUND`] those the door closed. Stopped and joined on drop.
struct Flood {
    stop: Arc<AtomicBool>,
    connects: Arc<AtomicU64>,
    closed: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Flood {
    fn start(server: SocketAddr) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let connects = Arc::new(AtomicU64::new(0));
        let closed_n = Arc::new(AtomicU64::new(0));
        let (s, c, h) = (stop.clone(), connects.clone(), closed_n.clone());
        let thread = std::thread::spawn(move || {
            let mut socks: Vec<Option<TcpStream>> = (0..FLOOD).map(|_| None).collect();
            for _ in 0..MAX_ROUNDS {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                for (i, slot) in socks.iter_mut().enumerate() {
                    if slot.as_mut().is_some_and(closed) {
                        *slot = None;
                        h.fetch_add(1, Ordering::Relaxed);
                    }
                    if slot.is_none() {
                        *slot = bare_connection(flood_ip(i as u32), server);
                        if slot.is_some() {
                            c.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                std::thread::sleep(ROUND);
            }
        });
        Self {
            stop,
            connects,
            closed: closed_n,
            thread: Some(thread),
        }
    }

    /// Connections made so far.
    fn connects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Pushes `src` to the server as `name`, pulls it back into `back`; both must succeed and
/// the pulled file must equal `src`. Returns how long the two took.
fn push_and_pull(
    home: &std::path::Path,
    server: &Server,
    src: &std::path::Path,
    name: &str,
    back: &std::path::Path,
) -> Duration {
    let began = Instant::now();
    cp!(home; "-P", "4", src, server.remote(name)).assert_ok();
    cp!(home; "-P", "4", server.remote(name), back).assert_ok();
    let took = began.elapsed();
    assert_same_bytes(src, &back.join(name));
    took
}

#[test]
fn a_spread_flood_of_bare_connections_does_not_stop_a_real_push_and_pull() {
    let scratch = Scratch::new("spread-flood");
    let home = scratch.dir("home");
    let root = scratch.dir("root");
    let src = scratch.dir("src").join("payload.bin");
    let mut rng = Rng::from_env("spread_flood");
    write_random(&src, &mut rng, SIZE);
    let cap = CAP.to_string();
    let server = Server::start_with(&home, &root, &["--max-pending", &cap]);
    let addr: SocketAddr = server.addr.parse().unwrap();
    // Once without the flood (it also pins the server's certificate).
    let quiet = push_and_pull(
        &home,
        &server,
        &src,
        "quiet.bin",
        &scratch.dir("back-quiet"),
    );

    let flood = Flood::start(addr);
    // Wait (bounded) until the flood holds more connections than the door lets wait.
    let deadline = Instant::now() + Duration::from_secs(30);
    while flood.connects() < u64::from(2 * FLOOD) {
        assert!(
            Instant::now() < deadline,
            "the flood made only {} connections in 30 s",
            flood.connects()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = flood.connects();
    let closed_before = flood.closed.load(Ordering::Relaxed);
    let flooded = push_and_pull(
        &home,
        &server,
        &src,
        "flooded.bin",
        &scratch.dir("back-flood"),
    );
    let during = flood.connects() - before;
    let closed_during = flood.closed.load(Ordering::Relaxed) - closed_before;
    drop(flood);
    eprintln!(
        "cap {CAP}, flood from {FLOOD} addresses ({during} connections made and {closed_during} closed by the \
         door during the copies): push + pull of {} MiB took {:.2} s without the \
         flood, {:.2} s with it",
        SIZE >> 20,
        quiet.as_secs_f64(),
        flooded.as_secs_f64()
    );
    assert!(
        during > u64::from(CAP),
        "the flood made only {during} connections during the copies: the door was not kept full"
    );
}
