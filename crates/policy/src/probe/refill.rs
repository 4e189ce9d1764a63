//! A hold whose streams' windows, not the pacing, keep them under the held rate (see
//! [`super`]): for [`SHORT_ROUNDS`] hold rounds in a row the path delivered under
//! [`SHORT_SHARE`] of the held rate with under that share of the held rate's bytes in
//! flight, no queue, no retransmission, the streams busy and the receiver's window open.
//! Nothing on the path holds them back then: their congestion windows do. So BBR is
//! restarted on every stream (its start-up doubles the window per round trip up to the
//! pacing cap), and once the streams have the held rate in flight (or after
//! [`REFILL_ROUNDS`]) the cruise on CUBIC goes on from the window BBR left; a run that
//! cruised on BBR (the path's own loss) stays there.
//!
//! Why: a jump into a 1 MB buffer at 150 ms (1/19 of the BDP; `bench/paths.sh` models
//! (b) and (d)) lost a thousand segments, retreated and started up again; the start-up
//! lost as many more before its exit. The held rate was the path's (978 Mbit/s), but the
//! streams then cruised on CUBIC from the windows the losses had cut: 560 Mbit/s
//! delivered at the hold's first round, 826 from 3 s on with 15.5 of 18.3 MB in flight,
//! at the minimum RTT, with no retransmission, and the held rate only at 10 s: CUBIC's
//! window stays near the size of its last loss for seconds (its curve is flat there) and
//! grows by one segment a round trip beside it. No upward probe runs (the held rate is
//! already the path's) and no queue lowers it, so nothing else moved. A restarted CUBIC
//! would not do: its slow start ends at the first long train of acks, and a window of a
//! round's worth makes one at once.

use std::time::Duration;

use super::RateProbe;

/// A round delivered less than this share of the held rate, with less than this share of
/// its bytes in flight, is short.
const SHORT_SHARE: f64 = 0.92;
/// Short rounds in a row before the windows are refilled (a drain's last round and a
/// stall's round are short too, once).
const SHORT_ROUNDS: u32 = 3;
/// A refill is over when a round delivered this share of the held rate, or had this share
/// of its bytes in flight.
const FULL_SHARE: f64 = 0.95;
/// Hold rounds a refill waits for the windows at most (BBR's start-up from 0.6 of the
/// rate needs one or two).
const REFILL_ROUNDS: u32 = 6;
/// Refills in a run, at most: a window that refilling does not grow is held by something
/// this rule does not see (a send buffer, a slow receiver).
const MAX_REFILLS: u32 = 2;

/// One hold round as the refill rule judges it.
#[derive(Debug, Clone, Copy)]
pub(super) struct HoldRound {
    /// What the path delivered in the round, in pacing's terms (bit/s).
    pub(super) delivered: u64,
    /// The held rate (bit/s).
    pub(super) held: u64,
    /// Bytes in flight at the round's end, all streams.
    pub(super) in_flight: u64,
    /// The held rate's bytes in flight: held rate x minimum RTT.
    pub(super) path_bytes: u64,
    /// Retransmits so far, all streams.
    pub(super) retransmits: u64,
    /// No queue, the streams busy, the receiver's window open.
    pub(super) clean: bool,
}

/// What the controller does after a hold round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RefillStep {
    /// Nothing to do for the windows: judge the round as usual.
    Judge,
    /// Restart BBR on every stream (its start-up refills the windows); the round is not
    /// judged.
    Restart,
    /// A refill under way: the round is not judged.
    Refilling,
    /// The windows are refilled: back to this congestion control (`None`: stay on BBR);
    /// the round is not judged.
    Refilled(Option<&'static str>),
}

/// The counts the refill rule keeps across hold rounds.
#[derive(Debug, Clone, Default)]
pub(super) struct Refill {
    /// Short rounds in a row.
    short_rounds: u32,
    /// Refills so far.
    refills: u32,
    /// A refill under way: hold rounds since its restart, and the control to go back to.
    under_way: Option<(u32, Option<&'static str>)>,
    /// Retransmits at the end of the last hold round.
    resent: Option<u64>,
}

impl Refill {
    /// Judges the hold round that ends now; `cruise` is the congestion control the
    /// streams cruise on when it is not BBR (`None` on BBR).
    pub(super) fn end_round(
        &mut self,
        round: HoldRound,
        cruise: Option<&'static str>,
    ) -> RefillStep {
        let resent = self
            .resent
            .replace(round.retransmits)
            .is_some_and(|before| round.retransmits > before);
        let share = |share: f64| (round.held as f64 * share, round.path_bytes as f64 * share);
        if let Some((rounds, back)) = self.under_way.as_mut() {
            *rounds += 1;
            let (rate, bytes) = share(FULL_SHARE);
            let full = round.delivered as f64 >= rate || round.in_flight as f64 >= bytes;
            if full || *rounds >= REFILL_ROUNDS {
                let back = *back;
                self.under_way = None;
                self.short_rounds = 0;
                return RefillStep::Refilled(back);
            }
            return RefillStep::Refilling;
        }
        let (rate, bytes) = share(SHORT_SHARE);
        let short = round.clean
            && !resent
            && (round.delivered as f64) < rate
            && (round.in_flight as f64) < bytes;
        self.short_rounds = if short { self.short_rounds + 1 } else { 0 };
        if self.short_rounds >= SHORT_ROUNDS && self.refills < MAX_REFILLS {
            self.short_rounds = 0;
            self.refills += 1;
            self.under_way = Some((0, cruise));
            return RefillStep::Restart;
        }
        RefillStep::Judge
    }
}

impl RateProbe {
    /// The refill rule's verdict on the hold round that ends at `at` ([`self`]);
    /// whether it took the round (a refill began, goes on or ended in it).
    pub(super) fn refill_windows(
        &mut self,
        at: Duration,
        queued: bool,
        app_limited: bool,
        in_flight: u64,
        retransmits: u64,
    ) -> bool {
        // Only where BBR may be asked for (the user's own loss-based control is kept).
        if !self.bbr {
            return false;
        }
        let held = self.held.unwrap_or(1);
        let base = self.base_rtt.unwrap_or(self.round).as_secs_f64();
        let round = HoldRound {
            delivered: self.paced(self.round_rate().unwrap_or(0)),
            held,
            in_flight,
            path_bytes: (held as f64 / 8.0 * base) as u64,
            retransmits,
            clean: !queued && !app_limited && !self.held_back(),
        };
        let cruise = (!self.on_bbr).then_some("cubic");
        match self.refill.end_round(round, cruise) {
            RefillStep::Judge => return false,
            RefillStep::Restart => {
                self.switch_to = Some(("bbr", true));
                // The cruise's losses while BBR's start-up refills are the refill's, not
                // the path's: no return to BBR for them.
                if self.cruising.is_some() {
                    self.cruise_from(at, retransmits, REFILL_ROUNDS + 2);
                }
            }
            RefillStep::Refilling => {}
            RefillStep::Refilled(back) => {
                if let Some(cc) = back {
                    self.switch_to = Some((cc, false));
                    // As after the start-up: the refill's own losses are not the path's.
                    self.cruise_from(at, retransmits, super::CRUISE_GRACE_ROUNDS);
                }
            }
        }
        self.clean_rounds = 0;
        true
    }

