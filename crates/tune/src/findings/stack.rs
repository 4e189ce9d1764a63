//! The single-number sysctls of the network stack: TCP's on/off features and the per-CPU
//! backlog between the NIC and the stack.

use super::{absent, sysctl_change, Finding, Severity, Target};
use crate::facts::HostFacts;

pub(super) fn check_flag(
    facts: &HostFacts,
    key: &str,
    wanted: u64,
    severity_if_wrong: Severity,
    why: &str,
    out: &mut Vec<Finding>,
) {
    let Some(current) = facts.numbers(key).and_then(|n| n.first().copied()) else {
        out.push(absent(key, why));
        return;
    };
    // tcp_mtu_probing=2 (always probe) is also fine.
    let fine = current == wanted || (key == "net.ipv4.tcp_mtu_probing" && current == 2);
    let (severity, fix, change) = if fine {
        (Severity::Ok, None, None)
    } else {
        let (fix, change) = sysctl_change(key, wanted.to_string());
        (severity_if_wrong, fix, change)
    };
    out.push(Finding {
        key: key.into(),
        severity,
        current: current.to_string(),
        wanted: Some(wanted.to_string()),
        why: why.into(),
        fix,
        change,
    });
}

/// Packets a CPU may queue from the NIC before softirq processing drops them.
fn wanted_backlog(rate_bps: u64) -> u64 {
    match rate_bps {
        r if r >= 40_000_000_000 => 250_000,
        r if r >= 10_000_000_000 => 30_000,
        _ => 1000,
    }
}

pub(super) fn check_backlog(facts: &HostFacts, target: &Target, out: &mut Vec<Finding>) {
    let key = "net.core.netdev_max_backlog";
    let why = "packets queued per CPU between the NIC and the stack; a short queue drops \
               bursts at high rates before TCP sees them";
    let Some(current) = facts.numbers(key).and_then(|n| n.first().copied()) else {
        out.push(absent(key, why));
        return;
    };
    let wanted = wanted_backlog(target.rate_bps);
    let (severity, fix, change) = if current >= wanted {
        (Severity::Ok, None, None)
    } else {
        let (fix, change) = sysctl_change(key, wanted.to_string());
        (Severity::Info, fix, change)
    };
    out.push(Finding {
        key: key.into(),
        severity,
        current: current.to_string(),
        wanted: Some(format!(">= {wanted}")),
        why: why.into(),
        fix,
        change,
    });
}
