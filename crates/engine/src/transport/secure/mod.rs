//! The stream every longhaul connection runs on: plain TCP or TLS 1.3 over TCP, with the
//! same surface as a [`TcpStream`] (clones that share it, a reader on one thread and
//! writers on others, half-close, read timeouts, the socket underneath for options and
//! `TCP_INFO`).
//!
//! After rustls's handshake a TLS stream carries its records with longhaul's own record
//! layer ([`super::record`]; one copy per byte where rustls's buffered connection made
//! three): the receiving half under a reader lock, the sending half under a writer lock
//! held from sealing to the socket write (so records leave in sequence order). One
//! thread may then wait for the peer while another sends, as on a control connection.
//! A KeyUpdate the peer asks for goes out before this end's next record.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::record::{self, Receiver, Sender, Step};
use crate::stage_cpu::{self, Stage, Stretch};

/// How much ciphertext one socket read takes.
const READ_CHUNK: usize = 256 * 1024;
/// Reads of at least this much go from the socket straight into the reader's buffer,
/// where their records are opened in place ([`record::Receiver::open_in`]).
const DIRECT_READ: usize = 32 * 1024;
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
    /// Held from sealing to the socket write, so records go out in order.
    writing: Mutex<Sender>,
    /// Held by the one reader at a time, with the ciphertext read but not yet opened.
    reading: Mutex<Receiver>,
    /// The peer asked for our KeyUpdate (seen by the reader, sent by the next writer).
    update_owed: AtomicBool,
    exporter: Option<[u8; 32]>,
    peer_certificate: Option<super::tls::Fingerprint>,
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

    /// A TLS connection whose handshake rustls completed: its records go to the record
    /// layer from here; `ahead` is what was read from the socket past the handshake.
    pub(crate) fn tls(
        tcp: TcpStream,
        conn: rustls::Connection,
        log: &super::tls::handover::SecretLog,
        ahead: &[u8],
    ) -> io::Result<Self> {
        let h = super::tls::handover::hand_over(conn, log, ahead, READ_CHUNK)?;
        Ok(Self {
            tcp,
            tls: Some(Arc::new(TlsShared {
                writing: Mutex::new(h.sender),
                reading: Mutex::new(h.receiver),
                update_owed: AtomicBool::new(false),
                exporter: h.exporter,
                peer_certificate: h.peer_certificate,
            })),
            lowat: 0,
        })
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
        self.tls.as_ref()?.exporter
    }

    /// SHA-256 of the certificate the server presented (client side; `None` on a server or
    /// without TLS).
    pub fn peer_certificate(&self) -> Option<super::tls::Fingerprint> {
        self.tls.as_ref()?.peer_certificate
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
            if let Ok(mut tx) = t.writing.try_lock() {
                tx.close_notify();
                let _ = send_sealed(&self.tcp, &mut tx);
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
        let _ = buf;
        self.send_file_range_hashed(file, offset, len, &mut |_| {})
    }

    /// With TLS: sends `len` bytes of `file` from `offset`, giving `hash` each record's
    /// plaintext between its read and its sealing (while it is in cache; its time is the
    /// hash stage's): a chunk is hashed as it goes, its file read once. Without TLS, an
    /// error (nothing is sent).
    pub fn send_file_range_hashed(
        &self,
        file: &std::fs::File,
        offset: u64,
        len: u64,
        hash: &mut dyn FnMut(&[u8]),
    ) -> io::Result<()> {
        match &self.tls {
            Some(t) => t.send_file_range(&self.tcp, file, offset, len, hash),
            None => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a plain connection sends files from the page cache, unseen",
            )),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> io::Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| io::Error::other("a thread using this connection panicked"))
}

/// One socket read of more ciphertext, tried again when a signal interrupted it (as
/// `read_exact` does); the end of the connection here is an error: no close_notify came.
fn read_more(tcp: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match (&*tcp).read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection ended without TLS close_notify (cut short)",
                ))
            }
            r => return r,
        }
    }
}

/// Writes the records `tx` sealed and empties its buffer for the next ones.
fn send_sealed(tcp: &TcpStream, tx: &mut Sender) -> io::Result<()> {
    let out = tx.take();
    let r = (&*tcp).write_all(out);
    out.clear();
    r
}

impl TlsShared {
    /// Plaintext already opened first; then the next whole record; then the socket, with
    /// only the reader's lock held.
    fn read(&self, tcp: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        let mut rx = lock(&self.reading)?;
        loop {
            // Opening records (and the copy out) is the cipher's CPU time.
            let step = stage_cpu::timed(Stage::Cipher, || rx.read(buf));
            self.note_update_request(&mut rx);
            match step.map_err(|e| self.refuse(tcp, e))? {
                Step::Plain(n) => return Ok(n),
                Step::Closed => return Ok(0),
                Step::NeedMore => {}
            }
            // A small read (a frame, a chunk's header) takes one record from the socket,
            // not a batch: what follows it may be a large read's, which then goes
            // straight into its own buffer ([`TlsShared::read_exact`]).
            let small = buf.len() < DIRECT_READ;
            let want = if small {
                rx.wanted().unwrap_or(record::HEADER)
            } else {
                usize::MAX
            };
            let space = rx.space();
            let want = want.min(space.len());
            let n = read_more(tcp, &mut space[..want])?;
            rx.filled(n);
        }
    }

