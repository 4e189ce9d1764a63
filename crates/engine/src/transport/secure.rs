//! The stream every longhaul connection runs on: plain TCP or TLS 1.3 over TCP, with the
//! same surface as a [`TcpStream`] (clones that share it, a reader on one thread and
//! writers on others, half-close, read timeouts, the socket underneath for options and
//! `TCP_INFO`).
//!
//! A TLS stream keeps rustls's state under a lock that is never held across a blocking
//! socket call: a reader takes ciphertext from the socket with the lock released and
//! hands it to rustls; a writer encrypts under the lock into its own buffer and writes
//! that to the socket under a separate writer lock (so records leave in sequence order).
//! One thread may then wait for the peer while another sends, as on a control
//! connection. Key updates rustls makes on its own (before a key's confidentiality limit)
//! go out with the next write; an answer rustls owes after reading goes out at once.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::stage_cpu::{self, Stage};

/// How much ciphertext one socket read takes.
const READ_CHUNK: usize = 256 * 1024;
/// Plaintext rustls encrypts per write before it is sent (a few records per syscall).
const WRITE_BATCH: usize = 256 * 1024;

/// A connection: plain TCP, or TLS 1.3 over it.
pub struct SecureStream {
    tcp: TcpStream,
    tls: Option<Arc<TlsShared>>,
    /// The socket's SO_RCVLOWAT as this handle last set it ([`SecureStream::expect_bulk`];
    /// 0: the kernel's default of one byte). Only the one reader of a stream sets it.
    lowat: u32,
}

/// The most a bulk read waits to have queued before it wakes: a piece of a chunk, so a
/// receiver through a path that delivers a packet at a time wakes once per 256 KiB, not
/// once per few packets (half its CPU went to the scheduler through such a delay line).
const BULK_LOWAT: usize = 256 * 1024;
/// What a TLS stream may hold in user space of what is sure to come when it reads the
/// socket: a partial record (the socket is read only once rustls has no whole record
/// left). A bulk read's low-water mark stays under the rest.
const TLS_READ_SLACK: usize = 16 * 1024 + 256;

struct TlsShared {
    conn: Mutex<rustls::Connection>,
    /// Held from encryption to the socket write, so records go out in order.
    writing: Mutex<Vec<u8>>,
    /// Held by the one reader at a time, with the ciphertext read but not yet decrypted.
    reading: Mutex<Pending>,
}

/// Ciphertext read from the socket: `cipher[used..filled]` is still to be given to
/// rustls. The buffer keeps its length once allocated: zeroing it again before each read
/// (a read often returns a few segments of its 256 KiB) was 8 % of a receiver's CPU.
#[derive(Default)]
struct Pending {
    cipher: Vec<u8>,
    used: usize,
    filled: usize,
}

impl SecureStream {
    /// A plain TCP connection.
    pub fn plain(tcp: TcpStream) -> Self {
        Self {
            tcp,
            tls: None,
            lowat: 0,
        }
    }

    /// A TLS connection whose handshake is complete.
    pub fn tls(tcp: TcpStream, mut conn: rustls::Connection) -> Self {
        conn.set_buffer_limit(Some(2 * WRITE_BATCH));
        Self {
            tcp,
            tls: Some(Arc::new(TlsShared {
                conn: Mutex::new(conn),
                writing: Mutex::new(Vec::with_capacity(WRITE_BATCH + 4096)),
                reading: Mutex::new(Pending::default()),
            })),
            lowat: 0,
        }
    }

