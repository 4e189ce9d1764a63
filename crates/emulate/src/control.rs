//! A running emulator as other processes see it: the stats file it rewrites while it runs
//! ([`publish_until_stopped`], [`read_stats`]) and taking it down from another process
//! ([`take_down`]: the processes left in its namespaces, the emulator itself, the
//! namespaces and its state files).

use std::time::{Duration, Instant};

use longhaul_linkem::LinkConfig;
use longhaul_sys::process::TerminationSignals;
use serde::{Deserialize, Serialize};

use crate::error::EmulateError;
use crate::stats::EmulatorStats;
use crate::{state, topology, Emulator, EmulatorConfig};

/// How often a running emulator rewrites its stats file.
pub const STATS_EVERY: Duration = Duration::from_millis(250);
/// How long `down` waits for an emulator it signalled to end.
pub const STOP_WAIT: Duration = Duration::from_secs(15);

/// What the stats file holds (`longhaul emulate stats --json` prints it as it is).
#[derive(Debug, Serialize, Deserialize)]
pub struct StatsFile {
    /// Always "stats".
    #[serde(rename = "type")]
    pub kind: String,
    /// The emulator's name.
    pub name: String,
    /// The emulator's process.
    pub pid: u32,
    /// The path's MTU.
    pub mtu: u32,
    /// The link model from end a to end b.
    pub a_to_b: LinkConfig,
    /// The link model from end b to end a.
    pub b_to_a: LinkConfig,
    /// The counters when the file was written.
    pub stats: EmulatorStats,
}

/// Rewrites `cfg.name`'s stats file every [`STATS_EVERY`] until a termination signal
/// arrives or a packet loop ends (its error is [`Emulator::shutdown`]'s to report).
pub fn publish_until_stopped(
    emu: &Emulator,
    cfg: &EmulatorConfig,
    signals: &TerminationSignals,
) -> Result<(), EmulateError> {
    loop {
        let file = StatsFile {
            kind: "stats".into(),
            name: cfg.name.clone(),
            pid: std::process::id(),
            mtu: cfg.mtu,
            a_to_b: cfg.a_to_b.clone(),
            b_to_a: cfg.b_to_a.clone(),
            stats: emu.stats(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| EmulateError::Setup {
            what: "encode the stats file",
            source: e.into(),
        })?;
        state::write_atomic(&state::stats_path(&cfg.name), &bytes)
            .map_err(EmulateError::setup("write the stats file"))?;
        if signals.wait(STATS_EVERY).is_some() || !emu.is_running() {
            return Ok(());
        }
    }
}

/// The stats file of the running emulator `name`, parsed, and its bytes as written.
pub fn read_stats(name: &str) -> Result<(StatsFile, Vec<u8>), EmulateError> {
    topology::check_name(name)?;
    let path = state::stats_path(name);
    let not_running = |why: String| EmulateError::NotRunning {
        name: name.to_string(),
        why,
    };
    let bytes = std::fs::read(&path).map_err(|_| not_running(format!("no {}", path.display())))?;
    let file: StatsFile = serde_json::from_slice(&bytes)
        .map_err(|e| not_running(format!("{} does not parse: {e}", path.display())))?;
    if !longhaul_sys::process::process_alive(file.pid) {
        return Err(not_running(format!("pid {} is gone", file.pid)));
    }
    Ok((file, bytes))
}

/// Takes emulator `name` down from any process: stops what runs in its namespaces (as
/// root), ends the emulator process its pid file names (waiting up to [`STOP_WAIT`]),
/// removes its namespaces and state files. Returns what it did, in order (empty: it was
/// not up).
pub fn take_down(name: &str) -> Result<Vec<String>, EmulateError> {
    topology::check_name(name)?;
    let mut did = Vec::new();
    // Only the process that wrote the pid file: a pid reused since is someone else's.
    let daemon = state::running_pid(name);
    let root = longhaul_sys::process::is_root();
    if root {
        // Before the emulator goes: it deletes the namespaces on its way out, and a
        // process left in a deleted namespace runs on, unreachable, holding it.
        let n = topology::stop_processes(name, daemon);
        if n > 0 {
            did.push(format!(
                "stopped {} in its namespaces",
                topology::processes(n)
            ));
        }
    }
    if let Some(pid) = daemon {
        longhaul_sys::process::terminate(pid)
            .map_err(EmulateError::setup("stop the emulator process"))?;
        let start = Instant::now();
        while longhaul_sys::process::process_alive(pid) && start.elapsed() < STOP_WAIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        if longhaul_sys::process::process_alive(pid) {
            return Err(EmulateError::DidNotStop {
                name: name.to_string(),
                pid,
                waited_secs: STOP_WAIT.as_secs(),
            });
        }
        did.push(format!("stopped pid {pid}"));
    }
    if !root {
        return Err(EmulateError::NotRoot);
    }
    for ns in topology::remove_leftovers(name)? {
        did.push(format!("removed namespace {ns}"));
    }
    state::remove(name);
    Ok(did)
}
