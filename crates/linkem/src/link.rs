//! One direction of an emulated link: decides each offered packet's fate and release time
//! on a virtual clock, with no timer per packet.
//!
//! Each segment of an offered packet goes through, in order:
//! 1. the bottleneck: departure F_i = max(arrival, F_(i-1)) + wire_bits_i / R, computed
//!    exactly (the remainder of the division is carried to the next segment), and a
//!    drop-tail check at arrival against the backlog (remaining work in bytes, or waiting
//!    segments);
//! 2. the random loss model (on the "long wire" after the bottleneck).
//!
//! Then the surviving segments are grouped into runs of consecutive segments, and each run
//! is released at (departure of its last segment) + delay + jitter, kept in FIFO order
//! unless the packet was chosen for reordering. Jitter, reordering and duplication are
//! drawn once per offered packet (a wandering jitter is read at each run's departure).

use std::collections::VecDeque;

use crate::config::{Jitter, LinkConfig, QueueLimit};
use crate::loss::LossProcess;
use crate::rng::{Chance, Rng};
use crate::stats::LinkStats;
use crate::wander::WanderingOffset;

/// The most segments one offered packet is split into; a packet that would need more has
/// its segments made larger (only a hostile or broken header asks for that).
pub const MAX_SEGMENTS: u32 = 65_536;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A packet as the link sees it: one IP packet, or a GSO super-packet that the wire
/// carries as several segments, each with its own copy of the headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Header bytes repeated in every segment (IP + TCP/UDP); 0 for a plain packet.
    pub header_bytes: u32,
    /// Bytes after the headers, split over the segments.
    pub payload_bytes: u32,
    /// Payload bytes per segment (the GSO size); the last segment may carry fewer.
    pub segment_payload_bytes: u32,
}

impl Packet {
    /// A plain packet of `wire_bytes` bytes, carried as one segment.
    pub fn single(wire_bytes: u32) -> Self {
        Packet {
            header_bytes: 0,
            payload_bytes: wire_bytes,
            segment_payload_bytes: wire_bytes.max(1),
        }
    }

    /// A GSO super-packet: `header_bytes` of headers, then `payload_bytes` split into
    /// segments of `segment_payload_bytes` (0 means one segment).
    pub fn gso(header_bytes: u32, payload_bytes: u32, segment_payload_bytes: u32) -> Self {
        Packet {
            header_bytes,
            payload_bytes,
            segment_payload_bytes,
        }
    }

    fn effective_segment_payload(&self) -> u32 {
        if self.segment_payload_bytes == 0 || self.payload_bytes == 0 {
            return self.payload_bytes.max(1);
        }
        let min_for_cap = self.payload_bytes.div_ceil(MAX_SEGMENTS);
        self.segment_payload_bytes.max(min_for_cap)
    }

    /// How many segments the wire carries: ceil(payload / segment payload), at least 1,
    /// at most [`MAX_SEGMENTS`].
    pub fn segments(&self) -> u32 {
        self.payload_bytes
            .div_ceil(self.effective_segment_payload())
            .max(1)
    }

    /// Wire bytes of segment `index` (headers + its share of the payload).
    pub fn segment_bytes(&self, index: u32) -> u32 {
        let seg = self.effective_segment_payload();
        let offset = u64::from(index) * u64::from(seg);
        let left = u64::from(self.payload_bytes).saturating_sub(offset);
        let payload = left.min(u64::from(seg)) as u32;
        self.header_bytes.saturating_add(payload)
    }

    /// Wire bytes of all segments together.
    pub fn wire_bytes(&self) -> u64 {
        u64::from(self.header_bytes) * u64::from(self.segments()) + u64::from(self.payload_bytes)
    }
}

