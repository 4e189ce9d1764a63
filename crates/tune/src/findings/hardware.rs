//! The interface (MTU, transmit queue, offloads) and the CPU governor: advice with the
//! command that fixes it, never a sysctl `--apply` writes.

use super::{Finding, Severity, Target};
use crate::facts::HostFacts;

pub(super) fn check_interface(facts: &HostFacts, target: &Target, out: &mut Vec<Finding>) {
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

pub(super) fn check_governor(facts: &HostFacts, out: &mut Vec<Finding>) {
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
