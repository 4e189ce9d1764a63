//! What the engine's integration tests share: a real `longhaul serve` in this process on
//! a loopback port, serving a temporary root the test fills.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use longhaul_engine::daemon::transfer::ServedFiles;
use longhaul_engine::daemon::{ServeConfig, Server};
use longhaul_engine::transport::tls::{Security, ServerTls};
use longhaul_proto::Token;
use longhaul_sys::served_root::ServedRoot;

/// The token every test server here holds.
pub fn token() -> Token {
    Token::new(b"5d0c7a9e31f24b68a0c1e2d3f4a5b6c7").unwrap()
}

/// A server on an ephemeral loopback port serving a fresh root, with its own
/// certificate; stopped and joined on drop.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its identity (clients pin its fingerprint).
    pub tls: ServerTls,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    /// The root it serves.
    pub root: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server whose root `fill` fills first.
    pub fn start(fill: impl FnOnce(&Path)) -> Self {
        let root = tempfile::tempdir().unwrap();
        fill(root.path());
        let tls = ServerTls::ephemeral().unwrap();
        let server = Server::bind(
            ServeConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                keyring: token().into(),
                once: false,
                rx_rate_bps: None,
                files: ServedFiles::Root(Arc::new(ServedRoot::open(root.path()).unwrap())),
                tls: tls.clone(),
                keep_setuid: false,
                caps: Default::default(),
            },
            Arc::new(|_: &str| {}),
        )
        .unwrap();
        let addr = server.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            server.serve(Some(s2)).unwrap().unwrap();
        });
        Self {
            addr,
            tls,
            stop,
            handle: Some(handle),
            root,
        }
    }

    /// Its certificate pinned, data in TLS.
    pub fn security(&self) -> Security {
        Security::pinned(self.tls.fingerprint())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
