//! Helpers shared by every integration test of the `longhaul` binary, one idea a file:
//!
//! - [`process`]: the root check ([`is_root`], the effective uid), child processes killed
//!   on drop ([`Proc`]), `longhaul` commands with a private HOME ([`longhaul`],
//!   [`longhaul_via`]) and the JSON Lines they print;
//! - [`scratch`]: scratch directories removed on drop ([`Scratch`]);
//! - [`server`]: a `longhaul serve` process that can be killed and restarted
//!   ([`Server`]), its tokens and refused configs;
//! - [`cp`]: `longhaul cp` runs with a time limit (and the `cp!` macro here);
//! - [`partial`]: the receiver's `.NAME.longhaul-part` / `.NAME.longhaul-manifest` files;
//! - [`emulated`]: an emulated path up for the test's length;
//! - [`http`], [`mounts`], [`sshd`]: metrics requests, tmpfs and loop mounts, a private
//!   sshd.
//!
//! The seeded RNG whose seed is printed ([`Rng`]) and the files and trees written and
//! compared byte-exact (modes and mtimes too) are the workspace's, from
//! `longhaul-testkit`, re-exported here with the rest so a test says `use support::*`.
//!
//! Every test file includes this module with `mod support;` and uses a part of it; no test
//! file keeps its own copy of these.
#![allow(dead_code)]

pub mod cp;
pub mod emulated;
pub mod http;
pub mod mounts;
pub mod partial;
pub mod process;
pub mod scratch;
pub mod server;
pub mod sshd;

// Each test file uses a part; the rest is unused there.
#[allow(unused_imports)]
pub use {
    cp::*, emulated::*, longhaul_testkit::tree::*, longhaul_testkit::Rng, partial::*, process::*,
    scratch::*, server::*,
};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_longhaul");
/// One MiB, the chunk size most tests pass with `--chunk 1MiB`.
pub const MIB: u64 = 1 << 20;

/// `cp!(home; arg, arg, ...)`: runs `longhaul cp ARGS` with the test's HOME (any
/// `AsRef<OsStr>` argument) to completion within [`CP_LIMIT`] and returns the [`CpRun`].
#[allow(unused_macros)]
macro_rules! cp {
    ($home:expr; $($arg:expr),* $(,)?) => {{
        let mut c = $crate::support::cp_command($home);
        $( c.arg($arg); )*
        $crate::support::run(&mut c, $crate::support::CP_LIMIT)
    }};
}
