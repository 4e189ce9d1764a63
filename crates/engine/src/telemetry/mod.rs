//! Per-stream telemetry of data connections, shared by `bench` and `cp`: byte counters the
//! stream threads bump, and a [`Sampler`] that reads each socket's TCP_INFO once per
//! interval and turns the counters and the kernel's figures into a [`Sampled`] interval
//! (and, at the end, per-stream totals as [`StreamResult`]s).
//!
//! The sampler is the thin I/O layer (TCP_INFO, the clock); the arithmetic on snapshots is
//! in the pure [`stream_sample`], [`stream_total`] and [`crossed::CrossedMeter`] (the bytes
//! that crossed the path, behind every interval's rate).

pub mod crossed;
pub mod view;

use crate::transport::secure::SecureStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossed::{delivered_bytes, tls_payload, CrossedMeter, RateSource};
use longhaul_proto::{IntervalReport, StreamResult, StreamSample};
use longhaul_sys::tcp_info::{tcp_info, TcpInfo};

/// Which way an end moves data on its streams (the transport policy's role).
pub use longhaul_policy::Role;

/// Payload bytes per data stream, counted by the threads that write (or read) them.
#[derive(Debug)]
pub struct StreamCounters {
    bytes: Box<[AtomicU64]>,
    /// Where a sender's warm-up run lies in each stream's bytes (see [`WarmupSpan`]):
    /// they cross the path but are no transfer's bytes.
    warmup: Box<[OnceLock<WarmupSpan>]>,
}

/// A warm-up run's place in a stream's sequence space: the stream's bytes sent before it
/// (`from`) and its own bytes on the wire (`wire`, TLS framing included). The sampler takes
/// what of it the kernel counts delivered out of the stream's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmupSpan {
    /// New bytes the stream had sent (or queued) before the run.
    pub from: u64,
    /// The run's bytes on the wire.
    pub wire: u64,
}

impl WarmupSpan {
    /// How much of the run is delivered when the stream has delivered `delivered` bytes.
    pub fn delivered_of(&self, delivered: u64) -> u64 {
        delivered.saturating_sub(self.from).min(self.wire)
    }
}

