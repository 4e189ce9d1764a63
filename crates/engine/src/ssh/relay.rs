//! Through the firewall: when the far end's TCP port cannot be reached from here (a site
//! that lets only ssh in), every connection of the session is carried by an ssh
//! connection of its own instead. A relay listens on this host's loopback; the client
//! dials it exactly as it would dial the far end, and each connection it accepts becomes
//! the stdin and stdout of `ssh host FAR-LONGHAUL ssh-bridge ADDR:PORT` ([`super::bridge`]
//! on the far host joins them to the far end's port there). TLS, the token's proof and
//! the chunks' MACs run end to end inside, as over TCP.
//!
//! Each stream being its own ssh connection, each has its own TCP connection over the
//! path and its own session channel window (OpenSSH's 2 MiB: about 90 Mbit/s per stream at
//! 180 ms), so the streams add up as an ssh copier's connections do (mscp). ssh's own
//! cipher adds its cost per byte to TLS's. The user's `ControlMaster`, when set, carries
//! them all over one connection instead.
//!
//! [`SshRelay`] owns the listener's thread and every ssh it started: dropping it stops
//! the one and kills and reaps the others.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::rsh::ssh_argv_with;

/// Data streams of a copy through ssh unless asked otherwise: each is held to one ssh
/// channel's window, so as many as an ssh copier runs (`mscp -n 8`).
pub const STREAMS: u16 = 8;

/// The most connections one relay carries (a session's control connection and up to 256
/// data streams, with room for a retry).
const MAX_TUNNELS: usize = 300;

/// A loopback relay whose every connection rides an ssh connection of its own to the far
/// end's port.
pub struct SshRelay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    tunnels: Arc<Tunnels>,
    thread: Option<JoinHandle<()>>,
}

/// The ssh processes a relay started: those still running, and how many in all.
#[derive(Default)]
struct Tunnels {
    running: Mutex<Vec<Child>>,
    started: AtomicUsize,
}

impl SshRelay {
    /// Starts the relay: `rsh` is the user's ssh command (`-e`), `port` its `-p`,
    /// `destination` the `[user@]host`, `far_longhaul` the far command that started the
    /// far end, and `far` the far end's address and port as the far host itself reaches
    /// it.
    pub fn start(
        rsh: &[String],
        port: Option<u16>,
        destination: &str,
        far_longhaul: &str,
        far: SocketAddr,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let mut words = rsh.to_vec();
        // No X11 or agent forwarding on a data connection.
        words.extend(["-x".into(), "-a".into()]);
        let command = [
            far_longhaul.to_string(),
            "ssh-bridge".into(),
            forward_target(far),
        ];
        let argv = ssh_argv_with(&words, port, destination, &command);
        let stop = Arc::new(AtomicBool::new(false));
        let tunnels = Arc::new(Tunnels::default());
        let thread = {
            let (stop, tunnels) = (stop.clone(), tunnels.clone());
            std::thread::Builder::new()
                .name("lh-ssh-relay".into())
                .spawn(move || relay(listener, &argv, &stop, &tunnels))?
        };
        Ok(Self {
            addr,
            stop,
            tunnels,
            thread: Some(thread),
        })
    }

    /// Where the client dials instead of the far end.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many ssh connections it has started so far.
    pub fn tunnels(&self) -> usize {
        self.tunnels.started.load(Ordering::Relaxed)
    }
}

impl Drop for SshRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut running = self
            .tunnels
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for child in running.iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The far end's address as the far host reaches it; its loopback when it listens on
/// every interface.
fn forward_target(far: SocketAddr) -> String {
    let ip = match far.ip() {
        ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        ip => ip,
    };
    match ip {
        IpAddr::V4(v4) => format!("{v4}:{}", far.port()),
        IpAddr::V6(v6) => format!("[{v6}]:{}", far.port()),
    }
}

/// Accepts until told to stop; each connection becomes one ssh's stdin and stdout.
fn relay(listener: TcpListener, argv: &[String], stop: &AtomicBool, tunnels: &Tunnels) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let mut running = tunnels.running.lock().unwrap_or_else(|p| p.into_inner());
        // Reap the ones that ended (their streams closed).
        running.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        if running.len() >= MAX_TUNNELS {
            continue;
        }
        let _ = conn.set_nodelay(true);
        if let Ok(child) = carry(conn, argv) {
            running.push(child);
            tunnels.started.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Starts ssh with `conn` as its stdin and stdout (ssh's stderr goes on to ours: its
/// errors and prompts are the user's to see).
fn carry(conn: TcpStream, argv: &[String]) -> io::Result<Child> {
    let output = OwnedFd::from(conn.try_clone()?);
    let input = OwnedFd::from(conn);
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::from(input))
        .stdout(Stdio::from(output))
        .spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forward_target_is_where_the_far_host_listens() {
        let t = |s: &str| forward_target(s.parse().unwrap());
        assert_eq!(t("10.0.0.2:5000"), "10.0.0.2:5000");
        assert_eq!(t("0.0.0.0:5000"), "127.0.0.1:5000");
        assert_eq!(t("[::]:5000"), "127.0.0.1:5000");
        assert_eq!(t("[fd00::2]:5000"), "[fd00::2]:5000");
    }

    /// The relay carries bytes both ways through the program it runs, and reaps it: `cat`
    /// stands in for ssh here, echoing what it is sent (the real ssh is in the cli tests).
    #[test]
    fn each_connection_rides_its_own_process() {
        use std::io::{Read, Write};
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let tunnels = Arc::new(Tunnels::default());
        let argv: Vec<String> = ["sh", "-c", "cat"].map(String::from).to_vec();
        let t = {
            let (stop, tunnels) = (stop.clone(), tunnels.clone());
            std::thread::spawn(move || relay(listener, &argv, &stop, &tunnels))
        };
        for round in 0..3u8 {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(&[round; 1000]).unwrap();
            let mut back = [0u8; 1000];
            c.read_exact(&mut back).unwrap();
            assert_eq!(back, [round; 1000]);
        }
        stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(addr);
        t.join().unwrap();
        assert_eq!(tunnels.started.load(Ordering::Relaxed), 3);
        let mut running = tunnels.running.lock().unwrap();
        for c in running.iter_mut() {
            let _ = c.kill();
            c.wait().unwrap();
        }
    }
}
