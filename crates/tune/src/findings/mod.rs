//! The checks: each sysctl and interface setting that limits a long fat path, judged against
//! the path to serve, with why it matters and the command that fixes it.

mod buffers;
mod congestion;
mod hardware;
mod stack;
#[cfg(test)]
mod tests;

use crate::facts::HostFacts;
use buffers::{check_core_max, check_tcp_mem, check_tcp_mem_triplet};
use congestion::{check_congestion_control, check_qdisc};
use hardware::{check_governor, check_interface};
use longhaul_model::buffers::{bdp_bytes, socket_buffer_bytes};
use longhaul_model::units::{format_rate_bps, format_seconds};
use stack::{check_backlog, check_flag};
use std::time::Duration;

/// Largest socket buffer Linux accepts in `tcp_rmem`/`tcp_wmem`/`rmem_max` (INT_MAX).
pub const SOCKET_BUFFER_LIMIT_BYTES: u64 = i32::MAX as u64;

/// The path the host must serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Rate one stream must reach, bit/s.
    pub rate_bps: u64,
    /// Round-trip time of the path.
    pub rtt: Duration,
}

impl Target {
    /// Bandwidth-delay product in bytes.
    pub fn bdp_bytes(&self) -> u64 {
        bdp_bytes(self.rate_bps, self.rtt)
    }

    /// Socket buffer one stream needs (2 x BDP), capped at what Linux accepts.
    pub fn socket_buffer_bytes(&self) -> u64 {
        socket_buffer_bytes(self.rate_bps, self.rtt).min(SOCKET_BUFFER_LIMIT_BYTES)
    }

    fn describe(&self) -> String {
        format!(
            "{} at {} RTT",
            format_rate_bps(self.rate_bps as f64),
            format_seconds(self.rtt.as_secs_f64())
        )
    }
}

/// How much a finding matters for the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Fine as it is.
    Ok,
    /// Worth knowing; may help.
    Info,
    /// Costs throughput on this path in some cases.
    Warning,
    /// Keeps this path from reaching its rate.
    Critical,
}

impl Severity {
    /// Lower-case name, as printed and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// A sysctl value `--apply` would write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlChange {
    /// Sysctl name, e.g. `net.ipv4.tcp_rmem`.
    pub name: String,
    /// New value, e.g. `4096 131072 45000000`.
    pub value: String,
}

/// One thing checked on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked: a sysctl name, `interface.mtu`, `cpu.governor`, ...
    pub key: String,
    /// How much it matters for the path.
    pub severity: Severity,
    /// The value found (`"absent"` when not visible).
    pub current: String,
    /// The value the path wants, when there is one.
    pub wanted: Option<String>,
    /// Why it matters for this path.
    pub why: String,
    /// The exact command that fixes it, when it needs fixing.
    pub fix: Option<String>,
    /// The sysctl change `--apply` makes for it, if any.
    pub change: Option<SysctlChange>,
}

/// Judges the host against the path: one finding per check, in a stable order.
pub fn inspect(facts: &HostFacts, target: &Target) -> Vec<Finding> {
    let mut out = Vec::new();
    let buffer = target.socket_buffer_bytes();
    check_core_max(
        facts,
        target,
        buffer,
        "net.core.rmem_max",
        "SO_RCVBUF",
        &mut out,
    );
    check_core_max(
        facts,
        target,
        buffer,
        "net.core.wmem_max",
        "SO_SNDBUF",
        &mut out,
    );
    check_tcp_mem_triplet(
        facts,
        target,
        buffer,
        "net.ipv4.tcp_rmem",
        "receive",
        &mut out,
    );
    check_tcp_mem_triplet(facts, target, buffer, "net.ipv4.tcp_wmem", "send", &mut out);
    check_tcp_mem(facts, buffer, &mut out);
    check_congestion_control(facts, &mut out);
    check_qdisc(facts, &mut out);
    check_flag(
        facts,
        "net.ipv4.tcp_no_metrics_save",
        1,
        Severity::Warning,
        "a new connection inherits the slow-start threshold of an earlier one to the same \
         host, so one loss in a past run caps the next run's slow start far below the BDP",
        &mut out,
    );
    check_flag(
        facts,
        "net.ipv4.tcp_mtu_probing",
        1,
        Severity::Info,
        "if a hop drops large packets without an ICMP message (a black hole), the connection \
         stalls; probing lowers the segment size after a black hole is detected",
        &mut out,
    );
    check_flag(
        facts,
        "net.ipv4.tcp_window_scaling",
        1,
        Severity::Critical,
        "without window scaling the window is at most 64 KiB: a few Mbit/s at long RTTs",
        &mut out,
    );
    check_flag(
        facts,
        "net.ipv4.tcp_timestamps",
        1,
        Severity::Warning,
        "timestamps give an RTT sample per ACK and protect against wrapped sequence numbers \
         (PAWS) at high rates",
        &mut out,
    );
    check_flag(
        facts,
        "net.ipv4.tcp_sack",
        1,
        Severity::Warning,
        "without selective ACKs a loss of several packets in one window costs one RTT each",
        &mut out,
    );
    check_flag(
        facts,
        "net.ipv4.tcp_slow_start_after_idle",
        0,
        Severity::Info,
        "after an idle RTO the window collapses to the initial window and must slow-start \
         again: bad for transfers that pause between chunks",
        &mut out,
    );
    check_backlog(facts, target, &mut out);
    check_interface(facts, target, &mut out);
    check_governor(facts, &mut out);
    out
}

fn absent(key: &str, why: &str) -> Finding {
    Finding {
        key: key.to_string(),
        severity: Severity::Info,
        current: "absent".into(),
        wanted: None,
        why: format!(
            "not visible in this network namespace (a global setting, or not in this kernel); \
             check it in the host namespace. {why}"
        ),
        fix: None,
        change: None,
    }
}

fn sysctl_change(name: &str, value: String) -> (Option<String>, Option<SysctlChange>) {
    (
        Some(format!("sysctl -w {name}=\"{value}\"")),
        Some(SysctlChange {
            name: name.to_string(),
            value,
        }),
    )
}
