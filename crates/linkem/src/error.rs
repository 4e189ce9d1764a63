//! The crate's error type: what was wrong with a configuration or a spec, with the value.

use thiserror::Error;

/// Everything that can go wrong when building or parsing a link configuration.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LinkemError {
    /// A probability was outside [0, 1] or not a number.
    #[error("{what} = {value} is not a probability: give a value in [0, 1] (e.g. 1e-4) or a percentage (e.g. 0.01%)")]
    Probability {
        /// Which parameter.
        what: &'static str,
        /// The offending value, as given.
        value: String,
    },
    /// A rate of zero bits per second.
    #[error(
        "rate 0 bit/s cannot carry a packet: give a positive rate, or none for an unlimited link"
    )]
    ZeroRate,
    /// A rate above what the model supports.
    #[error("rate {rate_bps} bit/s is above the supported maximum of {max_bps} bit/s")]
    RateTooHigh {
        /// The requested rate.
        rate_bps: u64,
        /// The largest accepted rate.
        max_bps: u64,
    },
    /// A delay or jitter outside what the model supports.
    #[error("{what} {value_ns} ns is above the supported maximum of {max_ns} ns")]
    DurationTooLong {
        /// Which parameter.
        what: &'static str,
        /// The requested duration in nanoseconds.
        value_ns: u128,
        /// The largest accepted duration in nanoseconds.
        max_ns: u128,
    },
    /// The bottleneck buffer cannot hold even one packet of the link's MTU.
    #[error("buffer of {limit} cannot hold one {mtu_bytes}-byte packet: make it at least one MTU (e.g. {mtu_bytes}B or 1pkt)")]
    BufferBelowMtu {
        /// The buffer as configured, human readable.
        limit: String,
        /// The MTU it was checked against.
        mtu_bytes: u32,
    },
    /// A loss spec that is neither a probability nor `ge:P,R[,H[,K]]`.
    #[error("loss spec {spec:?} not understood: {reason}; give a probability (1e-4, 0.01%) or ge:P,R,H,K (Gilbert-Elliott: P = P(good->bad), R = P(bad->good), H = loss in bad, K = loss in good)")]
    LossSpec {
        /// The spec as given.
        spec: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A buffer spec that is neither a size, a multiple of the BDP nor a packet count.
    #[error("buffer spec {spec:?} not understood: {reason}; give a size (25MB, 64MiB, 150000B), a multiple of the bandwidth-delay product (1bdp, 0.5bdp) or a packet count (500pkt)")]
    BufferSpec {
        /// The spec as given.
        spec: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A BDP-relative buffer on a link without a rate limit.
    #[error("buffer {spec:?} is relative to the bandwidth-delay product, but the link has no rate: give --rate, or size the buffer in bytes or packets")]
    BdpWithoutRate {
        /// The spec as given.
        spec: String,
    },
}
