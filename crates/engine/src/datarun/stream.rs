//! One data stream's loop: the sender writes (write, sendfile or MSG_ZEROCOPY) until its
//! budget ends, the receiver reads until end of file. Each counts its bytes for the sampler.

use crate::transport::secure::SecureStream;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use longhaul_proto::SendMode;
use longhaul_sys::zerocopy::{self, MemFile};

/// Bytes handed to the kernel per call.
const CHUNK: usize = 1 << 20;
/// Size of the payload the sender cycles through (every packet of a run carries
/// different data within this span, as the Land Speed Record rules ask).
const PAYLOAD_LEN: usize = 8 << 20;

/// The bytes a sender sends: pseudo-random data, in memory and in a memfd for sendfile.
pub struct Payload {
    bytes: longhaul_sys::aligned::AlignedBuf,
    file: Option<MemFile>,
}

impl Payload {
    /// The payload every run of this process sends in `mode`, built on first use: it is
    /// the same bytes each time, so a server running many sessions keeps one copy (two
    /// with sendfile's memfd) instead of 8 MiB per sending session.
    pub fn shared(mode: SendMode) -> io::Result<Arc<Self>> {
        static PLAIN: std::sync::Mutex<Option<Arc<Payload>>> = std::sync::Mutex::new(None);
        static WITH_FILE: std::sync::Mutex<Option<Arc<Payload>>> = std::sync::Mutex::new(None);
        let slot = match mode {
            SendMode::Sendfile => &WITH_FILE,
            _ => &PLAIN,
        };
        // The slot holds either nothing or a finished payload, so a poisoned lock is
        // still consistent.
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = &*slot {
            return Ok(p.clone());
        }
        let p = Arc::new(Self::new(mode)?);
        *slot = Some(p.clone());
        Ok(p)
    }

    /// Builds the payload; the memfd is made only for [`SendMode::Sendfile`].
    pub fn new(mode: SendMode) -> io::Result<Self> {
        let mut bytes = longhaul_sys::aligned::AlignedBuf::zeroed(PAYLOAD_LEN);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for chunk in bytes.chunks_exact_mut(8) {
            // xorshift64: cheap, incompressible enough for a link test.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        let file = match mode {
            SendMode::Sendfile => Some(MemFile::with_contents("longhaul-payload", &bytes)?),
            _ => None,
        };
        Ok(Self { bytes, file })
    }
}

/// When a sender stops.
#[derive(Clone)]
pub enum Budget {
    /// Until the flag is raised (a timed run).
    Until(Arc<AtomicBool>),
    /// Until the shared byte count is used up (a `--bytes` run: streams that go faster
    /// take more, so no stream is left holding the end of the transfer).
    Bytes(Arc<AtomicU64>),
}

impl Budget {
    /// Claims up to `want` bytes to send next; 0 means stop.
    fn claim(&self, want: usize) -> usize {
        match self {
            Budget::Until(stop) => {
                if stop.load(Ordering::Relaxed) {
                    0
                } else {
                    want
                }
            }
            Budget::Bytes(left) => {
                let mut cur = left.load(Ordering::Relaxed);
                loop {
                    let take = cur.min(want as u64);
                    if take == 0 {
                        return 0;
                    }
                    match left.compare_exchange_weak(
                        cur,
                        cur - take,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return take as usize,
                        Err(actual) => cur = actual,
                    }
                }
            }
        }
    }

