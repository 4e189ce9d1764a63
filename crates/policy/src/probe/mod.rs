//! The sender's rate controller when the user gave no rate, with no I/O: it finds the
//! bottleneck without overrunning its buffer, then holds every stream's pacing so that the
//! sum never exceeds the bottleneck, and keeps checking that it does not.
//!
//! The record teams sized the window and pacing to the path by hand. longhaul learns the
//! rate instead, from TCP_INFO of every stream sampled several times a round trip
//! ([`RateProbe::sample_every`]: every 25 ms on a long path), in four phases:
//!
//! - **Start-up.** The kernel's start-up (BBR, else slow start) doubles each stream's
//!   rate per round trip, uncapped. News of a queue is a round trip old, so by the time it
//!   shows the doubling has already queued about 0.44 BDP (the integral of the last
//!   round's excess): the start-up must end at the first sign, not three rounds later as
//!   BBR's own rule does (which overruns a 1-BDP buffer by thousands of packets). It
//!   ends at the first sign of a queue: the RTT of the latest acks (each stream's smoothed
//!   RTT with the kernel's smoothing taken out, `RateProbe::recent_rtt`; the lower
//!   quartile of the streams, so a few streams' noise does not end it) more than
//!   clamp(min RTT / 64, 3 ms, 8 ms) above the minimum in two samples running, and
//!   growing (bursts and a busy receiver raise the RTT too, but do not keep raising it).
//!   The queue grows slowly at first (as the square of the time), so the time it takes to
//!   cross the threshold adds to the 0.44 BDP, as does the smoothing's lag of about eight
//!   acks (at 180 ms the two took the queue of a fluid model from 73 % of a 1-BDP buffer
//!   to 100 %; at 100 ms, HyStart++'s 10 ms takes half a round more and the queue
//!   reaches 1 BDP). Even so the margin is thin: the queue reaches 0.7-0.9 BDP. Or it
//!   ends at a retransmission under loss-based congestion control; or after three rounds
//!   without 25 % growth (a path whose queue never shows, e.g. a policer). The rate to hold is the
//!   largest delivery rate (all streams) of the last round: once a queue forms, that is
//!   the bottleneck's.
//! - **Drain.** Pacing at [`DRAIN_GAIN`] x the held rate until the queue the start-up left
//!   is gone: the bytes in flight fit the path (held rate x minimum RTT), or the RTT is
//!   back within 1 % of the minimum (a round trip later), or the time a round of queue
//!   needs has passed. A drain that short may end before the start-up's last round
//!   arrives: the first hold round after it raises the held rate to what it delivered.
//! - **Hold.** The held rate, shared by the streams that have data to send (a stream whose
//!   work is done gives its share to the others, so the last chunks of a transfer cross at
//!   the full rate). A round whose RTT is more than 2.5 % over the minimum means the held
//!   rate builds a queue and the path delivered less than it: it is lowered to 98 % of
//!   what was delivered (by at most a tenth per round) and the queue drained. A rate the
//!   path delivers whole is not above the bottleneck: its queue gets one drain, and a
//!   queue a drain did not empty is left alone (a busy host's late acks are not a queue
//!   this sender can empty, and following them down ends at the floor). If the rate it
//!   lowered had proved itself (five clean rounds, a probe taken whole, or under 97 % of
//!   the best round the path delivered), that rate is tried again after two clean rounds
//!   (by at most 10 % per probe, the next step at once after each taken whole): a host or
//!   emulator that stalls for part of a round costs the path a round of capacity, not its
//!   rate. Lowerings in a row come back to the highest. A try that falls short is not
//!   repeated. Streams whose windows keep them under the held rate with neither queue nor
//!   loss for three rounds (a start-up's losses cut CUBIC's) are refilled through BBR's
//!   start-up (`probe/refill.rs`).
//! - **Probe up.** After [`PROBE_EVERY`] clean rounds in which the streams sent all the
//!   held rate allowed, one round paces higher (2 %, doubling after each success up to
//!   4 %, or up to 100 % after three whole successes or while the rate is under half the
//!   best held so far; past the best round the path ever delivered, by at most 4 % unless
//!   the probe itself set a new best), and the next round shows whether it was taken
//!   whole (97 % of the probed rate and three quarters of the step) without a queue:
//!   then the higher rate is held and the next probe follows at once; if not, 98 % of
//!   what the path delivered is held and the probe's queue drained. A held rate that is
//!   too low climbs back as a start-up would; one at the bottleneck costs a queue of 2 %
//!   of the BDP for a round. A path that stalls (a forwarder on a busy host: a short
//!   round, a queue, a catch-up) must still be probed: a short round without a queue is
//!   not counted but does not start the count again, a queue a drain did not empty and
//!   the path delivers the held rate through counts as clean, and a probe whose watching
//!   round delivered less than the held rate itself (no bottleneck between the two rates
//!   does that) is tried again after one clean round or two in turn (a fixed wait locks
//!   onto stalls that come as often as the cycle). What the streams' delivery counters
//!   show of a paced rate (1-2 % less on a real path: the pacing counts bytes the
//!   delivered payload does not) is learned from clean rounds without a queue, and the
//!   rounds are judged in pacing's terms; else no 2 % probe shows three quarters of its
//!   step and a rate that started low never climbs.
//!
//! - **Compete.** Another flow that is loss-based (CUBIC, Reno) keeps the buffer full
//!   whatever this sender does: against it the rules above lower the held rate round after
//!   round (the queue never empties), down to a quarter of the best, and a 256 MiB pull
//!   beside one iperf3 CUBIC flow at 150 ms crossed 0.0 % of the path in 300 s. So when
//!   `FOREIGN_ROUNDS` hold rounds in a row deliver less than the held rate with a queue
//!   that stood through the drain before them, the sender competes on the other flow's
//!   terms: unpaced, on CUBIC (each stream then takes about one flow's share; the other
//!   flow keeps its own per-flow share), from a slow start on reno to its first loss (the
//!   hold left small windows, and CUBIC's own slow start ends at the other flow's queue). Every `COMPETE_CHECK_ROUNDS` rounds (at least
//!   `COMPETE_CHECK_MIN`) it paces at `CHECK_GAIN` of what it delivered until the
//!   queue there could have drained: a queue gone with our rate was ours alone, so the
//!   other flow has left and that rate is held again (the probes climb from it); a queue
//!   that stays is the other flow's, and competing goes on.
//!
//! Once the rate is held, pacing (not the window) keeps the queue empty, so BBR's model and
//! its ProbeRTT (4-6 % of a long run) are not needed: the sender cruises on CUBIC. If the
//! held path then loses packets although nobody sends faster than the bottleneck, the loss
//! is not congestion: the sender goes back to BBR, which does not mistake it for a full
//! queue. On BBR an upward probe lasts BBR's eight-round cycle (BBR paces at its own
//! estimate and sends more only in the one round of eight that probes, by a quarter, so
//! a one-round probe of the cap above it never saw more delivered), and ends early when a
//! round took it whole while climbing; a step over 4 % restarts BBR instead and lasts four
//! rounds, its start-up filling the cap within round trips.

