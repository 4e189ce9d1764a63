//! Choosing socket buffers for a path, with no I/O: the record teams' rule that the window
//! must cover the bandwidth-delay product, Linux's need for about twice that in socket
//! buffer, what to do when the kernel's caps are lower, and how a choice is shown.

use std::time::Duration;

use longhaul_model::buffers::bdp_bytes;

/// The rate `--window auto` assumes when the user gave none: buffers are sized so a path
/// up to this rate can be filled, then the rate probe holds the window to what it found.
pub const PROBE_CEILING_BPS: u64 = 10_000_000_000;

/// Smallest buffer longhaul will ever set explicitly (below this autotuning is better).
const MIN_EXPLICIT_BUFFER: u64 = 256 * 1024;

/// Largest value worth asking for: the TCP window cannot exceed 2^30 bytes (scale 14).
pub const MAX_WINDOW: u64 = 1 << 30;

/// One host's limits on socket buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferCaps {
    /// net.core.wmem_max: cap of SO_SNDBUF.
    pub wmem_max: u64,
    /// net.core.rmem_max: cap of SO_RCVBUF.
    pub rmem_max: u64,
    /// Third field of net.ipv4.tcp_wmem: ceiling of send autotuning.
    pub tcp_wmem_max: u64,
    /// Third field of net.ipv4.tcp_rmem: ceiling of receive autotuning.
    pub tcp_rmem_max: u64,
    /// Whether SO_SNDBUFFORCE/SO_RCVBUFFORCE are allowed (CAP_NET_ADMIN).
    pub can_force: bool,
}

impl From<&longhaul_proto::HostFacts> for BufferCaps {
    /// The caps a host reported (this host's, or the peer's in its `BenchReady`).
    fn from(f: &longhaul_proto::HostFacts) -> Self {
        BufferCaps {
            wmem_max: f.wmem_max,
            rmem_max: f.rmem_max,
            tcp_wmem_max: f.tcp_wmem_max,
            tcp_rmem_max: f.tcp_rmem_max,
            can_force: f.can_force_buffers,
        }
    }
}

/// Which side of the data connection a buffer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The sending socket (SO_SNDBUF).
    Send,
    /// The receiving socket (SO_RCVBUF).
    Receive,
}

/// What to do with one socket's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BufferChoice {
    /// Leave the kernel's autotuning on: its ceiling already covers the need.
    Autotune,
    /// Set this value (the kernel doubles it) with SO_*BUF, or SO_*BUFFORCE when `force`.
    Set {
        /// Value to pass to setsockopt.
        bytes: u64,
        /// Whether the capability override is needed and available.
        force: bool,
    },
    /// The need exceeds the caps and this process cannot override them: set the cap and
    /// warn with the sysctl that would fix it.
    Capped {
        /// Value that will be granted.
        bytes: u64,
        /// Value the path needs.
        needed: u64,
        /// The exact command that lifts the cap.
        fix: String,
    },
}

/// The setsockopt value one stream needs to carry `rate_bps` over `rtt`: twice the
/// per-stream BDP ([`longhaul_model::buffers::bdp_bytes`]; Linux keeps about half of a
/// buffer for bookkeeping), at least 256 KiB, at most [`MAX_WINDOW`].
pub fn needed_buffer(rate_bps: u64, rtt: Duration, streams: u16) -> u64 {
    let per_stream = bdp_bytes(rate_bps, rtt) / streams.max(1) as u64;
    (2 * per_stream).clamp(MIN_EXPLICIT_BUFFER, MAX_WINDOW)
}

/// Decides how to size one socket's buffer of `side` on a host with `caps`.
pub fn choose(side: Side, needed: u64, caps: &BufferCaps) -> BufferChoice {
    let (autotune_ceiling, cap, sysctl, tcp_sysctl) = match side {
        Side::Send => (
            caps.tcp_wmem_max,
            caps.wmem_max,
            "net.core.wmem_max",
            "net.ipv4.tcp_wmem",
        ),
        Side::Receive => (
            caps.tcp_rmem_max,
            caps.rmem_max,
            "net.core.rmem_max",
            "net.ipv4.tcp_rmem",
        ),
    };
    // Autotuning grows the buffer up to its ceiling (which is the doubled value).
    if 2 * needed <= autotune_ceiling {
        return BufferChoice::Autotune;
    }
    if needed <= cap {
        return BufferChoice::Set {
            bytes: needed,
            force: false,
        };
    }
    if caps.can_force {
        return BufferChoice::Set {
            bytes: needed,
            force: true,
        };
    }
    BufferChoice::Capped {
        bytes: cap,
        needed,
        fix: format!(
            "sudo sysctl -w {sysctl}={v} {tcp_sysctl}=\"4096 131072 {v2}\"",
            v = needed,
            v2 = 2 * needed
        ),
    }
}

