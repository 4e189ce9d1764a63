//! Reads off this host (this network namespace) every fact `longhaul-tune` judges, for
//! `longhaul tune` and for a `longhaul serve` answering `tune --peer`.

use std::io;

use longhaul_sys::{netdev, sysctl};
use longhaul_tune::{HostFacts, InterfaceFacts, SYSCTLS_INSPECTED};

/// Reads the sysctls, the CPU governors and the settings of interface `dev` (default: the
/// one of the default route, else the first routed one).
pub fn gather(dev: Option<&str>) -> io::Result<HostFacts> {
    let mut facts = HostFacts {
        page_size_bytes: sysctl::page_size_bytes(),
        cpu_governors: netdev::cpu_governors(),
        ..HostFacts::default()
    };
    for name in SYSCTLS_INSPECTED {
        if let Some(value) = sysctl::read(name)? {
            facts.sysctls.insert((*name).to_string(), value);
        }
    }
    let dev = match dev {
        Some(d) => Some(d.to_string()),
        None => netdev::routed_interface()?,
    };
    if let Some(name) = dev {
        let info = netdev::interface_info(&name).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("reading interface {name} (check --dev): {e}"),
            )
        })?;
        facts.interface = Some(InterfaceFacts {
            name: info.name,
            mtu_bytes: info.mtu_bytes,
            txqueuelen: info.txqueuelen,
            offloads: info.offloads,
        });
    }
    Ok(facts)
}

/// This host's name as the kernel knows it (this UTS namespace), or "" when unreadable.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().chars().take(255).collect())
        .unwrap_or_default()
}
