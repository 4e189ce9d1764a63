//! The data half of a bench run at one end: the stream threads, the shared TCP_INFO
//! [`Sampler`] that turns their counters into per-interval samples, and (at the sender) the
//! rate probe that holds pacing to the bottleneck once it is found.

use crate::transport::secure::SecureStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhaul_proto::{Results, SendMode, StreamResult};

use super::pacer::Pacer;
use super::stream::{self, Budget, Payload, StreamOutcome};
pub use crate::telemetry::Role;
use crate::telemetry::{Sampled, Sampler, StreamCounters};
use longhaul_policy::{Chrono, JumpAction, JumpValidator, RateProbe};

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
    /// Jump-start: the validator of the jump (its plan's start rate paces every stream
    /// from the first byte). Needs `probe`.
    pub jump: Option<JumpValidator>,
}

struct StreamState {
    handle: Option<JoinHandle<StreamOutcome>>,
    outcome: Option<StreamOutcome>,
}

/// The streams of one end of a run, from start to results.
pub struct DataRun {
    streams: Vec<StreamState>,
    sampler: Sampler,
    stop: Arc<AtomicBool>,
    start: Instant,
    pacer: Option<Pacer>,
    cpu0: (Duration, Duration),
}

impl DataRun {
    /// Starts one thread per socket. `sockets[i]` is stream `i`.
    pub fn start(
        role: Role,
        sockets: Vec<SecureStream>,
        sender: Option<SenderPlan>,
        read_rate_bps: u64,
    ) -> std::io::Result<Self> {
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let cpu0 = longhaul_sys::cpu::process_cpu_times();
        let (payload, budget, mode, probe, jump) = match (&role, sender) {
            (Role::Sender, Some(plan)) => {
                let jump_bps = plan
                    .jump
                    .as_ref()
                    .map(|v| v.plan().start_bps / sockets.len().max(1) as u64);
                // A fixed rate or a jump paces every stream at its share from the first
                // byte; else the kernel paces each round of the start-up (no burst of
                // every stream's window at once), as cp's sender does.
                let cap = plan.pacing_bps.or(jump_bps);
                for s in &sockets {
                    match cap {
                        Some(bps) => longhaul_sys::socket::set_max_pacing_rate(s, bps / 8)?,
                        None => crate::transport::sockopts::pace_by_kernel(s)?,
                    }
                }
                for s in &sockets {
                    crate::transport::sockopts::limit_unsent(s, sockets.len())?;
                }
                let budget = match plan.bytes {
                    Some(b) => Budget::Bytes(Arc::new(AtomicU64::new(b))),
                    None => Budget::Until(stop.clone()),
                };
                (
                    Some(Payload::shared(plan.mode)?),
                    Some(budget),
                    plan.mode,
                    plan.probe,
                    plan.jump,
                )
            }
            _ => (None, None, SendMode::Write, None, None),
        };
        let socks: Vec<Arc<SecureStream>> = sockets.into_iter().map(Arc::new).collect();
        // `--read-rate` is the application's total: each stream reads its share.
        let read_rate_bps = read_rate_bps / socks.len().max(1) as u64;
        let counters = Arc::new(StreamCounters::new(socks.len()));
        // The sampler's base snapshot is taken before any byte moves.
        let sampler = Sampler::new(role, socks.clone(), counters.clone(), start);
        let mut streams = Vec::with_capacity(socks.len());
        for (i, sock) in socks.iter().enumerate() {
            let (s2, c2) = (sock.clone(), counters.clone());
            let handle = match (&payload, &budget) {
                (Some(p), Some(b)) => {
                    let (p, b) = (p.clone(), b.clone());
                    std::thread::Builder::new()
                        .name(format!("lh-send-{i}"))
                        .spawn(move || {
                            // `i` has a counter (both come from `socks`); the fallback
                            // only keeps this free of a panic path.
                            let spare = AtomicU64::new(0);
                            let counter = c2.slot(i).unwrap_or(&spare);
                            stream::send(&s2, mode, &p, &b, counter, start)
                        })?
                }
                _ => std::thread::Builder::new()
                    .name(format!("lh-recv-{i}"))
                    .spawn(move || {
                        let spare = AtomicU64::new(0);
                        let counter = c2.slot(i).unwrap_or(&spare);
                        stream::receive(&s2, counter, start, read_rate_bps)
                    })?,
            };
            streams.push(StreamState {
                handle: Some(handle),
                outcome: None,
            });
        }
        let pacer = probe.map(|p| {
            let pacer = Pacer::new(socks, p, start);
            match jump {
                Some(v) => pacer.with_jump_start(v),
                None => pacer,
            }
        });
        Ok(Self {
            streams,
            sampler,
            stop,
            start,
            pacer,
            cpu0,
        })
    }

    /// Bytes the streams moved so far (sent or received), all streams.
    pub fn bytes_moved(&self) -> u64 {
        self.sampler.counters().total()
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

    /// The jump-start's verdict, once made.
    pub fn jump_verdict(&self) -> Option<JumpAction> {
        self.pacer.as_ref().and_then(Pacer::jump_verdict)
    }

    /// The congestion control the held run cruises on, if the probe switched it.
    pub fn cruise(&self) -> Option<&str> {
        self.pacer.as_ref().and_then(Pacer::cruise)
    }

    /// Feeds the rate controller (sender only); see [`Pacer::step`].
    pub fn probe_step(&mut self) {
        if let Some(p) = self.pacer.as_mut() {
            p.step();
        }
    }

    /// How often `probe_step` should run (`rtt` when nothing is probed).
    pub fn probe_every(&self, rtt: Duration) -> Duration {
        self.pacer
            .as_ref()
            .map_or(rtt.max(Duration::from_millis(20)), Pacer::every)
    }

    /// Per-stream samples since the previous call.
    pub fn sample(&mut self) -> Sampled {
        self.sampler.sample()
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
        // The kernel's figures from the sampler; bytes, time to the last byte and CPU
        // from each stream's own outcome.
        let streams = self
            .sampler
            .totals()
            .into_iter()
            .zip(&self.streams)
            .map(|(total, s)| {
                let o = s.outcome.as_ref();
                StreamResult {
                    bytes: o.map_or(0, |o| o.bytes),
                    elapsed_us: o.map_or(0, |o| o.elapsed.as_micros() as u64),
                    cpu_us: o.map_or(0, |o| o.cpu.as_micros() as u64),
                    ..total
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
