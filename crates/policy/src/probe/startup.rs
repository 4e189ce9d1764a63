//! The rate controller's start-up (see [`super`]): when it ends (a queue in the RTT of the
//! latest acks, a loss under loss-based control, a plateau), the RTT of the latest acks
//! with the kernel's smoothing taken out, the pause after a stall of the host, and what
//! is in flight (a receiver's delayed acks weigh on the RTT while flights are small).

use std::time::Duration;

use super::repair::RepairRound;
use super::{RateProbe, StartUpExit, StreamSample, FLAT_ROUNDS, GROWTH};

/// What a start-up has in flight, all streams.
#[derive(Debug, Clone, Copy)]
pub(super) struct Flight {
    /// Bytes.
    pub(super) bytes: u64,
    /// Segments per busy stream, on average (`None`: no MSS known).
    pub(super) segments_per_stream: Option<f64>,
    /// The largest segment size the streams report (0: none does).
    pub(super) mss: u32,
}

impl Flight {
    /// `bytes` in flight over `streams`.
    pub(super) fn of(bytes: u64, streams: &[StreamSample]) -> Self {
        Self {
            bytes,
            segments_per_stream: segments_per_stream(streams),
            mss: streams.iter().map(|s| s.mss).max().unwrap_or(0),
        }
    }
}

/// The busy streams' segments in flight, on average (`None` when none is busy or their MSS
/// is unknown).
fn segments_per_stream(streams: &[StreamSample]) -> Option<f64> {
    // The mean of bytes over the mean MSS: their sums' ratio.
    let busy = streams.iter().filter(|s| s.busy && s.mss > 0);
    let (bytes, mss) = busy.fold((0u64, 0u64), |(b, m), s| {
        (b + s.in_flight_bytes, m + u64::from(s.mss))
    });
    (mss > 0).then(|| bytes as f64 / mss as f64)
}

impl RateProbe {
    /// A start-up that begins at `at` (time since the data began) rather than with the
    /// data: after a jump's retreat, when the retreat's drain ends. Its first two rounds
    /// give no verdict, as a first start-up's do: the jump's queue is still draining,
    /// and a fresh start-up 80 ms after a retreat read it as its own (a cp push whose
    /// emulator stalled in the handshake ended its start-up at 188 Mbit/s on a 1 Gbit/s
    /// path, held a quarter of that, and took 12 s to climb back).
    pub fn begin_at(&mut self, at: Duration) {
        self.began = at;
        self.round_end = at + self.round;
    }

    /// A start-up after a jump's retreat to a path remembered to carry `remembered_bps`
    /// (all streams): [`Self::begin_at`], and a burst of loss the jump met is repaired
    /// before its flat rounds count: while the start-up has delivered under half that rate,
    /// a round that retransmitted more than a tenth of what it delivered gives no verdict
    /// (16 rounds at most), and the round after the repair begins the start-up again from
    /// a restarted BBR.
    pub fn begin_after_retreat(&mut self, at: Duration, remembered_bps: u64) {
        self.begin_at(at);
        self.repair.expect(remembered_bps);
    }

    /// The start-up once more from `at`, after a burst of loss was repaired (see
    /// [`super::repair`]): growth judged afresh, from a restarted congestion control (BBR
    /// left its own start-up during the repair, and climbs from there by a quarter per
    /// eight round trips).
    fn begin_again(&mut self, at: Duration) {
        self.begin_at(at);
        self.round_best_bps = 0;
        self.flat_rounds = 0;
        if self.bbr {
            self.switch_to = Some(("bbr", true));
        }
    }

