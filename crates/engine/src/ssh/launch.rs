//! This end of an ssh start-up: runs `ssh [-e opts] [user@]host REMOTE ssh-server`, reads
//! the far end's ready line, finds an address that reaches its port, and owns the ssh
//! process for the whole session.
//!
//! The host's name is resolved here first and the addresses passed on
//! (`ssh-server --client-dials A,B`): when the far host's side of the ssh connection is
//! one of them, the far end listens on that address alone (see
//! [`super::far::listen_address`]).
//!
//! ssh's stdin and stdout are pipes held here: stdin stays open while the session runs
//! (closing it is how the far process learns to exit), stdout carries the one ready line.
//! ssh's stderr goes on to this process's stderr (password prompts use the terminal, not
//! these pipes) and its last few KiB are kept for error messages. [`FarEnd`] kills ssh
//! when dropped, so every error path leaves no ssh behind; [`FarEnd::finish`] is the
//! orderly end.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::transport::tls::Fingerprint;
use longhaul_proto::ssh_ready::MAX_READY_LINE;
use longhaul_proto::{ProtoError, SshReady, Token, PROTOCOL_VERSION};
use longhaul_transfer::SshHost;

use super::deploy::{self, ThisBinary, Uploaded};
use super::reach::{choose, Detour, RelaySpec};
use super::relay::SshRelay;
use super::reverse::{FarStdin, ReverseRelay};
use super::rsh::{split_rsh, ssh_argv, DEFAULT_RSH};
use super::SshError;

/// ssh's stderr kept for messages.
const STDERR_TAIL: usize = 4096;
/// Other output the far side may print before its ready line (a chatty login script).
const MAX_NOISE: usize = 64 * 1024;
/// How long ssh gets to end once its stdin is closed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// Most addresses of the host's name passed to the far end.
const MAX_CLIENT_DIALS: usize = 16;

/// How to start the far end.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// `-e/--rsh`: the ssh command with options (`None`: `ssh`).
    pub rsh: Option<String>,
    /// `--remote-longhaul`: the far command. `None`: this binary's copy in the far cache,
    /// else the far PATH's `longhaul`, uploading this binary when neither will do (see
    /// [`super::deploy`]).
    pub remote_longhaul: Option<String>,
    /// Whether this binary may be uploaded (`--no-upload`: not).
    pub upload: bool,
    /// `--port-range LO-HI` for the far end's listening port.
    pub port_range: Option<(u16, u16)>,
    /// How the session's connections reach the far end's port.
    pub data_path: DataPath,
    /// The data streams the session will open (`--streams`), for the logins made ahead
    /// of a copy through ssh; `None`: [`super::relay::STREAMS`].
    pub streams: Option<u16>,
    /// How long to wait for the ready line.
    pub ready_timeout: Duration,
    /// Told what is happening when the start takes a detour (an upload).
    pub notice: Notice,
}

impl Default for SshOptions {
    fn default() -> Self {
        Self {
            rsh: None,
            remote_longhaul: None,
            upload: true,
            port_range: None,
            data_path: DataPath::Auto,
            streams: None,
            ready_timeout: super::READY_TIMEOUT,
            notice: Notice::default(),
        }
    }
}

/// How a session's connections reach the far end's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPath {
    /// Directly over TCP; through ssh ([`super::relay`]) when the port cannot be reached.
    Auto,
    /// Through ssh, without trying the port (`--via-ssh`).
    Ssh,
}

/// Something that takes a note.
pub type NoteSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Where the start's notes go (the command's warnings); nowhere by default.
#[derive(Clone, Default)]
pub struct Notice(pub Option<NoteSink>);

impl Notice {
    pub(super) fn say(&self, text: &str) {
        if let Some(f) = &self.0 {
            f(text);
        }
    }
}

impl std::fmt::Debug for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Notice(set)"
        } else {
            "Notice(none)"
        })
    }
}

