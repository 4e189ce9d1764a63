//! What an interval and a whole run look like to a person or a JSON reader, from one
//! end's samples: per stream and in all, the rate of the bytes that crossed the path and
//! what limited each stream; and the verdict of a run carried through ssh, whose sockets
//! say nothing of the path. Shared by bench and cp.

use longhaul_policy::{judge, LimitedBy};
use serde::Serialize;

use super::crossed::RateSource;
use super::Sampled;

/// One stream's figures in an interval (the sender's TCP_INFO).
#[derive(Debug, Clone, Serialize)]
pub struct StreamInterval {
    /// Stream index.
    pub id: u16,
    /// Payload bytes in the interval: at a sender those that crossed the path (as
    /// `crossed_bytes`), at a receiver those the application read.
    pub bytes: u64,
    /// Payload bytes that crossed the path in the interval, counted as `rate_source` says.
    pub crossed_bytes: u64,
    /// Bit rate over the interval, of `crossed_bytes`.
    pub bits_per_second: f64,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Smoothed RTT, ms.
    pub rtt_ms: f64,
    /// Segments retransmitted in the interval.
    pub retransmits: u32,
    /// Kernel's delivery-rate sample, bit/s.
    pub delivery_rate_bps: u64,
    /// Kernel's pacing rate, bit/s.
    pub pacing_rate_bps: u64,
    /// What limited the stream in the interval.
    pub limited_by: LimitedBy,
}

/// The `interval` object.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalView {
    /// Start of the interval, seconds since the run began.
    pub start: f64,
    /// End of the interval.
    pub end: f64,
    /// Per stream.
    pub streams: Vec<StreamInterval>,
    /// Bytes of all streams (as a stream's `bytes`).
    pub bytes: u64,
    /// Bytes that crossed the path, all streams.
    pub crossed_bytes: u64,
    /// Which count `crossed_bytes` and the rates come from: `delivered` (the sender's
    /// kernel: acknowledged cumulatively or selectively) or `arrived` (the receiver's
    /// kernel: in order, or held behind a hole).
    pub rate_source: RateSource,
    /// Bit rate of all streams, of `crossed_bytes`.
    pub bits_per_second: f64,
    /// Retransmits of all streams.
    pub retransmits: u32,
    /// Pacing rate held after the bottleneck probe, bit/s, once found.
    pub held_rate_bps: Option<u64>,
}

/// One stream over the whole run.
#[derive(Debug, Clone, Serialize)]
pub struct StreamSummary {
    /// Stream index.
    pub id: u16,
    /// Bytes the receiver read.
    pub bytes: u64,
    /// Receiver's bit rate.
    pub bits_per_second: f64,
    /// Retransmits (sender).
    pub retransmits: u64,
    /// Smallest RTT (sender), ms.
    pub min_rtt_ms: f64,
    /// Final congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Verdict for the stream.
    pub limited_by: LimitedBy,
}

/// The verdict of a run or copy carried through ssh: this end's sockets reach only the
/// relay on its loopback, so their counters say nothing of the path.
pub const THROUGH_SSH: (longhaul_policy::LimitedBy, &str, &str) = (
    longhaul_policy::LimitedBy::Unknown,
    "the ssh connections carrying the streams",
    "each stream is held to one ssh channel's window (2 MiB per round trip with OpenSSH) \
     and pays ssh's cipher; open the far longhaul's port (or name an open --port-range) \
     for the path's own rate",
);

/// Turns one end's interval samples into the printed view; rates are of the bytes that
/// crossed the path.
pub fn view(sampled: &Sampled, rate_bps: Option<u64>, held: Option<u64>) -> IntervalView {
    let r = &sampled.report;
    let secs = (sampled.crossed_ms as f64 / 1e3).max(1e-3);
    let n = r.streams.len().max(1) as f64;
    let streams: Vec<StreamInterval> = r
        .streams
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let crossed = sampled.crossed.get(i).copied().unwrap_or(s.bytes);
            let bps = crossed as f64 * 8.0 / secs;
            let paced = rate_bps.map(|rate| bps / (rate as f64 / n));
            StreamInterval {
                id: s.stream,
                bytes: s.bytes,
                crossed_bytes: crossed,
                bits_per_second: bps,
                cwnd_bytes: s.cwnd_bytes,
                rtt_ms: s.srtt_us as f64 / 1e3,
                retransmits: s.retransmits,
                delivery_rate_bps: s.delivery_rate_bps,
                pacing_rate_bps: s.pacing_rate_bps,
                limited_by: judge(
                    longhaul_policy::Chrono {
                        elapsed_us: r.end_ms.saturating_sub(r.start_ms) * 1000,
                        busy_us: s.busy_us,
                        rwnd_limited_us: s.rwnd_limited_us,
                        sndbuf_limited_us: s.sndbuf_limited_us,
                    },
                    paced,
                ),
            }
        })
        .collect();
    let bytes = streams.iter().map(|s| s.bytes).sum::<u64>();
    let crossed = streams.iter().map(|s| s.crossed_bytes).sum::<u64>();
    IntervalView {
        start: r.start_ms as f64 / 1e3,
        end: r.end_ms as f64 / 1e3,
        bits_per_second: crossed as f64 * 8.0 / secs,
        retransmits: streams.iter().map(|s| s.retransmits).sum(),
        bytes,
        crossed_bytes: crossed,
        rate_source: sampled.source,
        streams,
        held_rate_bps: held,
    }
}