/// The buffer choice for one end: with a fixed window, always set it (forcing if needed
/// and possible); otherwise let [`choose`] decide.
pub fn plan_buffer(side: Side, needed: u64, fixed: bool, caps: &BufferCaps) -> BufferChoice {
    match choose(side, needed, caps) {
        BufferChoice::Autotune if fixed => choose(
            side,
            needed,
            &BufferCaps {
                tcp_wmem_max: 0,
                tcp_rmem_max: 0,
                ..*caps
            },
        ),
        c => c,
    }
}

/// The value a choice will set (0 for autotuning).
pub fn choice_bytes(c: &BufferChoice) -> u64 {
    match c {
        BufferChoice::Autotune => 0,
        BufferChoice::Set { bytes, .. } | BufferChoice::Capped { bytes, .. } => *bytes,
    }
}

/// Describes a choice for the start line.
pub fn describe(c: &BufferChoice) -> String {
    match c {
        BufferChoice::Autotune => "kernel autotuning (its ceiling covers the path)".into(),
        BufferChoice::Set { bytes, force: true } => {
            format!("{bytes} bytes, forced past the sysctl cap")
        }
        BufferChoice::Set { bytes, .. } => format!("{bytes} bytes"),
        BufferChoice::Capped { bytes, needed, .. } => {
            format!("{bytes} bytes (capped; the path needs {needed})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stock(can_force: bool) -> BufferCaps {
        BufferCaps {
            wmem_max: 4 << 20,
            rmem_max: 4 << 20,
            tcp_wmem_max: 4 << 20,
            tcp_rmem_max: 32 << 20,
            can_force,
        }
    }

    #[test]
    fn record_team_figure_one_gigabit_at_180_ms() {
        // 1 Gbit/s x 180 ms = 22.5 MB; Linux needs ~45 MB of buffer.
        let rtt = Duration::from_millis(180);
        assert_eq!(bdp_bytes(1_000_000_000, rtt), 22_500_000);
        assert_eq!(needed_buffer(1_000_000_000, rtt, 1), 45_000_000);
        assert_eq!(needed_buffer(1_000_000_000, rtt, 4), 11_250_000);
    }

    #[test]
    fn loopback_keeps_autotuning() {
        let need = needed_buffer(10_000_000_000, Duration::from_micros(30), 1);
        assert_eq!(
            choose(Side::Send, need, &stock(false)),
            BufferChoice::Autotune
        );
        assert_eq!(
            choose(Side::Receive, need, &stock(false)),
            BufferChoice::Autotune
        );
    }

    #[test]
    fn long_path_forces_as_root_and_warns_otherwise() {
        let need = needed_buffer(1_000_000_000, Duration::from_millis(180), 1);
        assert_eq!(
            choose(Side::Send, need, &stock(true)),
            BufferChoice::Set {
                bytes: 45_000_000,
                force: true
            }
        );
        match choose(Side::Receive, need, &stock(false)) {
            BufferChoice::Capped { bytes, needed, fix } => {
                assert_eq!(bytes, 4 << 20);
                assert_eq!(needed, 45_000_000);
                assert!(fix.contains("net.core.rmem_max=45000000"), "{fix}");
            }
            other => panic!("expected a capped buffer, got {other:?}"),
        }
    }

    #[test]
    fn within_caps_needs_no_force() {
        let caps = BufferCaps {
            wmem_max: 64 << 20,
            ..stock(false)
        };
        let need = needed_buffer(1_000_000_000, Duration::from_millis(100), 1);
        assert_eq!(
            choose(Side::Send, need, &caps),
            BufferChoice::Set {
                bytes: need,
                force: false
            }
        );
    }

    #[test]
    fn buffer_never_exceeds_the_window_scale_ceiling() {
        let need = needed_buffer(100_000_000_000, Duration::from_millis(500), 1);
        assert_eq!(need, MAX_WINDOW);
    }

    #[test]
    fn a_fixed_window_is_set_even_where_autotuning_would_cover_it() {
        let need = 1 << 20;
        assert_eq!(
            plan_buffer(Side::Send, need, false, &stock(false)),
            BufferChoice::Autotune
        );
        assert_eq!(
            plan_buffer(Side::Send, need, true, &stock(false)),
            BufferChoice::Set {
                bytes: need,
                force: false
            }
        );
        assert_eq!(choice_bytes(&BufferChoice::Autotune), 0);
        assert_eq!(
            describe(&BufferChoice::Set {
                bytes: 5,
                force: true
            }),
            "5 bytes, forced past the sysctl cap"
        );
    }
}
