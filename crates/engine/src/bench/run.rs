//! The data half of a bench run at one end: the stream threads, the TCP_INFO sampler that
//! turns counters into per-interval samples, and (at the sender) the rate probe that holds
//! pacing to the bottleneck once it is found.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhaul_proto::{IntervalReport, Results, SendMode, StreamResult, StreamSample};
use longhaul_sys::tcp_info::{tcp_info, TcpInfo};

use super::pacer::Pacer;
use super::stream::{self, Budget, Payload, StreamOutcome};
use longhaul_policy::{Chrono, ProbeAction, RateProbe};

pub use longhaul_policy::Role;

/// How the sender paces and when it stops.
pub struct SenderPlan {
    /// Send mode.
    pub mode: SendMode,
    /// Per-stream pacing cap in bit/s, if any.
    pub pacing_bps: Option<u64>,
    /// Probe the bottleneck and hold pacing to it (auto window without a rate).
    pub probe: Option<RateProbe>,
    /// Stop after this many bytes in all (None: timed, stopped by [`DataRun::stop`]).
    pub bytes: Option<u64>,
}

struct StreamState {
    sock: Arc<TcpStream>,
    counter: Arc<AtomicU64>,
    handle: Option<JoinHandle<StreamOutcome>>,
    outcome: Option<StreamOutcome>,
    base: TcpInfo,
    prev: TcpInfo,
    prev_bytes: u64,
}

/// The streams of one end of a run, from start to results.
pub struct DataRun {
    role: Role,
    streams: Vec<StreamState>,
    stop: Arc<AtomicBool>,
    start: Instant,
    last_sample: Duration,
    pacer: Option<Pacer>,
    cpu0: (Duration, Duration),
}

impl DataRun {
    /// Starts one thread per socket. `sockets[i]` is stream `i`.
    pub fn start(
        role: Role,
        sockets: Vec<TcpStream>,
        sender: Option<SenderPlan>,
        read_rate_bps: u64,
    ) -> std::io::Result<Self> {
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let cpu0 = longhaul_sys::cpu::process_cpu_times();
        let (payload, budget, mode, probe) = match (&role, sender) {
            (Role::Sender, Some(plan)) => {
                if let Some(bps) = plan.pacing_bps {
                    for s in &sockets {
                        longhaul_sys::socket::set_max_pacing_rate(s, bps / 8)?;
                    }
                }
                let budget = match plan.bytes {
                    Some(b) => Budget::Bytes(Arc::new(AtomicU64::new(b))),
                    None => Budget::Until(stop.clone()),
                };
                (
                    Some(Arc::new(Payload::new(plan.mode)?)),
                    Some(budget),
                    plan.mode,
                    plan.probe,
                )
            }
            _ => (None, None, SendMode::Write, None),
        };
        let mut streams = Vec::with_capacity(sockets.len());
        for (i, sock) in sockets.into_iter().enumerate() {
            let sock = Arc::new(sock);
            let counter = Arc::new(AtomicU64::new(0));
            let base = tcp_info(&*sock).unwrap_or_default();
            let (s2, c2) = (sock.clone(), counter.clone());
            let handle = match (&payload, &budget) {
                (Some(p), Some(b)) => {
                    let (p, b) = (p.clone(), b.clone());
                    std::thread::Builder::new()
                        .name(format!("lh-send-{i}"))
                        .spawn(move || stream::send(&s2, mode, &p, &b, &c2, start))?
                }
                _ => std::thread::Builder::new()
                    .name(format!("lh-recv-{i}"))
                    .spawn(move || stream::receive(&s2, &c2, start, read_rate_bps))?,
            };
            streams.push(StreamState {
                sock,
                counter,
                handle: Some(handle),
                outcome: None,
                base,
                prev: base,
                prev_bytes: 0,
            });
        }
        let pacer =
            probe.map(|p| Pacer::new(streams.iter().map(|s| s.sock.clone()).collect(), p, start));
        Ok(Self {
            role,
            streams,
            stop,
            start,
            last_sample: Duration::ZERO,
            pacer,
            cpu0,
        })
    }

    /// Bytes the streams moved so far (sent or received), all streams.
    pub fn bytes_moved(&self) -> u64 {
        self.streams
            .iter()
            .map(|s| s.counter.load(Ordering::Relaxed))
            .sum()
    }

    /// When the run started.
    pub fn started_at(&self) -> Instant {
        self.start
    }

    /// Ends a timed run: senders stop after their current write.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether every stream thread has ended.
    pub fn finished(&mut self) -> bool {
        for s in &mut self.streams {
            if s.outcome.is_none() && s.handle.as_ref().is_some_and(|h| h.is_finished()) {
                if let Some(h) = s.handle.take() {
                    s.outcome = h.join().ok();
                }
            }
        }
        self.streams.iter().all(|s| s.outcome.is_some())
    }