    /// `bytes` of plaintext are sure to come, beyond everything the reads until the next
    /// call will take, without this end answering anything (the rest of a chunk the sender
    /// has begun, after the piece about to be read): a blocked read may wait for up to
    /// `BULK_LOWAT` of them to be queued before it wakes. `0` ends the hint (before a
    /// header, whose successor may never come). Costs a system call only when the mark
    /// must change; a failure leaves the kernel's default, which is only slower.
    pub fn expect_bulk(&mut self, bytes: usize) {
        let slack = if self.tls.is_some() {
            TLS_READ_SLACK
        } else {
            0
        };
        // Half of what is sure to come: a read that has copied part of what it waits for
        // is woken only when another SO_RCVLOWAT of new bytes is queued (the kernel
        // compares what is queued, not what the read still lacks), so the mark must fit
        // twice into the rest.
        let want = (bytes.saturating_sub(slack) / 2).min(BULK_LOWAT) as u32;
        // Lower at once (waiting for more than will come would stall the stream); raise
        // only in big steps.
        let change = want < self.lowat || want >= self.lowat.saturating_mul(2).max(64 * 1024);
        if want == self.lowat || !change {
            return;
        }
        if longhaul_sys::socket::set_rcvlowat(&self.tcp, want.max(1)).is_ok() {
            self.lowat = want;
        }
    }

    /// Whether the bytes are encrypted and authenticated (TLS).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// 32 bytes of this connection's TLS exporter (label
    /// [`longhaul_proto::EXPORTER_LABEL`]): the same at both ends of this connection and
    /// no other. `None` without TLS or before the handshake ends.
    pub fn exporter(&self) -> Option<[u8; 32]> {
        let tls = self.tls.as_ref()?;
        let conn = tls.conn.lock().ok()?;
        conn.export_keying_material([0u8; 32], longhaul_proto::EXPORTER_LABEL, None)
            .ok()
    }

    /// SHA-256 of the certificate the server presented (client side; `None` on a server or
    /// without TLS).
    pub fn peer_certificate(&self) -> Option<super::tls::Fingerprint> {
        let tls = self.tls.as_ref()?;
        let conn = tls.conn.lock().ok()?;
        let cert = conn.peer_certificates()?.first()?;
        Some(super::tls::Fingerprint::of(cert.as_ref()))
    }

    /// The TCP socket underneath (socket options, `TCP_INFO`, pacing).
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Another handle to the same connection (and the same TLS state).
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            tcp: self.tcp.try_clone()?,
            tls: self.tls.clone(),
            lowat: self.lowat,
        })
    }

    /// Shuts down one or both directions; with TLS, a write shutdown first sends the
    /// close_notify that tells the peer the data ended here, not cut short (unless a
    /// writer is blocked in the socket: a shutdown that unblocks it does not wait).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        if let (Some(t), Shutdown::Write | Shutdown::Both) = (&self.tls, how) {
            if let Ok(mut out) = t.writing.try_lock() {
                out.clear();
                if let Ok(mut c) = t.conn.lock() {
                    c.send_close_notify();
                    drain(&mut c, &mut out);
                }
                let _ = (&self.tcp).write_all(&out);
                out.clear();
            }
        }
        self.tcp.shutdown(how)
    }

    /// As [`TcpStream::set_read_timeout`].
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.tcp.set_read_timeout(d)
    }

    /// As [`TcpStream::set_nodelay`].
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.tcp.set_nodelay(on)
    }

    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.peer_addr()
    }

    /// Sends `len` bytes of `file` from `offset`: straight from the page cache
    /// (`sendfile`) on a plain connection, through `buf` and the cipher with TLS.
    pub fn send_file_range(
        &self,
        file: &std::fs::File,
        offset: u64,
        len: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        if self.tls.is_none() {
            return longhaul_sys::file_io::send_file_range(&self.tcp, file, offset, len);
        }
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            stage_cpu::timed(Stage::Disk, || {
                longhaul_sys::file_io::read_exact_at(file, &mut buf[..n], offset + done)
            })?;
            (&*self).write_all(&buf[..n])?;
            done += n as u64;
        }
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> io::Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| io::Error::other("a thread using this connection panicked"))
}

