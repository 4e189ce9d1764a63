//! The buffer checks: the caps on a socket's own buffer (`rmem_max`, `wmem_max`), the bounds
//! of TCP's buffer autotuning (`tcp_rmem`, `tcp_wmem`) and the memory of all TCP sockets
//! together (`tcp_mem`), each against 2 x BDP of the path.

use super::{absent, sysctl_change, Finding, Severity, Target};
use crate::facts::HostFacts;
use longhaul_model::units::{format_bytes, format_rate_bps};

pub(super) fn check_core_max(
    facts: &HostFacts,
    target: &Target,
    buffer: u64,
    key: &str,
    option: &str,
    out: &mut Vec<Finding>,
) {
    let why_base = format!(
        "caps {option}: an application that sets its own buffer (iperf3 -w, longhaul) gets at \
         most this; {} needs {} (2 x BDP)",
        target.describe(),
        format_bytes(buffer as f64)
    );
    let Some(current) = facts.numbers(key).and_then(|n| n.first().copied()) else {
        out.push(absent(key, &why_base));
        return;
    };
    let (severity, fix, change) = if current >= buffer {
        (Severity::Ok, None, None)
    } else {
        let (fix, change) = sysctl_change(key, buffer.to_string());
        (Severity::Warning, fix, change)
    };
    out.push(Finding {
        key: key.into(),
        severity,
        current: current.to_string(),
        wanted: Some(format!(">= {buffer}")),
        why: format!("{why_base}; now {}", format_bytes(current as f64)),
        fix,
        change,
    });
}

pub(super) fn check_tcp_mem_triplet(
    facts: &HostFacts,
    target: &Target,
    buffer: u64,
    key: &str,
    direction: &str,
    out: &mut Vec<Finding>,
) {
    let Some(n) = facts.numbers(key).filter(|n| n.len() == 3) else {
        out.push(absent(key, "bounds TCP buffer autotuning"));
        return;
    };
    let max = n[2];
    let window_limited = max as f64 * 8.0 / target.rtt.as_secs_f64();
    let why = format!(
        "the {direction} buffer autotuning may grow to is {}: one stream then carries at most \
         about {} at this RTT; {} needs {} (2 x BDP)",
        format_bytes(max as f64),
        format_rate_bps(window_limited),
        target.describe(),
        format_bytes(buffer as f64)
    );
    let (severity, fix, change) = if max >= buffer {
        (Severity::Ok, None, None)
    } else {
        let (fix, change) = sysctl_change(key, format!("{} {} {}", n[0], n[1], buffer));
        (Severity::Critical, fix, change)
    };
    out.push(Finding {
        key: key.into(),
        severity,
        current: format!("{} {} {}", n[0], n[1], n[2]),
        wanted: Some(format!("max >= {buffer}")),
        why,
        fix,
        change,
    });
}

pub(super) fn check_tcp_mem(facts: &HostFacts, buffer: u64, out: &mut Vec<Finding>) {
    let key = "net.ipv4.tcp_mem";
    let Some(n) = facts.numbers(key).filter(|n| n.len() == 3) else {
        out.push(absent(key, "limits the memory of all TCP sockets together"));
        return;
    };
    let page = facts.page_size_bytes.max(1);
    // A sender and a receiver on one host (tests, demos) each need a full buffer.
    let wanted_pages = (2 * buffer).div_ceil(page);
    let (severity, fix, change) = if n[2] >= wanted_pages && n[1] >= wanted_pages {
        (Severity::Ok, None, None)
    } else {
        let value = format!(
            "{} {} {}",
            n[0],
            n[1].max(wanted_pages),
            n[2].max(2 * wanted_pages)
        );
        let (fix, change) = sysctl_change(key, value);
        let severity = if n[2] < wanted_pages {
            Severity::Critical
        } else {
            Severity::Warning
        };
        (severity, fix, change)
    };
    out.push(Finding {
        key: key.into(),
        severity,
        current: format!("{} {} {}", n[0], n[1], n[2]),
        wanted: Some(format!("pressure and max >= {wanted_pages} pages")),
        why: format!(
            "all TCP sockets together may use {} before the kernel squeezes buffers (pressure) \
             and {} at most; a sender and a receiver of this path need {}",
            format_bytes((n[1] * page) as f64),
            format_bytes((n[2] * page) as f64),
            format_bytes((2 * buffer) as f64)
        ),
        fix,
        change,
    });
}
