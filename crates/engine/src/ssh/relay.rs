//! Through the firewall: when the far end's TCP port cannot be reached from here (a site
//! that lets only ssh in), every connection of the session is carried by an ssh
//! connection of its own instead. A relay listens on this host's loopback; the client
//! dials it exactly as it would dial the far end, and each connection it accepts is
//! joined to the pipes of `ssh host FAR-LONGHAUL ssh-bridge -` ([`super::bridge`] on the
//! far host says it is up, reads the port from its stdin and joins the channel to the far
//! end's port there). TLS, the token's proof and the chunks' MACs run end to end inside,
//! as over TCP.
//!
//! Each stream being its own ssh connection, each has its own TCP connection over the
//! path and its own session channel window (OpenSSH's 2 MiB: about 90 Mbit/s per stream at
//! 180 ms), so the streams add up as an ssh copier's connections do (mscp). ssh's own
//! cipher adds its cost per byte to TLS's. The user's `ControlMaster`, when set, carries
//! them all over one connection instead.
//!
//! When the copy knows from the start that it goes through ssh (`--via-ssh`), the
//! streams' ssh logins run while the far end starts ([`SshRelay::logins_ahead`]); the port
//! goes to them when it is known ([`SshRelay::aim`]), saving a login's round trips (about
//! 3 s at 180 ms) off the copy. At most [`LOGINS_AT_ONCE`] logins are under way at once:
//! sshd refuses connections at random past its `MaxStartups` (10 unauthenticated by
//! default), so more streams (`--streams` above 8) log in as earlier logins finish.
//!
//! Any process on this host can reach a loopback port: the relay carries only
//! connections from sockets of its own user (the kernel's socket table says whose), so
//! another user cannot spend this user's ssh logins (the far end's one-time token would
//! keep them out regardless).
//!
//! [`SshRelay`] owns the listener's thread and every ssh it started: dropping it stops
//! the one and kills and reaps the others.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::rsh::ssh_argv_with;

/// Data streams of a copy through ssh unless asked otherwise: each is held to one ssh
/// channel's window, so as many as an ssh copier runs (`mscp -n 8`).
pub const STREAMS: u16 = 8;

/// ssh logins under way at once: with the far start's own login beside them, at sshd's
/// default `MaxStartups` of 10 (past which it refuses at random), and enough for the
/// control connection and [`STREAMS`] streams together (a stream that waits for a login
/// holds up the whole start, which waits for every stream).
pub const LOGINS_AT_ONCE: usize = 9;

/// The most connections one relay carries (a session's control connection and up to 256
/// data streams, with room for a retry).
const MAX_TUNNELS: usize = 300;

/// The verdict of a run or copy carried through ssh (see [`crate::telemetry::view::THROUGH_SSH`]).
pub use crate::telemetry::view::THROUGH_SSH as VERDICT;

/// What the far bridge writes first, once its ssh has logged in and it runs.
pub const BRIDGE_UP: u8 = b'+';

/// A loopback relay whose every connection rides an ssh connection of its own to the far
/// end's port.
pub struct SshRelay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    tunnels: Arc<Tunnels>,
    thread: Option<JoinHandle<()>>,
    /// Until [`SshRelay::aim`]: the listener, and the logins made ahead.
    waiting: Option<(TcpListener, Vec<Spare>)>,
}

/// An ssh logging in or logged in, its far bridge waiting for the port on its stdin.
struct Spare {
    stdin: ChildStdin,
    /// Its stdout, once the bridge said it is up (an error: the login failed).
    stdout: mpsc::Receiver<io::Result<ChildStdout>>,
}

/// The ssh processes a relay started, the command that starts one, and the logins under
/// way.
struct Tunnels {
    argv: Vec<String>,
    running: Mutex<Vec<Child>>,
    started: AtomicUsize,
    logging_in: Mutex<usize>,
    login_done: Condvar,
}

