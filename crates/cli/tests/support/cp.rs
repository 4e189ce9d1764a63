//! Running `longhaul cp`: a command with the test's HOME ([`cp_command`]), run to its end
//! within a time limit ([`run`], [`CpRun`]) or spawned with its output piped
//! ([`spawn_piped`], [`Running`]). The `cp!` macro is in the parent module.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{longhaul, Proc};

/// Time limit of one ordinary `longhaul cp` run in these tests.
pub const CP_LIMIT: Duration = Duration::from_secs(120);

/// `longhaul cp` with the test's HOME; add the arguments.
pub fn cp_command(home: &Path) -> Command {
    let mut c = longhaul(home);
    c.arg("cp");
    c
}

/// The outcome of one `longhaul cp` run.
pub struct CpRun {
    /// The command line, for messages.
    pub cmdline: String,
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output (JSON Lines with `--json`).
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl CpRun {
    /// The exit code (None if killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Everything about the run, for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nexit: {:?}\nstdout:\n{}\nstderr:\n{}",
            self.cmdline, self.status, self.stdout, self.stderr
        )
    }

    /// Panics (with the run described) unless the run exited 0.
    pub fn assert_ok(&self) -> &Self {
        assert_eq!(self.code(), Some(0), "cp failed\n{}", self.describe());
        self
    }

    /// Panics unless the run exited with `code`.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code(),
            Some(code),
            "expected exit {code}\n{}",
            self.describe()
        );
        self
    }

    /// Panics unless the run exited non-zero (and was not killed by a signal).
    pub fn assert_failed(&self) -> &Self {
        assert!(
            matches!(self.code(), Some(c) if c != 0),
            "expected a failure\n{}",
            self.describe()
        );
        self
    }

    /// The JSON Lines on stdout; every line must be JSON with a "type".
    pub fn json(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}\n{}", self.describe()));
                assert!(v["type"].is_string(), "line without type: {l}");
                v
            })
            .collect()
    }

    /// The JSON object of type `ty` (the last one of that type).
    pub fn json_of(&self, ty: &str) -> serde_json::Value {
        self.json()
            .into_iter()
            .rev()
            .find(|v| v["type"] == ty)
            .unwrap_or_else(|| panic!("no {ty:?} line\n{}", self.describe()))
    }

    /// The `end` line's unsigned field `key`.
    pub fn end_u64(&self, key: &str) -> u64 {
        let end = self.json_of("end");
        end[key]
            .as_u64()
            .unwrap_or_else(|| panic!("end.{key} is not an unsigned integer: {end}"))
    }
}

/// Runs `cmd` to completion with piped output; kills it and panics after `limit`.
pub fn run(cmd: &mut Command, limit: Duration) -> CpRun {
    let child = spawn_piped(cmd);
    child.wait(limit)
}

/// A running `longhaul cp` whose stdout and stderr are collected by threads.
pub struct Running {
    /// The command line, for messages.
    pub cmdline: String,
    proc: Proc,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
}

/// Spawns `cmd` with stdout and stderr collected.
pub fn spawn_piped(cmd: &mut Command) -> Running {
    let cmdline = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmdline}: {e}"));
    let collect = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = collect(Box::new(child.stdout.take().unwrap()));
    let err = collect(Box::new(child.stderr.take().unwrap()));
    Running {
        cmdline,
        proc: Proc(child),
        out,
        err,
    }
}

impl Running {
    /// True once the process has ended (it is then reaped by `wait`).
    pub fn has_exited(&mut self) -> bool {
        matches!(self.proc.0.try_wait(), Ok(Some(_)))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.proc.0.id()
    }

    /// kill -9 now (the output collected so far stays readable through `wait`).
    pub fn kill9(&mut self) {
        let _ = self.proc.0.kill();
    }

    /// Waits for the end (killing it and panicking after `limit`), then collects output.
    pub fn wait(mut self, limit: Duration) -> CpRun {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.proc.0.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                self.proc.kill();
                let out = self.out.join().unwrap_or_default();
                let err = self.err.join().unwrap_or_default();
                panic!(
                    "{} did not end within {limit:?}; killed\nstdout:\n{out}\nstderr:\n{err}",
                    self.cmdline
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        CpRun {
            cmdline: self.cmdline.clone(),
            status,
            stdout: self.out.join().unwrap_or_default(),
            stderr: self.err.join().unwrap_or_default(),
        }
    }
}
