//! Every figure `longhaul plan` prints for one path, computed at once from a [`PathSpec`]
//! (plus the size to move and the terrestrial distance, when given).
//!
//! With N streams, each stream carries rate / N: windows, socket buffers, recovery times and
//! loss tolerances are per stream; throughputs and router buffers are for the whole path.

use crate::buffers::{self, LINUX_STOCK_TCP_WMEM_MAX_BYTES, WINDOW_SCALE_CEILING_BYTES};
use crate::path::{mss_for_mtu, PathSpec, JUMBO_MTU_BYTES};
use crate::{lsr, tcp_response as tcp, ModelError};

/// What to plan for: the path, and optionally what to move and how far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanRequest {
    /// The path.
    pub path: PathSpec,
    /// Bytes to move, for transfer times.
    pub size_bytes: Option<u64>,
    /// Terrestrial distance in meters, for the Land Speed Record metric.
    pub distance_m: Option<f64>,
}

/// The figures of a path. Field names carry their unit.
#[derive(Debug, Clone, PartialEq)]
pub struct PathPlan {
    /// The path the figures are for (validated).
    pub path: PathSpec,
    /// Maximum segment size: MTU - 52.
    pub mss_bytes: u32,
    /// Bandwidth-delay product of the whole path: rate x RTT / 8.
    pub bdp_bytes: u64,
    /// The share of the BDP one stream must keep in flight: BDP / streams.
    pub bdp_per_stream_bytes: u64,
    /// Socket buffer each stream needs on Linux: 2 x BDP per stream.
    pub socket_buffer_bytes: u64,
    /// Largest window of one TCP connection (window scale 14).
    pub window_scale_ceiling_bytes: u64,
    /// Whether one stream alone could cover the whole BDP (BDP <= 2^30 bytes).
    pub single_stream_can_cover: bool,
    /// Whether each of the planned streams can cover its share (BDP / N <= 2^30 bytes).
    pub streams_can_cover: bool,
    /// Fewest streams whose largest windows cover the BDP.
    pub streams_needed_for_window: u64,
    /// Highest rate one stream can reach at this RTT: 2^30 x 8 / RTT.
    pub single_stream_max_bps: f64,
    /// Fraction of the link rate left for TCP payload: (MTU - 52) / (MTU + 38).
    pub goodput_fraction: f64,
    /// Highest TCP payload rate at the target rate.
    pub goodput_ceiling_bps: f64,
    /// Congestion window one stream needs, in segments.
    pub window_segments_per_stream: f64,
    /// Time for one stream to regain its rate after a loss, with delayed ACKs (as Linux).
    pub reno_recovery_seconds: f64,
    /// The same without delayed ACKs (one ACK per segment).
    pub reno_recovery_no_delayed_ack_seconds: f64,
    /// The same with jumbo frames (MTU 9000), with delayed ACKs.
    pub reno_recovery_jumbo_seconds: f64,
    /// The same with jumbo frames, without delayed ACKs.
    pub reno_recovery_jumbo_no_delayed_ack_seconds: f64,
    /// Highest loss rate at which Reno holds the target (Mathis inverted).
    pub max_loss_reno: f64,
    /// Highest loss rate at which CUBIC holds the target (RFC 9438 response function).
    pub max_loss_cubic: f64,
    /// Highest loss rate at which HighSpeed TCP holds the target (RFC 3649).
    pub max_loss_hstcp: f64,
    /// With a loss rate: the Mathis bound on Reno's throughput, all streams together.
    pub mathis_throughput_bps: Option<f64>,
    /// CUBIC's K: seconds after a loss until one stream's window is back at W_max.
    pub cubic_k_seconds: f64,
    /// Router buffer by the rule of thumb: one BDP.
    pub router_buffer_bytes: u64,
    /// Router buffer for the planned streams as desynchronised flows: BDP / sqrt(N).
    pub router_buffer_for_streams_bytes: u64,
    /// Switch buffer where two streams merge into one link: 1/4 x BW x RTT.
    pub merge_buffer_bytes: u64,
    /// Pacing rate per stream: rate / streams.
    pub pacing_rate_per_stream_bps: u64,
    /// Utilisation N synchronised Reno flows reach: 1 - 1 / (1 + 3N).
    pub parallel_reno_utilisation: f64,
    /// With a size: how long moving it takes.
    pub transfer: Option<TransferTimes>,
    /// With a distance: the Land Speed Record metric at the goodput ceiling.
    pub bit_meters_per_second: Option<f64>,
}

/// How long moving a given size takes, tuned and untuned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferTimes {
    /// Bytes to move.
    pub size_bytes: u64,
    /// At the goodput ceiling of the target rate.
    pub transfer_seconds: f64,
    /// The best rate a stock Linux host reaches: each stream's window is capped by the stock
    /// send buffer (tcp_wmem max 4 MiB), so at most streams x 4 MiB x 8 / RTT.
    pub stock_rate_bps: f64,
    /// At the stock rate.
    pub stock_transfer_seconds: f64,
}

