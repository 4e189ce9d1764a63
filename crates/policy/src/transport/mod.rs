//! The transport plan: from what the user asked (streams, `--rate`, `--window`, `-C`) and
//! what this end is (sender or receiver), everything one end of a `bench` or `cp` run
//! decides about its data sockets before it opens them: the buffer per stream and the
//! sysctl fix when the kernel caps it, the congestion control, whether the rate probe
//! runs, the pacing per stream, and whether the window is fixed.
//!
//! Both ends of both commands call [`plan_transport`]: the client with the user's
//! options, the server with the request it received ([`Window::requested`]). The rules:
//!
//! - `--window SIZE` is a fixed window: that buffer is set on every stream (forced past
//!   the sysctl cap when this process may), never left to autotuning, and the rate probe
//!   never runs (it would hold pacing below what the user asked the window to carry).
//! - `--window auto` sizes the buffer to 2 x the per-stream BDP of `--rate` (or of
//!   [`PROBE_CEILING_BPS`] when no rate was given) and keeps autotuning when its ceiling
//!   covers that.
//! - The sender paces each stream at `rate / streams` when a rate was given; with no rate,
//!   an auto window and an RTT of at least [`MIN_PROBE_RTT`] it runs the [`RateProbe`]
//!   instead (below 1 ms there is no queue worth protecting).
//! - The sender runs `-C` if the kernel has it (else an error naming what it has), or BBR
//!   when loaded, or the kernel's default. A receiver sets none: the sender's choice rules.

use std::time::Duration;

use longhaul_model::buffers::pacing_rate_per_stream_bps;

use crate::congestion::{check_congestion, default_congestion};
use crate::probe::RateProbe;
use crate::window::{needed_buffer, plan_buffer, BufferCaps, BufferChoice, Side};
use crate::{PolicyError, PROBE_CEILING_BPS};

/// Shortest RTT at which the rate probe runs: on a shorter path (loopback, a LAN) a
/// start-up overshoot drains at once and the probe's rounds would be noise.
pub const MIN_PROBE_RTT: Duration = Duration::from_millis(1);

/// Which way this end moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// This end writes.
    Sender,
    /// This end reads.
    Receiver,
}

impl Role {
    /// The socket buffer this end sizes: the send buffer of a sender, the receive buffer
    /// of a receiver.
    pub fn side(self) -> Side {
        match self {
            Role::Sender => Side::Send,
            Role::Receiver => Side::Receive,
        }
    }
}

/// The window the user asked for, as the end that plans sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// `--window auto` at the end that sizes it (the client): from the rate and the RTT.
    Auto,
    /// `--window auto` as the peer sized it (a server receiving the request): this many
    /// bytes per stream; autotuning may still cover it and the probe may run.
    AutoSized(u64),
    /// `--window SIZE`: exactly this buffer per stream, set on every socket, never probed.
    Fixed(u64),
}

impl Window {
    /// The window of a request received from a peer: `bytes` per stream, fixed or not.
    /// A server builds its plan from this, so a request's fixed flag cannot be dropped.
    pub fn requested(bytes: u64, fixed: bool) -> Self {
        if fixed {
            Window::Fixed(bytes)
        } else {
            Window::AutoSized(bytes)
        }
    }

    /// Whether the user fixed the window.
    pub fn is_fixed(self) -> bool {
        matches!(self, Window::Fixed(_))
    }
}

/// What the user asked of the transport, at one end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportRequest {
    /// Whether this end sends or receives the data.
    pub role: Role,
    /// Parallel data streams (0 counts as 1).
    pub streams: u16,
    /// Total pacing rate `--rate`, bit/s (`None`: not given).
    pub rate_bps: Option<u64>,
    /// `--window`.
    pub window: Window,
    /// `-C`: the sender's congestion control (`None`: not given).
    pub congestion: Option<String>,
}

/// The congestion controls this host's kernel offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Congestion {
    /// `net.ipv4.tcp_available_congestion_control`.
    pub available: Vec<String>,
    /// `net.ipv4.tcp_congestion_control`.
    pub default: String,
}

/// Everything one end decided about its data sockets.
#[derive(Debug, Clone)]
pub struct TransportPlan {
    /// Whether this end sends or receives.
    pub role: Role,
    /// The buffer this end sizes ([`Role::side`]).
    pub side: Side,
    /// Socket buffer per stream the path needs (the request's `window_bytes`).
    pub window_bytes: u64,
    /// Whether the user fixed the window (the request's `window_fixed`).
    pub window_fixed: bool,
    /// What to do with each data socket's buffer on this end.
    pub buffer: BufferChoice,
    /// What the user should know (a capped buffer, with the sysctl that lifts the cap).
    pub warnings: Vec<String>,
    /// Congestion control to set on each data socket: the sender's, checked against the
    /// kernel; `None` at a receiver.
    pub congestion: Option<String>,
    /// The rate probe the sender runs (auto window, no rate, RTT >= [`MIN_PROBE_RTT`]).
    pub probe: Option<RateProbe>,
    /// Pacing cap of each stream at the sender, bit/s: `rate / streams`.
    pub pacing_bps: Option<u64>,
}