impl StreamCounters {
    /// `streams` counters at zero.
    pub fn new(streams: usize) -> Self {
        Self {
            bytes: (0..streams).map(|_| AtomicU64::new(0)).collect(),
            warmup: (0..streams).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Where `stream`'s warm-up run lies (set once; not payload).
    pub fn set_warmup(&self, stream: usize, span: WarmupSpan) {
        if let Some(c) = self.warmup.get(stream) {
            let _ = c.set(span);
        }
    }

    /// `stream`'s warm-up run, if it had one.
    pub fn warmup(&self, stream: usize) -> Option<WarmupSpan> {
        self.warmup.get(stream).and_then(|c| c.get().copied())
    }

    /// Counts `n` bytes on `stream`; a stream outside the counters is ignored (the
    /// counters are a view, never a reason to fail a transfer).
    pub fn add(&self, stream: usize, n: u64) {
        if let Some(c) = self.bytes.get(stream) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The counter of `stream`, for threads that bump it themselves.
    pub fn slot(&self, stream: usize) -> Option<&AtomicU64> {
        self.bytes.get(stream)
    }

    /// Bytes counted on `stream` so far (0 outside the counters).
    pub fn get(&self, stream: usize) -> u64 {
        self.bytes
            .get(stream)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Bytes counted on all streams.
    pub fn total(&self) -> u64 {
        self.bytes.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Number of streams.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether there are no streams.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// What the sampler remembers of one stream.
struct Tracked {
    sock: Arc<SecureStream>,
    base: TcpInfo,
    prev: TcpInfo,
    prev_bytes: u64,
    /// The counter when sampling started.
    base_bytes: u64,
    /// A sender's payload bytes reported so far (delivered, never more than written).
    reported: u64,
    /// A sender's bytes that crossed before the count of writes allowed them.
    unreported: u64,
    /// A sender's warm-up bytes (wire) the kernel had delivered at the last sample.
    warmup_seen: u64,
    /// The bytes that crossed the path.
    crossed: CrossedMeter,
}

/// One interval of a set of streams: this end's samples, and the bytes that crossed the
/// path per stream (the count behind the rates).
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    /// Per-stream samples; `bytes` is what crossed at a sender, what was read at a receiver.
    pub report: IntervalReport,
    /// Payload bytes that crossed the path in the interval, per stream (as `report`).
    pub crossed: Vec<u64>,
    /// Which count `crossed` is.
    pub source: RateSource,
    /// Milliseconds `crossed` covers (the report's span, or the peer's whose count it is).
    pub crossed_ms: u64,
}

impl Sampled {
    /// A sender's samples (a peer's report): its `bytes` are what crossed.
    pub fn from_sender(report: IntervalReport) -> Self {
        Self {
            crossed: report.streams.iter().map(|s| s.bytes).collect(),
            crossed_ms: report.end_ms.saturating_sub(report.start_ms),
            report,
            source: RateSource::Delivered,
        }
    }
}

/// Samples the TCP_INFO of a set of data streams, interval after interval.
pub struct Sampler {
    role: Role,
    streams: Vec<Tracked>,
    counters: Arc<StreamCounters>,
    start: Instant,
    last_sample: Duration,
}

impl Sampler {
    /// Starts sampling `socks` (`socks[i]` is stream `i`, counted in `counters[i]`); the
    /// first interval and the totals run from `start` and from each socket's TCP_INFO now.
    pub fn new(
        role: Role,
        socks: Vec<Arc<SecureStream>>,
        counters: Arc<StreamCounters>,
        start: Instant,
    ) -> Self {
        let streams = socks
            .into_iter()
            .enumerate()
            .map(|(i, sock)| {
                let base = tcp_info(&*sock).unwrap_or_default();
                Tracked {
                    sock,
                    base,
                    prev: base,
                    prev_bytes: counters.get(i),
                    base_bytes: counters.get(i),
                    reported: 0,
                    unreported: 0,
                    warmup_seen: counters
                        .warmup(i)
                        .map_or(0, |w| w.delivered_of(delivered_bytes(&base))),
                    crossed: CrossedMeter::new(role, &base),
                }
            })
            .collect();
        Self {
            role,
            streams,
            counters,
            start,
            last_sample: Duration::ZERO,
        }
    }

    /// When sampling started.
    pub fn started_at(&self) -> Instant {
        self.start
    }

    /// The counters the sampler reads.
    pub fn counters(&self) -> &Arc<StreamCounters> {
        &self.counters
    }

    /// Per-stream samples since the previous call (or since the start).
    pub fn sample(&mut self) -> Sampled {
        let now = self.start.elapsed();
        let mut streams = Vec::with_capacity(self.streams.len());
        let mut crossed = Vec::with_capacity(self.streams.len());
        for (i, s) in self.streams.iter_mut().enumerate() {
            // A socket the kernel no longer answers for keeps its last figures.
            let info = tcp_info(&*s.sock).unwrap_or(s.prev);
            let counted = self.counters.get(i);
            // The kernel counts wire bytes: under TLS less the records' framing.
            let mut moved = s.crossed.advance(&info);
            if let (Role::Sender, Some(w)) = (self.role, self.counters.warmup(i)) {
                // A warm-up run crosses first, and is nobody's payload.
                let seen = w.delivered_of(delivered_bytes(&info)).max(s.warmup_seen);
                moved = moved.saturating_sub(seen - s.warmup_seen);
                s.warmup_seen = seen;
            }
            if s.sock.is_tls() {
                moved = tls_payload(moved);
            }
            let bytes = match self.role {
                Role::Sender => {
                    // Never more payload than was written (the framing's bytes are not
                    // payload); what crossed beyond it is reported once the writes catch
                    // up, so over the run every byte is counted once.
                    let written = counted.saturating_sub(s.base_bytes);
                    let due = s.unreported + moved;
                    moved = due.min(written.saturating_sub(s.reported));
                    s.unreported = due - moved;
                    s.reported += moved;
                    moved
                }
                Role::Receiver => counted.saturating_sub(s.prev_bytes),
            };
            streams.push(stream_sample(i as u16, self.role, &s.prev, &info, bytes));
            crossed.push(moved);
            s.prev = info;
            s.prev_bytes = counted;
        }
        let report = IntervalReport {
            start_ms: self.last_sample.as_millis() as u64,
            end_ms: now.as_millis() as u64,
            streams,
        };
        self.last_sample = now;
        Sampled {
            crossed_ms: report.end_ms.saturating_sub(report.start_ms),
            report,
            crossed,
            source: RateSource::of(self.role),
        }
    }

    /// Per-stream totals from the start: counted bytes, the time since the start, and the
    /// kernel's counters since then (`cpu_us` is 0: threads are the caller's business).
    pub fn totals(&self) -> Vec<StreamResult> {
        let elapsed = self.start.elapsed();
        self.streams
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let info = tcp_info(&*s.sock).unwrap_or(s.prev);
                stream_total(i as u16, &s.base, &info, self.counters.get(i), elapsed)
            })
            .collect()
    }
}

/// One stream's figures between two TCP_INFO snapshots, with the `bytes` the caller
/// counted (a sender: what crossed the path, [`crossed`]; a receiver: what it read).
/// A receiver's own window and rates say nothing about the path (the sender's are at the
/// other end), so they are 0, and its RTT is the kernel's receive-side estimate.
pub fn stream_sample(
    stream: u16,
    role: Role,
    prev: &TcpInfo,
    now: &TcpInfo,
    bytes: u64,
) -> StreamSample {
    let (cwnd_bytes, srtt_us, delivery_rate_bps, pacing_rate_bps) = match role {
        Role::Sender => (
            now.cwnd_bytes(),
            now.rtt_us,
            now.delivery_rate.saturating_mul(8),
            now.pacing_rate.saturating_mul(8),
        ),
        Role::Receiver => (
            0,
            if now.rcv_rtt_us > 0 {
                now.rcv_rtt_us
            } else {
                now.rtt_us
            },
            0,
            0,
        ),
    };
    StreamSample {
        stream,
        bytes,
        cwnd_bytes,
        srtt_us,
        retransmits: now.total_retrans.saturating_sub(prev.total_retrans),
        delivery_rate_bps,
        pacing_rate_bps,
        busy_us: now.busy_time_us.saturating_sub(prev.busy_time_us),
        rwnd_limited_us: now.rwnd_limited_us.saturating_sub(prev.rwnd_limited_us),
        sndbuf_limited_us: now.sndbuf_limited_us.saturating_sub(prev.sndbuf_limited_us),
    }
}

/// One stream's totals between its first snapshot `base` and `now`.
pub fn stream_total(
    stream: u16,
    base: &TcpInfo,
    now: &TcpInfo,
    bytes: u64,
    elapsed: Duration,
) -> StreamResult {
    StreamResult {
        stream,
        bytes,
        elapsed_us: elapsed.as_micros().min(u128::from(u64::MAX)) as u64,
        retransmits: u64::from(now.total_retrans.saturating_sub(base.total_retrans)),
        busy_us: now.busy_time_us.saturating_sub(base.busy_time_us),
        rwnd_limited_us: now.rwnd_limited_us.saturating_sub(base.rwnd_limited_us),
        sndbuf_limited_us: now.sndbuf_limited_us.saturating_sub(base.sndbuf_limited_us),
        min_rtt_us: now.min_rtt_us,
        srtt_us: now.rtt_us,
        cwnd_bytes: now.cwnd_bytes(),
        cpu_us: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warmup_run_is_counted_delivered_only_within_its_span() {
        let w = WarmupSpan {
            from: 600,
            wire: 40_000,
        };
        // The handshake's and hello's bytes before it, the chunks' after it.
        assert_eq!(w.delivered_of(0), 0);
        assert_eq!(w.delivered_of(600), 0);
        assert_eq!(w.delivered_of(10_600), 10_000);
        assert_eq!(w.delivered_of(40_600), 40_000);
        assert_eq!(w.delivered_of(5_000_000), 40_000);
    }

    fn info(acked: u64, retrans: u32, busy: u64, rwnd: u64, sndbuf: u64) -> TcpInfo {
        TcpInfo {
            snd_mss: 1000,
            snd_cwnd: 30,
            rtt_us: 5000,
            rcv_rtt_us: 7000,
            min_rtt_us: 4000,
            bytes_acked: acked,
            total_retrans: retrans,
            busy_time_us: busy,
            rwnd_limited_us: rwnd,
            sndbuf_limited_us: sndbuf,
            delivery_rate: 1_000_000,
            pacing_rate: 2_000_000,
            ..TcpInfo::default()
        }
    }

    #[test]
    fn a_sender_reports_the_differences_of_its_counters() {
        let s = stream_sample(
            3,
            Role::Sender,
            &info(1000, 2, 100, 10, 5),
            &info(6000, 7, 900, 40, 5),
            5000,
        );
        assert_eq!(s.stream, 3);
        assert_eq!(s.bytes, 5000);
        assert_eq!(s.retransmits, 5);
        assert_eq!(
            (s.busy_us, s.rwnd_limited_us, s.sndbuf_limited_us),
            (800, 30, 0)
        );
        assert_eq!(s.cwnd_bytes, 30_000);
        assert_eq!(s.srtt_us, 5000);
        assert_eq!(s.delivery_rate_bps, 8_000_000);
        assert_eq!(s.pacing_rate_bps, 16_000_000);
    }

    #[test]
    fn a_receiver_counts_what_it_read_and_reports_no_sender_figures() {
        let s = stream_sample(
            0,
            Role::Receiver,
            &info(0, 0, 0, 0, 0),
            &info(0, 0, 0, 0, 0),
            4096,
        );
        assert_eq!(s.bytes, 4096);
        assert_eq!(s.srtt_us, 7000, "the receive-side RTT estimate");
        assert_eq!(
            (s.cwnd_bytes, s.delivery_rate_bps, s.pacing_rate_bps),
            (0, 0, 0)
        );
        let no_rcv_rtt = TcpInfo {
            rcv_rtt_us: 0,
            ..info(0, 0, 0, 0, 0)
        };
        let s = stream_sample(0, Role::Receiver, &no_rcv_rtt, &no_rcv_rtt, 0);
        assert_eq!(s.srtt_us, 5000, "falls back to the smoothed RTT");
    }

    #[test]
    fn counters_that_go_backwards_give_zero_not_a_wrapped_number() {
        // A failed read keeps the previous snapshot; a reset connection reads zeros.
        let s = stream_sample(
            0,
            Role::Sender,
            &info(9000, 9, 900, 90, 90),
            &TcpInfo::default(),
            0,
        );
        assert_eq!(
            (
                s.bytes,
                s.retransmits,
                s.busy_us,
                s.rwnd_limited_us,
                s.sndbuf_limited_us
            ),
            (0, 0, 0, 0, 0)
        );
        let t = stream_total(
            0,
            &info(9000, 9, 900, 90, 90),
            &TcpInfo::default(),
            0,
            Duration::ZERO,
        );
        assert_eq!((t.retransmits, t.busy_us, t.rwnd_limited_us), (0, 0, 0));
    }

    #[test]
    fn totals_run_from_the_base_snapshot() {
        let t = stream_total(
            2,
            &info(0, 1, 50, 0, 10),
            &info(0, 4, 1050, 200, 30),
            77,
            Duration::from_millis(1500),
        );
        assert_eq!(t.stream, 2);
        assert_eq!(t.bytes, 77);
        assert_eq!(t.elapsed_us, 1_500_000);
        assert_eq!(t.retransmits, 3);
        assert_eq!(
            (t.busy_us, t.rwnd_limited_us, t.sndbuf_limited_us),
            (1000, 200, 20)
        );
        assert_eq!(
            (t.min_rtt_us, t.srtt_us, t.cwnd_bytes),
            (4000, 5000, 30_000)
        );
    }

    #[test]
    fn counters_add_per_stream_and_ignore_streams_they_do_not_have() {
        let c = StreamCounters::new(2);
        c.add(0, 10);
        c.add(1, 5);
        c.add(1, 5);
        c.add(7, 1000);
        assert_eq!((c.get(0), c.get(1), c.get(7)), (10, 10, 0));
        assert_eq!(c.total(), 20);
        assert_eq!(c.len(), 2);
        assert!(c.slot(2).is_none());
    }

    #[test]
    fn the_sampler_reads_real_sockets_on_loopback() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let server = SecureStream::plain(server);
        let counters = Arc::new(StreamCounters::new(1));
        let server = Arc::new(server);
        let mut sampler = Sampler::new(
            Role::Receiver,
            vec![server.clone()],
            counters.clone(),
            Instant::now(),
        );
        client.write_all(&[7u8; 10_000]).unwrap();
        let mut buf = vec![0u8; 10_000];
        (&*server).read_exact(&mut buf).unwrap();
        counters.add(0, 10_000);
        let r = sampler.sample();
        assert_eq!(r.report.streams.len(), 1);
        assert_eq!(r.report.streams[0].bytes, 10_000);
        assert!(r.report.end_ms >= r.report.start_ms);
        // All of it arrived in order: the kernel's count is exact.
        assert_eq!((r.crossed, r.source), (vec![10_000], RateSource::Arrived));
        let again = sampler.sample();
        assert_eq!(again.report.streams[0].bytes, 0, "nothing new was read");
        assert_eq!(again.crossed, vec![0], "nothing new arrived");
        let t = sampler.totals();
        assert_eq!(t[0].bytes, 10_000);
    }
}
