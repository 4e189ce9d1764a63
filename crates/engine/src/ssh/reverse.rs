//! The other way round through a firewall, this side: the far end's port cannot be
//! reached from here, but this host can be reached from there. This host listens on a
//! port of its own (the first free one of `--port-range`, else an ephemeral one, on every
//! interface; as root with a receive buffer wide enough for any window, so that the
//! connections' window scale allows the path's), and each connection the session dials
//! to the far end becomes a request over the ssh channel's stdin ([`super::dial_back`]:
//! `dial PORT TAG`): the connection that arrives saying that one-time tag is the
//! session's, handed to the dialer itself ([`crate::transport::connect_back`]), so the
//! session's buffers, pacing and `TCP_INFO` are those of the socket that crosses the path.
//! The far end serves it as a connection it accepted; TLS and the token's proof run on it
//! as on any.
//!
//! The address the session dials is a loopback port reserved here (never accepted on:
//! the dialer intercepts it). A connection to the public port that does not say a tag
//! being waited for within a few seconds is closed: a stranger can neither take a
//! stream's place nor keep a thread. Before the session uses the way,
//! [`ReverseRelay::probe`] checks it once (`probe PORT TAG`: the far end connects, says
//! the tag, closes).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use longhaul_policy::MAX_WINDOW;

use super::dial_back::{Request, DIAL_TIMEOUT, TAG_LEN};
use crate::transport::connect_back::{self, Connector};

/// How long a connection to the public port has to say its tag.
const TAG_WAIT: Duration = Duration::from_secs(5);

/// How long a connection waits for its connection back (the far end's own try, and a
/// round trip or two).
const PAIR_WAIT: Duration = Duration::from_secs(DIAL_TIMEOUT.as_secs() + 5);

/// The far end's stdin, shared by everyone who writes requests to it (closed by
/// [`super::launch::FarEnd::finish`]).
pub type FarStdin = Arc<Mutex<Option<ChildStdin>>>;

type Waiting = Arc<Mutex<HashMap<[u8; TAG_LEN], mpsc::Sender<TcpStream>>>>;

/// Connections that come back from the far end, for the dialer.
pub struct ReverseRelay {
    /// The reserved loopback address the session dials.
    local: TcpListener,
    asker: Arc<Asker>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What asks the far end for a connection back and waits for it.
struct Asker {
    port: u16,
    stdin: FarStdin,
    waiting: Waiting,
    carried: AtomicUsize,
}

impl Asker {
    /// Asks for `req` and waits at most `wait` for the connection that says its tag (the
    /// tag is forgotten when it does not come).
    fn back(&self, req: Request, wait: Duration) -> Option<TcpStream> {
        let (Request::Dial { tag, .. } | Request::Probe { tag, .. }) = req;
        let rx = ask(&self.waiting, &self.stdin, req).ok()?;
        let back = rx.recv_timeout(wait).ok();
        if back.is_none() {
            if let Ok(mut w) = self.waiting.lock() {
                w.remove(&tag);
            }
        }
        back
    }
}

impl Connector for Asker {
    fn connect(&self, _receiving: bool) -> io::Result<TcpStream> {
        let req = Request::Dial {
            port: self.port,
            tag: new_tag(),
        };
        let back = self.back(req, PAIR_WAIT).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the far end did not connect back to this host's port {} within {} s",
                    self.port,
                    PAIR_WAIT.as_secs()
                ),
            )
        })?;
        self.carried.fetch_add(1, Ordering::Relaxed);
        Ok(back)
    }
}

