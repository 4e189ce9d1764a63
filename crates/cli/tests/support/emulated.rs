//! An emulated path ([`EmulatedPath`]): `longhaul emulate up NAME --daemon`, taken down
//! on drop.

use std::process::Command;

use super::BIN;

/// An emulated path brought up with `longhaul emulate up NAME --daemon ARGS` (namespaces
/// `lh-NAME-a` and `lh-NAME-b`), taken down on drop (which also ends what still runs in
/// its namespaces).
pub struct EmulatedPath(pub String);

impl EmulatedPath {
    /// Brings the path up; panics with the emulator's words if it cannot.
    pub fn up(name: &str, args: &[&str]) -> Self {
        let out = Command::new(BIN)
            .args(["emulate", "up", name, "--daemon"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self(name.to_string())
    }

    /// The namespace of end `a` or `b`.
    pub fn ns(&self, end: char) -> String {
        format!("lh-{}-{end}", self.0)
    }
}

impl Drop for EmulatedPath {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["emulate", "down", &self.0])
            .output();
    }
}
