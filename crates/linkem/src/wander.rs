//! A delay offset that wanders smoothly over time within +-max: linear between random
//! points drawn every `4 * max`, so its slope stays within +-1/2 and packets released at
//! departure + delay + offset keep their order by themselves (no bunching, no bias).

use crate::rng::Rng;

/// Knot spacing in units of the bound: slope <= 2 max / (4 max) = 1/2.
const SPACING_PER_BOUND: u64 = 4;

/// The state of the wandering offset between packets.
#[derive(Debug, Clone)]
pub(crate) struct WanderingOffset {
    max_ns: u64,
    period_ns: u64,
    /// Knots (time, offset) around the last query; `None` until the first query.
    knots: Option<(u64, i128, i128)>,
}

impl WanderingOffset {
    pub(crate) fn new(max_ns: u64) -> Self {
        WanderingOffset {
            max_ns,
            period_ns: max_ns.saturating_mul(SPACING_PER_BOUND),
            knots: None,
        }
    }

    fn draw(&self, rng: &mut Rng) -> i128 {
        let span = 2 * u128::from(self.max_ns) + 1;
        // span <= 2^65: draw from the top 64 bits scaled, exact enough for a delay offset.
        let r = (u128::from(rng.next_u64()) * span) >> 64;
        r as i128 - i128::from(self.max_ns)
    }

    /// The offset (ns) at time `t_ns`; queries must come in non-decreasing time.
    pub(crate) fn offset_at(&mut self, t_ns: u64, rng: &mut Rng) -> i128 {
        if self.max_ns == 0 {
            return 0;
        }
        let (mut t0, mut v0, mut v1) = match self.knots {
            Some(k) => k,
            None => (t_ns, self.draw(rng), self.draw(rng)),
        };
        let t0_end = t0.saturating_add(self.period_ns);
        if t_ns >= t0_end {
            if t_ns < t0_end.saturating_add(self.period_ns) {
                // The next segment: its start is where the last one ended.
                t0 = t0_end;
                v0 = v1;
            } else {
                // Idle for more than a period: start afresh (the previous packet is more
                // than a period back, so the jump cannot reorder).
                t0 = t_ns;
                v0 = self.draw(rng);
            }
            v1 = self.draw(rng);
        }
        self.knots = Some((t0, v0, v1));
        let into = i128::from(t_ns - t0);
        v0 + (v1 - v0) * into / i128::from(self.period_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_order_preserving_without_any_clamp() {
        for seed in 1..5u64 {
            let mut rng = Rng::new(seed);
            let max = 500_000u64;
            let mut w = WanderingOffset::new(max);
            let mut t = 0u64;
            let mut last_release = i128::MIN;
            for i in 0..200_000u64 {
                // Gaps from 0 to ~5 periods, so every branch (same segment, next segment,
                // fresh start after idle) is taken.
                t += match i % 7 {
                    0 => 0,
                    1..=4 => rng.below(20_000),
                    5 => rng.below(2_000_000),
                    _ => rng.below(10_000_000),
                };
                let off = w.offset_at(t, &mut rng);
                assert!(off.abs() <= i128::from(max), "seed {seed}: offset {off}");
                let release = i128::from(t) + off;
                assert!(release >= last_release, "seed {seed}: reordered at {t}");
                last_release = release;
            }
        }
    }

    #[test]
    fn zero_bound_is_zero() {
        let mut rng = Rng::new(1);
        let mut w = WanderingOffset::new(0);
        assert_eq!(w.offset_at(5, &mut rng), 0);
    }
}