impl PathPlan {
    /// Computes every figure for `request`; fails if the path is not one the formulas can use.
    pub fn compute(request: &PlanRequest) -> Result<PathPlan, ModelError> {
        let path = request.path.validated()?;
        let streams = path.streams;
        let rate_per_stream = path.rate_per_stream_bps();
        let mss = path.mss_bytes();
        let jumbo_mss = mss_for_mtu(JUMBO_MTU_BYTES);
        let bdp = buffers::bdp_bytes(path.rate_bps, path.rtt);
        let bdp_per_stream = bdp.div_ceil(u64::from(streams));
        let window = tcp::window_segments(rate_per_stream, path.rtt, mss);
        let goodput_ceiling_bps = buffers::goodput_ceiling_bps(path.rate_bps, path.mtu_bytes);

        if let Some(distance) = request.distance_m {
            if !(distance.is_finite() && distance > 0.0) {
                return Err(ModelError::Path {
                    field: "distance_m",
                    value: distance.to_string(),
                    problem: "give a distance above zero, e.g. --distance 28983km".into(),
                });
            }
        }
        let transfer = request.size_bytes.map(|size_bytes| {
            let stock_window_bps =
                buffers::window_limited_rate_bps(LINUX_STOCK_TCP_WMEM_MAX_BYTES, path.rtt)
                    * f64::from(streams);
            let stock_rate_bps = stock_window_bps.min(goodput_ceiling_bps);
            let bits = size_bytes as f64 * 8.0;
            TransferTimes {
                size_bytes,
                transfer_seconds: bits / goodput_ceiling_bps,
                stock_rate_bps,
                stock_transfer_seconds: bits / stock_rate_bps,
            }
        });

        Ok(PathPlan {
            path,
            mss_bytes: mss,
            bdp_bytes: bdp,
            bdp_per_stream_bytes: bdp_per_stream,
            socket_buffer_bytes: bdp_per_stream.saturating_mul(2),
            window_scale_ceiling_bytes: WINDOW_SCALE_CEILING_BYTES,
            single_stream_can_cover: buffers::single_stream_can_cover(bdp),
            streams_can_cover: buffers::single_stream_can_cover(bdp_per_stream),
            streams_needed_for_window: buffers::streams_needed_for_window(bdp),
            single_stream_max_bps: buffers::window_limited_rate_bps(
                WINDOW_SCALE_CEILING_BYTES,
                path.rtt,
            ),
            goodput_fraction: buffers::goodput_fraction(path.mtu_bytes),
            goodput_ceiling_bps,
            window_segments_per_stream: window,
            reno_recovery_seconds: tcp::reno_recovery_seconds(rate_per_stream, path.rtt, mss, true),
            reno_recovery_no_delayed_ack_seconds: tcp::reno_recovery_seconds(
                rate_per_stream,
                path.rtt,
                mss,
                false,
            ),
            reno_recovery_jumbo_seconds: tcp::reno_recovery_seconds(
                rate_per_stream,
                path.rtt,
                jumbo_mss,
                true,
            ),
            reno_recovery_jumbo_no_delayed_ack_seconds: tcp::reno_recovery_seconds(
                rate_per_stream,
                path.rtt,
                jumbo_mss,
                false,
            ),
            max_loss_reno: tcp::reno_max_loss(window),
            max_loss_cubic: tcp::cubic_max_loss(window, path.rtt),
            max_loss_hstcp: tcp::hstcp_max_loss(window),
            mathis_throughput_bps: path
                .loss
                .map(|p| tcp::mathis_throughput_bps(mss, path.rtt, p) * f64::from(streams)),
            cubic_k_seconds: tcp::cubic_k_seconds(window),
            router_buffer_bytes: buffers::router_buffer_bytes(path.rate_bps, path.rtt),
            router_buffer_for_streams_bytes: buffers::router_buffer_for_flows_bytes(
                path.rate_bps,
                path.rtt,
                streams,
            ),
            merge_buffer_bytes: buffers::merge_buffer_bytes(path.rate_bps, path.rtt),
            pacing_rate_per_stream_bps: buffers::pacing_rate_per_stream_bps(path.rate_bps, streams),
            parallel_reno_utilisation: tcp::parallel_reno_utilisation(streams),
            transfer,
            bit_meters_per_second: request
                .distance_m
                .map(|d| lsr::bit_meters_per_second(goodput_ceiling_bps, d)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn request(rate_bps: u64, rtt_ms: u64) -> PlanRequest {
        PlanRequest {
            path: PathSpec::new(rate_bps, Duration::from_millis(rtt_ms)),
            size_bytes: None,
            distance_m: None,
        }
    }

    #[test]
    fn one_gigabit_180ms() {
        let plan = PathPlan::compute(&request(1_000_000_000, 180)).unwrap();
        assert_eq!(plan.mss_bytes, 1448);
        assert_eq!(plan.bdp_bytes, 22_500_000);
        assert_eq!(plan.socket_buffer_bytes, 45_000_000);
        assert!(plan.single_stream_can_cover && plan.streams_can_cover);
        // 125e6 x 0.18^2 / (2 x 1448) = 1398.5 s, doubled by delayed ACKs.
        assert!((plan.reno_recovery_no_delayed_ack_seconds - 1398.48).abs() < 0.01);
        assert!((plan.reno_recovery_seconds - 2796.96).abs() < 0.02);
        assert!(plan.reno_recovery_jumbo_seconds * 6.0 < plan.reno_recovery_seconds);
        assert_eq!(plan.mathis_throughput_bps, None);
        assert_eq!(plan.transfer, None);
    }

    #[test]
    fn streams_split_the_window() {
        let mut req = request(100_000_000_000, 180);
        let one = PathPlan::compute(&req).unwrap();
        assert!(!one.single_stream_can_cover && !one.streams_can_cover);
        assert_eq!(one.streams_needed_for_window, 3);
        req.path.streams = 4;
        let four = PathPlan::compute(&req).unwrap();
        assert!(four.streams_can_cover);
        assert_eq!(four.socket_buffer_bytes, one.socket_buffer_bytes / 4);
        assert_eq!(four.pacing_rate_per_stream_bps, 25_000_000_000);
        assert!(four.max_loss_reno > one.max_loss_reno);
    }

    #[test]
    fn size_loss_and_distance() {
        let mut req = request(1_000_000_000, 180);
        req.path.loss = Some(1e-6);
        req.size_bytes = Some(1_000_000_000_000);
        req.distance_m = Some(28_983_000.0);
        let plan = PathPlan::compute(&req).unwrap();
        let mathis = plan.mathis_throughput_bps.unwrap();
        assert!(
            (mathis - 1448.0 * 8.0 / 0.18 * 1.2247 / 1e-3).abs() < 1e4,
            "{mathis}"
        );
        let t = plan.transfer.unwrap();
        assert!((t.transfer_seconds - 8e12 / (1e9 * 1448.0 / 1538.0)).abs() < 1e-6);
        // 4 MiB per 180 ms is 186 Mbit/s.
        assert!(
            (t.stock_rate_bps / 1e6 - 186.4).abs() < 0.1,
            "{}",
            t.stock_rate_bps
        );
        assert!(t.stock_transfer_seconds > 5.0 * t.transfer_seconds);
        let lsr = plan.bit_meters_per_second.unwrap();
        assert!((lsr - plan.goodput_ceiling_bps * 28_983_000.0).abs() < 1.0);
    }

    #[test]
    fn bad_paths_are_refused_with_the_field() {
        let mut req = request(1_000_000_000, 180);
        req.path.mtu_bytes = 100;
        let msg = PathPlan::compute(&req).unwrap_err().to_string();
        assert!(msg.contains("mtu_bytes = 100"), "{msg}");
        let mut req = request(1_000_000_000, 180);
        req.path.loss = Some(0.0);
        assert!(PathPlan::compute(&req).is_err());
        let mut req = request(1_000_000_000, 180);
        req.distance_m = Some(-1.0);
        assert!(PathPlan::compute(&req).is_err());
        assert!(PathPlan::compute(&request(0, 180)).is_err());
        assert!(PathPlan::compute(&request(1, 0)).is_err());
    }

    proptest! {
        #[test]
        fn plan_is_monotonic_in_rtt_and_rate(
            rate in 1_000_000u64..400_000_000_000,
            rate_factor in 1u64..10,
            rtt_us in 100u64..1_000_000,
            rtt_factor in 1u64..10,
            streams in 1u32..64,
        ) {
            let base = |rate_bps, rtt_us| {
                let mut path = PathSpec::new(rate_bps, Duration::from_micros(rtt_us));
                path.streams = streams;
                PathPlan::compute(&PlanRequest { path, size_bytes: None, distance_m: None }).unwrap()
            };
            let a = base(rate, rtt_us);
            for b in [base(rate * rate_factor, rtt_us), base(rate, rtt_us * rtt_factor)] {
                prop_assert!(b.bdp_bytes >= a.bdp_bytes);
                prop_assert!(b.socket_buffer_bytes >= a.socket_buffer_bytes);
                prop_assert!(b.router_buffer_bytes >= a.router_buffer_bytes);
                prop_assert!(b.merge_buffer_bytes >= a.merge_buffer_bytes);
                prop_assert!(b.reno_recovery_seconds >= a.reno_recovery_seconds);
                prop_assert!(b.max_loss_reno <= a.max_loss_reno);
                prop_assert!(b.max_loss_hstcp <= a.max_loss_hstcp);
                prop_assert!(b.max_loss_cubic <= a.max_loss_cubic * (1.0 + 1e-12));
                prop_assert!(b.cubic_k_seconds >= a.cubic_k_seconds);
            }
        }
    }
}
