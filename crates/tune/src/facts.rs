//! What a driver reads off a host before [`crate::inspect`] can judge it.

use std::collections::BTreeMap;

/// The sysctls [`crate::inspect`] looks at; a driver reads each that exists.
pub const SYSCTLS_INSPECTED: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.core.default_qdisc",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_mtu_probing",
    "net.core.netdev_max_backlog",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_slow_start_after_idle",
];

/// The host as a driver found it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostFacts {
    /// Sysctl values by name, whitespace collapsed to single spaces (`"4096 131072 6291456"`).
    /// A name that is absent does not exist in this network namespace or on this kernel.
    pub sysctls: BTreeMap<String, String>,
    /// The interface that carries traffic to the peer (or the default route), if known.
    pub interface: Option<InterfaceFacts>,
    /// Distinct CPU frequency governors in use; empty when the host has no cpufreq.
    pub cpu_governors: Vec<String>,
    /// Memory page size in bytes (`tcp_mem` counts pages).
    pub page_size_bytes: u64,
}

/// An interface's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceFacts {
    /// Interface name.
    pub name: String,
    /// MTU in bytes.
    pub mtu_bytes: u32,
    /// Transmit queue length in packets.
    pub txqueuelen: u32,
    /// Segmentation/receive offloads and whether each is on; `None` when unknown.
    pub offloads: Option<Vec<(String, bool)>>,
}

impl HostFacts {
    /// The value of a sysctl, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.sysctls.get(name).map(String::as_str)
    }

    /// The numbers of a sysctl (`tcp_rmem` has three), if present and numeric.
    pub fn numbers(&self, name: &str) -> Option<Vec<u64>> {
        self.get(name)?
            .split_whitespace()
            .map(|n| n.parse().ok())
            .collect()
    }
}