    /// The first stream error seen so far, as (stream, message).
    pub fn first_error(&self) -> Option<(u16, String)> {
        self.streams.iter().enumerate().find_map(|(i, s)| {
            s.outcome
                .as_ref()
                .and_then(|o| o.error.as_ref())
                .map(|e| (i as u16, e.to_string()))
        })
    }

    /// The pacing rate the probe settled on (total, bit/s), once it has.
    pub fn held_bps(&self) -> Option<u64> {
        self.pacer.as_ref().and_then(Pacer::held_bps)
    }

    /// The congestion control the held run cruises on, if the probe switched it.
    pub fn cruise(&self) -> Option<&str> {
        self.pacer.as_ref().and_then(Pacer::cruise)
    }

    /// Feeds the rate probe (sender only); see [`Pacer::step`].
    pub fn probe_step(&mut self) -> Option<ProbeAction> {
        self.pacer.as_mut()?.step()
    }

    /// Per-stream samples since the previous call.
    pub fn sample(&mut self) -> IntervalReport {
        let now = self.start.elapsed();
        let mut streams = Vec::with_capacity(self.streams.len());
        for (i, s) in self.streams.iter_mut().enumerate() {
            let info = tcp_info(&*s.sock).unwrap_or(s.prev);
            let counted = s.counter.load(Ordering::Relaxed);
            // A sender counts what the peer acknowledged, not what sits in its buffer.
            let bytes = match self.role {
                Role::Sender => info.bytes_acked.saturating_sub(s.prev.bytes_acked),
                Role::Receiver => counted - s.prev_bytes,
            };
            streams.push(StreamSample {
                stream: i as u16,
                bytes,
                cwnd_bytes: info.cwnd_bytes(),
                srtt_us: info.rtt_us,
                retransmits: info.total_retrans.saturating_sub(s.prev.total_retrans),
                delivery_rate_bps: info.delivery_rate * 8,
                pacing_rate_bps: info.pacing_rate.saturating_mul(8),
                busy_us: info.busy_time_us.saturating_sub(s.prev.busy_time_us),
                rwnd_limited_us: info.rwnd_limited_us.saturating_sub(s.prev.rwnd_limited_us),
                sndbuf_limited_us: info
                    .sndbuf_limited_us
                    .saturating_sub(s.prev.sndbuf_limited_us),
            });
            s.prev = info;
            s.prev_bytes = counted;
        }
        let report = IntervalReport {
            start_ms: self.last_sample.as_millis() as u64,
            end_ms: now.as_millis() as u64,
            streams,
        };
        self.last_sample = now;
        report
    }

    /// Waits for every stream thread (they must be ending) and totals the run.
    pub fn results(&mut self) -> Results {
        for s in &mut self.streams {
            if let Some(h) = s.handle.take() {
                s.outcome = h.join().ok();
            }
        }
        let wall = self.start.elapsed();
        let (u1, s1) = longhaul_sys::cpu::process_cpu_times();
        let streams = self
            .streams
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let info = tcp_info(&*s.sock).unwrap_or(s.prev);
                let o = s.outcome.as_ref();
                StreamResult {
                    stream: i as u16,
                    bytes: o.map_or(0, |o| o.bytes),
                    elapsed_us: o.map_or(0, |o| o.elapsed.as_micros() as u64),
                    retransmits: info.total_retrans.saturating_sub(s.base.total_retrans) as u64,
                    busy_us: info.busy_time_us.saturating_sub(s.base.busy_time_us),
                    rwnd_limited_us: info.rwnd_limited_us.saturating_sub(s.base.rwnd_limited_us),
                    sndbuf_limited_us: info
                        .sndbuf_limited_us
                        .saturating_sub(s.base.sndbuf_limited_us),
                    min_rtt_us: info.min_rtt_us,
                    srtt_us: info.rtt_us,
                    cwnd_bytes: info.cwnd_bytes(),
                    cpu_us: o.map_or(0, |o| o.cpu.as_micros() as u64),
                }
            })
            .collect();
        Results {
            wall_us: wall.as_micros() as u64,
            cpu_user_us: (u1.saturating_sub(self.cpu0.0)).as_micros() as u64,
            cpu_system_us: (s1.saturating_sub(self.cpu0.1)).as_micros() as u64,
            streams,
        }
    }
}

/// The chrono counters of a stream result, for the verdict.
pub fn chrono_of(r: &StreamResult) -> Chrono {
    Chrono {
        elapsed_us: r.elapsed_us,
        busy_us: r.busy_us,
        rwnd_limited_us: r.rwnd_limited_us,
        sndbuf_limited_us: r.sndbuf_limited_us,
    }
}
