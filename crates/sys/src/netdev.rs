//! Facts about network interfaces: which one carries the default route, its MTU, transmit
//! queue length and offloads, and the CPU frequency governors of the host.

use std::fs;
use std::io;
use std::path::Path;
use std::process::Command;

/// Longest interface name Linux allows (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

/// The interface of the IPv4 default route (from `/proc/net/route`), then of the IPv6
/// default route (`/proc/net/ipv6_route`); `None` when there is no default route.
pub fn default_route_interface() -> io::Result<Option<String>> {
    if let Ok(table) = fs::read_to_string("/proc/net/route") {
        // Iface Destination Gateway Flags ... Mask: destination 0 and mask 0 is the default.
        for line in table.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 7 && f[1] == "00000000" && f[7] == "00000000" && valid_name(f[0]) {
                return Ok(Some(f[0].to_string()));
            }
        }
    }
    if let Ok(table) = fs::read_to_string("/proc/net/ipv6_route") {
        // dest dest_len src src_len next_hop metric refcnt use flags iface
        for line in table.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 10
                && f[1] == "00"
                && f[0].bytes().all(|b| b == b'0')
                && f[9] != "lo"
                && valid_name(f[9])
            {
                return Ok(Some(f[9].to_string()));
            }
        }
    }
    Ok(None)
}

/// The interface of the default route, or else the first interface other than `lo` that has
/// an IPv4 route (a namespace with only a link route, such as an emulator's end).
pub fn routed_interface() -> io::Result<Option<String>> {
    if let Some(dev) = default_route_interface()? {
        return Ok(Some(dev));
    }
    let Ok(table) = fs::read_to_string("/proc/net/route") else {
        return Ok(None);
    };
    Ok(table
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .find(|name| *name != "lo" && valid_name(name))
        .map(str::to_string))
}

/// An interface's settings that matter on a long fat path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceInfo {
    /// Interface name.
    pub name: String,
    /// MTU in bytes.
    pub mtu_bytes: u32,
    /// Length of the driver's transmit queue in packets.
    pub txqueuelen: u32,
    /// Offloads and whether they are on, from `ethtool -k` (e.g. `tcp-segmentation-offload`);
    /// `None` when ethtool is not installed or failed.
    pub offloads: Option<Vec<(String, bool)>>,
}

/// Reads MTU and txqueuelen from `/sys/class/net/NAME`, offloads from `ethtool -k NAME`.
pub fn interface_info(name: &str) -> io::Result<InterfaceInfo> {
    if !valid_name(name) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not an interface name"),
        ));
    }
    let dir = Path::new("/sys/class/net").join(name);
    let number = |file: &str| -> io::Result<u32> {
        let path = dir.join(file);
        let text = fs::read_to_string(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))?;
        text.trim().parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {:?} is not a number", path.display(), text.trim()),
            )
        })
    };
    Ok(InterfaceInfo {
        name: name.to_string(),
        mtu_bytes: number("mtu")?,
        txqueuelen: number("tx_queue_len")?,
        offloads: ethtool_offloads(name),
    })
}

/// Offloads of an interface from `ethtool -k` (segmentation and receive offloads only).
fn ethtool_offloads(name: &str) -> Option<Vec<(String, bool)>> {
    let out = Command::new("ethtool").arg("-k").arg(name).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(parse_ethtool_features(&String::from_utf8_lossy(
        &out.stdout,
    )))
}

/// The segmentation and receive offloads in `ethtool -k` output, e.g.
/// `tcp-segmentation-offload: on` -> `("tcp-segmentation-offload", true)`.
fn parse_ethtool_features(text: &str) -> Vec<(String, bool)> {
    const WANTED: [&str; 3] = [
        "tcp-segmentation-offload",
        "generic-segmentation-offload",
        "generic-receive-offload",
    ];
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            let key = key.trim();
            WANTED
                .contains(&key)
                .then(|| (key.to_string(), value.trim().starts_with("on")))
        })
        .collect()
}

/// The distinct CPU frequency governors in use (`scaling_governor` of every CPU); empty
/// when the host has no cpufreq (fixed clock, or a virtual machine).
pub fn cpu_governors() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Ok(entries) = fs::read_dir("/sys/devices/system/cpu") else {
        return out;
    };
    for entry in entries.flatten().take(4096) {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("cpu")
            && name[3..].bytes().all(|b| b.is_ascii_digit())
            && name.len() > 3)
        {
            continue;
        }
        if let Ok(g) = fs::read_to_string(entry.path().join("cpufreq/scaling_governor")) {
            let g = g.trim().to_string();
            if !g.is_empty() && !out.contains(&g) {
                out.push(g);
            }
        }
    }
    out.sort();
    out
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IFNAME
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_an_mtu_and_a_queue() {
        let lo = interface_info("lo").unwrap();
        assert!(lo.mtu_bytes >= 1500, "{lo:?}");
        assert_eq!(lo.name, "lo");
    }

    #[test]
    fn ethtool_output_is_parsed() {
        let text = "Features for eth0:\nrx-checksumming: on\ntcp-segmentation-offload: off\n\
                    \ttx-tcp-segmentation: off\ngeneric-segmentation-offload: on\n\
                    generic-receive-offload: on [fixed]\n";
        assert_eq!(
            parse_ethtool_features(text),
            vec![
                ("tcp-segmentation-offload".to_string(), false),
                ("generic-segmentation-offload".to_string(), true),
                ("generic-receive-offload".to_string(), true),
            ]
        );
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(interface_info("../../etc").is_err());
        assert!(interface_info("").is_err());
        assert!(interface_info("no-such-if-lh").is_err());
    }
}
