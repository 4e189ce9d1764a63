//! The crate's error type: a choice the user made that this host cannot honour.

use thiserror::Error;

/// Why a transport could not be planned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyError {
    /// The congestion control asked for (`-C`) is not loaded in this host's kernel.
    #[error(
        "congestion control {name:?} is not available on this host (available: {}); load it with `modprobe tcp_{name}` or pick one of those",
        .available.join(" ")
    )]
    UnknownCongestion {
        /// The name asked for.
        name: String,
        /// What the kernel offers (`net.ipv4.tcp_available_congestion_control`).
        available: Vec<String>,
    },
}
