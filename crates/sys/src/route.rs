//! Per-destination initial windows: the route metrics `initcwnd` (the congestion window a
//! new connection to that destination starts with; the kernel's default is 10 segments)
//! and `initrwnd` (the receive window it may advertise first), set on a host route to one
//! peer for the length of a run and put back when [`InitialWindows`] drops.
//!
//! The kernel reads `initrwnd` when it builds a SYN or SYN-ACK and `initcwnd` when the
//! connection is established, so both must be in place before a run's data connections
//! are made.
//!
//! How: `ip route get PEER` names the gateway, device and source the kernel picks; a host
//! route (`/32` or `/128`) with the same next hop and the two metrics is added, tagged
//! `proto 76` ([`ROUTE_PROTO`]), and deleted on drop. If a host route to the peer already
//! exists it is replaced with the same route plus the metrics and put back as it was on
//! drop. A crash leaves at most the tagged host route: the next run to that peer takes it
//! over and deletes it, and `ip route flush proto 76` removes every such leftover.
//! Needs root or CAP_NET_ADMIN.

use std::io;
use std::net::IpAddr;
use std::process::{Command, Stdio};

/// The `proto` number that marks longhaul's host routes (`L`, unassigned in
/// /etc/iproute2/rt_protos).
pub const ROUTE_PROTO: &str = "76";

/// A host route to one peer with initial-window metrics, removed (or restored) on drop.
#[derive(Debug)]
pub struct InitialWindows {
    prefix: String,
    /// The host route that existed before, as `ip route` arguments; `None` when this guard
    /// added the route (and deletes it).
    previous: Option<Vec<String>>,
    /// The route as set, for logs and tests.
    set: Vec<String>,
}

impl InitialWindows {
    /// Sets `initcwnd init_cwnd initrwnd init_rwnd` (segments) on a host route to `peer`.
    pub fn set(peer: IpAddr, init_cwnd: u32, init_rwnd: u32) -> io::Result<Self> {
        // A dual-stack listener (`[::]`, e.g. `ssh-server`'s) sees an IPv4 client as
        // `::ffff:a.b.c.d`, which has no IPv6 route: its connections take the IPv4 one.
        let peer = peer.to_canonical();
        let prefix = host_prefix(peer);
        let hop = next_hop(peer)?;
        let existing = ip_output(&["route", "show", "exact", &prefix])?;
        let existing: Vec<String> = existing
            .lines()
            .next()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let ours = existing
            .windows(2)
            .any(|w| w[0] == "proto" && w[1] == ROUTE_PROTO);
        let metrics = [
            "initcwnd".to_string(),
            init_cwnd.to_string(),
            "initrwnd".to_string(),
            init_rwnd.to_string(),
        ];
        let (set, previous) = if existing.is_empty() || ours {
            // A leftover of ours (a crashed run) is taken over and deleted at the end.
            let mut args = vec![prefix.clone()];
            args.extend(hop);
            args.extend(["proto".into(), ROUTE_PROTO.into()]);
            args.extend(metrics);
            (args, None)
        } else {
            let mut args = without_windows(&existing);
            args[0] = prefix.clone();
            args.extend(metrics);
            (args, Some(existing))
        };
        let mut cmd = vec!["route", "replace"];
        cmd.extend(set.iter().map(String::as_str));
        ip(&cmd)?;
        Ok(Self {
            prefix,
            previous,
            set,
        })
    }

    /// The route as set, as `ip route` arguments.
    pub fn route(&self) -> &[String] {
        &self.set
    }
}

impl Drop for InitialWindows {
    fn drop(&mut self) {
        let _ = match &self.previous {
            None => ip(&["route", "del", &self.prefix]),
            Some(prev) => {
                let mut cmd = vec!["route", "replace"];
                cmd.extend(prev.iter().map(String::as_str));
                ip(&cmd)
            }
        };
    }
}

/// `via GW dev DEV src SRC` (as present) of the route the kernel picks to `peer`; a local
/// or unreachable destination is an error.
/// The host route's prefix for `peer` (an IPv4-mapped IPv6 address is its IPv4 one).
fn host_prefix(peer: IpAddr) -> String {
    match peer.to_canonical() {
        IpAddr::V4(a) => format!("{a}/32"),
        IpAddr::V6(a) => format!("{a}/128"),
    }
}

fn next_hop(peer: IpAddr) -> io::Result<Vec<String>> {
    let out = ip_output(&["route", "get", &peer.to_string()])?;
    let words: Vec<&str> = out.split_whitespace().collect();
    if words.first().and_then(|w| w.parse::<IpAddr>().ok()) != Some(peer) {
        return Err(io::Error::other(format!(
            "no unicast route to {peer} (ip route get: {})",
            out.lines().next().unwrap_or("").trim()
        )));
    }
    let mut hop = Vec::new();
    for pair in words.windows(2) {
        if matches!(pair[0], "via" | "dev" | "src") && hop.len() < 6 {
            hop.extend([pair[0].to_string(), pair[1].to_string()]);
        }
    }
    if !hop.iter().any(|w| w == "dev") {
        return Err(io::Error::other(format!(
            "no device in the route to {peer}"
        )));
    }
    Ok(hop)
}

/// `args` without any `initcwnd N` / `initrwnd N` pairs.
fn without_windows(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if a == "initcwnd" || a == "initrwnd" {
            skip = true;
        } else {
            out.push(a.clone());
        }
    }
    out
}

fn ip(args: &[&str]) -> io::Result<()> {
    ip_output(args).map(drop)
}

fn ip_output(args: &[&str]) -> io::Result<String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            io::Error::new(e.kind(), format!("cannot run `ip` (install iproute2): {e}"))
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(io::Error::other(format!(
        "`ip {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// The source address the kernel would pick for a connection to `peer` (a UDP socket's
/// connect chooses it from the routing table and sends nothing); `None` when there is no
/// route.
pub fn source_toward(peer: std::net::SocketAddr) -> Option<IpAddr> {
    let any: std::net::SocketAddr = if peer.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = std::net::UdpSocket::bind(any).ok()?;
    socket.connect(peer).ok()?;
    socket.local_addr().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_metrics_are_stripped_from_a_saved_route() {
        let words: Vec<String> = "10.0.0.2 via 10.0.0.1 dev eth0 initcwnd 40 mtu 1500 initrwnd 9"
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(
            without_windows(&words).join(" "),
            "10.0.0.2 via 10.0.0.1 dev eth0 mtu 1500"
        );
    }

    /// Regression: an ssh far end (listening on `[::]`) declined every pull's jump with
    /// "`ip route get ::ffff:10.99.0.1` failed: Network is unreachable".
    #[test]
    fn a_mapped_ipv4_peer_gets_its_ipv4_host_route() {
        let mapped: IpAddr = "::ffff:10.99.0.1".parse().unwrap();
        assert_eq!(host_prefix(mapped), "10.99.0.1/32");
        assert_eq!(host_prefix("fd00::2".parse().unwrap()), "fd00::2/128");
        assert_eq!(host_prefix("10.0.0.2".parse().unwrap()), "10.0.0.2/32");
    }

    #[test]
    fn the_source_toward_loopback_is_loopback() {
        let peer = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 9));
        assert_eq!(
            source_toward(peer),
            Some(IpAddr::from(std::net::Ipv4Addr::LOCALHOST))
        );
    }
}
