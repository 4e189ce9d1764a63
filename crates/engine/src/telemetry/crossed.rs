//! Bytes that crossed the path, per stream and interval, from TCP_INFO snapshots: the one
//! place where bench and cp turn the kernel's counters into the bytes behind an interval's
//! rate. Pure arithmetic on snapshots; the [`super::Sampler`] reads the kernel.
//!
//! The counts an application sees arrive in lumps that never crossed the path at that
//! rate: a sender's cumulative ACK stands still during SACK recovery and then moves by a
//! whole window at once; a receiver can read nothing past a hole and then a window's worth
//! when it fills, and reads in chunks between disk writes. So:
//! - a sender counts bytes *delivered*: cumulatively acknowledged plus the segments the
//!   peer acknowledged selectively ([`TcpInfo::sacked`] x MSS). When recovery ends, the
//!   cumulative ACK jumps and the SACKed count falls by the same bytes.
//! - a receiver counts bytes *arrived*: in order ([`TcpInfo::bytes_received`]) plus an
//!   estimate of those held out of order behind a hole: the data segments that arrived
//!   ([`TcpInfo::data_segs_in`]) at the peer's segment size, bounded by the in-order count
//!   below and by the out-of-order segments since the queue was last empty above. An
//!   interval whose arrivals were all in order re-anchors the estimate to the exact count.
//!
//! An estimate may fall back (a SACKed segment shorter than the MSS, a reneged SACK, a
//! re-anchor): what was reported is never taken back nor counted twice; the count resumes
//! once the estimate passes its high-water mark. Over a whole run the counts add up to the
//! kernel's exact figure.

use serde::Serialize;

use super::Role;
use longhaul_sys::tcp_info::TcpInfo;

/// Which count an interval's rates come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateSource {
    /// The sender's kernel: bytes acknowledged, cumulatively or selectively.
    Delivered,
    /// The receiver's kernel: data that arrived, in order or held behind a hole.
    Arrived,
}

impl RateSource {
    /// The count a sender or a receiver measures.
    pub fn of(role: Role) -> Self {
        match role {
            Role::Sender => Self::Delivered,
            Role::Receiver => Self::Arrived,
        }
    }
}

/// One stream's running count of bytes that crossed the path (TCP payload, framing of
/// the application's records included).
#[derive(Debug, Clone)]
pub struct CrossedMeter {
    role: Role,
    base_acked: u64,
    base_received: u64,
    prev_received: u64,
    prev_segs: u32,
    /// Data segments counted since the base.
    segs: u64,
    prev_ooo: Option<u32>,
    /// Out-of-order segments since the receiver last had none held.
    ooo_since_clean: u64,
    /// Bytes estimated to have crossed since the base snapshot.
    estimate: u64,
    /// Bytes reported so far: the estimate's high-water mark.
    reported: u64,
}

impl CrossedMeter {
    /// Counts from the snapshot `base` on, at a sender or a receiver.
    pub fn new(role: Role, base: &TcpInfo) -> Self {
        Self {
            role,
            base_acked: base.bytes_acked,
            base_received: base.bytes_received,
            prev_received: base.bytes_received,
            prev_segs: base.data_segs_in,
            segs: 0,
            prev_ooo: base.rcv_ooopack,
            ooo_since_clean: 0,
            estimate: 0,
            reported: 0,
        }
    }

    /// Which count this meter keeps.
    pub fn source(&self) -> RateSource {
        RateSource::of(self.role)
    }

    /// Bytes that crossed between the previous snapshot (or the base) and `now`.
    pub fn advance(&mut self, now: &TcpInfo) -> u64 {
        self.estimate = match self.role {
            Role::Sender => self.delivered(now),
            Role::Receiver => self.arrived(now),
        };
        let new = self.estimate.saturating_sub(self.reported);
        self.reported = self.reported.max(self.estimate);
        new
    }

    /// Acknowledged cumulatively, plus selectively at the sender's segment size.
    fn delivered(&self, now: &TcpInfo) -> u64 {
        delivered_bytes(now).saturating_sub(self.base_acked)
    }

