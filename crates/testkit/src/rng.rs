//! The one seeded generator of the workspace's tests (SplitMix64, the step of
//! `longhaul_linkem::rng`): small, fast, the same sequence for the same seed everywhere.
//! Not the emulator's generator (`longhaul_linkem::rng::Rng`, xoshiro256**, part of the
//! model it drives).

use std::time::{SystemTime, UNIX_EPOCH};

/// SplitMix64: small, seeded, good enough for test data, delivery orders and kill points.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator with a fixed seed (any value, 0 included).
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A generator seeded from `LONGHAUL_TEST_SEED` or else the clock and the process id,
    /// for a test that should see other data each run; prints the seed (with `test`) so a
    /// failure can be replayed.
    pub fn from_env(test: &str) -> Self {
        let seed = std::env::var("LONGHAUL_TEST_SEED")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    ^ u64::from(std::process::id()) << 32
            });
        eprintln!("{test}: seed {seed} (rerun with LONGHAUL_TEST_SEED={seed})");
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        longhaul_linkem::rng::splitmix64(&mut self.0)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// A number below `n` (`n > 0`): an index into a slice of `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }

    /// `n` random bytes (never a whole zero 4 KiB block in practice).
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.fill(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        assert_eq!(a.bytes(100), b.bytes(100));
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
    }

    #[test]
    fn bytes_are_the_little_endian_words_in_order() {
        // What the cli's tests wrote before this kit: whole words, cut at `n`.
        let mut words = Rng::new(42);
        let want: Vec<u8> = (0..2)
            .flat_map(|_| words.next_u64().to_le_bytes())
            .collect();
        assert_eq!(Rng::new(42).bytes(13), want[..13]);
        assert_eq!(Rng::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn range_and_below_stay_in_bounds() {
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            assert!((3..=5).contains(&r.range(3, 5)));
            assert!(r.below(3) < 3);
        }
        assert_eq!(r.range(9, 9), 9);
    }
}
