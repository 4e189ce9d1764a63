//! ADLER32 (RFC 1950), the checksum FTS3 and most grid storage compare by default: kept
//! only so a storage client can ask a daemon for it. longhaul's own integrity is BLAKE3.

/// The modulus of both sums.
const MOD: u32 = 65_521;
/// Bytes that may be summed before a reduction (zlib's NMAX: no u32 overflow).
const NMAX: usize = 5552;

/// A running ADLER32.
#[derive(Debug, Clone, Copy)]
pub struct Adler32 {
    a: u32,
    b: u32,
}

impl Default for Adler32 {
    fn default() -> Self {
        Self { a: 1, b: 0 }
    }
}

impl Adler32 {
    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        for block in bytes.chunks(NMAX) {
            for &x in block {
                self.a += u32::from(x);
                self.b += self.a;
            }
            self.a %= MOD;
            self.b %= MOD;
        }
    }

    /// The checksum so far.
    pub fn value(&self) -> u32 {
        (self.b << 16) | self.a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(bytes: &[u8]) -> u32 {
        let mut a = Adler32::default();
        a.update(bytes);
        a.value()
    }

    #[test]
    fn known_values() {
        assert_eq!(of(b""), 1);
        assert_eq!(of(b"Wikipedia"), 0x11e6_0398);
        assert_eq!(of(b"abc"), 0x024d_0127);
    }

    #[test]
    fn pieces_give_the_whole() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let mut a = Adler32::default();
        for piece in data.chunks(4097) {
            a.update(piece);
        }
        assert_eq!(a.value(), of(&data));
        // 0xff bytes are the worst case for overflow between reductions.
        let ones = vec![0xffu8; 1 << 20];
        let (mut a, mut b) = (1u64, 0u64);
        for &x in &ones {
            a = (a + u64::from(x)) % 65_521;
            b = (b + a) % 65_521;
        }
        assert_eq!(of(&ones), ((b << 16) | a) as u32);
    }
}
