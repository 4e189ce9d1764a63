//! A fluid model of a bottleneck (rate, buffer, base RTT) and of the kernel's start-up
//! (each stream doubles per round trip from an initial window of ten 4418-byte segments,
//! up to a cwnd of three times its share of the BDP), for the rate controller's tests:
//! stalls of the path or the host, catch-ups, another flow, a receiver's delayed acks.

use super::*;

pub(super) const MSS_BITS: f64 = 4418.0 * 8.0;

/// A bottleneck and the senders' kernels, advanced in steps of `dt`.
pub(super) struct Path {
    pub(super) rate: f64,
    pub(super) buffer_bits: f64,
    pub(super) base: Duration,
    pub(super) dt: Duration,
    pub(super) now: Duration,
    pub(super) queue_bits: f64,
    /// The kernel's own rate per stream (what it would send uncapped).
    pub(super) kernel: Vec<f64>,
    pub(super) caps: Vec<Option<u64>>,
    /// Every congestion-control switch the controller asked for: the algorithm, and
    /// whether from its first state.
    pub(super) switches: Vec<(&'static str, bool)>,
    pub(super) busy: Vec<bool>,
    /// Per step: (per-stream departures from the bottleneck bit/s, queue bits after).
    pub(super) history: VecDeque<(Vec<f64>, f64)>,
    /// Bits each stream has delivered, as its sender knows it (a round trip late).
    pub(super) delivered: Vec<f64>,
    pub(super) dropped_bits: f64,
    pub(super) max_queue_bits: f64,
    /// A busy emulator's hiccups: every `.0` the bottleneck serves nothing for `.1`, then
    /// catches up at up to twice its rate (a late emulator, not a slower path).
    pub(super) stalls: Option<(Duration, Duration)>,
    /// One stall of the whole host from `.0` for `.1`: the bottleneck (an emulator on the
    /// same host) serves nothing and catches up after, and the controller is not sampled.
    pub(super) host_stall: Option<(Duration, Duration)>,
    /// Bits the bottleneck owes from its stalls.
    pub(super) debt_bits: f64,
    /// How much faster than its rate a late bottleneck catches up (1: twice its rate).
    pub(super) catch_up: f64,
    /// The kernel's smoothed RTT moves 1/8 of the way to each ack's sample (one ack per
    /// two segments); false: it follows the samples at once.
    pub(super) smoothed: bool,
    pub(super) srtt: Vec<Duration>,
    pub(super) acks: Vec<f64>,
    /// A loss-based flow on the same bottleneck while `.1` is true: its rate `.0` grows
    /// by a tenth of the bottleneck per round trip and falls to 70 % at a drop (CUBIC's
    /// beta), so it keeps the buffer full as CUBIC does.
    pub(super) foreign: Option<(f64, bool)>,
    /// When the foreign flow last reduced its rate.
    pub(super) foreign_cut: Duration,
    /// The share of what the streams send that their delivery counters do not show (the
    /// pacing counts bytes the delivered payload does not: headers, record framing).
    pub(super) shortfall: f64,
    /// The receiver's delayed-ack wait for a flight's odd last segment: one ack in n/2 of
    /// a stream with n segments out carries it (mean-field, no smoothing of its own).
    pub(super) delayed_ack: Duration,
    /// Where CUBIC's window stays once the start-up's cruise begins on it, as a share of
    /// each stream's share of the rate (the losses of a start-up into a shallow buffer
    /// cut it, and its curve is flat near the size of its last loss), until a restart.
    pub(super) plateau: Option<f64>,
    /// The ceiling [`Self::plateau`] set on every stream's rate (bit/s), while it lasts.
    pub(super) stuck: Option<f64>,
}

impl Path {
    pub(super) fn new(rate: f64, rtt_ms: u64, streams: usize) -> Self {
        let base = Duration::from_millis(rtt_ms);
        let iw = 10.0 * MSS_BITS / base.as_secs_f64();
        Self {
            rate,
            buffer_bits: rate * base.as_secs_f64(),
            base,
            dt: Duration::from_millis(5),
            now: Duration::ZERO,
            queue_bits: 0.0,
            kernel: vec![iw; streams],
            caps: vec![None; streams],
            switches: Vec::new(),
            busy: vec![true; streams],
            history: VecDeque::new(),
            delivered: vec![0.0; streams],
            dropped_bits: 0.0,
            max_queue_bits: 0.0,
            stalls: None,
            host_stall: None,
            debt_bits: 0.0,
            catch_up: 1.0,
            smoothed: false,
            srtt: vec![base; streams],
            acks: vec![0.0; streams],
            foreign: None,
            foreign_cut: Duration::ZERO,
            shortfall: 0.0,
            delayed_ack: Duration::ZERO,
            plateau: None,
            stuck: None,
        }
    }

    pub(super) fn steps_per_rtt(&self) -> usize {
        (self.base.as_nanos() / self.dt.as_nanos()) as usize
    }

