//! What a bench run reports, as serialisable values: the `start`, `interval` and `end`
//! objects of `--json` (schema in the README) and the figures the human output prints.

use serde::Serialize;

pub use crate::telemetry::crossed::RateSource;
pub use crate::telemetry::view::{IntervalView, StreamInterval, StreamSummary};
use longhaul_policy::LimitedBy;

/// Figures of one host's network stack.
#[derive(Debug, Clone, Serialize)]
pub struct HostView {
    /// net.core.wmem_max.
    pub wmem_max: u64,
    /// net.core.rmem_max.
    pub rmem_max: u64,
    /// Ceiling of send autotuning (tcp_wmem max).
    pub tcp_wmem_max: u64,
    /// Ceiling of receive autotuning (tcp_rmem max).
    pub tcp_rmem_max: u64,
    /// Whether the caps can be overridden (root).
    pub can_force_buffers: bool,
    /// Default congestion control.
    pub default_congestion: String,
}

impl From<&longhaul_proto::HostFacts> for HostView {
    fn from(f: &longhaul_proto::HostFacts) -> Self {
        Self {
            wmem_max: f.wmem_max,
            rmem_max: f.rmem_max,
            tcp_wmem_max: f.tcp_wmem_max,
            tcp_rmem_max: f.tcp_rmem_max,
            can_force_buffers: f.can_force_buffers,
            default_congestion: f.default_congestion.clone(),
        }
    }
}

/// The `start` object: what will run and how the window was chosen.
#[derive(Debug, Clone, Serialize)]
pub struct StartReport {
    /// Server address.
    pub server: String,
    /// Number of streams.
    pub streams: u16,
    /// `true` when the server sends (`--reverse`).
    pub reverse: bool,
    /// Duration of a timed run, seconds (null for `--bytes`).
    pub duration_seconds: Option<f64>,
    /// Bytes of a `--bytes` run.
    pub bytes: Option<u64>,
    /// Congestion control of the sender.
    pub congestion: String,
    /// RTT measured before the run (minimum of the control-connection pings), ms.
    pub rtt_ms: f64,
    /// Total pacing rate asked for, bit/s.
    pub rate_bps: Option<u64>,
    /// `auto` or `fixed`.
    pub window_mode: &'static str,
    /// Socket buffer (setsockopt value) the path needs per stream, bytes.
    pub window_needed_bytes: u64,
    /// What this end did with its buffer.
    pub local_buffer: String,
    /// Send buffer the server set per stream (0 = autotuning).
    pub server_sndbuf_bytes: u64,
    /// Receive buffer the server set per stream (0 = autotuning).
    pub server_rcvbuf_bytes: u64,
    /// How data is handed to the kernel.
    pub send_mode: &'static str,
    /// Receiver-side pacing rate in force, bit/s.
    pub rx_rate_bps: Option<u64>,
    /// This host.
    pub client_host: HostView,
    /// The server host.
    pub server_host: HostView,
    /// Warnings, each with its fix.
    pub warnings: Vec<String>,
    /// Jump-start: whether used, with what, or why not.
    pub jump_start: crate::jump::JumpReport,
}

/// One end's cost.
#[derive(Debug, Clone, Serialize)]
pub struct EndCost {
    /// CPU seconds (user + system) this end spent.
    pub cpu_seconds: f64,
    /// CPU seconds per gigabyte moved.
    pub cpu_seconds_per_gb: f64,
    /// CPU use as a share of one core over the run, percent.
    pub cpu_percent: f64,
}

impl Summary {
    /// The verdict of a run carried through ssh ([`crate::ssh::relay`]): this end's
    /// sockets reach only the relay on its loopback, so their counters say nothing of the
    /// path; the ssh connections set the pace.
    pub fn carried_through_ssh(&mut self) {
        (self.limited_by, self.limited_by_text, self.advice) = crate::telemetry::view::THROUGH_SSH;
    }
}

/// The `summary` of the `end` object.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Bytes the receiver read, all streams.
    pub bytes: u64,
    /// Seconds from the start to the last byte read.
    pub seconds: f64,
    /// `bytes * 8 / seconds`.
    pub bits_per_second: f64,
    /// Segments retransmitted, all streams.
    pub retransmits: u64,
    /// Verdict for the whole run.
    pub limited_by: LimitedBy,
    /// The verdict in words.
    pub limited_by_text: &'static str,
    /// What to do about it.
    pub advice: &'static str,
    /// Slowest stream's share of the fastest stream's bytes (1.0 = balanced).
    pub balance: f64,
    /// Rate the bottleneck probe held pacing to, bit/s (known when this end sends).
    pub held_rate_bps: Option<u64>,
    /// Congestion control the held run cruised on, if the probe switched it.
    pub cruise_congestion: Option<String>,
    /// Sending end's cost.
    pub sender: EndCost,
    /// Receiving end's cost.
    pub receiver: EndCost,
    /// Milliseconds from the command's start to this end's first data byte (sent when
    /// this end sends, received when it receives); see docs/startup.md.
    pub first_byte_ms: Option<f64>,
    /// [`Summary::first_byte_ms`] in round trips of the measured RTT.
    pub first_byte_rtts: Option<f64>,
    /// Round trips from the command's start to the dial of the data connections it used
    /// (about 0: with the control connection; 1: once its connect measured the RTT).
    pub data_dialed_rtts: Option<f64>,
}

/// The `end` object.
#[derive(Debug, Clone, Serialize)]
pub struct EndReport {
    /// Whole-run figures.
    pub summary: Summary,
    /// Per stream.
    pub streams: Vec<StreamSummary>,
    /// Jump-start, with the validation's verdict.
    pub jump_start: crate::jump::JumpReport,
    /// Whether the data was encrypted, and what the cipher allows per core here.
    pub data_protection: crate::transport::tls::record_speed::DataProtection,
}