    /// Gives back bytes claimed but not sent (a stream that failed).
    fn refund(&self, n: usize) {
        if let Budget::Bytes(left) = self {
            left.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// How a stream ended.
#[derive(Debug)]
pub struct StreamOutcome {
    /// Bytes written (sender) or read (receiver).
    pub bytes: u64,
    /// From the run's start to the last byte.
    pub elapsed: Duration,
    /// CPU time of the stream's thread.
    pub cpu: Duration,
    /// The error that ended it early, if any.
    pub error: Option<io::Error>,
}

/// Sends until the budget ends, then half-closes and waits for the receiver to close,
/// so that every byte is acknowledged before the sender's figures are read.
pub fn send(
    sock: &SecureStream,
    mode: SendMode,
    payload: &Payload,
    budget: &Budget,
    counter: &AtomicU64,
    start: Instant,
) -> StreamOutcome {
    let cpu0 = longhaul_sys::cpu::thread_cpu_time();
    let mut sent = 0u64;
    let result = send_loop(sock, mode, payload, budget, counter, &mut sent);
    let result = result.and_then(|()| {
        sock.shutdown(Shutdown::Write)?;
        let mut sink = [0u8; 64];
        // The receiver closes after it has read everything.
        while (&*sock).read(&mut sink)? > 0 {}
        Ok(())
    });
    StreamOutcome {
        bytes: sent,
        elapsed: start.elapsed(),
        cpu: longhaul_sys::cpu::thread_cpu_time() - cpu0,
        error: result.err(),
    }
}

fn send_loop(
    sock: &SecureStream,
    mode: SendMode,
    payload: &Payload,
    budget: &Budget,
    counter: &AtomicU64,
    sent: &mut u64,
) -> io::Result<()> {
    // sendfile and MSG_ZEROCOPY hand bytes to the kernel as they are: under TLS every
    // byte goes through the cipher, so the mode is a plain write.
    let mode = if sock.is_tls() { SendMode::Write } else { mode };
    let len = payload.bytes.len();
    let mut offset = 0usize;
    let mut zc_pending = 0u64;
    if mode == SendMode::MsgZerocopy {
        zerocopy::enable_zerocopy(sock)?;
    }
    loop {
        let want = CHUNK.min(len - offset);
        let n = budget.claim(want);
        if n == 0 {
            break;
        }
        let mut done = 0usize;
        while done < n {
            let at = offset + done;
            // The first byte leaves as the first write begins: a blocking write of a
            // whole piece returns only once the socket took all of it, round trips later
            // in slow start.
            crate::startup::note_first_data();
            let r = match mode {
                SendMode::Write => (&*sock).write(&payload.bytes[at..offset + n]),
                SendMode::Sendfile => match &payload.file {
                    Some(f) => f.send_to(sock, at as u64, n - done),
                    None => (&*sock).write(&payload.bytes[at..offset + n]),
                },
                SendMode::MsgZerocopy => {
                    let r = zerocopy::send_zerocopy(sock, &payload.bytes[at..offset + n]);
                    match r {
                        Err(e) if zerocopy::is_out_of_buffers(&e) => {
                            let (c, _) = zerocopy::drain_zerocopy_completions(sock)?;
                            zc_pending = zc_pending.saturating_sub(c);
                            if c == 0 {
                                std::thread::sleep(Duration::from_micros(50));
                            }
                            continue;
                        }
                        Ok(k) => {
                            zc_pending += 1;
                            if zc_pending % 32 == 0 {
                                let (c, _) = zerocopy::drain_zerocopy_completions(sock)?;
                                zc_pending = zc_pending.saturating_sub(c);
                            }
                            Ok(k)
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            match r {
                Ok(0) => {
                    budget.refund(n - done);
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "the connection stopped taking data",
                    ));
                }
                Ok(k) => {
                    done += k;
                    *sent += k as u64;
                    counter.fetch_add(k as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    budget.refund(n - done);
                    return Err(e);
                }
            }
        }
        offset = (offset + n) % len;
    }
    Ok(())
}

/// What a bench receiver lets queue before a read wakes (SO_RCVLOWAT).
const BULK_READ_LOWAT: u32 = 128 * 1024;

/// Reads until end of file, then closes, which tells the sender everything arrived.
/// `read_rate_bps` throttles the reading application on purpose (to show receiver-side
/// pacing); 0 reads as fast as possible.
pub fn receive(
    sock: &SecureStream,
    counter: &AtomicU64,
    start: Instant,
    read_rate_bps: u64,
) -> StreamOutcome {
    let cpu0 = longhaul_sys::cpu::thread_cpu_time();
    // The sender half-closes at the end, and nothing in between waits for this end: a
    // read may wait for 128 KiB to be queued (a FIN wakes it sooner), not wake at every
    // few packets of a path that delivers them one at a time. Not when reading slowly on
    // purpose, and not for the first read: it tells the first byte's arrival (a first
    // flight of slow start is smaller than the mark, whose wait would count one more
    // round trip).
    let mut bulk = read_rate_bps > 0;
    let mut buf = longhaul_sys::aligned::AlignedBuf::zeroed(CHUNK);
    let mut got = 0u64;
    let mut last_byte = start.elapsed();
    let result = loop {
        let want = if read_rate_bps > 0 {
            64 * 1024
        } else {
            buf.len()
        };
        match (&*sock).read(&mut buf[..want]) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                crate::startup::note_first_data();
                if !bulk {
                    bulk = true;
                    let _ = longhaul_sys::socket::set_rcvlowat(sock.tcp(), BULK_READ_LOWAT);
                }
                got += n as u64;
                counter.fetch_add(n as u64, Ordering::Relaxed);
                last_byte = start.elapsed();
                if read_rate_bps > 0 {
                    let due = Duration::from_secs_f64(got as f64 * 8.0 / read_rate_bps as f64);
                    if let Some(wait) = due.checked_sub(start.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    let _ = sock.shutdown(Shutdown::Both);
    StreamOutcome {
        bytes: got,
        elapsed: last_byte,
        cpu: longhaul_sys::cpu::thread_cpu_time() - cpu0,
        error: result.err(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (SecureStream, SecureStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (SecureStream::plain(c), SecureStream::plain(s))
    }

    #[test]
    fn byte_budget_is_exact_in_every_send_mode() {
        for mode in [SendMode::Write, SendMode::Sendfile, SendMode::MsgZerocopy] {
            let (c, s) = pair();
            let start = Instant::now();
            let rx = std::thread::spawn(move || {
                let counter = AtomicU64::new(0);
                receive(&s, &counter, start, 0)
            });
            let payload = Payload::new(mode).unwrap();
            let budget = Budget::Bytes(Arc::new(AtomicU64::new(20_000_001)));
            let counter = AtomicU64::new(0);
            let out = send(&c, mode, &payload, &budget, &counter, start);
            assert!(out.error.is_none(), "{mode:?}: {:?}", out.error);
            assert_eq!(out.bytes, 20_000_001, "{mode:?}");
            let r = rx.join().unwrap();
            assert_eq!(r.bytes, 20_000_001, "{mode:?}");
        }
    }

    #[test]
    fn budget_is_shared_between_streams() {
        let left = Arc::new(AtomicU64::new(10));
        let b = Budget::Bytes(left.clone());
        assert_eq!(b.claim(4), 4);
        assert_eq!(b.claim(4), 4);
        assert_eq!(b.claim(4), 2);
        assert_eq!(b.claim(4), 0);
        b.refund(3);
        assert_eq!(b.claim(4), 3);
    }
}