    /// Arrived in order, plus an estimate of what is held out of order.
    fn arrived(&mut self, now: &TcpInfo) -> u64 {
        if now.bytes_received < self.prev_received {
            // Not the same connection's counters (a reset socket reads zeros): no news.
            return self.estimate;
        }
        self.prev_received = now.bytes_received;
        let in_order = now.bytes_received - self.base_received;
        let segs = u64::from(now.data_segs_in.wrapping_sub(self.prev_segs));
        self.prev_segs = now.data_segs_in;
        self.segs = self.segs.saturating_add(segs);
        let (Some(ooo_now), Some(ooo_prev)) = (now.rcv_ooopack, self.prev_ooo) else {
            // A kernel that does not count out-of-order segments: the exact count.
            return in_order;
        };
        self.prev_ooo = Some(ooo_now);
        let ooo = u64::from(ooo_now.wrapping_sub(ooo_prev));
        match (segs, ooo) {
            // Nothing arrived: nothing changed but what the application read.
            (0, 0) => self.estimate.max(in_order),
            // Every arrival was in order: nothing is held behind a hole.
            (_, 0) => {
                self.ooo_since_clean = 0;
                in_order
            }
            _ => {
                self.ooo_since_clean = self.ooo_since_clean.saturating_add(ooo);
                let seg = self.bytes_per_segment(now, in_order);
                let held_at_most = self.ooo_since_clean.saturating_mul(seg);
                self.estimate
                    .saturating_add(segs.saturating_mul(seg))
                    .clamp(in_order, in_order.saturating_add(held_at_most))
            }
        }
    }

    /// Bytes a counted data segment carries: at least the peer's MSS, more when the
    /// kernel counts coalesced packets once (GRO, offload super-packets from a TUN
    /// device): the in-order bytes per segment so far, which errs low (segments held
    /// behind a hole are counted, their bytes not yet).
    fn bytes_per_segment(&self, now: &TcpInfo, in_order: u64) -> u64 {
        let average = in_order.checked_div(self.segs).unwrap_or(0);
        average.max(u64::from(now.rcv_mss))
    }
}

/// Payload bytes in a full TLS 1.3 record, and the record on the wire (5-byte header,
/// content type, 16-byte AEAD tag).
const TLS_RECORD_PAYLOAD: u64 = 16_384;
const TLS_RECORD_WIRE: u64 = TLS_RECORD_PAYLOAD + 22;

/// The payload in `wire` bytes of full TLS records: the kernel counts the framing.
pub fn tls_payload(wire: u64) -> u64 {
    wire / TLS_RECORD_WIRE * TLS_RECORD_PAYLOAD
        + wire % TLS_RECORD_WIRE * TLS_RECORD_PAYLOAD / TLS_RECORD_WIRE
}