/// Consecutive segments of one offered packet that are delivered together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Index of the first segment of the run in the offered packet.
    pub first_segment: u32,
    /// Number of segments in the run.
    pub segments: u32,
    /// Wire bytes of the run's segments (each with its headers).
    pub bytes: u64,
    /// When the run reaches the far end (virtual ns).
    pub release_ns: u64,
    /// 1, or 2 if the packet was duplicated (deliver the run twice).
    pub copies: u8,
}

/// The fate of one offered packet. Reuse one `Verdict` across calls to
/// [`Link::offer`]: it is cleared on each call and does not allocate once warm.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Surviving runs in segment order; empty if everything was dropped.
    pub runs: Vec<Run>,
    /// Segments dropped because the bottleneck buffer was full.
    pub dropped_queue_segments: u32,
    /// Segments lost by the random loss model.
    pub dropped_loss_segments: u32,
    /// True if the packet was held back to be overtaken (see [`crate::Reorder`]).
    pub reordered: bool,
    /// True if the surviving runs are to be delivered twice.
    pub duplicated: bool,
}

impl Verdict {
    /// True if nothing of the packet is delivered.
    pub fn is_dropped(&self) -> bool {
        self.runs.is_empty()
    }

    /// True if the packet is delivered whole, as one run (the driver can forward it
    /// unchanged).
    pub fn is_whole(&self) -> bool {
        self.dropped_queue_segments == 0 && self.dropped_loss_segments == 0 && self.runs.len() == 1
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.dropped_queue_segments = 0;
        self.dropped_loss_segments = 0;
        self.reordered = false;
        self.duplicated = false;
    }
}

/// One direction of an emulated link. See the module docs for the order of elements.
#[derive(Debug, Clone)]
pub struct Link {
    config: LinkConfig,
    rate_bps: Option<u64>,
    delay_ns: u64,
    loss: LossProcess,
    reorder: Option<(Chance, u64)>,
    duplicate: Chance,
    rng: Rng,
    /// Latest `now` seen; time never runs backwards inside the link.
    last_now_ns: u64,
    /// Departure time of the last admitted segment (F_(i-1)).
    busy_until_ns: u64,
    /// Remainder of (bits * 1e9) / rate not yet turned into a whole nanosecond.
    carry: u64,
    /// Departure times of admitted segments still in the bottleneck, oldest first.
    in_queue: VecDeque<u64>,
    /// Release time of the last in-order run (FIFO clamp).
    last_release_ns: u64,
    /// Whether the last segment that saw the loss model was lost (to count bursts).
    last_lost: bool,
    /// The offset process of [`Jitter::Wander`], if configured.
    wander: Option<WanderingOffset>,
    stats: LinkStats,
}

impl Link {
    /// A link with this configuration whose random choices are all determined by `seed`.
    /// Call [`LinkConfig::validate`] first; out-of-range probabilities are clamped here.
    pub fn new(config: LinkConfig, seed: u64) -> Self {
        let reorder = config
            .reorder
            .map(|r| (Chance::new(r.probability), duration_ns(r.extra)));
        Link {
            rate_bps: config.rate_bps.filter(|&r| r > 0),
            delay_ns: duration_ns(config.delay),
            loss: LossProcess::new(&config.loss),
            reorder,
            duplicate: Chance::new(config.duplicate),
            rng: Rng::new(seed),
            last_now_ns: 0,
            busy_until_ns: 0,
            carry: 0,
            in_queue: VecDeque::new(),
            last_release_ns: 0,
            last_lost: false,
            wander: match config.jitter {
                Some(Jitter::Wander { max }) => Some(WanderingOffset::new(duration_ns(max))),
                _ => None,
            },
            stats: LinkStats::default(),
            config,
        }
    }

    /// The configuration this link was made with.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Counters since the link was made.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Backlog of the bottleneck at `now_ns`: (bytes of remaining work including
    /// overhead, segments not yet fully sent). Does not change the link; O(log n), cheap
    /// enough for live statistics.
    pub fn backlog(&self, now_ns: u64) -> (u64, u64) {
        let now_ns = now_ns.max(self.last_now_ns);
        // Departure times are in increasing order: those still ahead are a suffix.
        let segments = self.in_queue.len() - self.in_queue.partition_point(|&f| f <= now_ns);
        (self.backlog_bytes(now_ns), segments as u64)
    }

