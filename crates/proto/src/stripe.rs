//! Striped copies: one copy shared by several pairs of hosts that see the same file
//! systems at each end (Data Reservoir's many servers per transfer, GridFTP's `-stripe`).
//! Each pair moves one [`Share`] of the chunks: the copy's chunks are numbered across the
//! whole list (file by file in list order, a file of `n` chunks taking `n` numbers, an
//! empty file or a symlink one), and share `i` of `k` takes the numbers `g` with
//! `g % k == i`. Every pair lists the same source the same way with the same chunk size,
//! so the shares are disjoint and cover the copy, one file's chunks and a tree's small
//! files alike.

use crate::error::ProtoError;
use crate::wire::invalid;

/// Most pairs one copy may be striped over.
pub const MAX_SHARES: u16 = 64;

/// Share `index` of `count` of a striped copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Share {
    index: u16,
    count: u16,
}

impl Share {
    /// Share `index` (from 0) of `count` (2..=[`MAX_SHARES`]).
    pub fn new(index: u16, count: u16) -> Result<Self, ProtoError> {
        if !(2..=MAX_SHARES).contains(&count) || index >= count {
            return Err(invalid(
                "share",
                format!("{index} of {count}: a copy is striped over 2..={MAX_SHARES} pairs, shares counted from 0"),
            ));
        }
        Ok(Self { index, count })
    }

    /// Which share (from 0).
    pub fn index(self) -> u16 {
        self.index
    }

    /// How many shares the copy has.
    pub fn count(self) -> u16 {
        self.count
    }

    /// Whether the chunk numbered `global` across the copy is this share's.
    pub fn holds(self, global: u64) -> bool {
        global % u64::from(self.count) == u64::from(self.index)
    }

    /// The share's name in work files and messages: `2-of-3` for index 1 of 3.
    pub fn label(self) -> String {
        format!("{}-of-{}", self.index + 1, self.count)
    }
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "share {} of {}", self.index + 1, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_disjoint_and_cover_every_chunk() {
        let shares: Vec<Share> = (0..3).map(|i| Share::new(i, 3).unwrap()).collect();
        for g in 0..1000u64 {
            assert_eq!(shares.iter().filter(|s| s.holds(g)).count(), 1, "chunk {g}");
        }
    }

    #[test]
    fn a_share_out_of_range_is_refused() {
        assert!(Share::new(0, 1).is_err());
        assert!(Share::new(2, 2).is_err());
        assert!(Share::new(0, MAX_SHARES + 1).is_err());
        assert_eq!(Share::new(1, 3).unwrap().label(), "2-of-3");
    }
}
