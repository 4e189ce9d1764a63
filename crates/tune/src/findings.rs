//! The checks: each sysctl and interface setting that limits a long fat path, judged against
//! the path to serve, with why it matters and the command that fixes it.

use crate::facts::HostFacts;
use longhaul_model::buffers::{bdp_bytes, socket_buffer_bytes};
use longhaul_model::units::{format_bytes, format_rate_bps, format_seconds};
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

fn check_core_max(
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

fn check_tcp_mem_triplet(
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

fn check_tcp_mem(facts: &HostFacts, buffer: u64, out: &mut Vec<Finding>) {
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

fn check_congestion_control(facts: &HostFacts, out: &mut Vec<Finding>) {
    let key = "net.ipv4.tcp_congestion_control";
    let available: Vec<&str> = facts
        .get("net.ipv4.tcp_available_congestion_control")
        .map(|v| v.split_whitespace().collect())
        .unwrap_or_default();
    let has_bbr = available.contains(&"bbr");
    let Some(current) = facts.get(key) else {
        out.push(absent(key, "the default congestion control"));
        return;
    };
    let best = if has_bbr { "bbr" } else { "cubic" };
    let (severity, why, fix, change) = match current {
        "bbr" => (
            Severity::Ok,
            "BBR paces itself and does not treat every random loss as congestion".to_string(),
            None,
            None,
        ),
        "reno" => {
            let (fix, change) = sysctl_change(key, best.to_string());
            (
                Severity::Warning,
                "Reno regains one segment per RTT after a loss: hours on a long fat path"
                    .to_string(),
                fix,
                change,
            )
        }
        other => (
            Severity::Info,
            if has_bbr {
                format!(
                    "{other} is loss-based: a random loss rate above its tolerance caps the \
                     rate; bbr is available (longhaul can also pick it per socket)"
                )
            } else {
                format!("{other} is loss-based; bbr is not loaded (modprobe tcp_bbr)")
            },
            has_bbr.then(|| format!("sysctl -w {key}=bbr")),
            None,
        ),
    };
    out.push(Finding {
        key: key.into(),
        severity,
        current: current.into(),
        wanted: Some(best.into()),
        why,
        fix,
        change,
    });
    if !has_bbr {
        out.push(Finding {
            key: "net.ipv4.tcp_available_congestion_control".into(),
            severity: Severity::Info,
            current: available.join(" "),
            wanted: Some("includes bbr".into()),
            why: "BBR tolerates random loss and paces inside TCP".into(),
            fix: Some("modprobe tcp_bbr".into()),
            change: None,
        });
    }
}

fn check_qdisc(facts: &HostFacts, out: &mut Vec<Finding>) {
    let key = "net.core.default_qdisc";
    let Some(current) = facts.get(key) else {
        out.push(absent(key, "fq paces every flow"));
        return;
    };
    let bbr = facts.get("net.ipv4.tcp_congestion_control") == Some("bbr");
    let (severity, why, fix) = if current == "fq" {
        (
            Severity::Ok,
            "fq paces every flow at its pacing rate".to_string(),
            None,
        )
    } else if bbr {
        (
            Severity::Ok,
            format!(
                "{current} does not pace, but BBR paces inside TCP (since Linux 4.13), as does \
                 any socket with SO_MAX_PACING_RATE"
            ),
            None,
        )
    } else {
        (
            Severity::Info,
            format!(
                "{current} does not pace: slow-start bursts can overflow small switch buffers; \
                 TCP paces by itself only with BBR or SO_MAX_PACING_RATE (longhaul sets it)"
            ),
            Some(format!(
                "sysctl -w {key}=fq   # if the sch_fq module exists"
            )),
        )
    };
    out.push(Finding {
        key: key.into(),
        severity,
        current: current.into(),
        wanted: None,
        why,
        fix,
        change: None,
    });
}

fn check_flag(
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

fn check_backlog(facts: &HostFacts, target: &Target, out: &mut Vec<Finding>) {
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

fn check_interface(facts: &HostFacts, target: &Target, out: &mut Vec<Finding>) {
    let Some(dev) = &facts.interface else {
        out.push(Finding {
            key: "interface".into(),
            severity: Severity::Info,
            current: "unknown".into(),
            wanted: None,
            why: "no route to the peer and no default route: MTU, txqueuelen and offloads \
                  not checked (name one with --dev)"
                .into(),
            fix: None,
            change: None,
        });
        return;
    };
    let name = &dev.name;
    let jumbo = dev.mtu_bytes >= 9000;
    out.push(Finding {
        key: format!("interface.{name}.mtu"),
        severity: if jumbo { Severity::Ok } else { Severity::Info },
        current: dev.mtu_bytes.to_string(),
        wanted: Some("9000 where every hop carries jumbo frames".into()),
        why: "after a loss Reno-like TCP regains the rate 6x faster with 9000-byte frames, \
              and the CPU handles 6x fewer packets"
            .into(),
        fix: (!jumbo).then(|| {
            format!("ip link set dev {name} mtu 9000   # only if the whole path carries it")
        }),
        change: None,
    });
    let wanted_txq: u32 = if target.rate_bps >= 10_000_000_000 {
        10_000
    } else {
        1000
    };
    let short = dev.txqueuelen < wanted_txq;
    out.push(Finding {
        key: format!("interface.{name}.txqueuelen"),
        severity: if short { Severity::Info } else { Severity::Ok },
        current: dev.txqueuelen.to_string(),
        wanted: Some(format!(">= {wanted_txq}")),
        why: "a short transmit queue drops packets of a burst on the host itself, which TCP \
              takes as congestion"
            .into(),
        fix: short.then(|| format!("ip link set dev {name} txqueuelen {wanted_txq}")),
        change: None,
    });
    match &dev.offloads {
        None => out.push(Finding {
            key: format!("interface.{name}.offloads"),
            severity: Severity::Info,
            current: "unknown".into(),
            wanted: Some("tso, gso, gro on".into()),
            why: "offloads not checked: ethtool is not installed (apt-get install ethtool)".into(),
            fix: None,
            change: None,
        }),
        Some(list) => {
            let off: Vec<&str> = list
                .iter()
                .filter(|(_, on)| !on)
                .map(|(k, _)| k.as_str())
                .collect();
            out.push(Finding {
                key: format!("interface.{name}.offloads"),
                severity: if off.is_empty() {
                    Severity::Ok
                } else {
                    Severity::Warning
                },
                current: if off.is_empty() {
                    "on".into()
                } else {
                    format!("off: {}", off.join(", "))
                },
                wanted: Some("tso, gso, gro on".into()),
                why: "without segmentation and receive offloads the CPU handles every packet: \
                      the host, not the network, becomes the bottleneck"
                    .into(),
                fix: (!off.is_empty()).then(|| format!("ethtool -K {name} tso on gso on gro on")),
                change: None,
            });
        }
    }
}

fn check_governor(facts: &HostFacts, out: &mut Vec<Finding>) {
    let governors = &facts.cpu_governors;
    let (severity, current, why, fix) = if governors.is_empty() {
        (
            Severity::Ok,
            "none".to_string(),
            "no cpufreq on this host (fixed clock or virtual machine)".to_string(),
            None,
        )
    } else if governors.iter().all(|g| g == "performance") {
        (
            Severity::Ok,
            governors.join(", "),
            "CPUs run at full clock".to_string(),
            None,
        )
    } else {
        (
            Severity::Info,
            governors.join(", "),
            "a CPU that clocks down between bursts adds latency and loses packets at line rate"
                .to_string(),
            Some("cpupower frequency-set -g performance".to_string()),
        )
    };
    out.push(Finding {
        key: "cpu.governor".into(),
        severity,
        current,
        wanted: Some("performance".into()),
        why,
        fix,
        change: None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::InterfaceFacts;

    /// A stock Debian 12 host as measured on this project's reference machine.
    fn stock_host() -> HostFacts {
        let mut facts = HostFacts {
            page_size_bytes: 4096,
            ..HostFacts::default()
        };
        for (k, v) in [
            ("net.core.rmem_max", "212992"),
            ("net.core.wmem_max", "212992"),
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
            ("net.ipv4.tcp_mem", "287898 383867 575796"),
            ("net.ipv4.tcp_congestion_control", "cubic"),
            (
                "net.ipv4.tcp_available_congestion_control",
                "reno bbr cubic",
            ),
            ("net.core.default_qdisc", "pfifo_fast"),
            ("net.ipv4.tcp_no_metrics_save", "0"),
            ("net.ipv4.tcp_mtu_probing", "0"),
            ("net.core.netdev_max_backlog", "1000"),
            ("net.ipv4.tcp_window_scaling", "1"),
            ("net.ipv4.tcp_timestamps", "1"),
            ("net.ipv4.tcp_sack", "1"),
            ("net.ipv4.tcp_slow_start_after_idle", "1"),
        ] {
            facts.sysctls.insert(k.into(), v.into());
        }
        facts.interface = Some(InterfaceFacts {
            name: "eth0".into(),
            mtu_bytes: 1500,
            txqueuelen: 1000,
            offloads: Some(vec![("tcp-segmentation-offload".into(), true)]),
        });
        facts
    }

    fn gig_180ms() -> Target {
        Target {
            rate_bps: 1_000_000_000,
            rtt: Duration::from_millis(180),
        }
    }

    fn find<'a>(findings: &'a [Finding], key: &str) -> &'a Finding {
        findings
            .iter()
            .find(|f| f.key == key)
            .unwrap_or_else(|| panic!("no {key}"))
    }

    #[test]
    fn stock_host_cannot_serve_1g_at_180ms() {
        let findings = inspect(&stock_host(), &gig_180ms());
        let wmem = find(&findings, "net.ipv4.tcp_wmem");
        assert_eq!(wmem.severity, Severity::Critical);
        assert_eq!(wmem.change.as_ref().unwrap().value, "4096 16384 45000000");
        assert_eq!(
            wmem.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_wmem=\"4096 16384 45000000\"")
        );
        // 4 MiB per 180 ms is 186 Mbit/s.
        assert!(wmem.why.contains("186 Mbit/s"), "{}", wmem.why);
        let rmem = find(&findings, "net.ipv4.tcp_rmem");
        assert_eq!(rmem.change.as_ref().unwrap().value, "4096 131072 45000000");
        assert_eq!(
            find(&findings, "net.core.rmem_max").severity,
            Severity::Warning
        );
        let nms = find(&findings, "net.ipv4.tcp_no_metrics_save");
        assert_eq!(nms.change.as_ref().unwrap().value, "1");
        assert_eq!(find(&findings, "net.ipv4.tcp_mem").severity, Severity::Ok);
        // Cubic is only information: bbr is offered, not forced.
        let cc = find(&findings, "net.ipv4.tcp_congestion_control");
        assert_eq!(cc.severity, Severity::Info);
        assert!(cc.change.is_none());
        // Interface settings are advice, never applied.
        let mtu = find(&findings, "interface.eth0.mtu");
        assert!(mtu.change.is_none() && mtu.fix.as_deref().unwrap().contains("mtu 9000"));
    }

    #[test]
    fn a_tuned_host_has_no_warnings() {
        let mut facts = stock_host();
        for change in inspect(&facts, &gig_180ms())
            .into_iter()
            .filter_map(|f| f.change)
        {
            facts.sysctls.insert(change.name, change.value);
        }
        let after = inspect(&facts, &gig_180ms());
        let worst = after.iter().map(|f| f.severity).max().unwrap();
        assert!(worst <= Severity::Info, "{after:#?}");
        assert!(after.iter().all(|f| f.change.is_none()));
    }

    #[test]
    fn buffers_are_never_lowered_and_capped_at_int_max() {
        let mut facts = stock_host();
        facts
            .sysctls
            .insert("net.ipv4.tcp_rmem".into(), "4096 131072 999999999".into());
        let findings = inspect(&facts, &gig_180ms());
        assert_eq!(find(&findings, "net.ipv4.tcp_rmem").severity, Severity::Ok);
        let huge = Target {
            rate_bps: 400_000_000_000,
            rtt: Duration::from_millis(500),
        };
        let findings = inspect(&stock_host(), &huge);
        let change = find(&findings, "net.ipv4.tcp_wmem").change.clone().unwrap();
        assert_eq!(change.value, "4096 16384 2147483647");
    }

    #[test]
    fn reno_is_replaced_and_missing_settings_are_reported() {
        let mut facts = stock_host();
        facts
            .sysctls
            .insert("net.ipv4.tcp_congestion_control".into(), "reno".into());
        facts.sysctls.remove("net.ipv4.tcp_mem");
        facts.sysctls.remove("net.core.default_qdisc");
        let findings = inspect(&facts, &gig_180ms());
        let cc = find(&findings, "net.ipv4.tcp_congestion_control");
        assert_eq!(cc.severity, Severity::Warning);
        assert_eq!(cc.change.as_ref().unwrap().value, "bbr");
        let mem = find(&findings, "net.ipv4.tcp_mem");
        assert_eq!(mem.current, "absent");
        assert!(mem.change.is_none());
    }

    #[test]
    fn window_scaling_off_is_critical() {
        let mut facts = stock_host();
        facts
            .sysctls
            .insert("net.ipv4.tcp_window_scaling".into(), "0".into());
        let findings = inspect(&facts, &gig_180ms());
        assert_eq!(
            find(&findings, "net.ipv4.tcp_window_scaling").severity,
            Severity::Critical
        );
    }
}
