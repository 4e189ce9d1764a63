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
//! When the copy knows from the start that it goes through ssh (`--via-ssh`), the
//! streams' ssh logins run while the far end starts ([`SshRelay::logins_ahead`]): their
//! far command waits for the port on its stdin ([`SshRelay::aim`] writes it), and the
//! relay then joins a local connection to a waiting ssh's pipes, saving a login's round
//! trips (about 3 s at 180 ms) off the copy.
//!
//! Any process on this host can reach a loopback port: the relay carries only
//! connections from sockets of its own user (the kernel's socket table says whose), so
//! another user cannot spend this user's ssh logins (the far end's one-time token would
//! keep them out regardless).
//!
//! [`SshRelay`] owns the listener's thread and every ssh it started: dropping it stops
//! the one and kills and reaps the others.

use std::io;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
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
    /// Until [`SshRelay::aim`]: the listener, the ssh words, and the logins made ahead.
    waiting: Option<(TcpListener, Vec<String>, Vec<Spare>)>,
}

/// An ssh logged in ahead, its far command waiting for the port on its stdin.
struct Spare {
    stdin: ChildStdin,
    stdout: ChildStdout,
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
        let mut relay = Self::logins_ahead(rsh, port, destination, far_longhaul, 0)?;
        relay.aim(far)?;
        Ok(relay)
    }

    /// A relay whose first `count` ssh connections log in now, before the far end's port
    /// is known (the arguments as for [`SshRelay::start`]); it carries nothing until
    /// [`SshRelay::aim`].
    pub fn logins_ahead(
        rsh: &[String],
        port: Option<u16>,
        destination: &str,
        far_longhaul: &str,
        count: usize,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let mut words = rsh.to_vec();
        // No X11 or agent forwarding on a data connection.
        words.extend(["-x".into(), "-a".into()]);
        let mut argv = ssh_argv_with(&words, port, destination, &[]);
        argv.extend([far_longhaul.to_string(), "ssh-bridge".into()]);
        let tunnels = Arc::new(Tunnels::default());
        let mut spares = Vec::with_capacity(count);
        for _ in 0..count.min(MAX_TUNNELS) {
            let mut child = Command::new(&argv[0])
                .args(&argv[1..])
                .arg("-")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other("ssh started without its pipes"));
            };
            spares.push(Spare { stdin, stdout });
            tunnels.add(child);
        }
        Ok(Self {
            addr,
            stop: Arc::new(AtomicBool::new(false)),
            tunnels,
            thread: None,
            waiting: Some((listener, argv, spares)),
        })
    }

    /// Tells the logins made ahead where the far end listens (`far`, as the far host
    /// reaches it) and starts carrying connections: first through those, then each
    /// through an ssh of its own.
    pub fn aim(&mut self, far: SocketAddr) -> io::Result<()> {
        let Some((listener, mut argv, mut spares)) = self.waiting.take() else {
            return Ok(());
        };
        let target = forward_target(far);
        // A short line into a pipe: it waits there until the far command reads it.
        for spare in &mut spares {
            let _ = spare.stdin.write_all(format!("{target}\n").as_bytes());
        }
        argv.push(target);
        let (stop, tunnels) = (self.stop.clone(), self.tunnels.clone());
        self.thread = Some(
            std::thread::Builder::new()
                .name("lh-ssh-relay".into())
                .spawn(move || relay(listener, &argv, spares, &stop, &tunnels))?,
        );
        Ok(())
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

impl Tunnels {
    /// Counts and keeps a started ssh.
    fn add(&self, child: Child) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        // Reap the ones that ended (their streams closed).
        running.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        running.push(child);
        self.started.fetch_add(1, Ordering::Relaxed);
    }

    /// How many are running.
    fn running(&self) -> usize {
        self.running.lock().map_or(0, |r| r.len())
    }
}

impl Drop for SshRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept.
        if self.thread.is_some() {
            let _ = TcpStream::connect(self.addr);
        }
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

/// Accepts until told to stop; each connection goes to an ssh logged in ahead while any
/// is left, then becomes one new ssh's stdin and stdout.
fn relay(
    listener: TcpListener,
    argv: &[String],
    mut spares: Vec<Spare>,
    stop: &AtomicBool,
    tunnels: &Tunnels,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(conn) = conn else { continue };
        // Any process on this host reaches the loopback: only our own user's connections
        // are carried (another user's would spend our ssh logins, though the far end's
        // token would still keep it out).
        if !ours(&conn) {
            continue;
        }
        let _ = conn.set_nodelay(true);
        if let Some(spare) = spares.pop() {
            let _ = join(conn, spare);
            continue;
        }
        if tunnels.running() >= MAX_TUNNELS {
            continue;
        }
        if let Ok(child) = carry(conn, argv) {
            tunnels.add(child);
        }
    }
}

/// Whether `conn` comes from a socket of this process's user.
fn ours(conn: &TcpStream) -> bool {
    let (Ok(SocketAddr::V4(peer)), Ok(SocketAddr::V4(local))) =
        (conn.peer_addr(), conn.local_addr())
    else {
        return false;
    };
    let me = longhaul_sys::creds::thread_uids().1;
    matches!(longhaul_sys::peer_uid::loopback_peer_uid(peer, local), Ok(Some(uid)) if uid == me)
}

/// Joins a local connection to the pipes of an ssh logged in ahead, one thread each way.
fn join(conn: TcpStream, spare: Spare) -> io::Result<()> {
    let Spare {
        mut stdin,
        mut stdout,
    } = spare;
    let mut from_local = conn.try_clone()?;
    let mut to_local = conn;
    std::thread::Builder::new()
        .name("lh-ssh-out".into())
        .spawn(move || {
            let _ = super::bridge::pump(&mut from_local, &mut stdin);
            // Dropping stdin: the far command sees the end.
        })?;
    std::thread::Builder::new()
        .name("lh-ssh-in".into())
        .spawn(move || {
            let _ = super::bridge::pump(&mut stdout, &mut to_local);
            let _ = to_local.shutdown(std::net::Shutdown::Write);
        })?;
    Ok(())
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

    /// Another user's connection to the relay is closed at once and starts nothing (root
    /// only: a thread of this test becomes user 65534 to connect).
    #[test]
    fn another_users_connection_is_not_carried() {
        if longhaul_sys::creds::thread_uids().1 != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        use std::io::Read;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let tunnels = Arc::new(Tunnels::default());
        let argv: Vec<String> = ["sh", "-c", "cat"].map(String::from).to_vec();
        let t = {
            let (stop, tunnels) = (stop.clone(), tunnels.clone());
            std::thread::spawn(move || relay(listener, &argv, Vec::new(), &stop, &tunnels))
        };
        let closed = std::thread::spawn(move || {
            longhaul_sys::creds::become_user(&longhaul_sys::creds::UserCreds {
                name: "nobody".into(),
                uid: 65534,
                gid: 65534,
                groups: vec![65534],
            })
            .unwrap();
            let mut c = TcpStream::connect(addr).unwrap();
            let mut buf = [0u8; 1];
            // Closed by the relay: the read ends (0 bytes, or a reset).
            !matches!(c.read(&mut buf), Ok(1))
        })
        .join()
        .unwrap();
        assert!(closed);
        stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(addr);
        t.join().unwrap();
        assert_eq!(tunnels.started.load(Ordering::Relaxed), 0);
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
            std::thread::spawn(move || relay(listener, &argv, Vec::new(), &stop, &tunnels))
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
