//! A small, fast, deterministic pseudo-random generator (xoshiro256**, seeded through
//! splitmix64), so that every run of the model with the same seed makes the same choices.

/// Mixes a 64-bit state into a well-distributed 64-bit value (splitmix64's step).
///
/// Used to expand one seed into the generator's state and to derive independent seeds
/// (e.g. one per direction) from one user seed.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Derives an independent seed from `seed` and a stream number (e.g. a direction).
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut s = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
    splitmix64(&mut s)
}

/// The xoshiro256** generator. Not cryptographic; fast and statistically good.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { s }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A uniform value in [0, 1) with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in [0, n) (n > 0), without modulo bias worth noticing (Lemire's
    /// multiply-shift; bias < n / 2^64).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `chance`.
    pub fn chance(&mut self, chance: Chance) -> bool {
        match chance.0 {
            0 => false,
            u64::MAX => true,
            t => self.next_u64() < t,
        }
    }

    /// A standard normal variate (Box-Muller; one of the pair is discarded for simplicity).
    pub fn normal(&mut self) -> f64 {
        // 1 - u is in (0, 1], so ln never sees 0.
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// A probability prepared for fast drawing: a threshold on a 64-bit uniform value.
///
/// `u64::MAX` stands for certainty (1.0); otherwise a draw succeeds when it is below the
/// threshold, which is `p * 2^64` rounded down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chance(u64);

impl Chance {
    /// Never.
    pub const NEVER: Chance = Chance(0);

    /// Prepares probability `p`; values outside [0, 1] (and NaN) are clamped into it.
    pub fn new(p: f64) -> Self {
        if p.is_nan() || p <= 0.0 {
            Chance(0)
        } else if p >= 1.0 {
            Chance(u64::MAX)
        } else {
            // p * 2^64 < 2^64, and `as` saturates, so this cannot overflow.
            Chance((p * 18_446_744_073_709_551_616.0) as u64)
        }
    }

    /// True if this chance can never succeed.
    pub fn is_never(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_different_seed_different() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn f64_in_unit_interval_with_mean_half() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        let mean = sum / n as f64;
        // sigma of the mean = sqrt(1/12 / n) ~ 6.5e-4; allow 5 sigma.
        assert!((mean - 0.5).abs() < 3.3e-3, "mean {mean}");
    }

    #[test]
    fn chance_extremes_are_exact() {
        let mut r = Rng::new(3);
        for _ in 0..1000 {
            assert!(!r.chance(Chance::new(0.0)));
            assert!(r.chance(Chance::new(1.0)));
        }
        assert!(Chance::new(f64::NAN).is_never());
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Rng::new(5);
        for n in [1u64, 2, 3, 10, 1 << 40] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
    }

    #[test]
    fn normal_has_unit_variance() {
        let mut r = Rng::new(11);
        let n = 200_000;
        let (mut s, mut s2) = (0.0, 0.0);
        for _ in 0..n {
            let x = r.normal();
            s += x;
            s2 += x * x;
        }
        let mean = s / n as f64;
        let var = s2 / n as f64 - mean * mean;
        assert!(mean.abs() < 0.012, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "var {var}");
    }
}