impl ReverseRelay {
    /// Listens on the public port (the first free one of `range`, else an ephemeral one)
    /// and reserves a loopback address; [`ReverseRelay::enable`] makes the dialer use it.
    pub fn open(range: Option<(u16, u16)>, stdin: FarStdin) -> io::Result<Self> {
        let local = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let public = bind_public(range)?;
        if longhaul_sys::socket::can_force_buffers() {
            let _ = longhaul_sys::socket::set_receive_buffer(&public, MAX_WINDOW, true);
        }
        let public_port = public.local_addr()?.port();
        let asker = Arc::new(Asker {
            port: public_port,
            stdin,
            waiting: Arc::default(),
            carried: AtomicUsize::new(0),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (waiting, stopped) = (asker.waiting.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("lh-reverse-in".into())
            .spawn(move || accept_back(public, &waiting, &stopped))?;
        Ok(Self {
            local,
            asker,
            stop,
            thread: Some(thread),
        })
    }

    /// Whether the far end can connect back: one `probe`, answered within `wait`.
    pub fn probe(&self, wait: Duration) -> bool {
        let req = Request::Probe {
            port: self.asker.port,
            tag: new_tag(),
        };
        self.asker.back(req, wait).is_some()
    }

    /// From now until dropped, the dialer reaches the far end through this relay when it
    /// dials [`ReverseRelay::addr`].
    pub fn enable(&self) -> io::Result<()> {
        connect_back::register(self.local.local_addr()?, self.asker.clone());
        Ok(())
    }

    /// Where the session dials instead of the far end.
    pub fn addr(&self) -> SocketAddr {
        self.local
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
    }

    /// The port the far end connects back to.
    pub fn public_port(&self) -> u16 {
        self.asker.port
    }

    /// How many connections have come back for the session so far.
    pub fn carried(&self) -> usize {
        self.asker.carried.load(Ordering::Relaxed)
    }
}

impl Drop for ReverseRelay {
    fn drop(&mut self) {
        if let Ok(addr) = self.local.local_addr() {
            connect_back::unregister(addr);
        }
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.asker.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A fresh random tag.
fn new_tag() -> [u8; TAG_LEN] {
    let mut tag = [0u8; TAG_LEN];
    // A failed random source leaves zeros: that connection then simply never pairs
    // with a stranger's guess of anything else.
    let _ = getrandom::getrandom(&mut tag);
    tag
}

/// Registers `req`'s tag and writes its line to the far end; the receiver gets the
/// connection that comes back saying it.
fn ask(waiting: &Waiting, stdin: &FarStdin, req: Request) -> io::Result<mpsc::Receiver<TcpStream>> {
    let (Request::Dial { tag, .. } | Request::Probe { tag, .. }) = req;
    let (tx, rx) = mpsc::channel();
    waiting
        .lock()
        .map_err(|_| io::Error::other("poisoned"))?
        .insert(tag, tx);
    let mut stdin = stdin.lock().map_err(|_| io::Error::other("poisoned"))?;
    match stdin.as_mut() {
        Some(s) => s.write_all(req.line().as_bytes())?,
        None => return Err(io::Error::other("the far end's channel is closed")),
    }
    Ok(rx)
}

/// Binds the public port on every interface (IPv6 with IPv4, else IPv4 alone).
fn bind_public(range: Option<(u16, u16)>) -> io::Result<TcpListener> {
    let ports: Vec<u16> = match range {
        Some((lo, hi)) => (lo..=hi).collect(),
        None => vec![0],
    };
    let mut last = io::Error::new(io::ErrorKind::AddrInUse, "empty port range");
    for port in ports {
        for any in [
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
        ] {
            match TcpListener::bind(any) {
                Ok(l) => return Ok(l),
                Err(e) => last = e,
            }
        }
    }
    Err(last)
}

/// Accepts connections back from the far end: each says its tag within [`TAG_WAIT`] and
/// goes to the one waiting for it; anything else is closed.
fn accept_back(public: TcpListener, waiting: &Waiting, stop: &AtomicBool) {
    for conn in public.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut conn) = conn else { continue };
        let waiting = waiting.clone();
        let _ = std::thread::Builder::new()
            .name("lh-reverse-tag".into())
            .spawn(move || {
                let mut tag = [0u8; TAG_LEN];
                let said = conn
                    .set_read_timeout(Some(TAG_WAIT))
                    .and_then(|()| conn.read_exact(&mut tag))
                    .and_then(|()| conn.set_read_timeout(None));
                if said.is_err() {
                    return;
                }
                let to = waiting.lock().ok().and_then(|mut w| w.remove(&tag));
                if let Some(tx) = to {
                    let _ = conn.set_nodelay(true);
                    let _ = tx.send(conn);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// `cat` stands in for ssh, and a thread for the far end: it reads the request lines
    /// and connects back with their tags, then echoes (the real far end, with its server,
    /// is in the cli tests).
    #[test]
    fn dialed_connections_come_back_tagged() {
        let mut cat = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin: FarStdin = Arc::new(Mutex::new(cat.stdin.take()));
        let mut lines = io::BufReader::new(cat.stdout.take().unwrap());
        std::thread::spawn(move || {
            let mut line = String::new();
            while io::BufRead::read_line(&mut lines, &mut line).unwrap_or(0) > 0 {
                let req = Request::parse(line.trim_end()).unwrap();
                let (Request::Dial { port, tag } | Request::Probe { port, tag }) = req;
                let mut c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
                c.write_all(&tag).unwrap();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4];
                    if c.read_exact(&mut buf).is_ok() {
                        let _ = c.write_all(&buf);
                    }
                });
                line.clear();
            }
        });
        let relay = ReverseRelay::open(None, stdin.clone()).unwrap();
        assert!(relay.probe(Duration::from_secs(5)), "the probe came back");
        relay.enable().unwrap();
        for round in 0..2u8 {
            let mut c = connect_back::connect(&relay.addr(), true)
                .expect("registered")
                .unwrap();
            c.write_all(&[round; 4]).unwrap();
            let mut echo = [0u8; 4];
            c.read_exact(&mut echo).unwrap();
            assert_eq!(echo, [round; 4]);
        }
        assert_eq!(relay.carried(), 2);
        // A stranger on the public port who says no tag it waits for is closed.
        let mut stranger = TcpStream::connect((Ipv4Addr::LOCALHOST, relay.public_port())).unwrap();
        stranger.write_all(&[9; TAG_LEN]).unwrap();
        let mut buf = [0u8; 1];
        assert!(!matches!(stranger.read(&mut buf), Ok(1)));
        let addr = relay.addr();
        drop(relay);
        assert!(connect_back::connect(&addr, true).is_none(), "unregistered");
        stdin.lock().unwrap().take();
        let _ = cat.wait();
    }

    #[test]
    fn without_a_far_end_the_probe_fails() {
        let stdin: FarStdin = Arc::new(Mutex::new(None));
        let relay = ReverseRelay::open(None, stdin).unwrap();
        assert!(!relay.probe(Duration::from_millis(200)));
    }
}
