//! The description of a path that every formula works from: target rate, round-trip time,
//! MTU, loss probability and number of parallel streams.

use crate::ModelError;
use std::time::Duration;

/// IPv4 header (20) + TCP header (20) + TCP timestamp option (12) bytes in every segment.
pub const TCP_IPV4_TIMESTAMP_HEADER_BYTES: u32 = 52;
/// Ethernet bytes on the wire around every IP packet: preamble and start delimiter (8),
/// MAC header (14), frame check sequence (4) and inter-frame gap (12).
pub const ETHERNET_OVERHEAD_BYTES: u32 = 38;
/// The standard Ethernet MTU.
pub const DEFAULT_MTU_BYTES: u32 = 1500;
/// The common jumbo-frame MTU.
pub const JUMBO_MTU_BYTES: u32 = 9000;
/// Smallest MTU an IPv4 host must accept (RFC 791 allows 68; TCP needs room for data).
pub const MIN_MTU_BYTES: u32 = 576;
/// Largest IPv4 packet.
pub const MAX_MTU_BYTES: u32 = 65535;

/// A long fat network path as the user describes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathSpec {
    /// Target (bottleneck) rate in bit/s, at the IP layer as link rates are quoted.
    pub rate_bps: u64,
    /// Round-trip time.
    pub rtt: Duration,
    /// IP MTU in bytes.
    pub mtu_bytes: u32,
    /// Probability that a packet is lost, if known.
    pub loss: Option<f64>,
    /// Number of parallel TCP streams sharing the path.
    pub streams: u32,
}

impl PathSpec {
    /// A path with the default MTU (1500), no known loss and one stream.
    pub fn new(rate_bps: u64, rtt: Duration) -> Self {
        PathSpec {
            rate_bps,
            rtt,
            mtu_bytes: DEFAULT_MTU_BYTES,
            loss: None,
            streams: 1,
        }
    }

    /// Checks that every parameter is one the formulas can use; returns the path unchanged.
    pub fn validated(self) -> Result<Self, ModelError> {
        let bad = |field, value: String, problem: &str| ModelError::Path {
            field,
            value,
            problem: problem.to_string(),
        };
        if self.rate_bps == 0 {
            return Err(bad(
                "rate_bps",
                "0".into(),
                "give a rate above zero, e.g. --rate 1G",
            ));
        }
        if self.rtt.is_zero() {
            return Err(bad(
                "rtt",
                "0".into(),
                "give a round-trip time above zero, e.g. --rtt 180ms",
            ));
        }
        if !(MIN_MTU_BYTES..=MAX_MTU_BYTES).contains(&self.mtu_bytes) {
            return Err(bad(
                "mtu_bytes",
                self.mtu_bytes.to_string(),
                "give an MTU between 576 and 65535 bytes (1500 standard, 9000 jumbo)",
            ));
        }
        if let Some(p) = self.loss {
            if !(p > 0.0 && p < 1.0) {
                return Err(bad(
                    "loss",
                    p.to_string(),
                    "give a loss probability between 0 and 1 (exclusive), e.g. 1e-6",
                ));
            }
        }
        if self.streams == 0 {
            return Err(bad("streams", "0".into(), "use at least one stream"));
        }
        Ok(self)
    }

    /// Maximum segment size: the MTU less TCP/IPv4 headers with timestamps (1500 -> 1448).
    pub fn mss_bytes(&self) -> u32 {
        mss_for_mtu(self.mtu_bytes)
    }

    /// The round-trip time in seconds.
    pub fn rtt_secs(&self) -> f64 {
        self.rtt.as_secs_f64()
    }

    /// The rate in bytes per second.
    pub fn rate_bytes_per_sec(&self) -> f64 {
        self.rate_bps as f64 / 8.0
    }

    /// The rate each stream must carry: rate / streams.
    pub fn rate_per_stream_bps(&self) -> f64 {
        self.rate_bps as f64 / f64::from(self.streams.max(1))
    }

    /// Congestion window, in segments, that one stream needs to carry its share of the rate.
    pub fn window_segments_per_stream(&self) -> f64 {
        self.rate_per_stream_bps() * self.rtt_secs() / (8.0 * f64::from(self.mss_bytes()))
    }
}

/// Maximum segment size for an MTU: MTU - 52 (IPv4 20 + TCP 20 + timestamps 12).
pub fn mss_for_mtu(mtu_bytes: u32) -> u32 {
    mtu_bytes.saturating_sub(TCP_IPV4_TIMESTAMP_HEADER_BYTES)
}