    /// Offers a packet arriving at `now_ns` (virtual nanoseconds since any fixed epoch;
    /// an earlier `now_ns` than a previous call's is taken as the previous one) and
    /// writes its fate into `verdict`.
    pub fn offer(&mut self, now_ns: u64, packet: Packet, verdict: &mut Verdict) {
        let now_ns = now_ns.max(self.last_now_ns);
        self.last_now_ns = now_ns;
        verdict.clear();
        self.stats.packets_in += 1;
        if self.rate_bps.is_some() {
            while self.in_queue.front().is_some_and(|&f| f <= now_ns) {
                self.in_queue.pop_front();
            }
        }
        for index in 0..packet.segments() {
            let bytes = packet.segment_bytes(index);
            self.stats.segments_in += 1;
            self.stats.bytes_in += u64::from(bytes);
            let Some(departure_ns) = self.bottleneck(now_ns, bytes) else {
                verdict.dropped_queue_segments += 1;
                self.stats.dropped_queue_segments += 1;
                self.stats.dropped_queue_bytes += u64::from(bytes);
                continue;
            };
            if !self.loss.is_none() {
                let lost = self.loss.lose(&mut self.rng);
                if lost {
                    if !self.last_lost {
                        self.stats.loss_bursts += 1;
                    }
                    self.last_lost = true;
                    verdict.dropped_loss_segments += 1;
                    self.stats.dropped_loss_segments += 1;
                    self.stats.dropped_loss_bytes += u64::from(bytes);
                    continue;
                }
                self.last_lost = false;
            }
            match verdict.runs.last_mut() {
                Some(run) if run.first_segment + run.segments == index => {
                    run.segments += 1;
                    run.bytes += u64::from(bytes);
                    run.release_ns = departure_ns;
                }
                _ => verdict.runs.push(Run {
                    first_segment: index,
                    segments: 1,
                    bytes: u64::from(bytes),
                    release_ns: departure_ns,
                    copies: 1,
                }),
            }
        }
        if verdict.runs.is_empty() {
            return;
        }
        self.schedule(verdict);
    }

    /// Admits one segment of `bytes` at `now_ns` into the bottleneck and returns its
    /// departure time, or `None` if the buffer is full.
    fn bottleneck(&mut self, now_ns: u64, bytes: u32) -> Option<u64> {
        let Some(rate) = self.rate_bps else {
            self.stats.record_queue_delay(0);
            return Some(now_ns);
        };
        let wire = u64::from(bytes) + u64::from(self.config.per_segment_overhead_bytes);
        let full = match self.config.queue {
            QueueLimit::Unlimited => false,
            QueueLimit::Bytes(limit) => self.backlog_bytes(now_ns) + wire > limit,
            QueueLimit::Packets(limit) => self.in_queue.len() as u64 >= u64::from(limit),
        };
        if full {
            return None;
        }
        let start_ns = if self.busy_until_ns > now_ns {
            self.busy_until_ns
        } else {
            // The link went idle: the fraction of a nanosecond left over is in the past.
            self.carry = 0;
            now_ns
        };
        self.stats.record_queue_delay(start_ns - now_ns);
        let tx_ns = self.transmission_ns(wire, rate);
        self.busy_until_ns = start_ns.saturating_add(tx_ns);
        self.in_queue.push_back(self.busy_until_ns);
        let backlog = self.backlog_bytes(now_ns);
        self.stats.queue_high_water_bytes = self.stats.queue_high_water_bytes.max(backlog);
        self.stats.queue_high_water_segments = self
            .stats
            .queue_high_water_segments
            .max(self.in_queue.len() as u64);
        Some(self.busy_until_ns)
    }

