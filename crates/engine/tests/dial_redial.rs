//! A server that closes the control connection before its TLS begins (a door at its cap
//! evicting the stalest under a flood, which may be a client's in the instant before its
//! first bytes) is dialed again, a bounded number of times: real sockets, a real server,
//! and in front of it a door that closes the first connections it accepts unread.

mod support;

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use longhaul_engine::transport::dial::{dial, DataPlan, DIALS};
use longhaul_engine::transport::tls::TlsError;
use longhaul_engine::transport::BenchError;
use support::{token, TestServer};

/// A door in front of `server`: closes the first `close` connections it accepts without
/// reading them, and forwards the rest both ways. Stops (and joins) on drop.
struct ClosingDoor {
    addr: SocketAddr,
    accepted: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl ClosingDoor {
    fn start(server: SocketAddr, close: u32) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (a2, s2) = (accepted.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            let mut pipes = Vec::new();
            // Bounded: the test stops it, and it gives up after a minute on its own.
            for _ in 0..60_000 {
                if s2.load(Ordering::Relaxed) {
                    break;
                }
                match listener.accept() {
                    Ok((client, _)) => {
                        let n = a2.fetch_add(1, Ordering::Relaxed) + 1;
                        if n <= close {
                            // Wait for the client's first bytes, then close unread: the
                            // kernel resets a connection closed with data unread, as a
                            // door's eviction does.
                            std::thread::sleep(Duration::from_millis(20));
                            drop(client);
                        } else {
                            pipes.push(forward(client, server));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            }
            for p in pipes {
                let _ = p.join();
            }
        });
        Self {
            addr,
            accepted,
            stop,
            handle: Some(handle),
        }
    }

    fn accepted(&self) -> u32 {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for ClosingDoor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Copies both ways between `client` and a new connection to `server` until either end
/// closes.
fn forward(client: TcpStream, server: SocketAddr) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let Ok(upstream) = TcpStream::connect(server) else {
            return;
        };
        let (mut c_in, mut c_out) = (client.try_clone().unwrap(), client);
        let (mut u_in, mut u_out) = (upstream.try_clone().unwrap(), upstream);
        let back = std::thread::spawn(move || {
            let _ = io::copy(&mut u_in, &mut c_out);
            let _ = c_out.shutdown(Shutdown::Both);
        });
        let _ = io::copy(&mut c_in, &mut u_out);
        let _ = u_out.shutdown(Shutdown::Both);
        let _ = back.join();
    })
}

/// No data connections: the control connection alone, as `tune --peer` dials.
const CONTROL_ONLY: DataPlan = DataPlan {
    streams: 0,
    receiving: false,
};

#[test]
fn a_control_connection_closed_before_tls_is_dialed_again() {
    let server = TestServer::setup().start();
    let door = ClosingDoor::start(server.addr, DIALS - 1);
    let mut dialed = dial(
        &door.addr.to_string(),
        &token(),
        &server.security(),
        CONTROL_ONLY,
    )
    .unwrap_or_else(|e| panic!("dial through a door that closed {} first: {e}", DIALS - 1));
    dialed.authenticate().unwrap();
    assert_eq!(door.accepted(), DIALS);
}

#[test]
fn a_server_that_always_closes_is_dialed_a_bounded_number_of_times() {
    let server = TestServer::setup().start();
    let door = ClosingDoor::start(server.addr, u32::MAX);
    let err = match dial(
        &door.addr.to_string(),
        &token(),
        &server.security(),
        CONTROL_ONLY,
    ) {
        Ok(_) => panic!("a door that closes every connection let the dial through"),
        Err(e) => e,
    };
    assert!(
        matches!(err, BenchError::Tls(TlsError::Closed { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("try again"), "{err}");
    assert_eq!(door.accepted(), DIALS);
}
