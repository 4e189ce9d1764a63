//! The rate controller's phases after the start-up (see [`super`]): a jump's resume, the
//! cruise on CUBIC, the drain, the hold, the upward probe and competing, with what moves
//! between them.

use std::time::Duration;

use super::{
    Phase, RateProbe, StartUpExit, StreamSample, CHECK_GAIN, COMPETE_CHECK_MIN,
    COMPETE_CHECK_ROUNDS, CRUISE_GRACE_ROUNDS, DRAIN_GAIN, FIRST_PROBE, FOREIGN_ROUNDS, MAX_PROBE,
    MAX_RESTORE, NEAR_PROBE, PROBE_EVERY, RESTORE_AFTER,
};

impl RateProbe {
    /// Skips the start-up: a jump-start's validator confirmed that the path carries
    /// `rate_bps` (all streams). The rate is held from `at` as if a start-up had found it;
    /// returns the congestion control to switch to (BBR cruises on CUBIC, as after a
    /// start-up, unless the validator saw the path's own loss (`path_loss`): then BBR
    /// stays, as after a loss while cruising. On a 1e-3 loss path CUBIC's cuts took a
    /// second at half the rate before that loss switched it back).
    pub fn resume_at(
        &mut self,
        at: Duration,
        rate_bps: u64,
        retransmits: u64,
        path_loss: bool,
    ) -> Option<&'static str> {
        self.exit = Some(StartUpExit::Jump);
        self.hold(rate_bps.max(1));
        self.phase = Phase::Hold;
        self.round_end = at + self.round;
        self.clean_rounds = 0;
        self.on_bbr = self.bbr && path_loss;
        if self.bbr && path_loss {
            self.cruising = None;
            Some("bbr")
        } else if self.bbr {
            self.cruise_from(at, retransmits, CRUISE_GRACE_ROUNDS);
            Some("cubic")
        } else {
            None
        }
    }

    /// Cruising on CUBIC from `at`, with `retransmits` so far: for `rounds` (at least a
    /// second) its retransmits are the switch's (a start-up's or a refill's recovery), not
    /// the path's ([`Self::check_cruise`]).
    pub(super) fn cruise_from(&mut self, at: Duration, retransmits: u64, rounds: u32) {
        let grace = (self.round * rounds).max(Duration::from_secs(1));
        self.cruising = Some((retransmits, at + grace));
    }

    /// Cruising on CUBIC: after the grace period, a retransmission means loss that is not
    /// congestion (nobody sends faster than the bottleneck): back to BBR, once.
    pub(super) fn check_cruise(&mut self, at: Duration, retransmits: u64) -> Option<&'static str> {
        let (base, grace_end) = self.cruising?;
        if at < grace_end {
            self.cruising = Some((retransmits, grace_end));
            None
        } else if retransmits > base {
            self.cruising = None;
            Some("bbr")
        } else {
            None
        }
    }

    /// The drain: until the queue is gone (see the module docs), then the hold; the
    /// start-up's drain sets the held rate.
    pub(super) fn on_drain(
        &mut self,
        at: Duration,
        until: Duration,
        qdelay: Option<Duration>,
        in_flight: u64,
    ) {
        // While the start-up's queue drains, the bottleneck still delivers its full
        // rate: what the last round of the drain delivered is the rate to hold (the
        // samples at the exit are a round trip old, or a burst's; the largest round
        // of the drain may hold a catch-up burst of a busy path).
        // The queue is gone when the bytes in flight fit the path (the RTT says so
        // only a round trip later, after a round of pacing below the rate). The
        // start-up's drain measures the path at the rate the busy bottleneck delivered,
        // not at the exit's figure: the kernel's delivery-rate samples average a round of
        // acks, so at the exit they said 85-90 % of the bottleneck, and a drain that
        // waited for the bytes in flight to fit that paced at 3/4 for a quarter round
        // after the queue had gone (a round later the path delivered 250-460 Mbit/s for
        // a second, at 436 ms and at 180 ms).
        let held = self.held.unwrap_or(0);
        let rate = if self.startup_drain {
            held.max(self.busy_bottleneck_bps())
        } else {
            held
        };
        let path_bytes = rate as f64 / 8.0 * self.base_rtt.unwrap_or(self.round).as_secs_f64();
        let emptied = in_flight > 0 && (in_flight as f64) <= path_bytes * 1.02;
        // The RTT says the queue is empty only from samples all taken in the drain
        // (queue_delay's quarter round): at the start-up's exit the window still
        // holds the samples before the queue, and a drain that ended there held
        // the exit's figure (85-88 % of the bottleneck at 436 ms).
        let rtt_says_empty = at >= self.drain_started + self.round / 4
            && qdelay.is_some_and(|q| q <= self.empty_queue());
        if at >= until || emptied || rtt_says_empty {
            if std::mem::take(&mut self.startup_drain) {
                self.catch_up = self.exit == Some(StartUpExit::Queue);
                // Not when the receiver's window held the streams back (a slow
                // reader, a window clamp): the round then says nothing about the
                // path, and pacing at what trickled through would slow even the
                // retransmissions that must refill the window.
                // A round much below the exit's figure (a loss recovery in it):
                // that round is held (the exit's figure may be a burst's), not
                // less than a quarter of it, and probes climb back fast from
                // under half of the exit's figure (kept as the best).
                let held = self.held.unwrap_or(0);
                match self.paced_round_rate() {
                    Some(rate) if !self.held_back() => {
                        // The drain's last round is short of the bottleneck's rate
                        // when the queue emptied in it (then it paced at 3/4): the
                        // best round while the queue kept the bottleneck busy is
                        // its rate (98 % of it; a held rate above the bottleneck
                        // is lowered at the next round's queue). First runs at
                        // 436 ms held 85-88 % here and took 10 s to climb back.
                        // (Not bounded by the exit's figure: the queue shows
                        // before the delivery samples reach the bottleneck's rate.)
                        let rate = rate.max(self.busy_bottleneck_bps());
                        self.held = Some(rate.max(held / 4));
                        if rate >= held / 2 {
                            self.peak_held = rate;
                        }
                    }
                    _ => {}
                }
            }
            self.phase = Phase::Hold;
            self.clean_rounds = 0;
            self.round_end = at + self.round;
            self.drain_ended = Some(at);
        }
    }

    /// The first hold round after a start-up that a queue ended: the start-up's last
    /// round reaches the receiver in it when the drain was short (a queue of a few
    /// milliseconds, gone in a quarter round), and what the path delivered then is its
    /// rate too. So the held rate rises to 98 % of what that round delivered, and the
    /// rounds are counted afresh from there. Not past what the start-up had in flight at
    /// its exit per RTT (its last round cannot deliver more), nor after a round with a
    /// queue: a stalling path's catch-up bursts count over the bottleneck in a round's
    /// figure (the best round of a model of such a path said 1.5 x). Whether the rate was
    /// raised. On a forwarder-bound delay line (1 Gbit/s x 150 ms, MTU 1500, one packet
    /// per read at normal priority: about 750 Mbit/s) the start-up ended at a 3-6 ms queue
    /// of its bursts, the drain held 467 Mbit/s, the next round delivered 560-700, and
    /// 2-4 % probes took five seconds to climb there. A rate above the bottleneck meets
    /// the hold's queue rule at the next round.
    fn catch_up(&mut self) -> bool {
        let held = self.held.unwrap_or(1);
        if self.held_back() {
            return false;
        }
        let Some(round) = self.paced_round_rate() else {
            return false;
        };
        let rate = (round.min(self.exit_sent_bps) as f64 * 0.98) as u64;
        if rate <= held {
            return false;
        }
        self.hold(rate);
        self.clean_rounds = 0;
        true
    }

    /// The bottleneck's rate as a drain holds it: 98 % of the best round the path
    /// delivered (while the start-up's queue kept it busy).
    fn busy_bottleneck_bps(&self) -> u64 {
        (self.paced(self.best_round) as f64 * 0.98) as u64
    }

    /// A probe: one round at `gain` x the held rate from `since`, then one round to see
    /// what it delivered.
    pub(super) fn on_probe(
        &mut self,
        at: Duration,
        gain: f64,
        since: Duration,
        qdelay: Option<Duration>,
    ) {
        // One round at the higher rate (a BBR cycle's on BBR), then one round to see
        // what it delivered: the best round since the probe's first ended.
        let rounds = self.probe_rounds();
        if at >= since + self.round {
            if let Some(r) = self.paced_round_rate() {
                self.probe_best = self.probe_best.max(r);
            }
        }
        // A probe of several rounds that a round already took whole, without a queue and
        // past the best round the path ever delivered (climbing, far from the
        // bottleneck), ends there: on BBR's cycle its one round of eight that sends more
        // comes at any point, on average half way (a climb from a stale record spent
        // 0.9 s per 2-4 % step). Near the bottleneck probes keep their length: ended
        // early there, the next probe came sooner and went over it more often (steady
        // state -0.4 %).
        let queued = qdelay.is_some_and(|q| q > self.standing_queue());
        let taken_early = rounds > 1
            && at >= since + self.round * 2
            && self.probe_best as f64 >= self.whole_probe(gain)
            && self.probe_best as f64 > self.paced(self.best_before_probe) as f64 * 1.01
            && !queued;
        if at >= since + self.round * (rounds + 1) || taken_early {
            let last = self.paced_round_rate().unwrap_or(0);
            let delivered = if rounds > 1 {
                self.probe_best.max(last)
            } else {
                last
            };
            let held = self.held.unwrap_or(1);
            let wanted = held as f64 * (1.0 + (gain - 1.0) * 0.75);
            let probed = held as f64 * gain;
            if delivered as f64 >= self.whole_probe(gain) && !queued {
                // The path took it all: hold it and try twice the step at once
                // (by at most NEAR_PROBE until three probes running were taken
                // whole, or the rate is under half the best held: a probe over
                // the bottleneck queues its excess for a round, and the queue
                // must stay within 5 % of the RTT).
                self.hold(delivered.min(probed as u64));
                self.successes += 1;
                self.restoring = false;
                self.proven = self.held.unwrap_or(0);
                let cap = if self.successes >= 3 || self.held.unwrap_or(0) < self.peak_held / 2 {
                    MAX_PROBE
                } else {
                    NEAR_PROBE
                };
                self.next_probe = (self.next_probe * 2.0).min(cap);
                // Up to the best round the path ever delivered a probe may double;
                // past it by at most NEAR_PROBE, unless this round was itself the
                // best (the path has more than it showed: climbing, not near the
                // bottleneck). A doubled step over the bottleneck queued 16 % of
                // the RTT for a round at 436 ms.
                let held_now = self.held.unwrap_or(1) as f64;
                let ceiling = self.paced(self.best_round) as f64 * (1.0 + NEAR_PROBE);
                let climbing = delivered as f64 > self.paced(self.best_before_probe) as f64 * 1.01;
                if !climbing && held_now * (1.0 + self.next_probe) > ceiling {
                    self.next_probe = (ceiling / held_now - 1.0).max(FIRST_PROBE);
                }
                // A restore not there yet takes its next step at once.
                let back = self.restore.filter(|&r| r as f64 > held_now * 1.01);
                self.restore = back;
                self.restoring = back.is_some();
                match back {
                    Some(back) => self.start_probe(restore_gain(back, held_now as u64), at),
                    None => self.start_probe(1.0 + self.next_probe, at),
                }
            } else if (delivered as f64) < held as f64 * 0.97 && !self.restoring {
                // Less than the held rate itself, which a bottleneck between the two
                // rates would still deliver: the round says nothing of the probe (a stall
                // of the path, whose catch-up comes later; a drop in the path's rate,
                // which the hold lowers to). Back to the hold, the probe next after one
                // clean round: a forwarder that stalled every two or three rounds hit most
                // two-round probes, and each miss started the count of five again. Every
                // other miss waits a round more: with a fixed wait, stalls that come every
                // three rounds hit every probe (the cycle of probe, watch and wait is three
                // rounds too), and a rate held under the bottleneck never climbed.
                self.phase = Phase::Hold;
                self.stalled_probes += 1;
                self.clean_rounds = PROBE_EVERY - 1 - self.stalled_probes % 2;
            } else if delivered as f64 >= wanted && !queued {
                // Most of it: the bottleneck is about what was delivered.
                self.forget_proven();
                self.hold((delivered as f64 * (1.0 - FIRST_PROBE)) as u64);
                self.next_probe = FIRST_PROBE;
                self.successes = 0;
                self.clean_rounds = 0;
                self.phase = Phase::Hold;
            } else {
                // The bottleneck is below the probe: what the path delivered is its
                // rate; hold a little under it and drain what the probe queued.
                self.forget_proven();
                if delivered > held {
                    self.hold((delivered as f64 * (1.0 - FIRST_PROBE)) as u64);
                }
                self.next_probe = FIRST_PROBE;
                self.successes = 0;
                self.clean_rounds = 0;
                self.start_drain(at, qdelay);
            }
            self.round_end = at + self.round;
        }
    }

    pub(super) fn on_hold(
        &mut self,
        at: Duration,
        qdelay: Option<Duration>,
        app_limited: bool,
        in_flight: u64,
        retransmits: u64,
    ) {
        if at < self.round_end {
            return;
        }
        self.round_end = at + self.round;
        let queued = qdelay.is_some_and(|q| q > self.standing_queue());
        if self.refill_windows(at, queued, app_limited, in_flight, retransmits) {
            return;
        }
        if std::mem::take(&mut self.catch_up) && !app_limited && !queued && self.catch_up() {
            return;
        }
        let held = self.held.unwrap_or(1);
        let counted = self.round_rate().unwrap_or(0);
        let delivered = self.paced(counted);
        if queued {
            // The path delivered less than the held rate that the streams did send: the
            // rate is above the bottleneck. A rate the path delivers whole is not; its
            // queue is one a probe or a burst left (a drain empties it), or a busy host's
            // late acks and timers (which lowering would only follow down to the floor:
            // a loaded 2-core host took a jump's 23 Mbit/s to a quarter and kept it there).
            let over = delivered < held * 99 / 100 && !app_limited;
            let drained_lately = self
                .drain_ended
                .is_some_and(|end| at < end + self.round * 2);
            // The path delivers less than the held rate, and the queue stood through the
            // drain before: a loss-based flow keeps it full (lowering would follow it down
            // to the floor, as against a CUBIC flow on a 1-BDP buffer a 256 MiB pull did:
            // 0.0 % of the path in 300 s). A busy host's late acks raise the RTT too, but
            // the path then delivers what is held.
            if over && drained_lately && !self.held_back() {
                self.foreign_rounds += 1;
                if self.foreign_rounds >= FOREIGN_ROUNDS {
                    self.start_competing(at);
                    return;
                }
            } else {
                self.foreign_rounds = 0;
            }
            if over && !self.held_back() {
                // By at most a tenth per round (one round's figure is not trusted further),
                // never below a quarter of the best rate held: a queue that lowering does
                // not drain is another flow's, and a delay-based sender must not spiral
                // down to nothing against a loss-based one.
                let floor = self.peak_held / 4;
                let lowered = (delivered.min(held) as f64 * 0.98).max(held as f64 * 0.9);
                let lowered = (lowered as u64).max(floor);
                self.held = Some(lowered);
                // A held rate under what the path delivered in its best round (while a
                // queue kept the bottleneck busy) is not above the bottleneck either: a
                // queue that lowers it before five clean rounds proved it is a stall's (a
                // busy host, a late emulator). At 180 ms one stall of about 120 ms took a
                // first cp run from 90 % of the bottleneck to 73 % in two lowerings, and
                // 2-4 % probes took five seconds to climb back. Lowerings in a row keep
                // the highest rate to come back to.
                let under_best = held as f64 <= self.paced(self.best_round) as f64 * 0.97;
                let back = self
                    .restore
                    .unwrap_or(0)
                    .max(self.proven)
                    .max(if under_best { held } else { 0 });
                self.restore = (back > lowered).then_some(back);
                self.start_drain(at, qdelay);
                self.next_probe = FIRST_PROBE;
            } else if !over && !drained_lately && !self.held_back() {
                // Held rate unchanged: one drain for the queue that is there.
                self.start_drain(at, qdelay);
            } else if !over && !self.held_back() && !app_limited {
                // A queue a drain did not empty, and the path delivered all that was held:
                // not this sender's queue to empty (a busy host's late acks, a forwarder's
                // stall), and no sign that the rate is at the bottleneck. The round counts
                // as clean: a path whose forwarder stalls every few rounds had no five
                // clean rounds in a row, and its rate was never probed upward.
                self.count_clean_round(at, held);
                return;
            }
            // Otherwise the receiver's window held the streams back:
            // its late acks raise the RTT, and lowering the rate to what the streams
            // delivered would only spiral down with it.
            self.clean_rounds = 0;
            return;
        }
        self.foreign_rounds = 0;
        if app_limited {
            self.clean_rounds = 0;
            return;
        }
        if delivered as f64 <= held as f64 * 0.95 {
            // Short of the held rate without a queue: not a clean round, but no reason to
            // start counting again either (a forwarder's stall shows so before its queue
            // does, and one came every two or three rounds on a busy host).
            return;
        }
        if qdelay.is_some_and(|q| q <= self.empty_queue()) {
            self.learn_yield(counted, held);
        }
        self.count_clean_round(at, held);
    }

    /// A round at the held rate the path delivered whole: after [`RESTORE_AFTER`] of them
    /// a rate a queue lowered is tried again, after [`PROBE_EVERY`] the rate is probed.
    fn count_clean_round(&mut self, at: Duration, held: u64) {
        self.clean_rounds += 1;
        let due = self.clean_rounds >= RESTORE_AFTER;
        if let Some(back) = self.restore.filter(|&r| r > held && due) {
            // Back toward the proven rate the queue lowered, at once (by at most a tenth
            // per probe, each taken whole before the next): if the path has really slowed,
            // the probe's round shows it, 98 % of what it delivered is held as after any
            // probe, and that proven rate is not tried again.
            self.restoring = true;
            self.start_probe(restore_gain(back, held), at);
        } else if self.clean_rounds >= PROBE_EVERY {
            self.proven = held;
            self.restore = None;
            self.restoring = false;
            self.start_probe(1.0 + self.next_probe, at);
        }
    }

    /// Another flow's queue: unpaced on CUBIC from `at` (a delay-based sender yields to a
    /// loss-based one until it has nothing left, so it takes the loss-based flow's own
    /// rule: each stream then gets about one flow's share), checking now and then whether
    /// the other flow has gone.
    fn start_competing(&mut self, at: Duration) {
        self.foreign_rounds = 0;
        self.competed += 1;
        self.compete_bps = self.paced_round_rate().unwrap_or(0);
        // Its losses are congestion, not the path's: no return to BBR on them.
        self.cruising = None;
        // From slow start, on reno until its first loss (see `on_compete`), then CUBIC.
        self.switch_to = Some(("reno", true));
        self.compete_slow_start = Some(None);
        self.phase = Phase::Compete {
            check: at + self.compete_check_every(),
        };
    }

    /// The wait before the next check: [`COMPETE_CHECK_ROUNDS`] rounds (at least
    /// [`COMPETE_CHECK_MIN`]), doubled for each check in a row that found the other flow
    /// still there, up to four times. A check paces at half of what the streams deliver
    /// until the other flow's queue could have drained, and CUBIC climbs back slowly: at
    /// 150 ms, a check every 6 s beside a flow that stayed for the whole copy cost a
    /// 30 s copy four of them.
    fn compete_check_every(&self) -> Duration {
        (self.round * COMPETE_CHECK_ROUNDS).max(COMPETE_CHECK_MIN)
            * (1 << self.checks_in_vain.min(2))
    }

    /// Competing: the best round the streams deliver is kept; at `check`, one round paced
    /// at [`CHECK_GAIN`] of it and one round to watch. A queue gone with our rate was
    /// ours alone: the other flow has left, and the rate the streams delivered is held
    /// (probes then climb from it, as after a drain). A queue that stays is the other
    /// flow's: competing goes on until the next check.
    pub(super) fn on_compete(
        &mut self,
        at: Duration,
        check: Duration,
        qdelay: Option<Duration>,
        retransmits: u64,
    ) {
        // The competing streams slow-start on reno, as the other flow's streams began:
        // the hold before left them small windows, and CUBIC's slow start ends at the first
        // rise of the RTT (HyStart), which the other flow's queue gives at once: beside a
        // CUBIC flow at 150 ms, 16 streams that began competing at 21 Mbit/s took 30 s
        // to climb to 450. Reno's slow start ends at a loss; CUBIC carries on from there.
        if let Some(base) = self.compete_slow_start {
            let base = base.unwrap_or(retransmits);
            if retransmits > base {
                self.compete_slow_start = None;
                self.switch_to = Some(("cubic", false));
            } else {
                self.compete_slow_start = Some(Some(base));
            }
        }
        if at < check {
            if let Some(r) = self.paced_round_rate() {
                self.compete_bps = self.compete_bps.max(r);
            }
            return;
        }
        // The check lasts what the queue there needs to drain at CHECK_GAIN (our own
        // CUBIC may have filled the buffer), and a round for the RTT to show it.
        let ends = *self.check_ends.get_or_insert_with(|| {
            let q = qdelay.unwrap_or_default().mul_f64(1.0 / (1.0 - CHECK_GAIN));
            at + (q + self.round * 2).min(super::MAX_DRAIN)
        });
        let gone = qdelay.is_some_and(|q| q <= self.standing_queue());
        if at < ends && !(gone && at >= check + self.round * 2) {
            return;
        }
        self.check_ends = None;
        if gone {
            self.checks_in_vain = 0;
            let rate = self.compete_bps.max(1);
            self.hold(rate);
            self.phase = Phase::Hold;
            self.clean_rounds = 0;
            self.round_end = at + self.round;
            self.next_probe = FIRST_PROBE;
            if self.bbr {
                self.cruise_from(at, retransmits, CRUISE_GRACE_ROUNDS);
            }
        } else {
            self.compete_bps = 0;
            self.checks_in_vain += 1;
            self.phase = Phase::Compete {
                check: at + self.compete_check_every(),
            };
        }
    }

    /// The pacing cap of each stream in the current phase.
    pub(super) fn per_stream(&self, streams: &[StreamSample]) -> Vec<Option<u64>> {
        let resumed = self
            .resumed
            .filter(|_| self.held.is_none())
            .map(|(from, rate)| {
                let at = self.window.back().map_or(from, |m| m.at);
                let rounds = at.saturating_sub(from).as_secs_f64() / self.round.as_secs_f64();
                (rate as f64 * 2f64.powf(rounds.min(40.0))) as u64
            });
        let Some(held) = self.held.or(self.pause.map(|p| p.1)).or(resumed) else {
            // Start-up: the kernel's own (BBR's, or slow start's) doubling per round trip.
            return vec![None; streams.len()];
        };
        let total = match self.phase {
            Phase::Compete { check } => {
                let at = self.window.back().map_or(check, |m| m.at);
                if at < check {
                    // Competing: the kernel's CUBIC sets the pace, as the other flow's.
                    return vec![None; streams.len()];
                }
                self.compete_bps as f64 * CHECK_GAIN
            }
            Phase::Drain { .. } => held as f64 * DRAIN_GAIN,
            Phase::ProbeUp { gain, since } if self.window_since(since) => held as f64 * gain,
            _ => held as f64,
        };
        let busy = streams.iter().filter(|s| s.busy).count().max(1);
        let share = (total / busy as f64).max(8_000.0) as u64;
        // An idle stream keeps a small share, so the first bytes of its next work do not
        // wait for the next sample.
        let idle = (share / 8).max(8_000);
        streams
            .iter()
            .map(|s| Some(if s.busy { share } else { idle }))
            .collect()
    }

    /// Whether `at - since` is still within the probe's first round (the round that
    /// paces higher; the second only watches).
    fn window_since(&self, since: Duration) -> bool {
        self.window
            .back()
            .is_some_and(|m| m.at < since + self.round * self.probe_rounds())
    }

    /// Pacing at [`DRAIN_GAIN`] x the held rate from `at`, for a queue of `qdelay`.
    pub(super) fn start_drain(&mut self, at: Duration, qdelay: Option<Duration>) {
        self.drain_started = at;
        self.phase = Phase::Drain {
            until: at + self.drain_limit(qdelay),
        };
    }

    /// What a probe at `gain` must deliver to be taken whole: 97 % of the probed rate,
    /// and at least three quarters of the step (for a 2 % step 97 % would be less than
    /// the held rate).
    fn whole_probe(&self, gain: f64) -> f64 {
        let held = self.held.unwrap_or(1) as f64;
        (held * gain * 0.97).max(held * (1.0 + (gain - 1.0) * 0.75))
    }

    /// One round at `gain` x the held rate from `at` (several on BBR, see
    /// [`Self::probe_rounds`]; a step over [`NEAR_PROBE`] restarts BBR), then one to see
    /// what it delivered.
    pub(super) fn start_probe(&mut self, gain: f64, at: Duration) {
        self.best_before_probe = self.best_round;
        self.probe_best = 0;
        self.probe_restarted = self.on_bbr && gain > 1.0 + NEAR_PROBE * 1.001;
        if self.probe_restarted {
            self.switch_to = Some(("bbr", true));
        }
        self.phase = Phase::ProbeUp { gain, since: at };
    }

    /// A try of the proven rate fell short: the path has slowed, do not try it again.
    pub(super) fn forget_proven(&mut self) {
        if std::mem::take(&mut self.restoring) {
            self.proven = 0;
            self.restore = None;
        }
    }
}

/// The gain of a probe back toward `back` from `held`: most of the way, by at most
/// [`MAX_RESTORE`] (and at least [`FIRST_PROBE`]).
fn restore_gain(back: u64, held: u64) -> f64 {
    (back as f64 / held.max(1) as f64 * 0.99).clamp(1.0 + FIRST_PROBE, 1.0 + MAX_RESTORE)
}
