//! What can go wrong setting up or running an emulated path.

use std::io;

/// Errors of the emulator driver.
#[derive(Debug, thiserror::Error)]
pub enum EmulateError {
    /// The emulator name cannot be used in namespace names.
    #[error("bad emulator name {name:?}: use 1-32 characters of A-Z a-z 0-9 _ . - (not starting with - or .)")]
    BadName {
        /// The name given.
        name: String,
    },
    /// Namespaces of that name exist already.
    #[error("emulator {name:?} is in use (its namespaces exist); pick another name or run `longhaul emulate down {name}`")]
    NameInUse {
        /// The name given.
        name: String,
    },
    /// Not running as root.
    #[error("the emulator needs root (CAP_NET_ADMIN) to create namespaces and TUN devices; run it with sudo")]
    NotRoot,
    /// /dev/net/tun missing or unusable.
    #[error("/dev/net/tun is not usable ({source}); load the tun module (`modprobe tun`) or run where TUN devices exist")]
    NoTun {
        /// Why opening it failed.
        source: io::Error,
    },
    /// A link parameter is out of range.
    #[error("{0}")]
    Config(String),
    /// No emulator of that name runs.
    #[error("emulator {name:?} is not running ({why}); start it with `longhaul emulate up {name} ...`, or clean up with `longhaul emulate down {name}`")]
    NotRunning {
        /// The name given.
        name: String,
        /// What shows it.
        why: String,
    },
    /// A signalled emulator did not end.
    #[error("emulator process {pid} did not stop within {waited_secs} s; kill it and run `longhaul emulate down {name}` again")]
    DidNotStop {
        /// The emulator's name.
        name: String,
        /// Its process.
        pid: u32,
        /// How long it was waited for.
        waited_secs: u64,
    },
    /// A system call or `ip` command failed while building or running the path.
    #[error("cannot {what}: {source}")]
    Setup {
        /// What was being done.
        what: &'static str,
        /// The underlying error.
        source: io::Error,
    },
}

impl EmulateError {
    /// A mapper from `io::Error` to [`EmulateError::Setup`] for `map_err`.
    pub fn setup(what: &'static str) -> impl Fn(io::Error) -> EmulateError {
        move |source| EmulateError::Setup { what, source }
    }
}
