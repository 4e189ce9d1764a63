//! Finding the bottleneck rate when the user did not give one, with no I/O.
//!
//! The record teams sized the window and pacing to the path by hand, from a priori
//! knowledge. `--window auto` without `--rate` learns the rate instead: while the run
//! starts it max-filters the kernel's estimate (BBR's bandwidth model when BBR runs,
//! otherwise the delivery-rate samples), declares the probe over after three rounds
//! without 25 % growth (BBR's own start-up exit rule) or, for loss-based congestion
//! control, at the first retransmission, and then the sender holds its pacing to that rate
//! so the path's queue is not overrun for the rest of the run.
//!
//! BBR, which finds the rate best, also drains the pipe every 10 s (ProbeRTT) to re-measure
//! the minimum RTT: on a 180 ms path that costs about 4 % of the run. Once the rate is held
//! by pacing, a clean path needs no model at all, so the sender cruises on CUBIC, paced at
//! the rate found (pacing, not the window, keeps the queue empty). If the path then loses
//! packets although nobody sends faster than the bottleneck, the loss is not congestion:
//! the sender goes back to BBR, which does not mistake such loss for a full queue.

use std::time::Duration;

/// Rounds without 25 % growth that end the probe.
const FLAT_ROUNDS: u32 = 3;
/// Growth that counts as still climbing.
const GROWTH: f64 = 1.25;
/// Shortest probe round, so that short RTTs still average over some samples.
const MIN_ROUND: Duration = Duration::from_millis(20);

/// One observation of all streams of a sender, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeSample {
    /// Time since the run started.
    pub at: Duration,
    /// Sum of the streams' latest delivery-rate samples, bit/s.
    pub delivery_bps: u64,
    /// Sum of BBR's bandwidth estimates, bit/s, when every stream runs BBR.
    pub bbr_bps: Option<u64>,
    /// Segments retransmitted so far, all streams.
    pub retransmits: u64,
    /// Every stream's latest delivery-rate sample was application-limited (the sender
    /// had nothing to send: a sync sending headers of unchanged chunks, a reader slower
    /// than the path): such a round says nothing about the path and never ends the probe.
    pub app_limited: bool,
}

/// Pacing during the drain, as a share of the held rate.
pub const DRAIN_GAIN: f64 = 0.75;
/// Longest drain.
const MAX_DRAIN: Duration = Duration::from_secs(20);

/// How long to pace at [`DRAIN_GAIN`] x the held rate so that the queue the start-up left
/// in the path empties: the queue holds `srtt - min_rtt` of traffic at the bottleneck rate,
/// and pacing 25 % below that rate removes it in four times as long. `None` when the
/// queue is negligible (under 2 ms or 5 % of the base RTT).
pub fn drain_time(srtt: Duration, min_rtt: Duration) -> Option<Duration> {
    let excess = srtt.saturating_sub(min_rtt);
    if excess < Duration::from_millis(2) || excess < min_rtt / 20 {
        return None;
    }
    Some(excess.mul_f64(1.0 / (1.0 - DRAIN_GAIN)).min(MAX_DRAIN))
}

/// What the sender should do after a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeAction {
    /// The probe ended: cap pacing at `rate_bps` (all streams together), and switch the
    /// congestion control to `congestion` if given.
    Hold {
        /// Total rate to pace at, bit/s.
        rate_bps: u64,
        /// Congestion control to cruise on.
        congestion: Option<&'static str>,
    },
    /// The held path lost packets: switch back to this congestion control.
    Switch(&'static str),
}

/// The state of the probe.
#[derive(Debug, Clone)]
pub struct RateProbe {
    round: Duration,
    loss_ends_probe: bool,
    best_bps: u64,
    round_best_bps: u64,
    round_end: Duration,
    flat_rounds: u32,
    first_retransmits: Option<u64>,
    held: Option<u64>,
    /// While cruising: retransmits seen so far, and the end of the grace period in which
    /// the start-up's loss recovery may still be retransmitting.
    cruising: Option<(u64, Duration)>,
}