/// A running far end: the ssh process, what it announced, and where it can be reached.
pub struct FarEnd {
    /// The connections carried through ssh, when the port could not be reached (or
    /// `--via-ssh`): declared first, so its ssh connections end first.
    relay: Option<SshRelay>,
    /// The connections made back from the far end, when its port could not be reached
    /// but this host can be ([`super::reverse`]).
    back: Option<ReverseRelay>,
    /// Declared before the rest so that it drops first: ssh is killed, the far end sees
    /// its channel close.
    ssh: Guard,
    stdin: FarStdin,
    ready: SshReady,
    /// `ADDR:PORT` that answered the reachability check.
    target: String,
    /// This binary was uploaded to the far host for this start.
    uploaded: Option<Uploaded>,
    /// How long the start took (ssh's login, the far start, an upload).
    took: Duration,
}

impl FarEnd {
    /// Starts the far end on `host` and checks that its port can be reached; uploads this
    /// binary first when the far host has no longhaul of this protocol (and
    /// `--remote-longhaul` was not given, nor `--no-upload`).
    pub fn start(host: &SshHost, opts: &SshOptions) -> Result<FarEnd, SshError> {
        let t0 = Instant::now();
        let mut end = Self::start_or_upload(host, opts)?;
        end.took = t0.elapsed();
        Ok(end)
    }

    fn start_or_upload(host: &SshHost, opts: &SshOptions) -> Result<FarEnd, SshError> {
        if let Some(remote) = &opts.remote_longhaul {
            return Self::start_as(host, opts, remote, remote);
        }
        let Ok(me) = ThisBinary::current() else {
            // This binary cannot be read (a deleted file?): the far PATH's, as before.
            return Self::start_as(host, opts, "longhaul", "longhaul");
        };
        let command = deploy::far_command(&me.name);
        match Self::start_as(host, opts, &command, "longhaul") {
            Err(e) if opts.upload && e.wants_upload() => {
                opts.notice.say(&format!(
                    "{}: {}; uploading this longhaul to ~/.cache/longhaul/{} there \
                     (--no-upload refuses; --remote-longhaul names one)",
                    host.destination(),
                    e.short(),
                    me.name
                ));
                let rsh = split_rsh(opts.rsh.as_deref().unwrap_or(DEFAULT_RSH))?;
                let up = deploy::upload(&rsh, host, &me)?;
                opts.notice.say(&format!(
                    "uploaded to {}: {:.1} MB compressed in {:.1} s",
                    up.far_path,
                    up.sent_bytes as f64 / 1e6,
                    up.took.as_secs_f64()
                ));
                let mut end = Self::start_as(host, opts, &command, &up.far_path)?;
                end.uploaded = Some(up);
                Ok(end)
            }
            other => other,
        }
    }

    /// What was uploaded to start this far end, if anything.
    pub fn uploaded(&self) -> Option<&Uploaded> {
        self.uploaded.as_ref()
    }

    /// How long the start took: ssh's login, the far start, an upload.
    pub fn took(&self) -> Duration {
        self.took
    }