use std::collections::VecDeque;
use std::time::Duration;

/// Growth per round that counts as still climbing (BBR's start-up exit rule).
const GROWTH: f64 = 1.25;
/// Rounds without [`GROWTH`] that end the start-up on a path whose queue never shows.
const FLAT_ROUNDS: u32 = 3;
/// Shortest round, so that short RTTs still average over some samples.
const MIN_ROUND: Duration = Duration::from_millis(20);
/// Pacing during a drain, as a share of the held rate.
pub const DRAIN_GAIN: f64 = 0.75;
/// BBR's bandwidth-probing cycle, in rounds (one round at 1.25 of its estimate in
/// eight).
const BBR_CYCLE_ROUNDS: u32 = 8;
/// Rounds after a switch to CUBIC (at least a second) whose retransmits are the switch's.
const CRUISE_GRACE_ROUNDS: u32 = 4;
/// Rounds a probe that restarted BBR paces at its gain.
const RESTARTED_PROBE_ROUNDS: u32 = 4;
/// Clean rounds at the held rate before it is probed upward.
pub const PROBE_EVERY: u32 = 5;
/// First upward probe, as a share of the held rate; it doubles after each success.
const FIRST_PROBE: f64 = 0.02;
/// Largest upward probe while the held rate is under half the best held so far: doubling,
/// as a start-up would, so that a rate far too low climbs back in a few round trips.
const MAX_PROBE: f64 = 1.0;
/// Largest upward probe otherwise: a probe over the bottleneck queues its excess for a
/// round, 4 % of the RTT at most.
const NEAR_PROBE: f64 = 0.04;
/// Clean rounds after a queue lowered the held rate before the rate it left is tried again.
const RESTORE_AFTER: u32 = 2;
/// Largest step of that try, as a share of the held rate.
const MAX_RESTORE: f64 = 0.10;
/// Longest drain.
const MAX_DRAIN: Duration = Duration::from_secs(20);
/// Rounds in a row in which the path delivered less than the held rate and a queue stood
/// after a drain, before the queue is taken for another flow's (and the sender competes).
const FOREIGN_ROUNDS: u32 = 3;
/// How often a competing sender checks whether the other flow has gone: every this many
/// rounds, at least `COMPETE_CHECK_MIN`.
const COMPETE_CHECK_ROUNDS: u32 = 40;
/// Shortest time between two such checks.
const COMPETE_CHECK_MIN: Duration = Duration::from_secs(5);
/// Pacing of a check, as a share of the rate the streams delivered while competing.
const CHECK_GAIN: f64 = 0.5;