    /// Time to send `wire` bytes at `rate` bit/s, exact over a sequence of calls: the
    /// remainder of the division is carried to the next segment.
    fn transmission_ns(&mut self, wire: u64, rate: u64) -> u64 {
        // carry < rate, so the sum only overflows u64 for multi-GB segments.
        let fast = wire
            .checked_mul(8 * NANOS_PER_SEC)
            .and_then(|w| w.checked_add(self.carry));
        if let Some(work) = fast {
            self.carry = work % rate;
            return work / rate;
        }
        let work = u128::from(wire) * 8 * u128::from(NANOS_PER_SEC) + u128::from(self.carry);
        let rate = u128::from(rate);
        // carry < rate <= u64::MAX.
        self.carry = (work % rate) as u64;
        // Only a multi-GB segment on a link of a few bit/s exceeds u64 ns: saturate.
        u64::try_from(work / rate).unwrap_or(u64::MAX)
    }

    /// Remaining work at the bottleneck at `now_ns`, in bytes, rounded up.
    ///
    /// The exact departure of the last admitted segment is `busy_until_ns + carry / rate`
    /// (the carry is the fraction of a nanosecond not yet turned into one), so the work
    /// left is `(busy_until_ns - now_ns) * rate + carry` in units of bit/1e9. Counting the
    /// carry keeps the drop-tail check exact: admitting `wire` bytes adds exactly
    /// `wire * 8e9` to that sum, so a segment admitted because backlog + wire <= limit
    /// leaves a backlog of at most the limit. Without it the check saw up to a byte less
    /// than the backlog measured after admission, where the carry is folded into the new
    /// whole-nanosecond departure.
    fn backlog_bytes(&self, now_ns: u64) -> u64 {
        let Some(rate) = self.rate_bps else { return 0 };
        if self.busy_until_ns <= now_ns {
            // The last segment has departed (at its whole nanosecond); the carry is a
            // fraction of a nanosecond in the past and is reset when the link restarts.
            return 0;
        }
        let left_ns = self.busy_until_ns - now_ns;
        const BYTE_UNITS: u64 = 8 * NANOS_PER_SEC;
        if let Some(x) = left_ns
            .checked_mul(rate)
            .and_then(|x| x.checked_add(self.carry))
        {
            return x.div_ceil(BYTE_UNITS);
        }
        // carry < rate, so this sum fits in u128.
        let work = u128::from(left_ns) * u128::from(rate) + u128::from(self.carry);
        u64::try_from(work.div_ceil(u128::from(BYTE_UNITS))).unwrap_or(u64::MAX)
    }

    /// Turns each run's departure time into its release time and draws jitter,
    /// reordering and duplication for the packet.
    fn schedule(&mut self, verdict: &mut Verdict) {
        let packet_jitter_ns = match self.config.jitter {
            None | Some(Jitter::Wander { .. }) => 0,
            Some(j) => self.draw_jitter_ns(j),
        };
        let reorder_extra_ns = match self.reorder {
            Some((chance, extra)) if self.rng.chance(chance) => Some(extra),
            _ => None,
        };
        let duplicated = self.rng.chance(self.duplicate);
        verdict.reordered = reorder_extra_ns.is_some();
        verdict.duplicated = duplicated;
        if reorder_extra_ns.is_some() {
            self.stats.reordered_packets += 1;
        }
        for run in &mut verdict.runs {
            let departure_ns = run.release_ns;
            let jitter_ns = match &mut self.wander {
                Some(w) => w.offset_at(departure_ns, &mut self.rng),
                None => packet_jitter_ns,
            };
            let base = i128::from(departure_ns) + i128::from(self.delay_ns) + jitter_ns;
            let drawn = base.clamp(i128::from(departure_ns), i128::from(u64::MAX)) as u64;
            let in_order = drawn.max(self.last_release_ns);
            run.release_ns = match reorder_extra_ns {
                Some(extra) => in_order.saturating_add(extra),
                None => {
                    self.last_release_ns = in_order;
                    in_order
                }
            };
            self.stats.segments_out += u64::from(run.segments);
            self.stats.bytes_out += run.bytes;
            if duplicated {
                run.copies = 2;
                self.stats.duplicated_segments += u64::from(run.segments);
                self.stats.duplicated_bytes += run.bytes;
            }
        }
    }