    /// The start-up: its exit, if this sample ends it.
    ///
    /// A stall of the host (no sample for [`Self::stall_gap`]) delays the packets and acks
    /// in flight with it: for up to two rounds after it the RTT of the latest acks is up
    /// by as much as the stall, as a queue's would be. At 436 ms on a busy 2-core host a
    /// 0.4 s stall read as 65-77 ms of queue with 18-24 MB in flight on a 54.5 MB path,
    /// ended the start-up at 200-330 Mbit/s, and the upward probes took 15-30 s to climb
    /// back. So a queue seen within two rounds of a stall pauses the start-up instead:
    /// one round paced at what is in flight per RTT (a real queue's bottleneck rate: the
    /// queue then stays, it does not grow), then the queue decides. Still over the
    /// threshold, the start-up ends as it would have; gone, it goes on from the paused
    /// rate, paced to double per round (the windows grew during the pause, and leaving
    /// at once they overran a 1-BDP buffer in the fluid model).
    pub(super) fn on_startup(
        &mut self,
        at: Duration,
        total: u64,
        retransmits: u64,
        app_limited: bool,
        flight: Flight,
    ) -> Option<StartUpExit> {
        let in_flight = flight.bytes;
        match self.pause {
            Some((until, _)) if at < until => return None,
            Some((_, rate)) => {
                self.pause = None;
                let queue = self.window.back().and_then(|m| self.recent_queue(m));
                if queue.is_some_and(|q| q > self.startup_threshold()) {
                    return Some(StartUpExit::Queue);
                }
                // Growth is judged afresh from here, paced from the paused rate.
                self.resumed = Some((at, rate));
                self.round_best_bps = 0;
                self.flat_rounds = 0;
                self.round_end = at + self.round;
                return None;
            }
            None => {}
        }
        let exit = self.startup_verdict(at, total, retransmits, app_limited, flight);
        // Its packets' acks come back a round trip after it, and the latest acks' RTT
        // shows them over part of another.
        let after_stall = self.stall_ended.is_some_and(|s| at < s + self.round * 2);
        if exit == Some(StartUpExit::Queue) && after_stall {
            // The window as it is, neither growing nor draining: what is in flight per
            // RTT now (not the delivery samples, which a stalled path's catch-up
            // inflates).
            let rtt = self
                .window
                .back()
                .and_then(|m| m.recent_rtt)
                .or(self.base_rtt)
                .unwrap_or(self.round)
                .max(Duration::from_millis(1));
            let rate = (in_flight as f64 * 8.0 / rtt.as_secs_f64()) as u64;
            self.pause = Some((at + self.round, rate.max(1)));
            return None;
        }
        exit
    }

    /// A gap between two samples that only a stall of the host explains: four sample
    /// intervals, at least 100 ms.
    pub(super) fn stall_gap(&self) -> Duration {
        (self.sample_every() * 4).max(Duration::from_millis(100))
    }

    /// The start-up's exit, if this sample ends it.
    pub(super) fn startup_verdict(
        &mut self,
        at: Duration,
        total: u64,
        retransmits: u64,
        app_limited: bool,
        flight: Flight,
    ) -> Option<StartUpExit> {
        let base = *self.first_retransmits.get_or_insert(retransmits);
        let best = self.best_total();
        if best == 0 || (total == 0 && app_limited) {
            return None;
        }
        // The first round's bursts (every stream's initial window at once) are no verdict,
        // nor, after a retreat, the jump's queue still on its way out.
        if at < self.began + self.round * 2 {
            return None;
        }
        if self.loss_ends_startup && retransmits > base {
            return Some(StartUpExit::Loss);
        }
        // Two samples in a row over the threshold, the queue still growing by a quarter
        // of the threshold from one to the next: a burst of the streams' initial windows
        // or a busy receiver's late acks raise the RTT for a while, but only a rate above
        // the bottleneck keeps raising it (at 2x the rate, by a sample's length per
        // sample). News of a queue is a round trip old already, so it is not filtered
        // longer.
        let threshold = self.startup_threshold() + delayed_ack_allowance(flight);
        let recent: Vec<Duration> = self
            .window
            .iter()
            .rev()
            .take(2)
            .filter_map(|m| self.recent_queue(m))
            .collect();
        if recent.len() == 2
            && recent.iter().all(|q| *q > threshold)
            && recent[0] >= recent[1] + threshold / 4
        {
            return Some(StartUpExit::Queue);
        }
        if at >= self.round_end {
            let delivered = self.window.back().map_or(0, |m| m.delivered);
            let repair = self
                .repair
                .end_round(retransmits, delivered, flight.mss, best);
            if repair == RepairRound::Repaired {
                self.begin_again(at);
                return None;
            }
            if app_limited || repair == RepairRound::Repairing {
                // Not the path's rate (nothing to send, or holes being repaired): no
                // verdict from this round.
            } else if best as f64 >= self.round_best_bps as f64 * GROWTH {
                self.round_best_bps = best;
                self.flat_rounds = 0;
            } else {
                self.flat_rounds += 1;
            }
            while self.round_end <= at {
                self.round_end += self.round;
            }
        }
        (self.flat_rounds >= FLAT_ROUNDS).then_some(StartUpExit::Plateau)
    }