/// What the controller keeps of one sample, for a round.
#[derive(Debug, Clone, Copy)]
struct Moment {
    at: Duration,
    /// Sum of the streams' delivery-rate samples, bit/s.
    total_bps: u64,
    /// Sum of the streams' delivered bytes.
    delivered: u64,
    /// Sum of the streams' time held back by the receiver's window, µs.
    held_back_us: u64,
    /// Streams with data to send.
    busy: usize,
    /// The RTT now (see [`RateProbe::on_sample`]).
    rtt: Option<Duration>,
    /// The RTT of the last sample's acks, without the kernel's smoothing (see
    /// [`RateProbe::recent_rtt`]): what ends the start-up.
    recent_rtt: Option<Duration>,
}

/// One stream's TCP_INFO, as the controller needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamSample {
    /// The kernel's latest delivery-rate sample, bit/s.
    pub delivery_bps: u64,
    /// Bytes delivered to the peer so far (acknowledged or SACKed).
    pub delivered_bytes: u64,
    /// Bytes sent and not yet acknowledged.
    pub in_flight_bytes: u64,
    /// Microseconds so far in which the stream could not send because of the receiver's
    /// window (TCP_INFO's rwnd-limited time).
    pub held_back_us: u64,
    /// Whether that sample was application-limited (the sender had nothing to send).
    pub app_limited: bool,
    /// Smoothed RTT (zero before the first sample).
    pub srtt: Duration,
    /// The kernel's minimum RTT (zero before the first sample).
    pub min_rtt: Duration,
    /// Segments retransmitted so far.
    pub retransmits: u64,
    /// Segments received so far (on a sender, its acks; wraps at 2^32), 0 if unknown.
    pub acks: u64,
    /// The stream has data unsent or unacknowledged: it takes a share of the rate.
    pub busy: bool,
    /// Its maximum segment size, bytes (0: unknown).
    pub mss: u32,
}

/// What the driver applies to the sockets after a sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pacing {
    /// Pacing cap per stream, bit/s, in the order of the samples (`None`: no cap).
    pub per_stream_bps: Vec<Option<u64>>,
    /// Switch every stream to this congestion control.
    pub congestion: Option<&'static str>,
    /// From that control's first state (slow start; no threshold of earlier losses).
    pub restart_congestion: bool,
}

