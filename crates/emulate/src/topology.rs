//! The two ends of an emulated path: namespaces `lh-NAME-a` and `lh-NAME-b`, each with a
//! TUN interface `lh0` whose fd the emulator holds, addresses on both, and nothing else.
//! Everything is removed when the [`Topology`] drops (or by [`remove_leftovers`]).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use longhaul_sys::netns::{self, NetnsGuard};
use longhaul_sys::tun::TunDevice;

use super::error::EmulateError;

/// Name of the TUN interface inside each namespace.
pub const IFNAME: &str = "lh0";
/// Longest emulator name (keeps `lh-NAME-a` a short, valid namespace name).
pub const MAX_NAME_LEN: usize = 32;

/// One end of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum End {
    /// End `a` (traffic a -> b is "up").
    A,
    /// End `b`.
    B,
}

impl End {
    /// `"a"` or `"b"`.
    pub fn as_str(self) -> &'static str {
        match self {
            End::A => "a",
            End::B => "b",
        }
    }

    /// The IPv4 address of this end's TUN interface.
    pub fn ipv4(self) -> Ipv4Addr {
        match self {
            End::A => Ipv4Addr::new(10, 99, 0, 1),
            End::B => Ipv4Addr::new(10, 99, 0, 2),
        }
    }

    /// The IPv6 (ULA) address of this end's TUN interface.
    pub fn ipv6(self) -> Ipv6Addr {
        match self {
            End::A => Ipv6Addr::new(0xfd00, 0x6c68, 0, 0, 0, 0, 0, 1),
            End::B => Ipv6Addr::new(0xfd00, 0x6c68, 0, 0, 0, 0, 0, 2),
        }
    }

    /// The other end.
    pub fn peer(self) -> End {
        match self {
            End::A => End::B,
            End::B => End::A,
        }
    }
}

/// Name of the namespace of `end` of emulator `name`.
pub fn ns_name(name: &str, end: End) -> String {
    format!("lh-{name}-{}", end.as_str())
}

/// Checks an emulator name: 1-32 characters of `[A-Za-z0-9_.-]`, not starting with `-`.
pub fn check_name(name: &str) -> Result<(), EmulateError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with(['-', '.'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(EmulateError::BadName {
            name: name.to_owned(),
        })
    }
}

/// Both namespaces with their TUN devices, up and addressed.
#[derive(Debug)]
pub struct Topology {
    /// TUN device of end a (reads: packets a sends; writes: packets a receives).
    pub tun_a: Arc<TunDevice>,
    /// TUN device of end b.
    pub tun_b: Arc<TunDevice>,
    // Dropped after the TUN devices (field order).
    _ns_a: NetnsGuard,
    _ns_b: NetnsGuard,
}

impl Topology {
    /// Creates both ends of emulator `name` with interface MTU `mtu` and transmit queue
    /// `txqueuelen` packets. On error nothing is left behind.
    pub fn create(
        name: &str,
        mtu: u32,
        txqueuelen: u32,
        offload: bool,
    ) -> Result<Topology, EmulateError> {
        check_name(name)?;
        for end in [End::A, End::B] {
            if netns::exists(&ns_name(name, end)) {
                return Err(EmulateError::NameInUse {
                    name: name.to_owned(),
                });
            }
        }
        let ns_a = NetnsGuard::create(&ns_name(name, End::A))
            .map_err(EmulateError::setup("create namespace"))?;
        let ns_b = NetnsGuard::create(&ns_name(name, End::B))
            .map_err(EmulateError::setup("create namespace"))?;
        let tun_a = open_end(&ns_a, End::A, mtu, txqueuelen, offload)?;
        let tun_b = open_end(&ns_b, End::B, mtu, txqueuelen, offload)?;
        Ok(Topology {
            tun_a: Arc::new(tun_a),
            tun_b: Arc::new(tun_b),
            _ns_a: ns_a,
            _ns_b: ns_b,
        })
    }
}

fn open_end(
    ns: &NetnsGuard,
    end: End,
    mtu: u32,
    txqueuelen: u32,
    offload: bool,
) -> Result<TunDevice, EmulateError> {
    let tun = netns::run_in(ns.name(), move || TunDevice::create(IFNAME, offload))
        .map_err(EmulateError::setup("open TUN device"))?;
    let n = ns.name();
    let mtu = mtu.to_string();
    let qlen = txqueuelen.to_string();
    let v4 = format!("{}/24", end.ipv4());
    let v6 = format!("{}/64", end.ipv6());
    let setup = || -> std::io::Result<()> {
        netns::ip(
            n,
            &["link", "set", IFNAME, "mtu", &mtu, "txqueuelen", &qlen],
        )?;
        netns::ip(n, &["addr", "add", &v4, "dev", IFNAME])?;
        netns::ip(n, &["-6", "addr", "add", &v6, "dev", IFNAME, "nodad"])?;
        netns::ip(n, &["link", "set", IFNAME, "up"])
    };
    setup().map_err(EmulateError::setup("configure TUN interface"))?;
    Ok(tun)
}

/// Removes the namespaces of emulator `name` if they exist (after a crash, say), first
/// stopping the processes still running in them (see [`stop_processes`]): `ip netns del`
/// alone leaves them running, holding the namespace and its addresses. Returns what was
/// done, one line per namespace.
pub fn remove_leftovers(name: &str) -> Result<Vec<String>, EmulateError> {
    let mut removed = Vec::new();
    for end in [End::A, End::B] {
        let ns = ns_name(name, end);
        if netns::exists(&ns) {
            let stopped = stop_processes_in(&ns, None);
            netns::delete(&ns).map_err(EmulateError::setup("delete namespace"))?;
            removed.push(match stopped {
                0 => ns,
                n => format!("{ns} (stopped {})", processes(n)),
            });
        }
    }
    Ok(removed)
}

/// Stops every process running in the namespaces of emulator `name` except `spare` (the
/// emulator itself): SIGTERM, then SIGKILL for those still alive after 2 s. Run it before
/// stopping the emulator, which deletes the namespaces on its way out. Returns how many
/// processes there were.
pub fn stop_processes(name: &str, spare: Option<u32>) -> usize {
    [End::A, End::B]
        .into_iter()
        .map(|end| stop_processes_in(&ns_name(name, end), spare))
        .sum()
}

/// "1 process", "3 processes".
pub fn processes(n: usize) -> String {
    format!("{n} process{}", if n == 1 { "" } else { "es" })
}

fn stop_processes_in(ns: &str, spare: Option<u32>) -> usize {
    use longhaul_sys::process::{kill_now, process_alive, terminate};
    let mut pids = netns::processes_in(ns).unwrap_or_default();
    pids.retain(|&p| Some(p) != spare);
    for &p in &pids {
        let _ = terminate(p);
    }
    let start = std::time::Instant::now();
    while pids.iter().any(|&p| process_alive(p))
        && start.elapsed() < std::time::Duration::from_secs(2)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for &p in &pids {
        if process_alive(p) {
            let _ = kill_now(p);
        }
    }
    pids.len()
}
