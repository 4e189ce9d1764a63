//! Facts about this host's network stack that bound a run: buffer caps, congestion control.

use longhaul_proto::HostFacts;

fn read_sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/{path}"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn read_u64(path: &str) -> u64 {
    read_sysctl(path).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn third_field(path: &str) -> u64 {
    read_sysctl(path)
        .and_then(|s| s.split_whitespace().nth(2).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Reads this host's (this network namespace's) buffer caps and congestion settings.
pub fn host_facts() -> HostFacts {
    HostFacts {
        wmem_max: read_u64("net/core/wmem_max"),
        rmem_max: read_u64("net/core/rmem_max"),
        tcp_wmem_max: third_field("net/ipv4/tcp_wmem"),
        tcp_rmem_max: third_field("net/ipv4/tcp_rmem"),
        can_force_buffers: longhaul_sys::socket::can_force_buffers(),
        default_congestion: read_sysctl("net/ipv4/tcp_congestion_control").unwrap_or_default(),
    }
}

/// The congestion-control algorithms the kernel offers now.
pub fn available_congestion() -> Vec<String> {
    read_sysctl("net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// [`longhaul_policy::plan_transport`] with this host's caps and congestion controls read
/// now; the facts are returned too (bench reports them). Every end of bench and cp plans
/// its data sockets through this.
pub fn plan_transport_here(
    req: &longhaul_policy::TransportRequest,
    rtt: std::time::Duration,
) -> Result<(longhaul_policy::TransportPlan, HostFacts), longhaul_policy::PolicyError> {
    let facts = host_facts();
    let kernel = longhaul_policy::Congestion {
        available: available_congestion(),
        default: facts.default_congestion.clone(),
    };
    let plan = longhaul_policy::plan_transport(
        req,
        rtt,
        &longhaul_policy::BufferCaps::from(&facts),
        &kernel,
        None,
    )?;
    Ok((plan, facts))
}
