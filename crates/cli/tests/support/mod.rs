//! Helpers shared by every integration test of the `longhaul` binary: the root check
//! ([`is_root`], the effective uid), child processes killed on drop ([`Proc`]), scratch
//! directories removed on drop ([`Scratch`]), `longhaul` commands with a private HOME
//! ([`longhaul`], [`longhaul_via`]) and a `longhaul serve` process that can be killed and
//! restarted ([`Server`]). For the `longhaul cp` tests also: `longhaul cp` runs with a time
//! limit, a seeded RNG whose seed is printed, byte-exact comparison of files and trees (modes
//! and mtimes too), and reading the receiver's `.NAME.longhaul-part` /
//! `.NAME.longhaul-manifest` files.
//!
//! Every test file includes this module with `mod support;` and uses a part of it; no test
//! file keeps its own copy of these.
#![allow(dead_code)]

pub mod http;
pub mod mounts;
pub mod sshd;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_longhaul");
/// One MiB, the chunk size most tests pass with `--chunk 1MiB`.
pub const MIB: u64 = 1 << 20;

// ---------------------------------------------------------------------------------------
// Processes and directories
// ---------------------------------------------------------------------------------------

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

static SCRATCH_SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh directory, removed (recursively) on drop unless `LONGHAUL_KEEP_SCRATCH` is set
/// (to look at what a failed test left).
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// Creates `longhaul-test-NAME-PID-SEQ` in the system temp dir.
    pub fn new(name: &str) -> Self {
        Self::under(&std::env::temp_dir(), name)
    }

    /// Creates `longhaul-test-NAME-PID-SEQ` in cargo's per-target temp dir
    /// (`CARGO_TARGET_TMPDIR`, inside `target/`), for files another program (a browser)
    /// must read that a private `/tmp` would hide.
    pub fn in_target_dir(name: &str) -> Self {
        Self::under(Path::new(env!("CARGO_TARGET_TMPDIR")), name)
    }

    /// Creates `longhaul-test-NAME-PID-SEQ` in `/dev/shm` (tmpfs) when it exists, else
    /// in the system temp dir: for trees of many small files made and read fast.
    pub fn in_memory(name: &str) -> Self {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            Self::under(shm, name)
        } else {
            Self::new(name)
        }
    }

    fn under(base: &Path, name: &str) -> Self {
        let seq = SCRATCH_SEQ.fetch_add(1, Ordering::Relaxed);
        let p = base.join(format!("longhaul-test-{name}-{}-{seq}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Self(p)
    }

    /// A path inside the scratch directory.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.0.join(rel)
    }

    /// Creates (with parents) and returns a directory inside the scratch directory.
    pub fn dir(&self, rel: impl AsRef<Path>) -> PathBuf {
        let p = self.0.join(rel);
        fs::create_dir_all(&p).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("LONGHAUL_KEEP_SCRATCH").is_some() {
            eprintln!("kept {}", self.0.display());
            return;
        }
        let _ = fs::remove_dir_all(&self.0);
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

/// `longhaul serve --listen 127.0.0.1 --port 0 [--root DIR]` (or with any arguments, see
/// [`Server::start_args`]) with its stderr collected.
pub struct Server {
    proc: Proc,
    /// `ADDR:PORT` as printed on the "listening on" line.
    pub addr: String,
    log: Arc<Mutex<String>>,
    home: PathBuf,
    /// What runs `longhaul` (see [`longhaul_via`]).
    prefix: Vec<String>,
    /// The arguments after `serve`.
    args: Vec<OsString>,
}

impl Server {
    /// Starts a server serving `root` and waits for its "listening on" line.
    pub fn start(home: &Path, root: &Path) -> Self {
        Self::spawn(home, Some(root))
    }

    /// Starts a server without `--root` (transfers must be refused).
    pub fn start_without_root(home: &Path) -> Self {
        Self::spawn(home, None)
    }

    /// Starts a server listening on `listen` (e.g. `::1`) serving `root`.
    pub fn start_on(home: &Path, root: &Path, listen: &str) -> Self {
        Self::spawn_on(home, Some(root), listen)
    }

    /// Starts a server serving `root` with `--token-file FILE`.
    pub fn start_with_token_file(home: &Path, root: &Path, file: &Path) -> Self {
        Self::spawn_with(home, Some(root), "127.0.0.1", Some(file))
    }

    fn spawn(home: &Path, root: Option<&Path>) -> Self {
        Self::spawn_on(home, root, "127.0.0.1")
    }

    fn spawn_on(home: &Path, root: Option<&Path>, listen: &str) -> Self {
        Self::spawn_with(home, root, listen, None)
    }

    fn spawn_with(
        home: &Path,
        root: Option<&Path>,
        listen: &str,
        token_file: Option<&Path>,
    ) -> Self {
        let mut args: Vec<OsString> = ["--listen", listen, "--port", "0"]
            .iter()
            .map(OsString::from)
            .collect();
        if let Some(f) = token_file {
            args.extend([OsString::from("--token-file"), f.into()]);
        }
        if let Some(root) = root {
            args.extend([OsString::from("--root"), root.into()]);
        }
        Self::launch(Vec::new(), home, args)
    }

    /// Starts a server on 127.0.0.1 serving `root` with `extra` options (`--memory 1GiB`).
    pub fn start_with(home: &Path, root: &Path, extra: &[&str]) -> Self {
        let mut args: Vec<OsString> = ["--listen", "127.0.0.1", "--port", "0", "--root"]
            .iter()
            .map(OsString::from)
            .collect();
        args.push(root.into());
        args.extend(extra.iter().map(OsString::from));
        Self::launch(Vec::new(), home, args)
    }

    /// Starts `longhaul serve ARGS` through `prefix` (see [`longhaul_via`]; `&[]` runs it
    /// directly) and waits for its "listening on" line.
    pub fn start_args(prefix: &[&str], home: &Path, args: &[&str]) -> Self {
        Self::launch(
            prefix.iter().map(|p| p.to_string()).collect(),
            home,
            args.iter().map(OsString::from).collect(),
        )
    }

    fn launch(prefix: Vec<String>, home: &Path, args: Vec<OsString>) -> Self {
        let prefix_refs: Vec<&str> = prefix.iter().map(String::as_str).collect();
        let mut cmd = longhaul_via(&prefix_refs, home);
        cmd.arg("serve").args(&args);
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let mut head = String::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                let _ = child.wait();
                panic!("longhaul serve ended before listening; it said:\n{head}");
            };
            head.push_str(&line);
            head.push('\n');
            if let Some((_, a)) = line.rsplit_once("listening on ") {
                break a.trim().to_string();
            }
        };
        let log = Arc::new(Mutex::new(head));
        let sink = Arc::clone(&log);
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                if s.len() < 1 << 20 {
                    s.push_str(&line);
                    s.push('\n');
                }
            }
        });
        Self {
            proc: Proc(child),
            addr,
            log,
            home: home.to_path_buf(),
            prefix,
            args,
        }
    }

    /// `longhaul://ADDR:PORT/PATH`, the remote argument of `longhaul cp`.
    pub fn remote(&self, path: &str) -> String {
        format!("longhaul://{}/{path}", self.addr)
    }

    /// `longhaul://ADDR:PORT/PATH` with a path that may not be UTF-8.
    pub fn remote_os(&self, path: &OsStr) -> OsString {
        let mut s = OsString::from(format!("longhaul://{}/", self.addr));
        s.push(path);
        s
    }

    /// The server's process id (for `/proc/PID/status`).
    pub fn pid(&self) -> u32 {
        self.proc.0.id()
    }

    /// kill -9 the server and reap it.
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Kills this server and starts a new one with the same arguments (on a new port when
    /// it asked for port 0).
    pub fn restart(&mut self) {
        self.kill();
        *self = Self::launch(self.prefix.clone(), &self.home.clone(), self.args.clone());
    }

    /// What the server printed on stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits up to 10 s for the server's log to contain `text` (a session's line comes
    /// when the server is done with it, which may be after the client exits); returns
    /// the log either way.
    #[allow(dead_code)]
    pub fn log_with(&self, text: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.log();
            if log.contains(text) || std::time::Instant::now() >= deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Running `longhaul cp`
// ---------------------------------------------------------------------------------------

/// Time limit of one ordinary `longhaul cp` run in these tests.
pub const CP_LIMIT: Duration = Duration::from_secs(120);

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

/// Makes a token file with `longhaul token --out FILE` (mode 0600, a fresh token).
pub fn make_token(home: &Path, file: &Path) {
    let out = longhaul(home)
        .args(["token", "--out"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "longhaul token --out: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `text` to the config file `file` and runs `longhaul serve --config FILE`, which
/// must refuse it: exit 2, before listening. Returns what it said on stderr.
pub fn refused_config(home: &Path, file: &Path, text: &str) -> String {
    write_file(file, text.as_bytes(), 0o644);
    let out = longhaul(home)
        .args(["serve", "--config"])
        .arg(file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{text}: {err}");
    assert!(!err.contains("listening on"), "{err}");
    err
}

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

// ---------------------------------------------------------------------------------------
// Seeded randomness
// ---------------------------------------------------------------------------------------

/// SplitMix64: small, seeded, good enough for test data and kill points.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded from `LONGHAUL_TEST_SEED` or the clock; prints the seed.
    pub fn from_env(test: &str) -> Self {
        let seed = std::env::var("LONGHAUL_TEST_SEED")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    ^ u64::from(std::process::id()) << 32
            });
        eprintln!("{test}: seed {seed} (rerun with LONGHAUL_TEST_SEED={seed})");
        Self(seed)
    }

    /// A generator with a fixed seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// `n` random bytes (never a whole zero 4 KiB block in practice).
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

// ---------------------------------------------------------------------------------------
// Files and trees
// ---------------------------------------------------------------------------------------

/// Writes `data` to `path` (creating parents), then sets `mode`.
pub fn write_file(path: &Path, data: &[u8], mode: u32) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    let mut f = File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    f.write_all(data).unwrap();
    drop(f);
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Writes `size` random bytes to `path` with mode 0644.
pub fn write_random(path: &Path, rng: &mut Rng, size: usize) -> Vec<u8> {
    let data = rng.bytes(size);
    write_file(path, &data, 0o644);
    data
}

/// Sets the modification time of a file or directory (seconds + nanoseconds).
pub fn set_mtime(path: &Path, secs: u64, nanos: u32) {
    let t = UNIX_EPOCH + Duration::new(secs, nanos);
    let f = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    f.set_modified(t)
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", path.display()));
}

/// (seconds, nanoseconds) of a path's mtime, not following symlinks.
pub fn mtime_of(md: &fs::Metadata) -> (i64, i64) {
    (md.mtime(), md.mtime_nsec())
}

/// Bytes allocated on disk for `path` (st_blocks x 512).
pub fn allocated_bytes(path: &Path) -> u64 {
    fs::metadata(path).unwrap().blocks() * 512
}

/// Panics with the first differing offset unless `a` and `b` hold the same bytes.
/// Reads only the union of both files' data segments (SEEK_DATA/SEEK_HOLE): outside it
/// both are holes, hence zeros. Streams in 8 MiB blocks, so multi-GB sparse files are
/// compared in the time their data takes.
pub fn assert_same_bytes(a: &Path, b: &Path) {
    let ma = fs::metadata(a).unwrap_or_else(|e| panic!("{}: {e}", a.display()));
    let mb = fs::metadata(b).unwrap_or_else(|e| panic!("{}: {e}", b.display()));
    assert_eq!(
        ma.len(),
        mb.len(),
        "sizes differ: {} vs {}",
        a.display(),
        b.display()
    );
    let len = ma.len();
    let fa = File::open(a).unwrap();
    let fb = File::open(b).unwrap();
    let segments = |f: &File| {
        longhaul_sys::file_io::data_segments(f, 0..len, 4096)
            .unwrap_or_else(|_| std::iter::once(0..len).collect())
    };
    let mut ranges = segments(&fa);
    ranges.extend(segments(&fb));
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<u64>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    let mut ba = vec![0u8; 8 << 20];
    let mut bb = vec![0u8; 8 << 20];
    for r in merged {
        let mut offset = r.start;
        while offset < r.end {
            let n = (r.end - offset).min(ba.len() as u64) as usize;
            fa.read_exact_at(&mut ba[..n], offset)
                .unwrap_or_else(|e| panic!("read {} at {offset}: {e}", a.display()));
            fb.read_exact_at(&mut bb[..n], offset)
                .unwrap_or_else(|e| panic!("read {} at {offset}: {e}", b.display()));
            if ba[..n] != bb[..n] {
                let i = (0..n).find(|&i| ba[i] != bb[i]).unwrap();
                panic!(
                    "{} and {} differ at byte {} ({:#04x} vs {:#04x})",
                    a.display(),
                    b.display(),
                    offset + i as u64,
                    ba[i],
                    bb[i]
                );
            }
            offset += n as u64;
        }
    }
}

/// What `assert_same_tree` compares beyond names, kinds and bytes.
#[derive(Clone, Copy)]
pub struct TreeCheck {
    /// Permission bits (mode & 0o7777) of files and directories.
    pub modes: bool,
    /// File mtimes to the nanosecond.
    pub file_mtimes: bool,
    /// Directory mtimes to the nanosecond.
    pub dir_mtimes: bool,
}

/// Everything: bytes, modes, file and directory mtimes.
pub const EXACT: TreeCheck = TreeCheck {
    modes: true,
    file_mtimes: true,
    dir_mtimes: true,
};

/// Entries of a tree by relative path (raw bytes), symlinks and special files included.
pub fn list_tree(root: &Path) -> BTreeMap<Vec<u8>, fs::Metadata> {
    fn walk(root: &Path, rel: &Path, out: &mut BTreeMap<Vec<u8>, fs::Metadata>) {
        let dir = root.join(rel);
        for e in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            let md = fs::symlink_metadata(root.join(&r)).unwrap();
            let is_dir = md.is_dir();
            out.insert(r.as_os_str().as_bytes().to_vec(), md);
            if is_dir {
                walk(root, &r, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// Panics unless `dst` holds exactly the regular files, directories and symlinks of `src`
/// (special files of `src` must be absent from `dst`), with identical bytes, symlinks as
/// symlinks with identical targets (never followed) and, as `check` says, modes and
/// mtimes (a symlink's own). Returns (regular files and symlinks, the files' total bytes):
/// what `longhaul cp` counts as files.
pub fn assert_same_tree(src: &Path, dst: &Path, check: TreeCheck) -> (u64, u64) {
    let a = list_tree(src);
    let b = list_tree(dst);
    let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    let (mut files, mut bytes) = (0u64, 0u64);
    for (rel, ma) in &a {
        let ft = ma.file_type();
        let copied = ft.is_file() || ft.is_dir() || ft.is_symlink();
        let Some(mb) = b.get(rel) else {
            assert!(!copied, "{} missing in {}", show(rel), dst.display());
            continue;
        };
        assert!(
            copied,
            "{} is neither a file, a directory nor a symlink in the source but exists in {}",
            show(rel),
            dst.display()
        );
        let fb = mb.file_type();
        assert_eq!(
            (ft.is_dir(), ft.is_symlink()),
            (fb.is_dir(), fb.is_symlink()),
            "{}: kind differs",
            show(rel)
        );
        assert!(
            fb.is_file() || fb.is_dir() || fb.is_symlink(),
            "{}: not a regular file, directory or symlink in {}",
            show(rel),
            dst.display()
        );
        let p = Path::new(OsStr::from_bytes(rel));
        if ft.is_symlink() {
            files += 1;
            assert_eq!(
                fs::read_link(src.join(p)).unwrap(),
                fs::read_link(dst.join(p)).unwrap(),
                "symlink {}: target differs",
                show(rel)
            );
            if check.file_mtimes {
                assert_eq!(mtime_of(ma), mtime_of(mb), "{}: mtime differs", show(rel));
            }
        } else if ft.is_file() {
            files += 1;
            bytes += ma.len();
            assert_same_bytes(&src.join(p), &dst.join(p));
            if check.file_mtimes {
                assert_eq!(mtime_of(ma), mtime_of(mb), "{}: mtime differs", show(rel));
            }
        } else if check.dir_mtimes {
            assert_eq!(
                mtime_of(ma),
                mtime_of(mb),
                "directory {}: mtime differs",
                show(rel)
            );
        }
        if check.modes {
            assert_eq!(
                ma.mode() & 0o7777,
                mb.mode() & 0o7777,
                "{}: mode differs ({:o} vs {:o})",
                show(rel),
                ma.mode() & 0o7777,
                mb.mode() & 0o7777
            );
        }
    }
    let extra: Vec<String> = b
        .keys()
        .filter(|k| !a.contains_key(*k))
        .map(|k| show(k))
        .collect();
    assert!(
        extra.is_empty(),
        "{} holds entries the source does not: {extra:?}",
        dst.display()
    );
    (files, bytes)
}

/// Relative paths (lossy) of every entry under `root`, for "nothing else was written".
pub fn names_under(root: &Path) -> Vec<String> {
    list_tree(root)
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

/// True if some regular file under `root` contains `needle`.
pub fn any_file_contains(root: &Path, needle: &[u8]) -> bool {
    list_tree(root).iter().any(|(rel, md)| {
        md.file_type().is_file()
            && fs::read(root.join(OsStr::from_bytes(rel)))
                .map(|d| d.windows(needle.len()).any(|w| w == needle))
                .unwrap_or(false)
    })
}

/// A path from raw bytes (for names that are not UTF-8).
pub fn os(bytes: &[u8]) -> OsString {
    OsString::from_vec(bytes.to_vec())
}

// ---------------------------------------------------------------------------------------
// The receiver's partial state
// ---------------------------------------------------------------------------------------

/// `DIR/.NAME.longhaul-part`.
pub fn part_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.longhaul-part"))
}

/// `DIR/.NAME.longhaul-manifest`.
pub fn manifest_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.longhaul-manifest"))
}

/// Number of 40-byte records after the 56-byte header (a torn last record not counted);
/// 0 when there is no manifest. Cheap enough to poll.
pub fn manifest_record_count(path: &Path) -> u64 {
    use longhaul_transfer::manifest::{HEADER_LEN, RECORD_LEN};
    fs::metadata(path)
        .map(|m| m.len().saturating_sub(HEADER_LEN as u64) / RECORD_LEN as u64)
        .unwrap_or(0)
}

/// Verified chunk indices (with their BLAKE3 chunk hashes) of a manifest as the receiver
/// will read it (torn last record dropped); empty when there is none or it is shorter
/// than its header (killed between creating and writing it). Panics if the manifest is otherwise corrupt:
/// a kill never damages more than the last append.
pub fn manifest_verified(path: &Path) -> Vec<(u32, [u8; 32])> {
    let Ok(bytes) = fs::read(path) else {
        return Vec::new();
    };
    if bytes.len() < longhaul_transfer::manifest::HEADER_LEN {
        return Vec::new();
    }
    let loaded = longhaul_transfer::ResumeManifest::parse(&bytes)
        .unwrap_or_else(|e| panic!("manifest {} is corrupt: {e}", path.display()));
    loaded.manifest.verified().collect()
}

/// Waits until `path`'s length has not changed for `quiet` (a receiver whose sender died
/// may still be recording the chunks it had); gives up after 20 s.
pub fn wait_until_stable(path: &Path, quiet: Duration) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let len = || fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut last = len();
    let mut since = Instant::now();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = len();
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return;
        }
    }
    panic!("{} kept changing for 20 s", path.display());
}
