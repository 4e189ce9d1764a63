//! Tests of the checks, on a stock Debian 12 host and variations of it.

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