    /// How many times the streams' windows were refilled.
    pub fn times_refilled(&self) -> u32 {
        self.refill.refills
    }

    /// Whether a refill is under way (the congestion control it switches is the refill's,
    /// not the cruise's).
    pub fn refilling(&self) -> bool {
        self.refill.under_way.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELD: u64 = 978_000_000;
    /// 978 Mbit/s x 150 ms.
    const PATH_BYTES: u64 = 18_337_500;

    /// A clean round that delivered `delivered` with `in_flight` bytes out, and the
    /// retransmits so far.
    fn round(delivered: u64, in_flight: u64, retransmits: u64) -> HoldRound {
        HoldRound {
            delivered,
            held: HELD,
            in_flight,
            path_bytes: PATH_BYTES,
            retransmits,
            clean: true,
        }
    }

    /// The trace of a bench at 150 ms into a 1 MB buffer (model (b)): after the start-up's
    /// losses the streams delivered 560-826 Mbit/s with 10.7-15.5 MB in flight.
    #[test]
    fn windows_short_of_the_held_rate_are_refilled_and_the_cruise_goes_on() {
        let mut refill = Refill::default();
        let trace = [(562, 10.7), (601, 12.6), (704, 14.0)];
        let steps: Vec<_> = trace
            .iter()
            .map(|&(mbps, mb)| {
                refill.end_round(
                    round(mbps * 1_000_000, (mb * 1e6) as u64, 997),
                    Some("cubic"),
                )
            })
            .collect();
        use RefillStep::*;
        assert_eq!(steps, [Judge, Judge, Restart]);
        // BBR's start-up fills the cap in a round or two.
        assert_eq!(
            refill.end_round(round(900_000_000, 17_000_000, 997), None),
            Refilling
        );
        assert_eq!(
            refill.end_round(round(975_000_000, 18_300_000, 997), None),
            Refilled(Some("cubic"))
        );
        // The rounds after are judged as usual.
        assert_eq!(
            refill.end_round(round(975_000_000, 18_300_000, 997), None),
            Judge
        );
    }

    #[test]
    fn a_refill_that_does_not_fill_ends_after_a_bounded_wait() {
        let mut refill = Refill::default();
        let short = round(700_000_000, 13_000_000, 0);
        let steps: Vec<_> = (0..3 + REFILL_ROUNDS as usize)
            .map(|_| refill.end_round(short, None))
            .collect();
        assert_eq!(steps[2], RefillStep::Restart);
        assert!(steps[3..steps.len() - 1]
            .iter()
            .all(|s| *s == RefillStep::Refilling));
        assert_eq!(steps.last(), Some(&RefillStep::Refilled(None)));
    }

    #[test]
    fn refills_are_bounded() {
        let mut refill = Refill::default();
        let short = round(700_000_000, 13_000_000, 0);
        let restarts = (0..100)
            .filter(|_| refill.end_round(short, None) == RefillStep::Restart)
            .count();
        assert_eq!(restarts, MAX_REFILLS as usize);
        assert_eq!(refill.refills, MAX_REFILLS);
    }

    /// A round with a queue, busy-less streams or a closed receiver's window (`clean`
    /// false), one that retransmitted, and one with the held rate's bytes in flight (the
    /// path, not the windows, delivered less) are not short.
    #[test]
    fn only_windows_that_nothing_else_holds_back_are_refilled() {
        let cases = [
            HoldRound {
                clean: false,
                ..round(700_000_000, 13_000_000, 0)
            },
            round(700_000_000, 18_000_000, 0),
            round(910_000_000, 13_000_000, 0),
        ];
        for case in cases {
            let mut refill = Refill::default();
            for _ in 0..10 {
                assert_eq!(refill.end_round(case, None), RefillStep::Judge, "{case:?}");
            }
        }
        // Retransmits in every round.
        let mut refill = Refill::default();
        for resent in 0..10 {
            let step = refill.end_round(round(700_000_000, 13_000_000, resent * 5), None);
            assert_eq!(step, RefillStep::Judge);
        }
    }
}
