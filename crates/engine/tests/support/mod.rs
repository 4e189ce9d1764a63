//! What the engine's integration tests share: a real `longhaul serve` in this process on
//! a loopback port ([`TestServer`]), one server identity every client pins, one token.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use longhaul_engine::cp::client::{CpConfig, CpJob};
use longhaul_engine::daemon::transfer::ServedFiles;
use longhaul_engine::daemon::{ServeConfig, ServeLimits, Server};
use longhaul_engine::transport::tls::{Security, ServerTls};
use longhaul_proto::{Credential, Token};
use longhaul_sys::served_root::ServedRoot;

/// The token every test server here holds unless told otherwise.
pub fn token() -> Token {
    Token::new(b"5d0c7a9e31f24b68a0c1e2d3f4a5b6c7").unwrap()
}

/// One server identity for every test server of a test binary; clients pin it.
pub fn server_tls() -> ServerTls {
    static TLS: std::sync::OnceLock<ServerTls> = std::sync::OnceLock::new();
    TLS.get_or_init(|| ServerTls::ephemeral().unwrap()).clone()
}

/// The test servers' certificate pinned, data in TLS.
pub fn pinned() -> Security {
    Security::pinned(server_tls().fingerprint())
}

/// A recursive copy of `path` at the test server `target` (pinned) with two streams and
/// no jump-start, proving `credential`.
pub fn cp_config(target: &str, credential: Credential, path: &str, job: CpJob) -> CpConfig {
    CpConfig {
        server: target.to_string(),
        remote_path: path.as_bytes().to_vec(),
        user_paths: false,
        job,
        credential,
        recursive: true,
        no_clobber: false,
        sync: false,
        checksum_only: false,
        keep_setuid: false,
        streams: Some(2),
        jump_start: false,
        rate_bps: None,
        window: None,
        congestion: None,
        chunk_size: None,
        security: pinned(),
        delta: None,
        filter: Default::default(),
        delete: false,
        hard_links: false,
        memory_gate: None,
        hashed_ahead: None,
    }
}

/// A server on a loopback port, stopped and joined on drop; its log lines are kept.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its identity ([`server_tls`]).
    pub tls: ServerTls,
    /// The root it serves, if any.
    pub root: Option<tempfile::TempDir>,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// What fills a fresh served root before the server starts.
type Fill = Box<dyn FnOnce(&Path)>;

/// How to start a [`TestServer`]: 127.0.0.1, port 0, [`token`], no files, default limits.
pub struct Setup {
    listen: String,
    token: Token,
    fill: Option<Fill>,
    limits: ServeLimits,
}

impl Setup {
    /// Listens on `addr` (`[::1]:0`, say).
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = addr.into();
        self
    }

    /// Holds `token` instead.
    pub fn token(mut self, token: Token) -> Self {
        self.token = token;
        self
    }

    /// Serves a fresh root that `fill` fills first.
    pub fn root(mut self, fill: impl FnOnce(&Path) + 'static) -> Self {
        self.fill = Some(Box::new(fill));
        self
    }

    /// With these session and door limits.
    pub fn limits(mut self, limits: ServeLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Binds and serves.
    pub fn start(self) -> TestServer {
        self.try_start().unwrap()
    }

    /// Binds and serves, or says why it cannot bind (the port is taken, say).
    pub fn try_start(self) -> std::io::Result<TestServer> {
        let root = self.fill.map(|fill| {
            let root = tempfile::tempdir().unwrap();
            fill(root.path());
            root
        });
        let files = match &root {
            Some(r) => ServedFiles::Root(Arc::new(ServedRoot::open(r.path()).unwrap())),
            None => ServedFiles::Nothing,
        };
        let log = Arc::new(Mutex::new(Vec::new()));
        let l2 = log.clone();
        let server = Server::bind(
            ServeConfig {
                listen: self.listen.parse().unwrap(),
                keyring: self.token.into(),
                once: false,
                rx_rate_bps: None,
                files,
                tls: server_tls(),
                keep_setuid: false,
                caps: Default::default(),
                relay_from: Default::default(),
            },
            Arc::new(move |line: &str| l2.lock().unwrap().push(line.to_string())),
        )?
        .with_limits(self.limits);
        let addr = server.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            server.serve(Some(s2)).unwrap().unwrap();
        });
        Ok(TestServer {
            addr,
            tls: server_tls(),
            root,
            log,
            stop,
            handle: Some(handle),
        })
    }
}

impl TestServer {
    /// The defaults, to change before [`Setup::start`].
    pub fn setup() -> Setup {
        Setup {
            listen: "127.0.0.1:0".into(),
            token: token(),
            fill: None,
            limits: ServeLimits::default(),
        }
    }

    /// A server whose root `fill` fills first, otherwise the defaults.
    pub fn start(fill: impl FnOnce(&Path) + 'static) -> Self {
        Self::setup().root(fill).start()
    }

    /// `ADDR:PORT`, as a client names it.
    pub fn target(&self) -> String {
        self.addr.to_string()
    }

    /// The served root (panics for a server without files).
    pub fn root_path(&self) -> &Path {
        self.root.as_ref().expect("a server with a root").path()
    }

    /// Its certificate pinned, data in TLS.
    pub fn security(&self) -> Security {
        pinned()
    }

    /// Its log lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
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