/// The controller's phase, for logs and the JSON.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// Growing, at most doubling per round.
    StartUp,
    /// Emptying the queue, until `until` at the latest.
    Drain {
        /// Latest end of the drain.
        until: Duration,
    },
    /// Holding the rate.
    Hold,
    /// Pacing `gain` x the held rate since `since` (one round), then watching one round;
    /// after a success the next, twice as large, follows at once.
    ProbeUp {
        /// Multiple of the held rate being tried.
        gain: f64,
        /// When the probe round began.
        since: Duration,
    },
    /// Sharing the bottleneck with a loss-based flow whose queue no drain of ours
    /// empties: unpaced, on CUBIC, as that flow is (see the module docs). From `check`,
    /// one round paced at half of what the streams deliver, and one round to see whether
    /// the queue went with it.
    Compete {
        /// When the next check begins.
        check: Duration,
    },
}

/// Why the start-up ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartUpExit {
    /// A queue showed in the RTT.
    Queue,
    /// A retransmission under loss-based congestion control.
    Loss,
    /// Three rounds without 25 % growth.
    Plateau,
    /// No start-up: a jump-start's rate was confirmed ([`RateProbe::resume_at`]).
    Jump,
}

/// The state of the controller.
#[derive(Debug, Clone)]
pub struct RateProbe {
    round: Duration,
    loss_ends_startup: bool,
    phase: Phase,
    /// Smallest minimum RTT any stream reported.
    base_rtt: Option<Duration>,
    /// The last round's samples.
    window: VecDeque<Moment>,
    /// Start-up: the best total at the last growth, and rounds without growth.
    round_end: Duration,
    /// When the start-up began (time since the data began; see [`RateProbe::begin_at`]).
    began: Duration,
    round_best_bps: u64,
    flat_rounds: u32,
    first_retransmits: Option<u64>,
    held: Option<u64>,
    exit: Option<StartUpExit>,
    /// Draining the start-up's queue (the held rate may still rise to what it delivers).
    startup_drain: bool,
    /// The first hold round after the start-up's drain, in which the start-up's last
    /// round still arrives ([`Self::catch_up`]).
    catch_up: bool,
    /// What the start-up had in flight at its exit, per minimum RTT: the most its last
    /// round can deliver.
    exit_sent_bps: u64,
    clean_rounds: u32,
    next_probe: f64,
    /// Upward probes taken whole in a row.
    successes: u32,
    /// Probes whose round delivered less than the held rate itself (a stall's), in all:
    /// the wait before the next alternates with it ([`Self::on_probe`]).
    stalled_probes: u32,
    /// The largest held rate so far.
    peak_held: u64,
    /// The last held rate that proved itself: [`PROBE_EVERY`] clean rounds, or a probe
    /// taken whole (0: none, or its restore failed).
    proven: u64,
    /// The proven rate a queue lowered the held rate from, tried again once
    /// ([`RESTORE_AFTER`]): a busy host or emulator that stalls for part of a round costs
    /// the path a round's capacity, not its rate, and climbing back by 2-4 % probes every
    /// five rounds would take seconds (at 436 ms, 4-5 s for a tenth).
    restore: Option<u64>,
    /// The probe under way is such a try.
    restoring: bool,
    /// When the last drain ended.
    drain_ended: Option<Duration>,
    /// When the current (or last) drain began.
    drain_started: Duration,
    /// The most the path has delivered in a round: about the bottleneck once a queue
    /// has formed (acks leave the far end at its rate).
    best_round: u64,
    /// [`Self::best_round`] when the probe under way began.
    best_before_probe: u64,
    /// Cruising: retransmits so far and the end of the grace period in which the
    /// start-up's recovery may still be retransmitting; `None` when not cruising.
    cruising: Option<(u64, Duration)>,
    bbr: bool,
    /// The congestion control the streams run now (the last one this controller asked
    /// for; BBR or not is what matters).
    on_bbr: bool,
    /// The best round (in pacing's terms) since the probe under way began.
    probe_best: u64,
    /// The probe under way restarted BBR (see [`RateProbe::probe_rounds`]).
    probe_restarted: bool,
    /// Each stream's smoothed RTT and acks at the last sample ([`Self::recent_rtt`]).
    last_srtt: Vec<(Duration, u64)>,
    /// Time spent at each held rate after the start-up, in buckets of 1/2 %: bucket ->
    /// (time, the smallest rate held in it) ([`Self::steady_bps`]).
    held_time: std::collections::BTreeMap<i32, (Duration, u64)>,
    /// When the last sample was taken.
    last_at: Option<Duration>,
    /// The first sample after a stall of the host (see [`Self::stall_gap`]).
    stall_ended: Option<Duration>,
    /// A start-up paused at this rate (bit/s) until then, instead of ended: the queue it
    /// saw may be the stall's ([`RateProbe::on_startup`]).
    pause: Option<(Duration, u64)>,
    /// A start-up going on after a pause: paced from this rate (bit/s) at this time,
    /// doubling per round, so the windows the pause let grow do not leave in one burst.
    resumed: Option<(Duration, u64)>,
    /// Hold rounds in a row that looked like another flow's queue ([`FOREIGN_ROUNDS`]).
    foreign_rounds: u32,
    /// While competing: the best round the streams delivered since it began (bit/s),
    /// what a check paces at half of and what is held when the other flow has gone.
    compete_bps: u64,
    /// Bursts of loss the start-up waited out ([`repair`]).
    repair: repair::Repair,
    /// Windows short of the held rate, refilled ([`refill`]).
    refill: refill::Refill,
    /// Competing streams slow-start on reno: their retransmits then (`Some(None)`: not yet).
    compete_slow_start: Option<Option<u64>>,
    /// A congestion control a phase change asks for, handed out with the next pacing, and
    /// whether from its first state.
    switch_to: Option<(&'static str, bool)>,
    /// Times the sender went competing (for logs and tests).
    competed: u32,
    /// Checks in a row that found the other flow still there (each doubles the next wait).
    checks_in_vain: u32,
    /// When the check under way ends at the latest.
    check_ends: Option<Duration>,
    /// What the streams' delivery counters show of a paced rate, learned from clean hold
    /// rounds ([`RateProbe::paced`]): pacing counts bytes the delivered payload does not
    /// (headers of a segment train, TLS framing), 1-2 % on a real path.
    yield_ratio: f64,
}

impl RateProbe {
    /// A controller for a path with round-trip time `rtt`. `loss_ends_startup` is true for
    /// loss-based congestion control (reno, cubic), whose first loss means the path is full.
    pub fn new(rtt: Duration, loss_ends_startup: bool) -> Self {
        let round = rtt.max(MIN_ROUND);
        Self {
            round,
            loss_ends_startup,
            phase: Phase::StartUp,
            base_rtt: None,
            window: VecDeque::new(),
            round_end: round,
            began: Duration::ZERO,
            round_best_bps: 0,
            flat_rounds: 0,
            first_retransmits: None,
            held: None,
            exit: None,
            startup_drain: false,
            catch_up: false,
            exit_sent_bps: 0,
            clean_rounds: 0,
            next_probe: FIRST_PROBE,
            successes: 0,
            stalled_probes: 0,
            peak_held: 0,
            proven: 0,
            restore: None,
            restoring: false,
            drain_ended: None,
            drain_started: Duration::ZERO,
            best_round: 0,
            best_before_probe: 0,
            cruising: None,
            bbr: !loss_ends_startup,
            on_bbr: !loss_ends_startup,
            probe_best: 0,
            probe_restarted: false,
            last_srtt: Vec::new(),
            held_time: std::collections::BTreeMap::new(),
            last_at: None,
            stall_ended: None,
            pause: None,
            resumed: None,
            foreign_rounds: 0,
            compete_bps: 0,
            compete_slow_start: None,
            repair: repair::Repair::default(),
            refill: refill::Refill::default(),
            yield_ratio: 1.0,
            switch_to: None,
            competed: 0,
            checks_in_vain: 0,
            check_ends: None,
        }
    }

