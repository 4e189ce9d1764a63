//! A start-up after a jump's retreat, and the burst of loss the jump may have met (see
//! [`super`]): while the start-up has delivered under half the rate the path is
//! remembered to carry, a round in which the streams retransmitted more than a tenth of
//! what they delivered was spent repairing holes, and its flat delivery is the repair's,
//! not the path's. Such rounds give no verdict of growth, and when the repair is over the
//! start-up begins again from a restarted congestion control.
//!
//! Why: a jump that met a burst of loss in its first round trips (a late emulator's queue
//! overflowing, a shaper's queue dropping at the sender) retreated, and the fresh
//! start-up after it saw 3-25 Mbit/s delivered for three rounds while the streams
//! repaired thousands of holes. It ended on a plateau there, held that rate on a
//! 1 Gbit/s path, and BBR, which had left its own start-up during the repair too, climbed
//! back by a quarter per eight round trips: a 192 MiB push took 28 s instead of 2.
//! A path's own random loss (a thousandth or so) is far below the share. A first
//! start-up is left alone: with nothing remembered, a shallow buffer's overshoot looks
//! the same, and waiting it out would only overshoot again.

/// A round that retransmitted more than this share of the segments it delivered is
/// repairing a burst of loss.
const REPAIR_SHARE: f64 = 0.10;
/// Fewer retransmits than this in a round are never a repair (the first rounds deliver
/// a few dozen segments).
const MIN_REPAIR_SEGMENTS: u64 = 8;
/// Rounds in a row a start-up waits for one repair to end, at most: a policer that drops
/// what a start-up sends over its rate looks like a repair that never ends. A 30 % loss
/// for 500 ms at 1 Gbit/s x 100 ms took 8-9 rounds to repair.
const MAX_REPAIR_ROUNDS: u32 = 16;
/// Start-ups begun again after a repair, at most.
const MAX_RESTARTS: u32 = 2;
/// The segment size assumed when no stream reports one.
const FALLBACK_MSS: u32 = 1448;

/// What a round that just ended was, for the start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RepairRound {
    /// Not repairing (or out of patience with the repair): judge growth as usual.
    Plain,
    /// Repairing a burst of loss: no verdict from this round.
    Repairing,
    /// The first round after a repair: begin the start-up again.
    Repaired,
}

/// The counts the start-up's repair rule keeps across rounds.
#[derive(Debug, Clone, Default)]
pub(super) struct Repair {
    /// The rate the path is remembered to carry (all streams, bit/s), after a retreat.
    expect_bps: Option<u64>,
    /// Retransmits and delivered bytes (all streams) when the round under way began.
    round_start: Option<(u64, u64)>,
    /// Rounds in a row spent waiting for the repair under way.
    rounds: u32,
    /// Start-ups begun again so far.
    restarts: u32,
}

impl Repair {
    /// Repairs are waited for from now on, while the start-up has delivered under half of
    /// `remembered_bps`.
    pub(super) fn expect(&mut self, remembered_bps: u64) {
        self.expect_bps = Some(remembered_bps);
    }

