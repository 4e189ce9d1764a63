//! Where a running emulator leaves traces for `down` and `stats`: a pid file and a stats
//! file rewritten a few times a second, under /run/longhaul.

use std::io;
use std::path::{Path, PathBuf};

/// Directory of the state files.
pub const STATE_DIR: &str = "/run/longhaul";

/// The pid file of emulator `name`.
pub fn pid_path(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("emulate-{name}.pid"))
}

/// The live stats file (JSON) of emulator `name`.
pub fn stats_path(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("emulate-{name}.json"))
}

/// Writes `bytes` to `path` so that readers see the old or the new content, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The pid recorded for emulator `name`, if any.
pub fn read_pid(name: &str) -> Option<u32> {
    std::fs::read_to_string(pid_path(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Removes the state files of emulator `name` (missing files are fine).
pub fn remove(name: &str) {
    let _ = std::fs::remove_file(pid_path(name));
    let _ = std::fs::remove_file(stats_path(name));
    let _ = std::fs::remove_file(stats_path(name).with_extension("log"));
}
