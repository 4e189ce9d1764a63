//! Buffers a long fat path needs: the bandwidth-delay product, the socket buffer Linux needs
//! for it, the window-scale ceiling of one TCP connection, router buffers, the goodput
//! ceiling of an MTU and the pacing rate per stream.
//!
//! These functions take plain numbers (`rate_bps`, `rtt`) so other commands (`bench`, `cp`)
//! can size their sockets without building a [`crate::PathSpec`].

use crate::path::{ETHERNET_OVERHEAD_BYTES, TCP_IPV4_TIMESTAMP_HEADER_BYTES};
use std::time::Duration;

/// Largest window one TCP connection can advertise: 65535 x 2^14 (window scale 14, RFC 7323),
/// rounded here to 2^30 bytes as the record teams did.
pub const WINDOW_SCALE_CEILING_BYTES: u64 = 1 << 30;

/// Linux's stock ceiling of the send buffer (`net.ipv4.tcp_wmem` max, 4 MiB): without tuning
/// one stream can never have more than this in flight.
pub const LINUX_STOCK_TCP_WMEM_MAX_BYTES: u64 = 4 << 20;

/// Linux's stock ceiling of the receive buffer (`net.ipv4.tcp_rmem` max, 6 MiB).
pub const LINUX_STOCK_TCP_RMEM_MAX_BYTES: u64 = 6 << 20;