    /// Starts `command ssh-server ...` on `host`; `shown` names it in messages.
    fn start_as(
        host: &SshHost,
        opts: &SshOptions,
        command: &str,
        shown: &str,
    ) -> Result<FarEnd, SshError> {
        let rsh = split_rsh(opts.rsh.as_deref().unwrap_or(DEFAULT_RSH))?;
        let mut far_args: Vec<String> = match opts.port_range {
            Some((lo, hi)) => vec!["--port-range".into(), format!("{lo}-{hi}")],
            None => Vec::new(),
        };
        // Where this end will dial besides the announced address; a name only ssh knows
        // (a `Host` alias of ~/.ssh/config) resolves to nothing here.
        let resolved = (host.host.as_str(), 0)
            .to_socket_addrs()
            .map(Vec::from_iter);
        let mut dials: Vec<IpAddr> = Vec::new();
        for ip in resolved.iter().flatten().map(SocketAddr::ip) {
            if !dials.contains(&ip) && dials.len() < MAX_CLIENT_DIALS {
                dials.push(ip);
            }
        }
        if !dials.is_empty() {
            far_args.push("--client-dials".into());
            far_args.push(
                dials
                    .iter()
                    .map(IpAddr::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        let dest = host.destination();
        let argv = ssh_argv(&rsh, host.port, &dest, command, &far_args);
        // The ssh part of the command, to try by hand.
        let ssh_part = &argv[..argv.len() - 2 - far_args.len()];
        // --via-ssh: the streams' logins go now, beside the far start's.
        let spec = RelaySpec {
            rsh: &rsh,
            port: host.port,
            destination: &dest,
            far_longhaul: command,
            count: usize::from(opts.streams.unwrap_or(super::relay::STREAMS)) + 1,
        };
        let ahead = match opts.data_path {
            DataPath::Ssh => Some(spec.logins_ahead(spec.count)?),
            DataPath::Auto => None,
        };
        let mut child = spawn_ssh(&argv)?;
        // From here on a guard kills ssh on every error path.
        let stdin: FarStdin = Arc::new(Mutex::new(child.stdin.take()));
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let mut guard = Guard(Some(child));
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
        if let Some(err) = stderr {
            let tail = tail.clone();
            spawn("lh-ssh-stderr", move || pass_stderr(err, &tail))?;
        }
        let (tx, rx) = mpsc::channel();
        if let Some(out) = stdout {
            spawn("lh-ssh-stdout", move || read_ready(out, &tx))?;
        }
        let said = |noise: &[u8]| said(noise, &tail);
        let ready = match rx.recv_timeout(opts.ready_timeout) {
            Ok(Stdout::Ready(line)) => SshReady::parse(&line).map_err(|cause| match cause {
                ProtoError::VersionMismatch { theirs, .. } => SshError::Version {
                    host: dest.clone(),
                    theirs,
                    ours: PROTOCOL_VERSION,
                },
                cause => SshError::BadReady {
                    host: dest.clone(),
                    cause,
                },
            })?,
            Ok(Stdout::Ended(noise)) => {
                let status = guard.wait_for(Duration::from_secs(5));
                return Err(classify(status, &said(&noise), &dest, shown, ssh_part));
            }
            Err(_) => {
                return Err(SshError::NoReady {
                    host: dest,
                    after: opts.ready_timeout,
                    said: said(&[]),
                })
            }
        };
        if ready.cert.is_none() {
            return Err(SshError::BadReady {
                host: dest,
                cause: ProtoError::InvalidField {
                    field: "cert",
                    why: "no certificate fingerprint to pin: every connection needs TLS".into(),
                },
            });
        }
        let back = (&stdin, opts.port_range);
        let (target, detour) = choose(
            (ready.addr, ready.port),
            (&host.host, resolved),
            (&spec, back),
            ahead,
            &opts.notice,
        )?;
        let (relay, back) = match detour {
            Detour::Direct => (None, None),
            Detour::Ssh(relay) => (Some(relay), None),
            Detour::Back(back) => (None, Some(back)),
        };
        Ok(FarEnd {
            relay,
            back,
            ssh: guard,
            stdin,
            ready,
            target,
            uploaded: None,
            took: Duration::ZERO,
        })
    }

    /// The streams and the jump-start of a session that asked for `streams` and
    /// `jump_start`, to this far end when there is one: through ssh each stream is held to
    /// ssh's channel window, so as many as an ssh copier runs unless asked
    /// ([`super::relay::STREAMS`]), and no jump (the relay's loopback is no path); with
    /// connections back, no jump either.
    pub fn session_shape(
        end: Option<&FarEnd>,
        streams: Option<u16>,
        jump_start: bool,
    ) -> (Option<u16>, bool) {
        match end {
            Some(e) if e.via_ssh().is_some() => (streams.or(Some(super::relay::STREAMS)), false),
            // The dialer sees the relay's loopback address, not the far host's: no route
            // of its own to jump on.
            Some(e) if e.via_connect_back().is_some() => (streams, false),
            _ => (streams, jump_start),
        }
    }

    /// Whether the session's connections go through ssh (the relay), and how many ssh
    /// connections it has started so far.
    pub fn via_ssh(&self) -> Option<usize> {
        self.relay.as_ref().map(SshRelay::tunnels)
    }

    /// Whether the session's connections come back from the far end to this host's port
    /// (the far port could not be reached, [`super::reverse`]), and how many have.
    pub fn via_connect_back(&self) -> Option<(u16, usize)> {
        self.back.as_ref().map(|b| (b.public_port(), b.carried()))
    }

    /// `ADDR:PORT` to connect to (what `dial` takes).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The session's one-time token.
    pub fn token(&self) -> Token {
        // 64 hex digits are always a valid token (at least 16 bytes).
        Token::new(self.ready.token_hex().as_bytes()).unwrap_or_else(|_| unreachable!())
    }

    /// The far end's certificate, as announced over the ssh channel (pinned: nothing
    /// else is trusted for this session).
    pub fn fingerprint(&self) -> Fingerprint {
        // `start` refused a ready line without one.
        Fingerprint(self.ready.cert.unwrap_or_default())
    }

    /// What the far end announced.
    pub fn ready(&self) -> &SshReady {
        &self.ready
    }

    /// The orderly end: closes ssh's stdin (the far process exits on that), waits a
    /// grace period for ssh to end, then kills it.
    pub fn finish(mut self) {
        if let Ok(mut stdin) = self.stdin.lock() {
            stdin.take();
        }
        self.ssh.wait_for(CLOSE_GRACE);
    }
}

/// Runs ssh (`argv`) with its stdin, stdout and stderr as pipes.
pub(super) fn spawn_ssh(argv: &[String]) -> Result<Child, SshError> {
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|cause| SshError::Spawn {
            program: argv[0].clone(),
            cause,
        })
}

/// Kills and reaps ssh unless taken.
pub(super) struct Guard(pub(super) Option<Child>);

impl Guard {
    /// Waits up to `limit` for ssh to end on its own (then kills it) and reaps it: its
    /// exit status.
    pub(super) fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let mut child = self.0.take()?;
        let deadline = Instant::now() + limit;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    let _ = child.kill();
                    return child.wait().ok();
                }
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What ssh's stdout brought.
enum Stdout {
    /// A line that starts like a ready line (parsed by the caller).
    Ready(Vec<u8>),
    /// The end (or too much noise) before any: the noise seen, bounded.
    Ended(Vec<u8>),
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), SshError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
        .map_err(|cause| SshError::Io {
            what: "starting a thread for ssh's output",
            cause,
        })
}

/// Reads lines until the ready line (each line read at most [`MAX_READY_LINE`] + 1 bytes
/// at a time, at most [`MAX_NOISE`] bytes of other output), then drains to the end.
fn read_ready(out: impl Read, tx: &mpsc::Sender<Stdout>) {
    let mut reader = BufReader::new(out);
    let mut noise = Vec::new();
    let mut seen = 0usize;
    let mut line = Vec::new();
    loop {
        line.clear();
        // A read error ends the wait like the end of the stream.
        let n = (&mut reader)
            .take(MAX_READY_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .unwrap_or_default();
        if n == 0 || seen > MAX_NOISE {
            let _ = tx.send(Stdout::Ended(noise));
            return;
        }
        if SshReady::is_ready_line(&line) {
            let _ = tx.send(Stdout::Ready(line.clone()));
            break;
        }
        seen += n;
        if noise.len() < 1024 {
            noise.extend_from_slice(&line[..line.len().min(1024 - noise.len())]);
        }
    }
    // Nothing more is expected; keep the pipe from filling up.
    let _ = std::io::copy(&mut reader, &mut std::io::sink());
}

/// Copies ssh's stderr to ours as it comes and keeps the last [`STDERR_TAIL`] bytes.
fn pass_stderr(mut err: impl Read, tail: &Mutex<VecDeque<u8>>) {
    let mut buf = [0u8; 4096];
    loop {
        let n = match err.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let _ = std::io::stderr().write_all(&buf[..n]);
        if let Ok(mut t) = tail.lock() {
            t.extend(&buf[..n]);
            let excess = t.len().saturating_sub(STDERR_TAIL);
            t.drain(..excess);
        }
    }
}

/// `: it said: ...` from the stdout noise and the stderr tail, or nothing.
fn said(noise: &[u8], tail: &Mutex<VecDeque<u8>>) -> String {
    // The stderr thread may still be copying the last words; give it a moment.
    std::thread::sleep(Duration::from_millis(50));
    let err: Vec<u8> = tail
        .lock()
        .map(|t| t.iter().copied().collect())
        .unwrap_or_default();
    let text = format!(
        "{} {}",
        String::from_utf8_lossy(noise).trim(),
        String::from_utf8_lossy(&err).trim()
    );
    let text = text.trim().replace('\n', " | ");
    if text.is_empty() {
        String::new()
    } else {
        format!("; it said: {text}")
    }
}

/// Why ssh ended without a ready line; `ssh_part` is the command without the far one.
fn classify(
    status: Option<ExitStatus>,
    said: &str,
    host: &str,
    remote: &str,
    ssh_part: &[String],
) -> SshError {
    let code = status.and_then(|s| s.code());
    let shown = match (code, status) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("{s}"),
        (None, None) => "still running".into(),
    };
    let lower = said.to_lowercase();
    // The far command's own word for "no longhaul here" (see `deploy::far_command`).
    let said = said.replace(deploy::UPLOAD_NEEDED, "no longhaul on its PATH");
    let said = said.as_str();
    if code == Some(127)
        || lower.contains("command not found")
        || (lower.contains("no such file or directory") && said.contains(remote))
    {
        return SshError::FarMissing {
            host: host.into(),
            remote: remote.into(),
            said: said.into(),
        };
    }
    // A far longhaul without ssh-server, or one whose ssh-server takes no --client-dials.
    if lower.contains("unrecognized subcommand")
        || lower.contains("unexpected argument '--client-dials'")
    {
        return SshError::FarTooOld {
            host: host.into(),
            remote: remote.into(),
            said: said.into(),
        };
    }
    if code == Some(255) {
        return SshError::SshFailed {
            host: host.into(),
            status: shown,
            said: said.into(),
            command: ssh_part.join(" "),
        };
    }
    SshError::FarFailed {
        host: host.into(),
        status: shown,
        said: said.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn status(code: i32) -> Option<ExitStatus> {
        Some(ExitStatus::from_raw(code << 8))
    }

    #[test]
    fn classifies_why_ssh_ended() {
        let ssh_part: Vec<String> = ["ssh", "-p", "22", "h"].map(String::from).to_vec();
        let c = |code, said: &str| classify(status(code), said, "h", "longhaul", &ssh_part);
        assert!(matches!(c(127, ""), SshError::FarMissing { .. }));
        assert!(matches!(
            c(1, "; it said: bash: longhaul: command not found"),
            SshError::FarMissing { .. }
        ));
        assert!(matches!(
            c(2, "; it said: error: unrecognized subcommand 'ssh-server'"),
            SshError::FarTooOld { .. }
        ));
        assert!(matches!(
            c(
                2,
                "; it said: error: unexpected argument '--client-dials' found"
            ),
            SshError::FarTooOld { .. }
        ));
        let e = c(255, "; it said: Connection refused");
        assert!(matches!(e, SshError::SshFailed { .. }));
        let msg = e.to_string();
        assert!(
            msg.contains("Connection refused") && msg.contains("`ssh -p 22 h`"),
            "{msg}"
        );
        assert!(matches!(c(1, "boom"), SshError::FarFailed { .. }));
        let missing = c(127, "").to_string();
        assert!(missing.contains("--remote-longhaul"), "{missing}");
    }

    #[test]
    fn ready_reader_skips_noise_and_bounds_it() {
        let (tx, rx) = mpsc::channel();
        let good = SshReady {
            proto: PROTOCOL_VERSION,
            port: 9,
            addr: None,
            token: [1; 32],
            cert: None,
        }
        .encode();
        let input = format!("Welcome!\nmotd line\n{good}");
        read_ready(input.as_bytes(), &tx);
        match rx.recv().unwrap() {
            Stdout::Ready(l) => assert_eq!(l, good.as_bytes()),
            Stdout::Ended(_) => panic!("no ready line"),
        }
        // Endless noise without newlines ends the wait instead of growing memory.
        let noise = vec![b'x'; 3 * MAX_NOISE];
        read_ready(&noise[..], &tx);
        match rx.recv().unwrap() {
            Stdout::Ended(n) => assert!(n.len() <= 1024),
            Stdout::Ready(_) => panic!("noise read as ready"),
        }
    }
}
