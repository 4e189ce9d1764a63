//! The defaults of an emulated path: what `longhaul emulate up` uses for an option not
//! given, and what `longhaul demo` builds its paths from. One place, so the two commands
//! and [`super::EmulatorConfig::symmetric`] cannot drift apart.

use std::time::Duration;

use longhaul_linkem::{BufferSpec, QueueLimit};

/// Defaults of an emulated path ([`PathDefaults::DEFAULT`], also `PathDefaults::default()`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathDefaults {
    /// Round-trip time (each direction gets half as one-way delay): 0, a LAN.
    pub rtt: Duration,
    /// Bottleneck buffer with a rate limit, in bandwidth-delay products: 1 BDP, the classic
    /// rule of thumb for one long-lived flow. Without a rate the buffer is unlimited.
    pub buffer_bdp: f64,
    /// Smallest default buffer, in full-size packets (MTU bytes each): 64, so that a path
    /// with a small or zero RTT still has a queue.
    pub min_buffer_packets: u32,
    /// Interface MTU at both ends, bytes: 1500, Ethernet.
    pub mtu_bytes: u32,
    /// Transmit queue length of the TUN interfaces, packets: 10 000, so bursts of a fast
    /// sender wait for the emulator instead of being dropped by the kernel.
    pub txqueuelen: u32,
    /// Use TUN offloads (TSO/USO super-packets): on.
    pub offload: bool,
    /// Run the packet loops at real-time (SCHED_FIFO) priority: on.
    pub realtime: bool,
    /// Longest burst written at once with a rate limit, in bottleneck time: 100 us.
    pub max_burst: Duration,
    /// How long a reordered packet is held back: 1 ms.
    pub reorder_delay: Duration,
    /// Seed of the model's random choices: 1.
    pub seed: u64,
    /// Most bytes each direction's delay line may hold: 4 GiB (32 Gbit/s x 1 s).
    pub max_held_bytes: u64,
}

impl PathDefaults {
    /// The defaults.
    pub const DEFAULT: PathDefaults = PathDefaults {
        rtt: Duration::ZERO,
        buffer_bdp: 1.0,
        min_buffer_packets: 64,
        mtu_bytes: 1500,
        txqueuelen: 10_000,
        offload: true,
        realtime: true,
        max_burst: Duration::from_micros(100),
        reorder_delay: Duration::from_millis(1),
        seed: 1,
        max_held_bytes: 4 << 30,
    };

    /// The default bottleneck buffer of a link of `rate_bps` (None: unlimited) with round
    /// trip `rtt` and `mtu_bytes` packets: [`Self::buffer_bdp`] BDPs, at least
    /// [`Self::min_buffer_packets`] packets; unlimited without a rate.
    pub fn queue(&self, rate_bps: Option<u64>, rtt: Duration, mtu_bytes: u32) -> QueueLimit {
        match BufferSpec::Bdp(self.buffer_bdp).resolve(rate_bps, rtt) {
            Ok(QueueLimit::Bytes(bytes)) => {
                QueueLimit::Bytes(bytes.max(self.min_buffer_bytes(mtu_bytes)))
            }
            // Only a missing rate makes a BDP-relative buffer fail: no rate, no queue limit.
            _ => QueueLimit::Unlimited,
        }
    }

    /// The default buffer in bytes for a path whose BDP is `bdp_bytes`.
    pub fn buffer_bytes(&self, bdp_bytes: u64, mtu_bytes: u32) -> u64 {
        ((self.buffer_bdp * bdp_bytes as f64).ceil() as u64).max(self.min_buffer_bytes(mtu_bytes))
    }

    /// [`Self::min_buffer_packets`] packets of `mtu_bytes`, in bytes.
    pub fn min_buffer_bytes(&self, mtu_bytes: u32) -> u64 {
        u64::from(self.min_buffer_packets) * u64::from(mtu_bytes)
    }
}

impl Default for PathDefaults {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_buffer_is_one_bdp_but_at_least_64_packets() {
        let d = PathDefaults::default();
        // 1 Gbit/s x 200 ms = 25 MB.
        assert_eq!(
            d.queue(Some(1_000_000_000), Duration::from_millis(200), 1500),
            QueueLimit::Bytes(25_000_000)
        );
        // Zero RTT: the floor.
        assert_eq!(
            d.queue(Some(1_000_000_000), Duration::ZERO, 9000),
            QueueLimit::Bytes(64 * 9000)
        );
        assert_eq!(
            d.queue(None, Duration::from_millis(200), 1500),
            QueueLimit::Unlimited
        );
        assert_eq!(d.buffer_bytes(25_000_000, 1500), 25_000_000);
        assert_eq!(d.buffer_bytes(1000, 1500), 96_000);
    }

    #[test]
    fn defaults_are_the_documented_values() {
        let d = PathDefaults::default();
        assert_eq!(d, PathDefaults::DEFAULT);
        assert_eq!(d.mtu_bytes, 1500);
        assert_eq!(d.txqueuelen, 10_000);
        assert_eq!(d.max_burst, Duration::from_micros(100));
        assert_eq!(d.reorder_delay, Duration::from_millis(1));
        assert_eq!(d.rtt, Duration::ZERO);
        assert_eq!(d.seed, 1);
        assert!(d.offload && d.realtime);
        assert_eq!(d.max_held_bytes, 4 << 30);
    }
}
