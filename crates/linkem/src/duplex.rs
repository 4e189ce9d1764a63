//! Both directions of a path, each its own [`Link`] with its own configuration (so the
//! path can be asymmetric) and an independent random stream derived from one seed.

use serde::{Deserialize, Serialize};

use crate::config::LinkConfig;
use crate::link::Link;
use crate::rng::derive_seed;
use crate::stats::LinkStats;

/// Which way a packet travels between the two ends `a` and `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From end `a` to end `b`.
    AToB,
    /// From end `b` to end `a`.
    BToA,
}

impl Direction {
    /// Both directions, `a -> b` first.
    pub const BOTH: [Direction; 2] = [Direction::AToB, Direction::BToA];
}

/// A two-way path: one [`Link`] per direction.
#[derive(Debug, Clone)]
pub struct Duplex {
    /// The `a -> b` direction.
    pub a_to_b: Link,
    /// The `b -> a` direction.
    pub b_to_a: Link,
}

/// Counters of both directions, for printing as one JSON object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuplexStats {
    /// The `a -> b` direction.
    pub a_to_b: LinkStats,
    /// The `b -> a` direction.
    pub b_to_a: LinkStats,
}

impl Duplex {
    /// A path whose directions are configured apart; `seed` determines both directions'
    /// random choices, which are independent of each other.
    pub fn new(a_to_b: LinkConfig, b_to_a: LinkConfig, seed: u64) -> Self {
        Duplex {
            a_to_b: Link::new(a_to_b, derive_seed(seed, 1)),
            b_to_a: Link::new(b_to_a, derive_seed(seed, 2)),
        }
    }

    /// The link carrying packets in direction `dir`.
    pub fn link_mut(&mut self, dir: Direction) -> &mut Link {
        match dir {
            Direction::AToB => &mut self.a_to_b,
            Direction::BToA => &mut self.b_to_a,
        }
    }

    /// A copy of both directions' counters.
    pub fn stats(&self) -> DuplexStats {
        DuplexStats {
            a_to_b: self.a_to_b.stats().clone(),
            b_to_a: self.b_to_a.stats().clone(),
        }
    }
}
