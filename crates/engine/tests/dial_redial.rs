//! A server that closes the control connection before its TLS begins (a door at its cap
//! evicting the stalest under a flood, which may be a client's in the instant before its
//! first bytes) is dialed again, a bounded number of times, and so is a data connection
//! (which waits silent at the door for its TLS until the control connection's connect):
//! real sockets, a real server, and in front of it a door that closes the first
//! connections it accepts unread.

mod support;

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use longhaul_engine::cp::client::{run_cp, CpJob};
use longhaul_engine::cp::Progress;
use longhaul_engine::transport::dial::{dial, DataPlan, DIALS};
use longhaul_engine::transport::tls::TlsError;
use longhaul_engine::transport::BenchError;
use longhaul_policy::{BufferChoice, Side};
use longhaul_proto::Credential;
use support::{cp_config, token, TestServer};

/// A door in front of `server`: closes the connections it accepts whose number (from 1)
/// `close` names, without reading them, and forwards the rest both ways. Stops (and
/// joins) on drop.
struct ClosingDoor {
    addr: SocketAddr,
    accepted: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl ClosingDoor {
    fn start(server: SocketAddr, close: impl Fn(u32) -> bool + Send + 'static) -> Self {
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
                        if close(n) {
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
    let door = ClosingDoor::start(server.addr, |n| n < DIALS);
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
    let door = ClosingDoor::start(server.addr, |_| true);
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

/// The second and third connections the door accepts are closed: the data connections
/// (their SYNs leave with the control connection's, which the door mostly takes first),
/// or one of them and the control connection (the dial then begins again). Both data
/// streams attach: their TLS and the server's hello on each.
#[test]
fn data_connections_closed_before_tls_connect_again() {
    let server = TestServer::setup().start();
    let door = ClosingDoor::start(server.addr, |n| n == 2 || n == 3);
    let two = DataPlan {
        streams: 2,
        receiving: false,
    };
    let dialed = dial(&door.addr.to_string(), &token(), &server.security(), two)
        .unwrap_or_else(|e| panic!("dial: {e}"));
    let streams = dialed
        .data
        .attach(&dialed.session, Side::Send, &BufferChoice::Autotune, None)
        .unwrap_or_else(|e| panic!("data streams after the door closed two: {e}"));
    assert_eq!(streams.len(), 2);
    assert!(door.accepted() >= 5, "{} accepted", door.accepted());
}

/// A whole pull through a door that closes its second and third connections: every
/// byte lands.
#[test]
fn a_copy_whose_connections_the_door_closed_lands_whole() {
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i * 7 + i / 4099) as u8).collect();
    let served = data.clone();
    let server = TestServer::start(move |root| std::fs::write(root.join("file"), &served).unwrap());
    let door = ClosingDoor::start(server.addr, |n| n == 2 || n == 3);
    let dest = tempfile::tempdir().unwrap();
    let job = CpJob::Pull {
        dest: dest.path().to_path_buf(),
    };
    let cfg = cp_config(
        &door.addr.to_string(),
        Credential::Token(token()),
        "file",
        job,
    );
    let report = run_cp(cfg, Arc::new(Progress::default()), &mut |_| {})
        .unwrap_or_else(|e| panic!("a pull through a door that closed two: {e}"));
    assert_eq!(report.files_ok, 1, "{report:?}");
    assert!(std::fs::read(dest.path().join("file")).unwrap() == data);
}