/// Bytes a sender's connection delivered so far: acknowledged cumulatively, plus what the
/// peer SACKed above that at the sender's segment size (so the count does not jump when a
/// loss recovery ends). The rate controller's delivered count and the sender's interval
/// rates both come from here.
pub fn delivered_bytes(info: &TcpInfo) -> u64 {
    info.bytes_acked
        .saturating_add(u64::from(info.sacked) * u64::from(info.snd_mss))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn tx(acked: u64, sacked: u32) -> TcpInfo {
        TcpInfo {
            snd_mss: MSS,
            bytes_acked: acked,
            sacked,
            ..TcpInfo::default()
        }
    }

    fn rx(received: u64, segs: u32, ooo: u32) -> TcpInfo {
        TcpInfo {
            rcv_mss: MSS,
            bytes_received: received,
            data_segs_in: segs,
            rcv_ooopack: Some(ooo),
            ..TcpInfo::default()
        }
    }

    /// The interval counts of a meter fed `snaps` after `base`.
    fn counts(role: Role, base: TcpInfo, snaps: &[TcpInfo]) -> Vec<u64> {
        let mut m = CrossedMeter::new(role, &base);
        snaps.iter().map(|s| m.advance(s)).collect()
    }

    #[test]
    fn a_sender_counts_sacked_segments_when_they_arrive_not_when_recovery_ends() {
        // 10 segments per interval cross (the connecting side's SYN counts one byte). A
        // loss at 10k: the cumulative ACK stands still for two intervals while the next
        // segments are SACKed, then jumps when the retransmission arrives.
        let c = counts(
            Role::Sender,
            tx(1, 0),
            &[
                tx(10_001, 0),
                tx(10_001, 9),  // one lost, nine SACKed
                tx(10_001, 19), // recovery: everything after the hole SACKed
                tx(40_001, 0),  // the hole filled: the ACK jumps by 30k
                tx(50_001, 0),
            ],
        );
        // The cumulative ACK alone shows 10k, 0, 0, 30k, 10k.
        assert_eq!(c, vec![10_000, 9_000, 10_000, 11_000, 10_000]);
        assert_eq!(
            c.iter().sum::<u64>(),
            50_000,
            "all acknowledged bytes, once"
        );
    }

    #[test]
    fn a_sender_never_counts_twice_what_an_estimate_gave_back() {
        // SACKed segments shorter than the MSS: the ACK moves less than the SACKed count.
        let c = counts(
            Role::Sender,
            tx(0, 0),
            &[tx(0, 10), tx(8_000, 0), tx(9_000, 0), tx(12_000, 0)],
        );
        assert_eq!(c, vec![10_000, 0, 0, 2_000]);
        assert_eq!(c.iter().sum::<u64>(), 12_000);
    }

    #[test]
    fn a_receiver_counts_segments_held_behind_a_hole_as_they_arrive() {
        // 10 segments per interval; segment 11 is lost, 19 arrive behind it over two
        // intervals, then the retransmission fills the hole and 10 more come in order.
        let c = counts(
            Role::Receiver,
            rx(0, 0, 0),
            &[
                rx(10_000, 10, 0),
                rx(10_000, 19, 9),
                rx(10_000, 29, 19),
                rx(40_000, 40, 19), // the hole filled, 9 more: in-order jumps by 30k
                rx(50_000, 40, 19),
            ],
        );
        assert_eq!(c, vec![10_000, 9_000, 10_000, 11_000, 10_000]);
        assert_eq!(c.iter().sum::<u64>(), 50_000);
    }

    #[test]
    fn a_receiver_reanchors_to_the_exact_count_when_all_arrived_in_order() {
        // Short segments (500 bytes) make the estimate overshoot while a hole is open; the
        // first interval without out-of-order arrivals takes the exact count again, and
        // what was overcounted is not counted again.
        let c = counts(
            Role::Receiver,
            rx(0, 0, 0),
            &[
                rx(0, 10, 10),     // 10 short segments behind a hole: estimated 10k
                rx(5_500, 11, 10), // the hole filled: 5.5k in all
                rx(9_500, 19, 10),
                rx(15_500, 31, 10),
            ],
        );
        assert_eq!(c, vec![10_000, 0, 0, 5_500]);
        assert_eq!(c.iter().sum::<u64>(), 15_500, "the exact total in the end");
    }

    #[test]
    fn a_receiver_counts_coalesced_packets_at_their_average_size() {
        // GRO (or a TUN device's super-packets) counts 4 segments as one: 4 kB each.
        let c = counts(
            Role::Receiver,
            rx(0, 0, 0),
            &[rx(40_000, 10, 0), rx(40_000, 15, 5), rx(80_000, 20, 5)],
        );
        // Behind the hole, 5 packets at 40k / 15 = 2666 bytes: low, never the 1 kB MSS.
        assert_eq!(c, vec![40_000, 13_330, 26_670]);
    }

    #[test]
    fn a_receiver_never_estimates_more_than_the_out_of_order_segments_could_hold() {
        // Duplicates counted as data segments: 50 arrive but only 5 went out of order.
        let c = counts(Role::Receiver, rx(0, 0, 0), &[rx(1_000, 50, 5)]);
        assert_eq!(c, vec![6_000]);
    }

    #[test]
    fn a_receiver_without_out_of_order_counts_takes_the_in_order_bytes() {
        let old = |r, s| TcpInfo {
            rcv_ooopack: None,
            ..rx(r, s, 0)
        };
        let c = counts(Role::Receiver, old(0, 0), &[old(0, 10), old(30_000, 30)]);
        assert_eq!(c, vec![0, 30_000]);
    }

    #[test]
    fn wrapping_segment_counters_and_reset_counters_do_not_inflate_the_count() {
        let c = counts(
            Role::Receiver,
            rx(0, u32::MAX - 4, u32::MAX),
            &[rx(0, 5, 8), rx(20_000, 15, 8)],
        );
        // 10 segments (9 out of order) across the wrap, then 10 in order.
        assert_eq!(c, vec![9_000, 11_000]);
        let mut m = CrossedMeter::new(Role::Receiver, &rx(0, 0, 0));
        assert_eq!(m.advance(&rx(10_000, 10, 0)), 10_000);
        assert_eq!(m.advance(&TcpInfo::default()), 0, "a socket read as zeros");
        assert_eq!(m.advance(&rx(20_000, 20, 0)), 10_000);
        let mut s = CrossedMeter::new(Role::Sender, &tx(5_000, 0));
        assert_eq!(s.advance(&tx(0, 0)), 0);
        assert_eq!(s.advance(&tx(6_000, 0)), 1_000);
    }

    #[test]
    fn the_source_says_which_end_counted() {
        let m = CrossedMeter::new(Role::Sender, &TcpInfo::default());
        assert_eq!(m.source(), RateSource::Delivered);
        assert_eq!(RateSource::of(Role::Receiver), RateSource::Arrived);
        assert_eq!(
            serde_json::to_value(RateSource::Arrived).unwrap(),
            serde_json::json!("arrived")
        );
    }

    #[test]
    fn tls_framing_is_taken_off() {
        assert_eq!(tls_payload(16_406), 16_384);
        assert_eq!(tls_payload(3 * 16_406), 3 * 16_384);
        assert_eq!(tls_payload(0), 0);
        assert!(tls_payload(8_203) <= 8_192);
    }
}