impl TransportPlan {
    /// The warning for the peer's end, given the caps it reported (a client learns the
    /// server's from its `BenchReady`); `None` when its buffer is not capped.
    pub fn peer_warning(&self, peer: &BufferCaps) -> Option<String> {
        let side = match self.side {
            Side::Send => Side::Receive,
            Side::Receive => Side::Send,
        };
        match plan_buffer(side, self.window_bytes, self.window_fixed, peer) {
            BufferChoice::Capped { bytes, needed, fix } => Some(format!(
                "the server caps its {} buffer at {bytes} bytes but the path needs {needed} per stream; \
                 run `longhaul serve` as root or on the server: {fix}",
                side_name(side)
            )),
            _ => None,
        }
    }
}

/// Plans one end's transport for a path of round-trip time `rtt`, on a host with buffer
/// caps `local` and congestion controls `local_congestion`; with `peer`, the plan's
/// warnings also cover the peer's buffer (see [`TransportPlan::peer_warning`]).
///
/// Fails only when this end sends and `-C` names a congestion control the kernel lacks.
pub fn plan_transport(
    req: &TransportRequest,
    rtt: Duration,
    local: &BufferCaps,
    local_congestion: &Congestion,
    peer: Option<&BufferCaps>,
) -> Result<TransportPlan, PolicyError> {
    let sender = req.role == Role::Sender;
    let congestion = match (&req.congestion, sender) {
        (_, false) => None,
        (Some(cc), true) => {
            check_congestion(cc, &local_congestion.available)?;
            Some(cc.clone())
        }
        (None, true) => Some(default_congestion(
            &local_congestion.available,
            &local_congestion.default,
        )),
    };
    let window_bytes = match req.window {
        Window::Auto => needed_buffer(req.rate_bps.unwrap_or(PROBE_CEILING_BPS), rtt, req.streams),
        Window::AutoSized(bytes) | Window::Fixed(bytes) => bytes,
    };
    let window_fixed = req.window.is_fixed();
    let side = req.role.side();
    let buffer = plan_buffer(side, window_bytes, window_fixed, local);
    let mut warnings = Vec::new();
    if let BufferChoice::Capped { bytes, needed, fix } = &buffer {
        warnings.push(format!(
            "this host caps the {} buffer at {bytes} bytes but the path needs {needed} per stream; \
             run as root (longhaul then overrides the cap) or: {fix}",
            side_name(side)
        ));
    }
    let probe = match &congestion {
        Some(cc) if !window_fixed && req.rate_bps.is_none() && rtt >= MIN_PROBE_RTT => {
            Some(RateProbe::new(rtt, cc != "bbr"))
        }
        _ => None,
    };
    let pacing_bps = req
        .rate_bps
        .filter(|_| sender)
        .map(|rate| pacing_rate_per_stream_bps(rate, u32::from(req.streams)));
    let mut plan = TransportPlan {
        role: req.role,
        side,
        window_bytes,
        window_fixed,
        buffer,
        warnings,
        congestion,
        probe,
        pacing_bps,
    };
    if let Some(w) = peer.and_then(|p| plan.peer_warning(p)) {
        plan.warnings.push(w);
    }
    Ok(plan)
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::Send => "send",
        Side::Receive => "receive",
    }
}

#[cfg(test)]
mod tests;

/// Streams for a path when the user gave no count: 2 on a LAN (under 2 ms), else one per
/// 14 ms of RTT rounded up to a power of two, from 4 to 64.
///
/// On a long path the start-up, not the steady state, decides a transfer: every stream
/// starts with the kernel's initial window (10 segments) and at most doubles it per round
/// trip, so N streams reach the bottleneck log2(N) round trips sooner than one. The held
/// rate is shared by all streams (see [`crate::probe`]), so many streams build no more
/// queue than one. But each stream paced at a small share sends small packets (the
/// kernel sizes them to a millisecond of the stream's pacing rate), which costs both
/// hosts and any forwarder per packet: at 1 Gbit/s x 150 ms, MTU 1500, through the
/// emulator, first runs on 32 streams held 0.70-0.72 of the path and on 16 streams
/// 0.86-0.88; at 436 ms, 32 and 64 streams did the same (0.55-0.57 at MTU 1500 in 12 s,
/// 0.86-0.87 at MTU 4470 in 20 s). It was one per 7 ms until then.
pub fn streams_for_path(rtt: Duration) -> u16 {
    if rtt < Duration::from_millis(2) {
        return 2;
    }
    let per_14ms = rtt.as_micros().div_ceil(14_000).max(1) as u16;
    per_14ms.next_power_of_two().clamp(4, MAX_PATH_STREAMS)
}

/// The most streams [`streams_for_path`] chooses (a path of more than 448 ms).
pub const MAX_PATH_STREAMS: u16 = 64;

/// Below this RTT a warm-up run is not worth its bytes: the file list's answer is back
/// before a round of slow start would matter.
pub const MIN_WARMUP_RTT: Duration = Duration::from_millis(5);

/// Bytes of a data stream's warm-up run: what fills its congestion window now (`cwnd`
/// segments of `mss` bytes, `unacked` of them in flight), less an eighth for TLS records'
/// framing, so the run goes in one flight and its acks double the window (slow start)
/// before the first chunk leaves. 0 under [`MIN_WARMUP_RTT`], or with nothing to fill.
pub fn warmup_bytes(rtt: Duration, cwnd: u32, mss: u32, unacked: u32) -> u32 {
    if rtt < MIN_WARMUP_RTT || mss == 0 {
        return 0;
    }
    let free = u64::from(cwnd.saturating_sub(unacked)) * u64::from(mss);
    (free - free / 8).min(u64::from(u32::MAX)) as u32
}