impl SshRelay {
    /// A relay whose first `count` ssh connections (at most [`LOGINS_AT_ONCE`]) log in
    /// now, before the far end's port is known; it carries nothing until
    /// [`SshRelay::aim`]. `rsh` is the user's ssh command (`-e`), `port` its `-p`,
    /// `destination` the `[user@]host`, and `far_longhaul` the far command that started
    /// the far end.
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
        argv.extend([far_longhaul.to_string(), "ssh-bridge".into(), "-".into()]);
        let tunnels = Arc::new(Tunnels::new(argv));
        let mut spares = Vec::new();
        for _ in 0..count.min(LOGINS_AT_ONCE) {
            spares.push(tunnels.login()?);
        }
        Ok(Self {
            addr,
            stop: Arc::new(AtomicBool::new(false)),
            tunnels,
            thread: None,
            waiting: Some((listener, spares)),
        })
    }

    /// Tells the logins made ahead where the far end listens (`far`, as the far host
    /// reaches it) and starts carrying connections: first through those, then each
    /// through an ssh of its own.
    pub fn aim(&mut self, far: SocketAddr) -> io::Result<()> {
        let Some((listener, mut spares)) = self.waiting.take() else {
            return Ok(());
        };
        let line = format!("{}\n", forward_target(far));
        // A short line into a pipe: it waits there until the far bridge reads it.
        for spare in &mut spares {
            let _ = spare.stdin.write_all(line.as_bytes());
        }
        let (stop, tunnels) = (self.stop.clone(), self.tunnels.clone());
        self.thread = Some(
            std::thread::Builder::new()
                .name("lh-ssh-relay".into())
                .spawn(move || relay(listener, &line, spares, &stop, &tunnels))?,
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
    fn new(argv: Vec<String>) -> Self {
        Self {
            argv,
            running: Mutex::new(Vec::new()),
            started: AtomicUsize::new(0),
            logging_in: Mutex::new(0),
            login_done: Condvar::new(),
        }
    }

    /// Starts one ssh once fewer than [`LOGINS_AT_ONCE`] are logging in; a thread waits
    /// for its bridge's first byte ([`BRIDGE_UP`]) and counts the login done.
    fn login(self: &Arc<Self>) -> io::Result<Spare> {
        // Given back when dropped: on every error below, or once the bridge is up.
        let slot = LoginSlot::take(self);
        let mut child = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let (Some(stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("ssh started without its pipes"));
        };
        self.add(child);
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("lh-ssh-login".into())
            .spawn(move || {
                let mut up = [0u8; 1];
                let said = match stdout.read_exact(&mut up) {
                    Ok(()) if up[0] == BRIDGE_UP => Ok(stdout),
                    Ok(()) => Err(io::Error::other("the far bridge said something else")),
                    Err(e) => Err(e),
                };
                drop(slot);
                let _ = tx.send(said);
            })?;
        Ok(Spare { stdin, stdout: rx })
    }

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

/// One of the [`LOGINS_AT_ONCE`] logins under way, given back when dropped.
struct LoginSlot(Arc<Tunnels>);

impl LoginSlot {
    /// Waits until fewer than [`LOGINS_AT_ONCE`] logins are under way, and takes one.
    fn take(tunnels: &Arc<Tunnels>) -> Self {
        let mut n = tunnels.logging_in.lock().unwrap_or_else(|p| p.into_inner());
        while *n >= LOGINS_AT_ONCE {
            n = tunnels
                .login_done
                .wait(n)
                .unwrap_or_else(|p| p.into_inner());
        }
        *n += 1;
        Self(tunnels.clone())
    }
}

impl Drop for LoginSlot {
    fn drop(&mut self) {
        *self.0.logging_in.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.0.login_done.notify_one();
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
/// is left, then to a new one told `line` (the target).
fn relay(
    listener: TcpListener,
    line: &str,
    mut spares: Vec<Spare>,
    stop: &AtomicBool,
    tunnels: &Arc<Tunnels>,
) {
    // The first connections take the first logins.
    spares.reverse();
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
        let spare = match spares.pop() {
            Some(spare) => spare,
            None if tunnels.running() >= MAX_TUNNELS => continue,
            None => match tunnels.login() {
                Ok(mut spare) => {
                    let _ = spare.stdin.write_all(line.as_bytes());
                    spare
                }
                Err(_) => continue,
            },
        };
        let _ = join(conn, spare);
    }
}

/// Whether `conn` comes from a socket of this process's user.
pub(super) fn ours(conn: &TcpStream) -> bool {
    let (Ok(SocketAddr::V4(peer)), Ok(SocketAddr::V4(local))) =
        (conn.peer_addr(), conn.local_addr())
    else {
        return false;
    };
    let me = longhaul_sys::creds::thread_uids().1;
    matches!(longhaul_sys::peer_uid::loopback_peer_uid(peer, local), Ok(Some(uid)) if uid == me)
}

/// Joins a local connection to an ssh's pipes, one thread each way; the way back starts
/// once its bridge is up (a failed login closes the connection).
fn join(conn: TcpStream, spare: Spare) -> io::Result<()> {
    let Spare { mut stdin, stdout } = spare;
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
            match stdout.recv() {
                Ok(Ok(mut stdout)) => {
                    let _ = super::bridge::pump(&mut stdout, &mut to_local);
                    let _ = to_local.shutdown(std::net::Shutdown::Write);
                }
                // The login failed: the client hears it at once.
                _ => _ = to_local.shutdown(std::net::Shutdown::Both),
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relay's accept loop on the loopback, with no logins made ahead; what it runs
    /// stands in for `ssh host longhaul ssh-bridge -`: it says it is up, reads the
    /// target's line, then echoes (the real ssh is in the cli tests).
    struct TestRelay {
        addr: SocketAddr,
        stop: Arc<AtomicBool>,
        tunnels: Arc<Tunnels>,
        thread: JoinHandle<()>,
    }

    impl TestRelay {
        fn start() -> Self {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            let addr = listener.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let bridge_like = ["sh", "-c", "printf +; read target; exec cat"];
            let tunnels = Arc::new(Tunnels::new(bridge_like.map(String::from).to_vec()));
            let thread = {
                let (stop, tunnels) = (stop.clone(), tunnels.clone());
                std::thread::spawn(move || relay(listener, "target\n", Vec::new(), &stop, &tunnels))
            };
            Self {
                addr,
                stop,
                tunnels,
                thread,
            }
        }

        /// Stops the accept loop; what it started.
        fn stop(self) -> Arc<Tunnels> {
            self.stop.store(true, Ordering::Relaxed);
            let _ = TcpStream::connect(self.addr);
            self.thread.join().unwrap();
            self.tunnels
        }
    }

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
        let relay = TestRelay::start();
        let addr = relay.addr;
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
        let tunnels = relay.stop();
        assert_eq!(tunnels.started.load(Ordering::Relaxed), 0);
    }

    /// The relay carries bytes both ways through the program it runs, and reaps it: `cat`
    /// stands in for ssh here, echoing what it is sent (the real ssh is in the cli tests).
    #[test]
    fn each_connection_rides_its_own_process() {
        use std::io::{Read, Write};
        let relay = TestRelay::start();
        let addr = relay.addr;
        for round in 0..3u8 {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(&[round; 1000]).unwrap();
            let mut back = [0u8; 1000];
            c.read_exact(&mut back).unwrap();
            assert_eq!(back, [round; 1000]);
        }
        let tunnels = relay.stop();
        assert_eq!(tunnels.started.load(Ordering::Relaxed), 3);
        let mut running = tunnels.running.lock().unwrap();
        for c in running.iter_mut() {
            let _ = c.kill();
            c.wait().unwrap();
        }
    }
}