impl RateProbe {
    /// A probe for a path with round-trip time `rtt`. `loss_ends_probe` is true for
    /// loss-based congestion control (reno, cubic), whose first loss means the path is full.
    pub fn new(rtt: Duration, loss_ends_probe: bool) -> Self {
        let round = rtt.max(MIN_ROUND);
        Self {
            round,
            loss_ends_probe,
            best_bps: 0,
            round_best_bps: 0,
            round_end: round,
            flat_rounds: 0,
            first_retransmits: None,
            held: None,
            cruising: None,
        }
    }

    /// How often to sample: one round (the RTT, at least 20 ms).
    pub fn round(&self) -> Duration {
        self.round
    }

    /// Feeds one sample; returns what to do when the probe ends or a cruise must switch.
    pub fn on_sample(&mut self, s: ProbeSample) -> Option<ProbeAction> {
        if let Some((base, grace_end)) = self.cruising {
            if s.at < grace_end {
                self.cruising = Some((s.retransmits, grace_end));
            } else if s.retransmits > base {
                self.cruising = None;
                return Some(ProbeAction::Switch("bbr"));
            }
            return None;
        }
        if self.held.is_some() {
            return None;
        }
        let estimate = s.bbr_bps.unwrap_or(s.delivery_bps);
        self.best_bps = self.best_bps.max(estimate);
        let base = *self.first_retransmits.get_or_insert(s.retransmits);
        let lost = self.loss_ends_probe && s.retransmits > base && self.best_bps > 0;
        if s.at >= self.round_end {
            if s.app_limited {
                // Not the path's rate: no verdict from this round.
            } else if self.best_bps as f64 >= self.round_best_bps as f64 * GROWTH {
                self.round_best_bps = self.best_bps;
                self.flat_rounds = 0;
            } else {
                self.flat_rounds += 1;
            }
            while self.round_end <= s.at {
                self.round_end += self.round;
            }
        }
        if lost || (self.flat_rounds >= FLAT_ROUNDS && self.best_bps > 0) {
            self.held = Some(self.best_bps);
            let cruise = s.bbr_bps.is_some();
            if cruise {
                let grace = (self.round * 4).max(Duration::from_secs(1));
                self.cruising = Some((s.retransmits, s.at + grace));
            }
            return Some(ProbeAction::Hold {
                rate_bps: self.best_bps,
                congestion: cruise.then_some("cubic"),
            });
        }
        None
    }

    /// The rate being held, once the probe has ended.
    pub fn held_bps(&self) -> Option<u64> {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ms: u64, bps: u64, retransmits: u64) -> ProbeSample {
        ProbeSample {
            at: Duration::from_millis(ms),
            delivery_bps: bps,
            bbr_bps: None,
            retransmits,
            app_limited: false,
        }
    }

    /// Regression (`longhaul sync` over 180 ms): a sender with little to send held its
    /// pacing at the ~100 kbit/s its headers made, and then sent the changed chunks at
    /// that rate.
    #[test]
    fn application_limited_rounds_never_end_the_probe() {
        let mut p = RateProbe::new(Duration::from_millis(100), false);
        for round in 1..50u64 {
            let mut s = sample(round * 100, 100_000, 0);
            s.app_limited = true;
            assert_eq!(p.on_sample(s), None, "held at round {round}");
        }
        // Then the path fills, and the probe ends at its rate.
        let mut held = None;
        for round in 50..80u64 {
            held = held.or(p.on_sample(sample(round * 100, 900_000_000, 0)));
        }
        assert!(matches!(
            held,
            Some(ProbeAction::Hold {
                rate_bps: 900_000_000,
                ..
            })
        ));
    }