    fn draw_jitter_ns(&mut self, jitter: Jitter) -> i128 {
        match jitter {
            Jitter::Uniform { max } => {
                let max = i128::from(duration_ns(max));
                let span = (2 * max + 1) as u64;
                i128::from(self.rng.below(span)) - max
            }
            Jitter::Normal { sigma } => {
                let z = self.rng.normal().clamp(-3.0, 3.0);
                (z * duration_ns(sigma) as f64) as i128
            }
            // Drawn per run from the wandering offset instead.
            Jitter::Wander { .. } => 0,
        }
    }
}

fn duration_ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_segment_sizes() {
        let p = Packet::gso(52, 10_000, 1448);
        assert_eq!(p.segments(), 7);
        assert_eq!(p.segment_bytes(0), 1500);
        assert_eq!(p.segment_bytes(6), 52 + 10_000 - 6 * 1448);
        let sum: u64 = (0..7).map(|i| u64::from(p.segment_bytes(i))).sum();
        assert_eq!(sum, p.wire_bytes());
    }

    #[test]
    fn single_and_degenerate_packets_are_one_segment() {
        assert_eq!(Packet::single(1500).segments(), 1);
        assert_eq!(Packet::single(1500).segment_bytes(0), 1500);
        assert_eq!(Packet::single(0).segments(), 1);
        assert_eq!(Packet::gso(40, 0, 1448).segments(), 1);
        assert_eq!(Packet::gso(40, 0, 1448).segment_bytes(0), 40);
        assert_eq!(Packet::gso(40, 3000, 0).segments(), 1);
    }

    #[test]
    fn hostile_segment_count_is_capped() {
        let p = Packet::gso(40, u32::MAX, 1);
        assert!(p.segments() <= MAX_SEGMENTS);
        let sum: u64 = (0..p.segments())
            .map(|i| u64::from(p.segment_bytes(i)))
            .sum();
        assert_eq!(sum, p.wire_bytes());
    }

    #[test]
    fn unlimited_ideal_link_delivers_now() {
        let mut link = Link::new(LinkConfig::default(), 1);
        let mut v = Verdict::default();
        link.offer(1234, Packet::single(100), &mut v);
        assert!(v.is_whole());
        assert_eq!(v.runs[0].release_ns, 1234);
    }

    #[test]
    fn huge_segments_take_the_wide_arithmetic_path_exactly() {
        // 4 GiB - 1 at 10 Gbit/s: bits * 1e9 and backlog * rate overflow u64.
        let cfg = LinkConfig {
            rate_bps: Some(10_000_000_000),
            ..Default::default()
        };
        let mut link = Link::new(cfg, 1);
        let mut v = Verdict::default();
        link.offer(0, Packet::single(u32::MAX), &mut v);
        assert_eq!(v.runs[0].release_ns, 3_435_973_836);
        assert_eq!(link.backlog(0), (u64::from(u32::MAX), 1));
        link.offer(0, Packet::single(1250), &mut v);
        assert_eq!(v.runs[0].release_ns, 3_435_973_836 + 1_000);
    }

    #[test]
    fn time_going_backwards_is_clamped() {
        let cfg = LinkConfig {
            delay: std::time::Duration::from_millis(1),
            ..Default::default()
        };
        let mut link = Link::new(cfg, 1);
        let mut v = Verdict::default();
        link.offer(5_000_000, Packet::single(100), &mut v);
        link.offer(1_000_000, Packet::single(100), &mut v);
        assert_eq!(v.runs[0].release_ns, 6_000_000);
    }
}
