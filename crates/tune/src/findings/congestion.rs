//! The congestion control and the default qdisc: whether the host's TCP tolerates random loss
//! and whether something paces its flows.

use super::{absent, sysctl_change, Finding, Severity};
use crate::facts::HostFacts;

pub(super) fn check_congestion_control(facts: &HostFacts, out: &mut Vec<Finding>) {
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

pub(super) fn check_qdisc(facts: &HostFacts, out: &mut Vec<Finding>) {
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