/// Moves everything rustls has to send into `out`.
fn drain(conn: &mut rustls::Connection, out: &mut Vec<u8>) {
    while conn.wants_write() {
        // Writing into a Vec cannot fail.
        if conn.write_tls(out).is_err() {
            break;
        }
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    let why = match &e {
        rustls::Error::DecryptError => {
            "a TLS record failed authentication: the stream was altered in transit (tampering \
             or corruption), so nothing from it was accepted"
                .to_string()
        }
        rustls::Error::AlertReceived(a) => format!("the peer ended TLS with alert {a:?}"),
        other => format!("TLS: {other}"),
    };
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// What a read found in rustls: plaintext, or a need for more ciphertext (and whether
/// rustls has something to send first).
enum Opened {
    Plain(usize),
    NeedMore { reply: bool },
}

impl TlsShared {
    /// Plaintext first; then ciphertext already read (rustls takes at most 16 KiB of
    /// plaintext at a time, so a large socket read is fed to it in pieces); then the
    /// socket, with the connection's lock released.
    fn read(&self, tcp: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        let mut pending = lock(&self.reading)?;
        let pending = &mut *pending;
        let mut eof = false;
        loop {
            // Opening records (and rustls's copies) is the cipher's CPU time.
            let opened = stage_cpu::timed(Stage::Cipher, || -> io::Result<Opened> {
                let mut c = lock(&self.conn)?;
                loop {
                    match c.reader().read(buf) {
                        Ok(n) => return Ok(Opened::Plain(n)),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "the connection ended without TLS close_notify (cut short)",
                            ))
                        }
                        Err(e) => return Err(e),
                    }
                    if pending.filled == pending.used && !eof {
                        break;
                    }
                    let mut rest = &pending.cipher[pending.used..pending.filled];
                    let before = rest.len();
                    // Zero bytes tells rustls the transport ended.
                    c.read_tls(&mut rest)?;
                    pending.used += before - rest.len();
                    eof = false;
                    if let Err(e) = c.process_new_packets() {
                        let mut out = Vec::new();
                        drain(&mut c, &mut out);
                        drop(c);
                        let _ = (&*tcp).write_all(&out);
                        return Err(tls_error(e));
                    }
                }
                Ok(Opened::NeedMore {
                    reply: c.wants_write(),
                })
            })?;
            let reply = match opened {
                Opened::Plain(n) => return Ok(n),
                Opened::NeedMore { reply } => reply,
            };
            if reply {
                self.flush(tcp)?;
            }
            if pending.cipher.len() < READ_CHUNK {
                pending.cipher.resize(READ_CHUNK, 0);
            }
            (pending.used, pending.filled) = (0, 0);
            let n = (&*tcp).read(&mut pending.cipher)?;
            pending.filled = n;
            eof = n == 0;
        }
    }

    fn write(&self, tcp: &TcpStream, buf: &[u8]) -> io::Result<usize> {
        let mut out = lock(&self.writing)?;
        out.clear();
        // Sealing records (and rustls's copies) is the cipher's CPU time.
        let n = stage_cpu::timed(Stage::Cipher, || -> io::Result<usize> {
            let mut c = lock(&self.conn)?;
            let n = c.writer().write(&buf[..buf.len().min(WRITE_BATCH)])?;
            drain(&mut c, &mut out);
            Ok(n)
        })?;
        let r = (&*tcp).write_all(&out);
        out.clear();
        r.map(|()| n)
    }

    fn flush(&self, tcp: &TcpStream) -> io::Result<()> {
        let mut out = lock(&self.writing)?;
        out.clear();
        {
            let mut c = lock(&self.conn)?;
            drain(&mut c, &mut out);
        }
        let r = (&*tcp).write_all(&out);
        out.clear();
        r
    }
}

impl Read for &SecureStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.tls {
            None => (&self.tcp).read(buf),
            Some(t) => t.read(&self.tcp, buf),
        }
    }
}

impl Write for &SecureStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.tls {
            None => (&self.tcp).write(buf),
            Some(t) => t.write(&self.tcp, buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &self.tls {
            None => Ok(()),
            Some(t) => t.flush(&self.tcp),
        }
    }
}

impl Read for SecureStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for SecureStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self).flush()
    }
}

impl std::os::fd::AsFd for SecureStream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.tcp.as_fd()
    }
}

impl std::os::fd::AsRawFd for SecureStream {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.tcp.as_raw_fd()
    }
}

