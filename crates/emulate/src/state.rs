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

/// Records this process as emulator `name`: its pid and start time, so a later `down`
/// never signals another process that got the pid after this one died (SIGKILL, a
/// crash, a reboot leave the file behind).
pub fn write_pid(name: &str) -> io::Result<()> {
    let pid = std::process::id();
    let start = longhaul_sys::process::start_time(pid).unwrap_or(0);
    write_atomic(&pid_path(name), format!("{pid} {start}\n").as_bytes())
}

/// The process recorded as emulator `name`, if it is still that process: alive, with the
/// recorded start time. A pid file left by a killed emulator whose pid now belongs to
/// someone else gives `None`.
pub fn running_pid(name: &str) -> Option<u32> {
    let text = std::fs::read_to_string(pid_path(name)).ok()?;
    let (pid, start) = parse_pid_file(&text)?;
    let alive = longhaul_sys::process::process_alive(pid)
        && longhaul_sys::process::start_time(pid) == Some(start);
    alive.then_some(pid)
}

/// `PID START` (a file without the start time names no process with certainty: `None`).
fn parse_pid_file(text: &str) -> Option<(u32, u64)> {
    let mut fields = text.split_whitespace();
    let pid = fields.next()?.parse().ok()?;
    let start = fields.next()?.parse().ok()?;
    fields.next().is_none().then_some((pid, start))
}

/// Removes the state files of emulator `name` (missing files are fine).
pub fn remove(name: &str) {
    let _ = std::fs::remove_file(pid_path(name));
    let _ = std::fs::remove_file(stats_path(name));
    let _ = std::fs::remove_file(stats_path(name).with_extension("log"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_files_name_a_process_by_pid_and_start_time() {
        assert_eq!(parse_pid_file("4242 987654\n"), Some((4242, 987654)));
        assert_eq!(
            parse_pid_file("4242\n"),
            None,
            "an old file names no process"
        );
        assert_eq!(parse_pid_file("4242 x"), None);
        assert_eq!(parse_pid_file("1 2 3"), None);
        let me = std::process::id();
        let start = longhaul_sys::process::start_time(me).expect("our own start time");
        assert!(start > 0);
        assert_eq!(longhaul_sys::process::start_time(me), Some(start), "stable");
    }
}