    /// One step: the streams send, the bottleneck serves and queues (dropping past its
    /// buffer), the kernels grow.
    pub(super) fn step(&mut self) {
        let dt = self.dt.as_secs_f64();
        let n = self.kernel.len() as f64;
        let sends: Vec<f64> = (0..self.kernel.len())
            .map(|i| {
                if !self.busy[i] {
                    return 0.0;
                }
                let cap = self.caps[i].map_or(f64::INFINITY, |c| c as f64);
                self.kernel[i].min(cap)
            })
            .collect();
        let ours: f64 = sends.iter().sum();
        let foreign = self.foreign.filter(|f| f.1).map_or(0.0, |f| f.0);
        let input = ours + foreign;
        let stalled = self.stalls.is_some_and(|(every, length)| {
            self.now.as_nanos() % every.as_nanos() < length.as_nanos()
        }) || self.host_stalled();
        let capacity = if stalled {
            // A stalled host's emulator stops its clock too: nothing to catch up.
            if !self.host_stalled() {
                self.debt_bits += self.rate * dt;
            }
            0.0
        } else {
            self.rate + (self.debt_bits / dt).min(self.rate * self.catch_up)
        };
        let served = (self.queue_bits / dt + input).min(capacity);
        if !stalled {
            self.debt_bits = (self.debt_bits - (served - self.rate).max(0.0) * dt).max(0.0);
        }
        self.queue_bits += (input - served) * dt;
        let now = self.now;
        let rtt = self.base;
        if let Some((c, true)) = &mut self.foreign {
            // At most one reduction per round trip, as TCP's.
            if self.queue_bits > self.buffer_bits && now >= self.foreign_cut + rtt {
                *c *= 0.7;
                self.foreign_cut = now;
            } else {
                *c += self.rate * 0.1 * dt / rtt.as_secs_f64();
            }
        }
        if self.queue_bits > self.buffer_bits {
            // Dropped in proportion to what each sent.
            self.dropped_bits += (self.queue_bits - self.buffer_bits) * ours / input.max(1.0);
            self.queue_bits = self.buffer_bits;
        }
        self.max_queue_bits = self.max_queue_bits.max(self.queue_bits);
        let out: Vec<f64> = sends
            .iter()
            .map(|s| if input > 0.0 { served * s / input } else { 0.0 })
            .collect();
        self.history.push_back((out, self.queue_bits));
        while self.history.len() > self.steps_per_rtt() {
            if let Some((old, _)) = self.history.pop_front() {
                for (d, o) in self.delivered.iter_mut().zip(old) {
                    *d += o * dt * (1.0 - self.shortfall);
                }
            }
        }
        let (front, queued) = self
            .history
            .front()
            .map_or((None, 0.0), |h| (Some(h.0.clone()), h.1));
        let sampled = self.base + Duration::from_secs_f64(queued.max(0.0) / self.rate);
        for (i, srtt) in self.srtt.iter_mut().enumerate() {
            let acks = front.as_ref().map_or(0.0, |o| o[i] * dt / (2.0 * MSS_BITS));
            self.acks[i] += acks;
            let segments = sends[i] * self.base.as_secs_f64() / MSS_BITS;
            let sampled = sampled + self.delayed_ack.mul_f64((2.0 / segments.max(1.0)).min(1.0));
            *srtt = if self.smoothed {
                let k = 1.0 - 0.875f64.powf(acks);
                let now = srtt.as_secs_f64();
                Duration::from_secs_f64(now + (sampled.as_secs_f64() - now) * k)
            } else {
                sampled
            };
        }
        // A stalled host acks nothing, so no window grows; what was in flight still
        // reaches the stalled emulator and waits there.
        let grow = if self.host_stalled() {
            1.0
        } else {
            2f64.powf(dt / self.base.as_secs_f64())
        };
        let ceiling = self.stuck.unwrap_or(3.0 * self.rate / n);
        for k in &mut self.kernel {
            *k = (*k * grow).min(ceiling);
        }
        self.now += self.dt;
    }

    /// What TCP_INFO says now: delivery and RTT are a round trip old.
    pub(super) fn samples(&self) -> Vec<StreamSample> {
        let (out, _) = self
            .history
            .front()
            .cloned()
            .unwrap_or((vec![0.0; self.kernel.len()], 0.0));
        // In flight: what left the bottleneck in the last round trip (its acks are still
        // on their way) and a share of the queue.
        let dt = self.dt.as_secs_f64();
        let n = self.kernel.len() as f64;
        let in_flight = |i: usize| {
            let piped: f64 = self.history.iter().map(|(o, _)| o[i] * dt).sum();
            ((piped + self.queue_bits / n) / 8.0) as u64
        };
        out.iter()
            .enumerate()
            .map(|(i, d)| StreamSample {
                delivery_bps: (*d * (1.0 - self.shortfall)) as u64,
                delivered_bytes: (self.delivered[i] / 8.0) as u64,
                held_back_us: 0,
                in_flight_bytes: in_flight(i),
                app_limited: false,
                srtt: self.srtt[i],
                min_rtt: self.base,
                retransmits: (self.dropped_bits / MSS_BITS) as u64,
                acks: self.acks[i] as u64,
                busy: self.busy[i],
                mss: (MSS_BITS / 8.0) as u32,
            })
            .collect()
    }

    pub(super) fn host_stalled(&self) -> bool {
        self.host_stall
            .is_some_and(|(from, length)| self.now >= from && self.now < from + length)
    }

    pub(super) fn queue_delay(&self) -> Duration {
        Duration::from_secs_f64(self.queue_bits.max(0.0) / self.rate)
    }

    /// Runs the controller against the path until `until`.
    pub(super) fn run(&mut self, p: &mut RateProbe, until: Duration) {
        let every = p.sample_every();
        let mut next = Duration::ZERO;
        while self.now < until {
            if self.now >= next && !self.host_stalled() {
                let pacing = p.on_sample(self.now, &self.samples());
                self.caps = pacing.per_stream_bps;
                if let Some(cc) = pacing.congestion {
                    self.switches.push((cc, pacing.restart_congestion));
                    let share = self.rate / self.kernel.len() as f64;
                    if pacing.restart_congestion {
                        self.stuck = None;
                    } else if cc == "cubic" {
                        self.stuck = self.plateau.take().map(|p| p * share);
                    }
                }
                next += every;
            }
            self.step();
        }
    }
}

pub(super) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