    #[test]
    fn slow_start_then_plateau_holds_the_plateau() {
        let mut p = RateProbe::new(Duration::from_millis(100), false);
        let mut rate = 10_000_000u64;
        let mut held = None;
        for round in 1..40u64 {
            rate = (rate * 2).min(1_000_000_000);
            if let Some(ProbeAction::Hold {
                rate_bps: h,
                congestion,
            }) = p.on_sample(sample(round * 100, rate, 0))
            {
                assert_eq!(congestion, None, "no BBR model: nothing to switch from");
                held = Some((round, h));
                break;
            }
        }
        let (round, h) = held.expect("probe never ended");
        assert_eq!(h, 1_000_000_000);
        // 10 Mbit/s doubles to 1 Gbit/s in 7 rounds, then three flat rounds.
        assert!((9..=11).contains(&round), "ended at round {round}");
        assert_eq!(p.held_bps(), Some(1_000_000_000));
        assert_eq!(p.on_sample(sample(9999, 5, 0)), None);
    }

    #[test]
    fn loss_ends_the_probe_for_loss_based_control_only() {
        let mut cubic = RateProbe::new(Duration::from_millis(100), true);
        assert_eq!(cubic.on_sample(sample(100, 500_000_000, 3)), None);
        assert_eq!(cubic.on_sample(sample(200, 800_000_000, 3)), None);
        assert_eq!(
            cubic.on_sample(sample(300, 900_000_000, 4)),
            Some(ProbeAction::Hold {
                rate_bps: 900_000_000,
                congestion: None
            })
        );

        let mut bbr = RateProbe::new(Duration::from_millis(100), false);
        assert_eq!(bbr.on_sample(sample(100, 500_000_000, 3)), None);
        assert_eq!(bbr.on_sample(sample(200, 800_000_000, 9)), None);
    }

    #[test]
    fn bbr_model_is_preferred_over_delivery_samples() {
        let mut p = RateProbe::new(Duration::from_millis(50), false);
        let mut held = None;
        for i in 1..20 {
            let s = ProbeSample {
                at: Duration::from_millis(i * 50),
                delivery_bps: 2_000_000_000,
                bbr_bps: Some(950_000_000),
                retransmits: 0,
                app_limited: false,
            };
            held = held.or(p.on_sample(s));
        }
        assert_eq!(
            held,
            Some(ProbeAction::Hold {
                rate_bps: 950_000_000,
                congestion: Some("cubic")
            })
        );
        // Cruising on CUBIC: a retransmission means non-congestive loss, back to BBR once.
        let at = |ms, retransmits| ProbeSample {
            at: Duration::from_millis(ms),
            delivery_bps: 950_000_000,
            bbr_bps: None,
            retransmits,
            app_limited: false,
        };
        // Retransmits within the grace period (the start-up's recovery) only move the base.
        assert_eq!(p.on_sample(at(1100, 3)), None);
        assert_eq!(p.on_sample(at(2000, 3)), None);
        assert_eq!(p.on_sample(at(2050, 5)), Some(ProbeAction::Switch("bbr")));
        assert_eq!(p.on_sample(at(2100, 9)), None);
    }

    #[test]
    fn a_standing_queue_is_drained_at_three_quarters_of_the_rate() {
        let ms = Duration::from_millis;
        // 436 ms path with the start-up's 1-BDP queue still standing: 4 x 424 ms.
        assert_eq!(drain_time(ms(860), ms(436)), Some(ms(1696)));
        assert_eq!(drain_time(ms(437), ms(436)), None);
        assert_eq!(
            drain_time(ms(188), ms(180)),
            None,
            "under 5 % of the base RTT"
        );
        assert_eq!(drain_time(ms(190), ms(180)), Some(ms(40)));
        assert_eq!(drain_time(ms(100_000), ms(100)), Some(MAX_DRAIN));
    }

    #[test]
    fn short_rtt_rounds_are_at_least_20_ms() {
        let mut p = RateProbe::new(Duration::from_micros(30), false);
        // Samples every 1 ms at a flat rate: the first 20 ms round counts as growth from
        // nothing, then three flat rounds end the probe at 80 ms.
        let mut ended = None;
        for ms in 1..200 {
            if p.on_sample(sample(ms, 1_000_000_000, 0)).is_some() {
                ended = Some(ms);
                break;
            }
        }
        assert_eq!(ended, Some(80));
    }
}
