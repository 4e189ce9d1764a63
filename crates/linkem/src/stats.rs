//! Counters of what a link did: traffic in and out, drops by cause, duplicates,
//! reorders, the queue's high-water mark and the queueing delay distribution.

use serde::{Deserialize, Serialize};

/// Number of buckets in [`LinkStats::queue_delay_histogram`].
pub const QUEUE_DELAY_BUCKETS: usize = 28;

/// Counters of one direction of a link, since it was made. All byte counts are wire bytes
/// of segments as offered (without [`crate::LinkConfig::per_segment_overhead_bytes`]).
///
/// Invariants: `segments_in = segments_out + dropped_queue_segments + dropped_loss_segments`
/// and the same for bytes; duplicates are counted apart and are not in `*_out`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkStats {
    /// Packets offered (a GSO super-packet counts once).
    pub packets_in: u64,
    /// Segments offered.
    pub segments_in: u64,
    /// Bytes offered.
    pub bytes_in: u64,
    /// Segments delivered (first copies only).
    pub segments_out: u64,
    /// Bytes delivered (first copies only).
    pub bytes_out: u64,
    /// Segments dropped because the bottleneck buffer was full.
    pub dropped_queue_segments: u64,
    /// Bytes dropped because the bottleneck buffer was full.
    pub dropped_queue_bytes: u64,
    /// Segments lost by the random loss model.
    pub dropped_loss_segments: u64,
    /// Bytes lost by the random loss model.
    pub dropped_loss_bytes: u64,
    /// Runs of consecutive segments lost by the loss model (mean burst length =
    /// `dropped_loss_segments / loss_bursts`).
    pub loss_bursts: u64,
    /// Extra segments delivered as duplicates.
    pub duplicated_segments: u64,
    /// Extra bytes delivered as duplicates.
    pub duplicated_bytes: u64,
    /// Packets held back to be overtaken (reordered).
    pub reordered_packets: u64,
    /// Largest backlog seen at the bottleneck, in bytes (including overhead).
    pub queue_high_water_bytes: u64,
    /// Largest backlog seen at the bottleneck, in segments.
    pub queue_high_water_segments: u64,
    /// Sum over admitted segments of the time waited before transmission started (ns).
    pub queue_delay_sum_ns: u64,
    /// Longest wait before transmission started (ns).
    pub queue_delay_max_ns: u64,
    /// Segments by waiting time: bucket 0 is < 1 us, bucket k (k >= 1) is
    /// [2^(k-1), 2^k) us; the last bucket also holds everything longer.
    pub queue_delay_histogram: [u64; QUEUE_DELAY_BUCKETS],
}

impl LinkStats {
    /// Mean waiting time in the queue of the segments admitted so far (ns), 0 if none.
    pub fn queue_delay_mean_ns(&self) -> u64 {
        let admitted = self.segments_in - self.dropped_queue_segments;
        self.queue_delay_sum_ns.checked_div(admitted).unwrap_or(0)
    }

    pub(crate) fn record_queue_delay(&mut self, wait_ns: u64) {
        self.queue_delay_sum_ns = self.queue_delay_sum_ns.saturating_add(wait_ns);
        self.queue_delay_max_ns = self.queue_delay_max_ns.max(wait_ns);
        let us = wait_ns / 1000;
        let bucket = (64 - us.leading_zeros() as usize).min(QUEUE_DELAY_BUCKETS - 1);
        self.queue_delay_histogram[bucket] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets() {
        let mut s = LinkStats::default();
        for ns in [0, 999, 1000, 1999, 2000, 3999, 4000, u64::MAX] {
            s.record_queue_delay(ns);
        }
        assert_eq!(s.queue_delay_histogram[0], 2);
        assert_eq!(s.queue_delay_histogram[1], 2);
        assert_eq!(s.queue_delay_histogram[2], 2);
        assert_eq!(s.queue_delay_histogram[3], 1);
        assert_eq!(s.queue_delay_histogram[QUEUE_DELAY_BUCKETS - 1], 1);
        assert_eq!(s.queue_delay_max_ns, u64::MAX);
    }
}