impl std::fmt::Debug for SecureStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureStream")
            .field("tcp", &self.tcp)
            .field("tls", &self.is_tls())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::tls::{ClientTls, ServerTls, ServerTrust};
    use std::net::TcpListener;

    const T: Duration = Duration::from_secs(10);

    /// A TLS pair over loopback; `relay` (if given) sits between them and may alter bytes
    /// going from the client to the server.
    fn pair(relay: Option<fn(u64, &mut [u8])>) -> (SecureStream, SecureStream) {
        let server_tls = ServerTls::ephemeral().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut target = l.local_addr().unwrap();
        if let Some(alter) = relay {
            let r = TcpListener::bind("127.0.0.1:0").unwrap();
            let to = target;
            target = r.local_addr().unwrap();
            std::thread::spawn(move || {
                let (a, _) = r.accept().unwrap();
                let b = TcpStream::connect(to).unwrap();
                let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = io::copy(&mut &b2, &mut &a2);
                    let _ = a2.shutdown(Shutdown::Write);
                });
                let mut buf = vec![0u8; 64 * 1024];
                let mut at = 0u64;
                loop {
                    let n = match (&a).read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    alter(at, &mut buf[..n]);
                    at += n as u64;
                    if (&b).write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = b.shutdown(Shutdown::Write);
            });
        }
        let fp = server_tls.fingerprint();
        let accept = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            server_tls.accept(s, T, &[]).unwrap()
        });
        let tcp = TcpStream::connect(target).unwrap();
        let client = ClientTls::new("localhost", 0, ServerTrust::Pinned(fp))
            .unwrap()
            .connect(tcp, "test", T)
            .unwrap()
            .0;
        (client, accept.join().unwrap())
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    #[test]
    fn bulk_data_crosses_both_ways_at_once_and_ends_with_close_notify() {
        let (c, s) = pair(None);
        let n = 24 << 20;
        let (c2, s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        // Each end writes on one thread while another reads the peer's data.
        let w1 = std::thread::spawn(move || {
            (&c2).write_all(&pattern(n)).unwrap();
            c2.shutdown(Shutdown::Write).unwrap();
        });
        let w2 = std::thread::spawn(move || {
            (&s2).write_all(&pattern(n / 2)).unwrap();
            s2.shutdown(Shutdown::Write).unwrap();
        });
        let mut at_server = Vec::new();
        let r1 = std::thread::spawn(move || {
            (&s).read_to_end(&mut at_server).unwrap();
            at_server
        });
        let mut at_client = Vec::new();
        (&c).read_to_end(&mut at_client).unwrap();
        w1.join().unwrap();
        w2.join().unwrap();
        assert!(r1.join().unwrap() == pattern(n));
        assert!(at_client == pattern(n / 2));
    }

    #[test]
    fn a_connection_cut_without_close_notify_is_an_error_not_an_end() {
        let (c, s) = pair(None);
        (&c).write_all(b"partial").unwrap();
        c.tcp().shutdown(Shutdown::Both).unwrap();
        let mut got = Vec::new();
        let err = (&s).read_to_end(&mut got).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
        assert_eq!(got, b"partial");
    }

    #[test]
    fn a_byte_altered_in_transit_is_refused_and_nothing_after_it_is_read() {
        // Flip one byte 1 MB into the client's stream (well past the handshake).
        let (c, s) = pair(Some(|at, buf| {
            let target = 1 << 20;
            if at <= target && target < at + buf.len() as u64 {
                buf[(target - at) as usize] ^= 0x40;
            }
        }));
        let writer = std::thread::spawn(move || {
            let _ = (&c).write_all(&pattern(4 << 20));
            let _ = c.shutdown(Shutdown::Write);
        });
        let mut got = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let err = loop {
            match (&s).read(&mut buf) {
                Ok(0) => panic!("the altered stream ended cleanly"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("altered in transit"), "{err}");
        assert!(got.len() < 1 << 20, "{} bytes read", got.len());
        assert!(
            got == pattern(got.len()),
            "every byte delivered is the sender's"
        );
        drop(s);
        writer.join().unwrap();
    }
}