    /// How many times the sender has found another flow's queue and competed with it.
    pub fn times_competed(&self) -> u32 {
        self.competed
    }

    /// How long a round is (the RTT, at least 20 ms).
    pub fn round(&self) -> Duration {
        self.round
    }

    /// How often to sample: a sixteenth of a round, between 5 and 25 ms (the start-up's
    /// exit needs two samples: at 436 ms 25 ms apart, in which a rate 2x the bottleneck
    /// queues 6 % of the BDP).
    pub fn sample_every(&self) -> Duration {
        (self.round / 16).clamp(Duration::from_millis(5), Duration::from_millis(25))
    }

    /// The rate being held (all streams, bit/s), once the start-up has ended.
    pub fn held_bps(&self) -> Option<u64> {
        self.held
    }

    /// The largest rate held so far (bit/s).
    pub fn peak_held_bps(&self) -> Option<u64> {
        self.held.map(|_| self.peak_held)
    }

    /// The rate the run held after the start-up, for the path's record: the upper
    /// quartile over time (within 1/2 %; bit/s). Not the held rate at the end, which a
    /// last round may have lowered (streams finishing, a busy host): a 180 ms push
    /// recorded 662 Mbit/s after holding 960-990 for most of the run, and the next run's
    /// jump took four seconds to climb back. Not the median either: a first run on a busy
    /// host spends seconds below the bottleneck after each stall (the median of one was
    /// 888 Mbit/s). A held rate is never above what the path delivered, so the upper
    /// quartile is what the path carried while the host kept up; the jump starts at a
    /// share of it and checks it.
    pub fn steady_bps(&self) -> Option<u64> {
        let total: Duration = self.held_time.values().map(|v| v.0).sum();
        let mut seen = Duration::ZERO;
        for (time, rate) in self.held_time.values() {
            seen += *time;
            if seen * 4 >= total * 3 && !total.is_zero() {
                return Some(*rate);
            }
        }
        None
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Why the start-up ended, once it has.
    pub fn startup_exit(&self) -> Option<StartUpExit> {
        self.exit
    }

    /// The smallest RTT seen, once a stream has reported one.
    pub fn base_rtt(&self) -> Option<Duration> {
        self.base_rtt
    }

    /// Feeds one sample of every stream at `at` (time since the data began); returns the
    /// pacing to apply.
    pub fn on_sample(&mut self, at: Duration, streams: &[StreamSample]) -> Pacing {
        if self
            .last_at
            .is_some_and(|last| at.saturating_sub(last) > self.stall_gap())
        {
            self.stall_ended = Some(at);
        }
        self.count_held_time(at);
        let total: u64 = streams.iter().map(|s| s.delivery_bps).sum();
        let retransmits: u64 = streams.iter().map(|s| s.retransmits).sum();
        let app_limited = streams.iter().all(|s| s.app_limited || !s.busy);
        for s in streams.iter().filter(|s| !s.min_rtt.is_zero()) {
            self.base_rtt = Some(self.base_rtt.map_or(s.min_rtt, |b| b.min(s.min_rtt)));
        }
        // The RTT now: the smallest smoothed RTT of the streams with data in flight (a
        // queue at the bottleneck delays them all; one stream in recovery does not count).
        let rtt_now = streams
            .iter()
            .filter(|s| s.busy && !s.srtt.is_zero())
            .map(|s| s.srtt)
            .min();
        let recent_rtt = self.recent_rtt(streams);
        self.window.push_back(Moment {
            at,
            total_bps: total,
            delivered: streams.iter().map(|s| s.delivered_bytes).sum(),
            held_back_us: streams.iter().map(|s| s.held_back_us).sum(),
            busy: streams.iter().filter(|s| s.busy).count(),
            rtt: rtt_now,
            recent_rtt,
        });
        while self.window.front().is_some_and(|m| m.at + self.round < at) {
            self.window.pop_front();
        }
        if let Some(r) = self.round_rate() {
            self.best_round = self.best_round.max(r);
        }
        let mut congestion = None;
        if let Some(cc) = self.check_cruise(at, retransmits) {
            congestion = Some(cc);
        }
        let qdelay = self.queue_delay(at);
        let in_flight: u64 = streams.iter().map(|s| s.in_flight_bytes).sum();
        match self.phase {
            Phase::StartUp => {
                let flight = Flight::of(in_flight, streams);
                if let Some(exit) = self.on_startup(at, total, retransmits, app_limited, flight) {
                    let held = self.best_total().max(1);
                    let base = self.base_rtt.unwrap_or(self.round).as_secs_f64();
                    self.exit_sent_bps = (in_flight as f64 * 8.0 / base) as u64;
                    self.exit = Some(exit);
                    self.startup_drain = true;
                    self.hold(held);
                    self.start_drain(at, qdelay);
                    if self.bbr {
                        congestion = Some("cubic");
                        self.cruise_from(at, retransmits, CRUISE_GRACE_ROUNDS);
                    }
                }
            }
            Phase::Drain { until } => self.on_drain(at, until, qdelay, in_flight),
            Phase::Hold => self.on_hold(at, qdelay, app_limited, in_flight, retransmits),
            Phase::ProbeUp { gain, since } => self.on_probe(at, gain, since, qdelay),
            Phase::Compete { check } => self.on_compete(at, check, qdelay, retransmits),
        }
        let mut restart_congestion = false;
        if let Some((cc, restart)) = self.switch_to.take() {
            congestion = Some(cc);
            restart_congestion = restart;
        }
        if let Some(cc) = congestion {
            self.on_bbr = cc == "bbr";
        }
        Pacing {
            per_stream_bps: self.per_stream(streams),
            congestion,
            restart_congestion,
        }
    }

    /// Adds the time since the last sample to the held rate's bucket, while holding or
    /// probing (not in the start-up or a drain).
    fn count_held_time(&mut self, at: Duration) {
        let since = at.saturating_sub(self.last_at.unwrap_or(at));
        self.last_at = Some(at);
        if !matches!(self.phase, Phase::Hold | Phase::ProbeUp { .. }) {
            return;
        }
        if let Some(held) = self.held.filter(|&h| h > 0) {
            let bucket = ((held as f64).ln() / 1.005f64.ln()) as i32;
            let e = self
                .held_time
                .entry(bucket)
                .or_insert((Duration::ZERO, held));
            e.0 += since;
            e.1 = e.1.min(held);
        }
    }

    /// Rounds a probe paces at its gain: one, unless the streams cruise on BBR (a path
    /// with loss of its own). BBR paces at its own estimate of the path, which rises only
    /// in the one round of its eight that probes (by a quarter): a one-round probe of the
    /// cap above it never saw more delivered (a jump-started run on a 1e-3 loss path held
    /// its start to the end), so a probe lasts BBR's cycle. But probes that all lasted it
    /// climbed from a stale record of 100 Mbit/s on a 1 Gbit/s path to 270 Mbit/s in
    /// 10 s, so a step over [`NEAR_PROBE`] restarts BBR (see [`RateProbe::start_probe`])
    /// and lasts [`RESTARTED_PROBE_ROUNDS`]: its start-up doubles the window per round
    /// trip up to the cap (with two or three rounds the ramp was not done).
    pub(super) fn probe_rounds(&self) -> u32 {
        if self.probe_restarted {
            RESTARTED_PROBE_ROUNDS
        } else if self.on_bbr {
            BBR_CYCLE_ROUNDS
        } else {
            1
        }
    }

    fn hold(&mut self, bps: u64) {
        self.held = Some(bps);
        self.peak_held = self.peak_held.max(bps);
    }

    /// The largest total delivery-rate sample of the last round.
    fn best_total(&self) -> u64 {
        self.window.iter().map(|m| m.total_bps).max().unwrap_or(0)
    }

    /// Whether the receiver's window held the busy streams back for more than a tenth of
    /// the last round.
    fn held_back(&self) -> bool {
        let (Some(first), Some(last)) = (self.window.front(), self.window.back()) else {
            return false;
        };
        let span = last.at.saturating_sub(first.at).as_micros() as u64;
        let back = last.held_back_us.saturating_sub(first.held_back_us);
        back * 10 > span * last.busy.max(1) as u64
    }

    /// The rate delivered over the last round (bit/s), once the window spans most of one.
    /// (Acks leave the far end as the bottleneck releases the data, whatever the queue
    /// before it, so a round of acks carries a round of the bottleneck's time.)
    fn round_rate(&self) -> Option<u64> {
        let (first, last) = (self.window.front()?, self.window.back()?);
        let span = last.at.saturating_sub(first.at);
        if span < self.round * 3 / 4 {
            return None;
        }
        let bytes = last.delivered.saturating_sub(first.delivered);
        Some((bytes as f64 * 8.0 / span.as_secs_f64()) as u64)
    }

    /// A rate the delivery counters showed, as the pacing that lets it out (see
    /// [`Self::yield_ratio`]): every comparison with the held rate is in pacing's terms.
    /// A 2 % probe must show three quarters of its step; with counters 1-2 % under the
    /// pacing none did, each was taken for the bottleneck and drained, and a cp pull
    /// jump-started at 83 % of a 500 Mbit/s shaper held it for 40 s.
    fn paced(&self, counted: u64) -> u64 {
        (counted as f64 / self.yield_ratio) as u64
    }

    /// [`Self::round_rate`] in pacing's terms ([`Self::paced`]).
    fn paced_round_rate(&self) -> Option<u64> {
        self.round_rate().map(|r| self.paced(r))
    }

    /// A clean hold round with no queue at all delivered `counted` (the counters' figure)
    /// of `held`: the counters' yield moves a quarter of the way to it. Within 0.9..=1: a
    /// round that delivered more is a catch-up, one that delivered much less was short for
    /// some other reason.
    fn learn_yield(&mut self, counted: u64, held: u64) {
        let sample = (counted as f64 / held.max(1) as f64).clamp(0.9, 1.0);
        self.yield_ratio = 0.75 * self.yield_ratio + 0.25 * sample;
    }

    /// The queueing delay: the smallest RTT of the last quarter round over the minimum.
    /// The queue delay the latest acks of sample `m` carried (see [`Self::recent_rtt`]).
    fn recent_queue(&self, m: &Moment) -> Option<Duration> {
        m.recent_rtt
            .map(|r| r.saturating_sub(self.base_rtt.unwrap_or(r)))
    }

    fn queue_delay(&self, at: Duration) -> Option<Duration> {
        let base = self.base_rtt?;
        let since = at.saturating_sub(self.round / 4);
        self.window
            .iter()
            .filter(|m| m.at >= since)
            .filter_map(|m| m.rtt)
            .min()
            .map(|r| r.saturating_sub(base))
    }

    /// Queue delay that a held rate must not build: 2.5 % of the minimum RTT, at least 2 ms.
    fn standing_queue(&self) -> Duration {
        (self.base_rtt.unwrap_or(self.round) / 40).max(Duration::from_millis(2))
    }

    /// Queue delay that counts as empty: 1 % of the minimum RTT, at least 1 ms.
    fn empty_queue(&self) -> Duration {
        (self.base_rtt.unwrap_or(self.round) / 100).max(Duration::from_millis(1))
    }

    /// The longest a drain may take: what a queue of a round (or of the RTT's excess, if
    /// larger) needs at [`DRAIN_GAIN`]. The queue the RTT shows is a round trip old, so the
    /// drain normally ends earlier, on the bytes in flight.
    fn drain_limit(&self, qdelay: Option<Duration>) -> Duration {
        let q = qdelay.unwrap_or_default().max(self.round);
        (q.mul_f64(1.0 / (1.0 - DRAIN_GAIN))).min(MAX_DRAIN)
    }
}

mod phases;
mod refill;
mod repair;
mod startup;
use startup::Flight;

#[cfg(test)]
mod fluid;
#[cfg(test)]
mod hold_tests;
#[cfg(test)]
mod tests;
