//! The other way round through a firewall, this side: the far end's port cannot be
//! reached from here, but this host can be reached from there. A relay listens on this
//! host's loopback, where the client dials as it would dial the far end; for each
//! connection it accepts it asks the far end, over the ssh channel's stdin, to connect
//! back to a port this host listens on ([`super::dial_back`]: `dial PORT TAG`), pairs the
//! connection that arrives saying that one-time tag with the one waiting, and carries bytes
//! between them. The data crosses the path on TCP connections of their own, as direct
//! ones do (not through ssh's channel windows); TLS and the token's proof run end to end
//! inside.
//!
//! The public port is the first free one of `--port-range` (else an ephemeral one), on
//! every interface. A connection to it that does not say a tag this relay is waiting for
//! within a few seconds is closed: a stranger can neither take a stream's place nor keep a
//! thread. Before the session uses the relay, [`ReverseRelay::probe`] checks the way once
//! (`probe PORT TAG`: the far end connects, says the tag, closes).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::dial_back::{join, Request, DIAL_TIMEOUT, TAG_LEN};

/// How long a connection to the public port has to say its tag.
const TAG_WAIT: Duration = Duration::from_secs(5);

/// How long a local connection waits for its connection back (the far end's own try,
/// and a round trip or two).
const PAIR_WAIT: Duration = Duration::from_secs(12);

/// The far end's stdin, shared by everyone who writes requests to it (closed by
/// [`super::launch::FarEnd::finish`]).
pub type FarStdin = Arc<Mutex<Option<ChildStdin>>>;

type Waiting = Arc<Mutex<HashMap<[u8; TAG_LEN], mpsc::Sender<TcpStream>>>>;

/// A loopback relay whose every connection comes back from the far end.
pub struct ReverseRelay {
    local: SocketAddr,
    public_port: u16,
    stdin: FarStdin,
    waiting: Waiting,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    carried: Arc<AtomicUsize>,
}

impl ReverseRelay {
    /// Listens on the loopback and on the public port (the first free one of `range`,
    /// else an ephemeral one); carries nothing until connections arrive.
    pub fn open(range: Option<(u16, u16)>, stdin: FarStdin) -> io::Result<Self> {
        let local_listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let public = bind_public(range)?;
        let mut relay = Self {
            local: local_listener.local_addr()?,
            public_port: public.local_addr()?.port(),
            stdin,
            waiting: Arc::default(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            carried: Arc::default(),
        };
        let (waiting, stop) = (relay.waiting.clone(), relay.stop.clone());
        relay.threads.push(
            std::thread::Builder::new()
                .name("lh-reverse-in".into())
                .spawn(move || accept_back(public, &waiting, &stop))?,
        );
        let (waiting, stop, stdin, carried) = (
            relay.waiting.clone(),
            relay.stop.clone(),
            relay.stdin.clone(),
            relay.carried.clone(),
        );
        let port = relay.public_port;
        relay.threads.push(
            std::thread::Builder::new()
                .name("lh-reverse".into())
                .spawn(move || {
                    accept_local(local_listener, port, &waiting, &stdin, &stop, &carried)
                })?,
        );
        Ok(relay)
    }

    /// Whether the far end can connect back: one `probe`, answered within `wait`.
    pub fn probe(&self, wait: Duration) -> bool {
        let Ok(rx) = ask(
            &self.waiting,
            &self.stdin,
            Request::Probe {
                port: self.public_port,
                tag: new_tag(),
            },
        ) else {
            return false;
        };
        rx.recv_timeout(wait).is_ok()
    }

    /// Where the client dials instead of the far end.
    pub fn addr(&self) -> SocketAddr {
        self.local
    }

    /// The port the far end connects back to.
    pub fn public_port(&self) -> u16 {
        self.public_port
    }

    /// How many connections it has carried so far.
    pub fn carried(&self) -> usize {
        self.carried.load(Ordering::Relaxed)
    }
}

impl Drop for ReverseRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake both accepts.
        let _ = TcpStream::connect(self.local);
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.public_port));
        for t in self.threads.drain(..) {
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

/// Accepts the client's connections on the loopback; each asks for a connection back and
/// is joined to it.
fn accept_local(
    local: TcpListener,
    port: u16,
    waiting: &Waiting,
    stdin: &FarStdin,
    stop: &AtomicBool,
    carried: &Arc<AtomicUsize>,
) {
    for conn in local.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(conn) = conn else { continue };
        // Only this user's connections (another user's would spend our far end's dials).
        if !super::relay::ours(&conn) {
            continue;
        }
        let _ = conn.set_nodelay(true);
        let tag = new_tag();
        let Ok(rx) = ask(waiting, stdin, Request::Dial { port, tag }) else {
            continue;
        };
        let (waiting, carried) = (waiting.clone(), carried.clone());
        let _ = std::thread::Builder::new()
            .name("lh-reverse-join".into())
            .spawn(move || match rx.recv_timeout(PAIR_WAIT + DIAL_TIMEOUT) {
                Ok(back) => {
                    carried.fetch_add(1, Ordering::Relaxed);
                    let _ = join(conn, back);
                }
                Err(_) => {
                    // Never came: the client hears it at once.
                    if let Ok(mut w) = waiting.lock() {
                        w.remove(&tag);
                    }
                    let _ = conn.shutdown(std::net::Shutdown::Both);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssh::dial_back::DialBack;
    use std::process::{Command, Stdio};

    /// The far end's stdin is a pipe into a thread that hands each line to a
    /// [`DialBack`] on this host (ssh and the far process are in the cli tests).
    #[test]
    fn connections_come_back_tagged_and_carry_bytes() {
        let far = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let far_addr = far.local_addr().unwrap();
        std::thread::spawn(move || {
            for c in far.incoming().take(2) {
                let mut c = c.unwrap();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4];
                    c.read_exact(&mut buf).unwrap();
                    c.write_all(&buf).unwrap();
                });
            }
        });
        // `cat` stands in for ssh: what is written to its stdin comes out of its stdout.
        let mut cat = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin: FarStdin = Arc::new(Mutex::new(cat.stdin.take()));
        let mut lines = io::BufReader::new(cat.stdout.take().unwrap());
        let back = Arc::new(DialBack::to(Some(Ipv4Addr::LOCALHOST.into())));
        back.serving(far_addr);
        std::thread::spawn(move || {
            let mut line = String::new();
            while io::BufRead::read_line(&mut lines, &mut line).unwrap_or(0) > 0 {
                back.command(line.trim_end());
                line.clear();
            }
        });
        let relay = ReverseRelay::open(None, stdin.clone()).unwrap();
        assert!(relay.probe(Duration::from_secs(5)), "the probe came back");
        for round in 0..2u8 {
            let mut c = TcpStream::connect(relay.addr()).unwrap();
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
        drop(relay);
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
