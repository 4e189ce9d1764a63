//! The far end of an ssh start-up ([`run_far_end`], what `longhaul ssh-server` runs) on
//! loopback, in this process: strangers who reach its port — with bytes that are not TLS,
//! and with a wrong token — before its client connects and while its client pulls, end
//! neither the far end nor the pull; the far end ends with its client's session.

mod support;

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhaul_engine::cp::client::{run_cp, CpConfig, CpJob};
use longhaul_engine::cp::Progress;
use longhaul_engine::daemon::server::LogFn;
use longhaul_engine::ssh::far::{run_far_end, FarConfig, FarOutcome};
use longhaul_engine::transport::dial::{dial, DataPlan};
use longhaul_engine::transport::tls::{Fingerprint, Security};
use longhaul_proto::{SshReady, Token};
use support::cp_config;

/// The far end's stdout: the ready line, handed to the test.
struct ReadyLine(mpsc::Sender<Vec<u8>>);

impl Write for ReadyLine {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = self.0.send(buf.to_vec());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A far end running in a thread, and what it announced.
struct Far {
    ready: SshReady,
    addr: SocketAddr,
    handle: Option<JoinHandle<io::Result<FarOutcome>>>,
}

impl Far {
    fn start() -> Self {
        let (tx, rx) = mpsc::channel();
        let log: LogFn = Arc::new(|_: &str| {});
        let cfg = FarConfig {
            port_range: None,
            connect_timeout: Duration::from_secs(120),
            // No ssh connection here: it listens everywhere, the test dials loopback.
            client_dials: Vec::new(),
            dial_back: Arc::new(longhaul_engine::ssh::dial_back::DialBack::to(None)),
        };
        let handle = std::thread::spawn(move || run_far_end(&cfg, &mut ReadyLine(tx), log));
        let mut line = Vec::new();
        while !line.ends_with(b"\n") {
            line.extend(rx.recv().expect("the far end ended before its ready line"));
        }
        let ready = SshReady::parse(&line).unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], ready.port));
        Self {
            ready,
            addr,
            handle: Some(handle),
        }
    }

    fn token(&self) -> Token {
        Token::new(self.ready.token_hex().as_bytes()).unwrap()
    }

    fn security(&self) -> Security {
        Security::pinned(Fingerprint(self.ready.cert.unwrap()))
    }

    /// Waits for the far end's own end (its client's session, here).
    fn outcome(mut self) -> FarOutcome {
        self.handle.take().unwrap().join().unwrap().unwrap()
    }
}

impl Drop for Far {
    fn drop(&mut self) {
        // A failed test leaves the far end to its idle limit; the process ends first.
        drop(self.handle.take());
    }
}

/// Strangers at the far end's port: bytes that are not TLS, then a client that completes
/// TLS (it can: the certificate is no secret) but holds another token.
fn strangers(far: &Far) {
    let mut junk = TcpStream::connect(far.addr).unwrap();
    let _ = junk.write_all(b"GET / HTTP/1.1\r\n\r\n");
    drop(junk);
    // Random, but not the far end's.
    let wrong =
        Token::new(b"ac99386bbf3307384a956d9d6b0423071365926772d357f54cc0021fe6bf84c7").unwrap();
    let none = DataPlan {
        streams: 0,
        receiving: false,
    };
    match dial(&far.addr.to_string(), &wrong, &far.security(), none) {
        Ok(_) => panic!("a client with a wrong token got through"),
        Err(e) => assert!(
            e.to_string().contains("authentication failed"),
            "the stranger failed otherwise: {e}"
        ),
    }
}

fn pull(far: &Far, src: &std::path::Path, dest: &std::path::Path, progress: Arc<Progress>) {
    let job = CpJob::Pull {
        dest: dest.to_path_buf(),
    };
    let remote = std::os::unix::ffi::OsStrExt::as_bytes(src.as_os_str());
    let cfg = CpConfig {
        remote_path: remote.to_vec(),
        user_paths: true,
        recursive: false,
        // Slow enough that a stranger comes while it runs.
        rate_bps: Some(100_000_000),
        security: far.security(),
        ..cp_config(&far.addr.to_string(), far.token().into(), "", job)
    };
    let report = run_cp(cfg, progress, &mut |_| {}).unwrap_or_else(|e| panic!("the pull: {e}"));
    assert_eq!(report.files_ok, 1, "{report:?}");
}

#[test]
fn strangers_before_and_during_a_pull_end_neither_the_far_end_nor_the_pull() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big.bin");
    let data: Vec<u8> = (0..24u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();
    let dest = dir.path().join("got");
    std::fs::create_dir(&dest).unwrap();

    let far = Far::start();
    strangers(&far);
    let progress = Arc::new(Progress::default());
    let puller = {
        let (progress, src, dest) = (progress.clone(), src.clone(), dest.clone());
        let far = Far {
            ready: far.ready.clone(),
            addr: far.addr,
            handle: None,
        };
        std::thread::spawn(move || pull(&far, &src, &dest, progress))
    };
    // While the pull runs: its first bytes have come, not its last.
    let deadline = Instant::now() + Duration::from_secs(60);
    while progress.snapshot().0 == 0 && !puller.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        !puller.is_finished(),
        "the pull ended before the strangers came (it failed, or ran faster than its rate)"
    );
    strangers(&far);
    puller.join().expect("the pull failed");
    assert!(std::fs::read(dest.join("big.bin")).unwrap() == data);
    match far.outcome() {
        FarOutcome::Served => {}
        other => panic!("the far end ended with {other:?}, not its client's session"),
    }
}
