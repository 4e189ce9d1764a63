//! Child processes for the tests: [`Proc`] (killed and reaped on drop), the root check
//! ([`is_root`]), `longhaul` commands with a private HOME ([`longhaul`], [`longhaul_via`])
//! and the JSON Lines they print ([`json_of`], [`json_lines`]).

use std::path::Path;
use std::process::{Child, Command};

use super::BIN;

/// A child process killed (SIGKILL) and reaped on drop.
pub struct Proc(pub Child);

impl Proc {
    /// SIGKILL now and reap; harmless if it already ended.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// True when the effective uid is 0 (`geteuid(2)`, through `longhaul-sys`, the one crate
/// allowed `unsafe`): what creating namespaces, TUN devices and writing sysctls need. The
/// only root check of the CLI tests.
pub fn is_root() -> bool {
    longhaul_sys::process::is_root()
}

/// A `longhaul` command with a private HOME (so client and server share the default token
/// file `HOME/.config/longhaul/token`) and no token from the environment.
pub fn longhaul(home: &Path) -> Command {
    longhaul_via(&[], home)
}

/// [`longhaul`] run through `prefix` (e.g. `["ip", "netns", "exec", NS]`); an empty prefix
/// runs the binary directly.
pub fn longhaul_via(prefix: &[&str], home: &Path) -> Command {
    let mut c = match prefix.split_first() {
        None => Command::new(BIN),
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(BIN);
            c
        }
    };
    c.env("HOME", home)
        .env_remove("LONGHAUL_TOKEN")
        .env_remove("XDG_CONFIG_HOME");
    c
}

/// The JSON Lines a command printed; it must have succeeded (else its stderr is the panic).
pub fn json_of(out: std::process::Output) -> Vec<serde_json::Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out.stdout)
}

/// Each line of `out` as JSON; a line that is not is the panic.
pub fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}