    /// Judges the round that ends now, given the streams' retransmits and delivered bytes
    /// so far, their segment size (0: unknown) and the start-up's best delivery (bit/s).
    pub(super) fn end_round(
        &mut self,
        retransmits: u64,
        delivered: u64,
        mss: u32,
        best_bps: u64,
    ) -> RepairRound {
        let Some((resent_before, delivered_before)) =
            self.round_start.replace((retransmits, delivered))
        else {
            return RepairRound::Plain;
        };
        let resent = retransmits.saturating_sub(resent_before);
        let mss = if mss == 0 { FALLBACK_MSS } else { mss };
        let segments = delivered.saturating_sub(delivered_before) as f64 / f64::from(mss);
        let short = self
            .expect_bps
            .is_some_and(|e| best_bps.saturating_mul(2) < e);
        let repairing =
            short && resent >= MIN_REPAIR_SEGMENTS && resent as f64 > segments * REPAIR_SHARE;
        let patient = self.rounds < MAX_REPAIR_ROUNDS && self.restarts < MAX_RESTARTS;
        match (repairing, self.rounds > 0) {
            (true, _) if patient => {
                self.rounds += 1;
                RepairRound::Repairing
            }
            (true, _) => {
                // Out of patience: this start-up ends as it would have.
                self.rounds = 0;
                self.restarts = MAX_RESTARTS;
                RepairRound::Plain
            }
            (false, true) => {
                self.rounds = 0;
                self.restarts += 1;
                RepairRound::Repaired
            }
            (false, false) => RepairRound::Plain,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1448;
    /// The rate remembered, and a start-up's best far under it.
    const REMEMBERED: u64 = 800_000_000;
    const BEST: u64 = 20_000_000;

    /// A repair rule after a retreat from a jump to `REMEMBERED`.
    fn after_retreat() -> Repair {
        let mut repair = Repair::default();
        repair.expect(REMEMBERED);
        repair
    }

    /// Feeds rounds of (retransmits, delivered segments) and returns what each was.
    fn rounds(repair: &mut Repair, per_round: &[(u64, u64)]) -> Vec<RepairRound> {
        let (mut resent, mut delivered) = (0, 0);
        repair.end_round(resent, delivered, MSS, BEST);
        per_round
            .iter()
            .map(|&(r, d)| {
                resent += r;
                delivered += d * u64::from(MSS);
                repair.end_round(resent, delivered, MSS, BEST)
            })
            .collect()
    }

    #[test]
    fn a_paths_own_loss_is_no_repair() {
        let mut repair = after_retreat();
        // 1e-3 loss at 1 Gbit/s x 100 ms: about 8 segments of 8,600 a round.
        let seen = rounds(&mut repair, &[(8, 8_600), (9, 8_600), (7, 8_600)]);
        assert!(seen.iter().all(|r| *r == RepairRound::Plain), "{seen:?}");
    }

    #[test]
    fn a_burst_is_waited_out_then_the_start_up_begins_again() {
        let mut repair = after_retreat();
        let seen = rounds(
            &mut repair,
            &[(5, 2_000), (400, 300), (390, 400), (30, 3_000), (3, 4_000)],
        );
        use RepairRound::*;
        assert_eq!(seen, [Plain, Repairing, Repairing, Repaired, Plain]);
        assert_eq!(repair.restarts, 1);
    }

    #[test]
    fn a_repair_that_never_ends_is_waited_for_a_bounded_time() {
        let mut repair = after_retreat();
        let seen = rounds(&mut repair, &[(500, 500); MAX_REPAIR_ROUNDS as usize + 4]);
        let waited = seen
            .iter()
            .filter(|r| **r == RepairRound::Repairing)
            .count();
        assert_eq!(waited, MAX_REPAIR_ROUNDS as usize, "{seen:?}");
        assert!(seen[MAX_REPAIR_ROUNDS as usize..]
            .iter()
            .all(|r| *r == RepairRound::Plain));
        // And no more waiting once out of patience.
        assert_eq!(rounds(&mut repair, &[(500, 500)]), [RepairRound::Plain]);
    }

    #[test]
    fn restarts_are_bounded() {
        let mut repair = after_retreat();
        let burst_and_calm = [(400, 300), (3, 4_000)];
        let mut restarts = 0;
        for _ in 0..5 {
            let seen = rounds(&mut repair, &burst_and_calm);
            restarts += seen.iter().filter(|r| **r == RepairRound::Repaired).count();
        }
        assert_eq!(restarts, MAX_RESTARTS as usize);
    }

    #[test]
    fn only_a_start_up_short_of_a_remembered_rate_waits() {
        let burst = [(400, 300), (3, 4_000)];
        let plain = [RepairRound::Plain; 2];
        // A first start-up: nothing remembered.
        assert_eq!(rounds(&mut Repair::default(), &burst), plain);
        // After a retreat, a start-up already at half the remembered rate.
        let mut repair = after_retreat();
        repair.end_round(0, 0, MSS, REMEMBERED / 2);
        assert_eq!(
            repair.end_round(400, 300 * 1448, MSS, REMEMBERED / 2),
            RepairRound::Plain
        );
    }
}
