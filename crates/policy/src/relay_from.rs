//! Where a daemon may pull from for a third-party copy (`serve --relay-from`): a client
//! that proved a token names the source, and the daemon connects there, so a site can
//! keep that to the networks it means (its partners' data-transfer nodes, say), or refuse
//! relays altogether.

use std::net::IpAddr;
use std::str::FromStr;

/// An address block: an address and how many leading bits of it count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// Whether `ip` lies in the block (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl FromStr for IpNet {
    type Err = String;

    /// `10.0.0.0/8`, `2001:db8::/32`, or one address (`192.0.2.7`: all its bits).
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr = canonical(
            addr.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("{s:?} is not an address or ADDR/BITS (10.0.0.0/8)"))?,
        );
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| format!("{s:?}: the prefix must be 0..={max} bits"))?,
            None => max,
        };
        Ok(Self { addr, prefix })
    }
}

/// The sources a daemon may pull from for third-party copies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RelayFrom {
    /// Any address (the default).
    #[default]
    Anywhere,
    /// Only these blocks (empty: no relayed pull at all).
    Only(Vec<IpNet>),
}

impl RelayFrom {
    /// Whether a pull from `ip` is allowed.
    pub fn allows(&self, ip: IpAddr) -> bool {
        match self {
            RelayFrom::Anywhere => true,
            RelayFrom::Only(nets) => nets.iter().any(|n| n.contains(ip)),
        }
    }

    /// The setting in words (for a refusal).
    pub fn describe(&self) -> String {
        match self {
            RelayFrom::Anywhere => "anywhere".into(),
            RelayFrom::Only(nets) if nets.is_empty() => "nowhere".into(),
            RelayFrom::Only(nets) => nets
                .iter()
                .map(|n| format!("{}/{}", n.addr, n.prefix))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

impl FromStr for RelayFrom {
    type Err = String;

    /// `any`, `none`, or a comma-separated list of blocks.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "any" => Ok(RelayFrom::Anywhere),
            "none" => Ok(RelayFrom::Only(Vec::new())),
            list => list
                .split(',')
                .map(str::parse)
                .collect::<Result<Vec<_>, _>>()
                .map(RelayFrom::Only),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_hold_what_their_bits_say() {
        let net: IpNet = "10.20.0.0/16".parse().unwrap();
        assert!(net.contains(ip("10.20.255.1")));
        assert!(!net.contains(ip("10.21.0.1")));
        assert!(net.contains(ip("::ffff:10.20.0.9")), "mapped IPv4 counts");
        assert!(!net.contains(ip("2001:db8::1")));
        let v6: IpNet = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:ffff::1")));
        assert!(!v6.contains(ip("2001:db9::1")));
        let one: IpNet = "192.0.2.7".parse().unwrap();
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.5")));
        for bad in ["10.0.0.0/33", "x/8", "::/129", "10.0.0.0/-1"] {
            assert!(bad.parse::<IpNet>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_setting_reads_as_written() {
        assert_eq!("any".parse::<RelayFrom>().unwrap(), RelayFrom::Anywhere);
        let none: RelayFrom = "none".parse().unwrap();
        assert!(!none.allows(ip("127.0.0.1")));
        assert_eq!(none.describe(), "nowhere");
        let some: RelayFrom = "10.0.0.0/8, 2001:db8::/32".parse().unwrap();
        assert!(some.allows(ip("10.1.2.3")) && some.allows(ip("2001:db8::5")));
        assert!(!some.allows(ip("127.0.0.1")));
        assert_eq!(some.describe(), "10.0.0.0/8, 2001:db8::/32");
        assert!("10.0.0.0/8,bogus".parse::<RelayFrom>().is_err());
    }
}