    /// Fills `buf` whole: a large read goes from the socket straight into `buf`, where its
    /// records are opened in place (no copy); what is already buffered, and small reads,
    /// go the usual way.
    fn read_exact(&self, tcp: &TcpStream, buf: &mut [u8]) -> io::Result<()> {
        let mut rx = lock(&self.reading)?;
        // buf[..plain] is filled; buf[cipher..end] is ciphertext read straight into it.
        let (mut plain, mut cipher, mut end) = (0, 0, 0);
        while plain < buf.len() {
            let direct = buf.len() - plain >= DIRECT_READ;
            if cipher < end || (direct && rx.is_empty()) {
                end += read_more(tcp, &mut buf[end..])?;
                let opened =
                    stage_cpu::timed(Stage::Cipher, || rx.open_in(buf, plain, cipher, end));
                self.note_update_request(&mut rx);
                (plain, cipher) = opened.map_err(|e| self.refuse(tcp, e))?;
                continue;
            }
            if let Some(want) = rx.wanted().filter(|_| direct) {
                // Only the rest of the record that did not fit: the reads after it go
                // straight into `buf` again.
                let space = rx.space();
                let want = want.min(space.len());
                let n = read_more(tcp, &mut space[..want])?;
                rx.filled(n);
                continue;
            }
            drop(rx);
            match self.read(tcp, &mut buf[plain..])? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => plain += n,
            }
            rx = lock(&self.reading)?;
            (cipher, end) = (plain, plain);
        }
        Ok(())
    }

    /// A KeyUpdate the peer asked for in what `rx` opened is owed before the next write.
    fn note_update_request(&self, rx: &mut Receiver) {
        if rx.take_update_request() {
            self.update_owed.store(true, Ordering::Relaxed);
        }
    }

    /// Tells the peer why its records were refused (unless a writer is busy); the error
    /// for the reader.
    fn refuse(&self, tcp: &TcpStream, e: record::RecordError) -> io::Error {
        if let Ok(mut tx) = self.writing.try_lock() {
            tx.alert_for(&e);
            let _ = send_sealed(tcp, &mut tx);
        }
        io::Error::new(io::ErrorKind::InvalidData, e.to_string())
    }

    /// Takes the writer's lock, with a KeyUpdate the peer asked for queued first.
    fn sender(&self) -> io::Result<MutexGuard<'_, Sender>> {
        let mut tx = lock(&self.writing)?;
        if self.update_owed.swap(false, Ordering::Relaxed) {
            tx.owe_update();
        }
        Ok(tx)
    }

    fn write(&self, tcp: &TcpStream, buf: &[u8]) -> io::Result<usize> {
        let mut tx = self.sender()?;
        // Sealing records (and the copy in) is the cipher's CPU time.
        let n = stage_cpu::timed(Stage::Cipher, || tx.seal(buf, WRITE_BATCH));
        send_sealed(tcp, &mut tx).map(|()| n)
    }

    /// Sends a KeyUpdate owed to the peer, if any (there is nothing else to flush).
    fn flush(&self, tcp: &TcpStream) -> io::Result<()> {
        let mut tx = self.sender()?;
        tx.settle();
        send_sealed(tcp, &mut tx)
    }

    /// `len` bytes of `file` from `offset`, read straight into the records that carry
    /// them (no copy in user space), sent a batch at a time.
    fn send_file_range(
        &self,
        tcp: &TcpStream,
        file: &std::fs::File,
        offset: u64,
        len: u64,
        hash: &mut dyn FnMut(&[u8]),
    ) -> io::Result<()> {
        let mut tx = self.sender()?;
        let mut done = 0u64;
        while done < len {
            let batch_end = len.min(done + WRITE_BATCH as u64);
            // A record's read, hash and seal take microseconds each: timed as one stretch.
            let mut stretch = Stretch::begin();
            while done < batch_end {
                let n = (batch_end - done).min(record::MAX_PLAIN as u64) as usize;
                let slot = tx.begin_record(n);
                let read = longhaul_sys::file_io::read_exact_at(file, slot, offset + done);
                stretch.done(Stage::Disk);
                if let Err(e) = read {
                    tx.abandon_record();
                    stretch.end();
                    return Err(e);
                }
                hash(slot);
                stretch.done(Stage::Hash);
                tx.end_record();
                stretch.done(Stage::Cipher);
                done += n as u64;
            }
            stretch.end();
            send_sealed(tcp, &mut tx)?;
        }
        Ok(())
    }
}

impl Read for &SecureStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.tls {
            None => (&self.tcp).read(buf),
            Some(t) => t.read(&self.tcp, buf),
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        match &self.tls {
            None => (&self.tcp).read_exact(buf),
            Some(t) => t.read_exact(&self.tcp, buf),
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

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        (&*self).read_exact(buf)
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
mod tests;