/// Bandwidth-delay product in bytes: rate (bit/s) x RTT (s) / 8, rounded up.
///
/// 1 Gbit/s x 180 ms = 22.5 MB.
pub fn bdp_bytes(rate_bps: u64, rtt: Duration) -> u64 {
    // u128 keeps 400 Gbit/s x hours exact; the result is capped at u64::MAX.
    let bits = u128::from(rate_bps) * rtt.as_nanos();
    let bytes = bits.div_ceil(8 * 1_000_000_000);
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

/// Socket buffer Linux needs for one stream to keep a window of `bdp` in flight: 2 x BDP.
///
/// Linux counts its own bookkeeping (`sk_buff` overhead) against `SO_SNDBUF`/`SO_RCVBUF` and
/// advertises only part of the receive buffer as window, so the buffer must be about twice
/// the window. 1 Gbit/s x 180 ms -> 45 MB.
pub fn socket_buffer_bytes(rate_bps: u64, rtt: Duration) -> u64 {
    bdp_bytes(rate_bps, rtt).saturating_mul(2)
}

/// Whether one TCP connection can cover a path of this BDP (BDP <= 2^30 bytes).
pub fn single_stream_can_cover(bdp_bytes: u64) -> bool {
    bdp_bytes <= WINDOW_SCALE_CEILING_BYTES
}

/// Fewest streams whose windows together cover the BDP: ceil(BDP / 2^30), at least 1.
pub fn streams_needed_for_window(bdp_bytes: u64) -> u64 {
    bdp_bytes.div_ceil(WINDOW_SCALE_CEILING_BYTES).max(1)
}

/// Highest rate one stream can carry at this RTT with the largest window: 2^30 x 8 / RTT.
///
/// About 8.6 Gbit·s / RTT: 47.7 Gbit/s at 180 ms.
pub fn window_limited_rate_bps(window_bytes: u64, rtt: Duration) -> f64 {
    window_bytes as f64 * 8.0 / rtt.as_secs_f64()
}

/// Router buffer by the rule of thumb: one BDP.
pub fn router_buffer_bytes(rate_bps: u64, rtt: Duration) -> u64 {
    bdp_bytes(rate_bps, rtt)
}

/// Router buffer with `flows` desynchronised flows (Appenzeller et al.): BDP / sqrt(n).
pub fn router_buffer_for_flows_bytes(rate_bps: u64, rtt: Duration, flows: u32) -> u64 {
    let n = f64::from(flows.max(1));
    (bdp_bytes(rate_bps, rtt) as f64 / n.sqrt()).ceil() as u64
}

/// Buffer a switch needs where two TCP streams merge into one link: 1/4 x BW x RTT.
///
/// 10 Gbit/s at 200 ms -> 62.5 MB.
pub fn merge_buffer_bytes(rate_bps: u64, rtt: Duration) -> u64 {
    bdp_bytes(rate_bps, rtt).div_ceil(4)
}

/// Fraction of the link rate left for TCP payload at an MTU on Ethernet, with TCP/IPv4
/// timestamps: (MTU - 52) / (MTU + 38). 1500 -> 94.1 %, 9000 -> 99.0 %.
pub fn goodput_fraction(mtu_bytes: u32) -> f64 {
    let payload = f64::from(mtu_bytes.saturating_sub(TCP_IPV4_TIMESTAMP_HEADER_BYTES));
    payload / f64::from(mtu_bytes + ETHERNET_OVERHEAD_BYTES)
}

/// Highest TCP payload rate on an Ethernet link of `rate_bps`: rate x goodput fraction.
pub fn goodput_ceiling_bps(rate_bps: u64, mtu_bytes: u32) -> f64 {
    rate_bps as f64 * goodput_fraction(mtu_bytes)
}

/// Pacing rate for each of `streams` streams sharing `rate_bps` evenly: rate / streams.
pub fn pacing_rate_per_stream_bps(rate_bps: u64, streams: u32) -> u64 {
    rate_bps / u64::from(streams.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn one_gigabit_at_180ms_needs_45_megabytes_of_socket_buffer() {
        assert_eq!(bdp_bytes(1_000_000_000, MS(180)), 22_500_000);
        assert_eq!(socket_buffer_bytes(1_000_000_000, MS(180)), 45_000_000);
    }

    #[test]
    fn record_team_windows() {
        // "1 Gbit/s at ~170 ms RTT needed a 40 MByte window"
        let buf = socket_buffer_bytes(1_000_000_000, MS(170));
        assert!((40_000_000..45_000_000).contains(&buf), "{buf}");
        // "2.5 Gbit/s needed 120 MByte" (at ~180 ms)
        let buf = socket_buffer_bytes(2_500_000_000, MS(180));
        assert!((110_000_000..=120_000_000).contains(&buf), "{buf}");
    }

    #[test]
    fn window_scale_ceiling() {
        assert!(single_stream_can_cover(bdp_bytes(10_000_000_000, MS(500))));
        let bdp = bdp_bytes(100_000_000_000, MS(180));
        assert!(!single_stream_can_cover(bdp));
        assert_eq!(streams_needed_for_window(bdp), 3);
        let max = window_limited_rate_bps(WINDOW_SCALE_CEILING_BYTES, MS(180));
        assert!((max / 1e9 - 47.72).abs() < 0.01, "{max}");
    }

    #[test]
    fn merge_buffer_at_10g_200ms_is_62_5_megabytes() {
        assert_eq!(merge_buffer_bytes(10_000_000_000, MS(200)), 62_500_000);
        assert_eq!(router_buffer_bytes(10_000_000_000, MS(200)), 250_000_000);
        assert_eq!(
            router_buffer_for_flows_bytes(10_000_000_000, MS(200), 100),
            25_000_000
        );
    }

    #[test]
    fn goodput_fractions() {
        assert!((goodput_fraction(1500) - 1448.0 / 1538.0).abs() < 1e-12);
        assert!((goodput_fraction(9000) - 8948.0 / 9038.0).abs() < 1e-12);
        assert!((goodput_ceiling_bps(10_000_000_000, 1500) / 1e9 - 9.415).abs() < 0.001);
    }

    #[test]
    fn pacing_splits_the_rate() {
        assert_eq!(pacing_rate_per_stream_bps(10_000_000_000, 4), 2_500_000_000);
        assert_eq!(
            pacing_rate_per_stream_bps(10_000_000_000, 0),
            10_000_000_000
        );
    }

    proptest! {
        #[test]
        fn buffers_grow_with_rtt_and_rate(
            rate in 1_000u64..400_000_000_000,
            extra_rate in 0u64..1_000_000_000,
            rtt_us in 1u64..2_000_000,
            extra_rtt_us in 0u64..1_000_000,
        ) {
            let rtt = Duration::from_micros(rtt_us);
            let longer = Duration::from_micros(rtt_us + extra_rtt_us);
            let faster = rate + extra_rate;
            prop_assert!(bdp_bytes(rate, longer) >= bdp_bytes(rate, rtt));
            prop_assert!(bdp_bytes(faster, rtt) >= bdp_bytes(rate, rtt));
            prop_assert!(socket_buffer_bytes(faster, longer) >= socket_buffer_bytes(rate, rtt));
            prop_assert!(merge_buffer_bytes(faster, longer) >= merge_buffer_bytes(rate, rtt));
            prop_assert!(
                window_limited_rate_bps(1 << 20, longer) <= window_limited_rate_bps(1 << 20, rtt)
            );
        }

        #[test]
        fn goodput_grows_with_mtu(mtu in 576u32..65535, extra in 0u32..1000) {
            let bigger = (mtu + extra).min(65535);
            prop_assert!(goodput_fraction(bigger) >= goodput_fraction(mtu));
            prop_assert!(goodput_fraction(mtu) < 1.0);
        }
    }
}
