//! The `longhaul serve` process of the tests ([`Server`]): started on a loopback port with
//! its stderr collected, killed, restarted; tokens made with `longhaul token`
//! ([`make_token`]) and configs it must refuse ([`refused_config`]).

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{longhaul, longhaul_via, write_file, Proc};

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
