//! Live counters of a running emulator: the link model's per direction, what the driver
//! did (reads, writes, late releases), and faults the kernel reported (TUN ring drops).

use longhaul_linkem::LinkStats;
use serde::{Deserialize, Serialize};

/// Buckets of [`DirectionStats::lateness_histogram`]: bucket 0 is < 1 us late, bucket k is
/// [2^(k-1), 2^k) us; the last holds everything later.
pub const LATENESS_BUCKETS: usize = 16;

/// Counters of one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// The link model's counters (offered, delivered, dropped by cause, queue).
    pub link: LinkStats,
    /// Packets read from the sending end (super-packets count once).
    pub reads: u64,
    /// Packets written to the receiving end.
    pub writes: u64,
    /// Writes the kernel refused.
    pub write_errors: u64,
    /// Reads that failed (other than "nothing to read").
    pub read_errors: u64,
    /// Reads shorter than a virtio header.
    pub runt_packets: u64,
    /// Super-packets cut into runs because some of their segments were dropped.
    pub split_packets: u64,
    /// Packets that had to be cut but could not be parsed (forwarded whole).
    pub unsplittable: u64,
    /// Packets held in the delay line now.
    pub in_flight_packets: u64,
    /// Bytes held in the delay line now.
    pub in_flight_bytes: u64,
    /// Packets dropped because the delay line held its maximum of bytes (a fault: the
    /// configuration asks for more memory than the emulator may use).
    pub overflow_drops: u64,
    /// Whether the packet loop got real-time priority.
    pub realtime: bool,
    /// Bottleneck backlog now (bytes).
    pub backlog_bytes: u64,
    /// Timed sleeps.
    pub sleeps: u64,
    /// Sleeps ended by a packet to read.
    pub wakeups_readable: u64,
    /// Short busy waits before a release.
    pub spins: u64,
    /// Latest a packet was written after its release time (ns).
    pub lateness_max_ns: u64,
    /// Sum of write lateness (ns), for the mean.
    pub lateness_sum_ns: u64,
    /// Writes by lateness (see [`LATENESS_BUCKETS`]).
    pub lateness_histogram: [u64; LATENESS_BUCKETS],
}

impl DirectionStats {
    pub(crate) fn record_lateness(&mut self, late_ns: u64) {
        self.lateness_max_ns = self.lateness_max_ns.max(late_ns);
        self.lateness_sum_ns = self.lateness_sum_ns.saturating_add(late_ns);
        let us = late_ns / 1000;
        let bucket = (64 - us.leading_zeros() as usize).min(LATENESS_BUCKETS - 1);
        self.lateness_histogram[bucket] += 1;
    }

    /// Mean write lateness (ns).
    pub fn lateness_mean_ns(&self) -> u64 {
        self.lateness_sum_ns
            .checked_div(self.writes + self.write_errors)
            .unwrap_or(0)
    }
}

/// A snapshot of a whole emulator.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmulatorStats {
    /// Nanoseconds since the emulator started.
    pub uptime_ns: u64,
    /// Direction a -> b.
    pub a_to_b: DirectionStats,
    /// Direction b -> a.
    pub b_to_a: DirectionStats,
    /// Packets end a's kernel dropped because the TUN ring towards the emulator was full
    /// (tx_dropped of a's lh0): a fault of the emulator, not part of the model.
    pub kernel_dropped_a: u64,
    /// The same for end b.
    pub kernel_dropped_b: u64,
}

impl EmulatorStats {
    /// Faults: packets lost outside the model (kernel ring drops, failed writes, delay
    /// line overflow).
    pub fn faults(&self) -> u64 {
        self.kernel_dropped_a
            + self.kernel_dropped_b
            + self.a_to_b.write_errors
            + self.b_to_a.write_errors
    }
}