    /// The RTT of the acks since the last sample: the lower quartile over the busy
    /// streams (a queue at the bottleneck delays them all; a few streams in recovery do
    /// not count) of each stream's smoothed RTT with the smoothing taken out.
    ///
    /// The kernel moves a stream's smoothed RTT an eighth of the way to each ack's sample,
    /// so after n acks it has moved 1 - (7/8)^n of the way to their RTT. That lag of about
    /// eight acks is 35 ms with 32 streams at 180 ms (each gets 220-230 acks a second), a
    /// fifth of the round trip, in which a start-up sending at twice the bottleneck queues
    /// a fifth of the BDP more. The acks are counted by the segments received; acks that
    /// carry no sample make the correction smaller, never larger.
    pub(super) fn recent_rtt(&mut self, streams: &[StreamSample]) -> Option<Duration> {
        if self.last_srtt.len() != streams.len() {
            self.last_srtt = vec![(Duration::ZERO, 0); streams.len()];
        }
        let mut rtts: Vec<Duration> = Vec::with_capacity(streams.len());
        for (s, last) in streams.iter().zip(self.last_srtt.iter_mut()) {
            let (before, acks_before) = std::mem::replace(last, (s.srtt, s.acks));
            if !s.busy || s.srtt.is_zero() {
                continue;
            }
            let acks = (s.acks as u32).wrapping_sub(acks_before as u32).min(64);
            if before.is_zero() || acks == 0 || s.acks == 0 {
                rtts.push(s.srtt);
                continue;
            }
            let kept = 0.875f64.powi(acks as i32);
            let now = s.srtt.as_secs_f64();
            let sample = (now - before.as_secs_f64() * kept) / (1.0 - kept);
            // Bounded: one stream's odd figure must not reach far.
            let sample = sample.clamp(s.min_rtt.as_secs_f64().min(now), now * 2.0);
            rtts.push(Duration::from_secs_f64(sample));
        }
        rtts.sort_unstable();
        rtts.get(rtts.len().saturating_sub(1) / 4).copied()
    }

    /// Queue delay that ends the start-up: min RTT / 64 within 3..=8 ms (below 3 ms, the
    /// first rounds' bursts of many streams' initial windows may end it falsely; at
    /// 180 ms, min RTT / 32 let the queue of a fluid model reach 94 % of a 1-BDP buffer,
    /// min RTT / 64 73 %).
    pub(super) fn startup_threshold(&self) -> Duration {
        (self.base_rtt.unwrap_or(self.round) / 64)
            .clamp(Duration::from_millis(3), Duration::from_millis(8))
    }
}

/// The longest a receiver commonly holds the ack of a flight's last segment (its delayed-
/// ack timer, which the kernel lets grow past its 40 ms minimum when segments come in
/// bursts; 72 ms was seen at 436 ms).
const DELAYED_ACK: Duration = Duration::from_millis(100);

/// How much a receiver's delayed acks raise the streams' RTT when each has `flight`
/// segments out: a receiver acks every second segment at once but holds the ack of an odd
/// last one for up to [`DELAYED_ACK`], so one ack in n/2 carries that wait and the kernel's
/// smoothed RTT averages it in (about `DELAYED_ACK / (n / 2)`). In the first round trips
/// a stream has a few dozen segments out and this is the size of a queue: at 436 ms and
/// MTU 1500 the 64 streams' RTT rose 9 ms with 2 MB in flight on a 1 Gbit/s path (no
/// queue can hold that), and the start-up ended at 20-40 Mbit/s; with the receiver's
/// delayed acks turned off (route metric `quickack`) the same run reached 784 Mbit/s.
/// Zero when the MSS is unknown, and from [`FULL_FLIGHT`] segments on.
fn delayed_ack_allowance(flight: Flight) -> Duration {
    match flight.segments_per_stream {
        // Tapered to none at FULL_FLIGHT segments: there the delayed acks' share is within
        // the smoothing's noise, and a start-up near a fast path's rate keeps its exit as
        // it was (a stalling path's catch-up overran the buffer when the exit came later).
        Some(n) if n >= 1.0 => {
            let taper = (1.0 - n / FULL_FLIGHT).max(0.0);
            DELAYED_ACK.mul_f64((2.0 / n).min(1.0) * taper)
        }
        Some(_) => DELAYED_ACK,
        None => Duration::ZERO,
    }
}

/// Segments per stream from which the start-up allows nothing for delayed acks.
const FULL_FLIGHT: f64 = 128.0;
