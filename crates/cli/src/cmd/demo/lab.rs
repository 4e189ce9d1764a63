//! The demo's lab: an emulated path, a `longhaul serve` inside its end b, bench runs from
//! its end a, child processes (iperf3) inside the namespaces — each behind a guard that
//! undoes it on drop — and the [`Cleanup`] registry the signal handler uses when the
//! guards cannot run.

use longhaul_engine::transport::tls::{Security, ServerTls};
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use longhaul_emulate::{Emulator, EmulatorConfig, End, PathDefaults};
use longhaul_engine::bench::report::{EndReport, IntervalView, StartReport};
use longhaul_engine::bench::{run_bench, BenchConfig, BenchObserver};
use longhaul_engine::daemon::{ServeConfig, Server};
use longhaul_linkem::{LinkConfig, QueueLimit};
use longhaul_proto::{SendMode, Token};
use longhaul_sys::netns;
use serde_json::json;

/// Port of the demo's `longhaul serve` (inside namespace b only).
pub const SERVE_PORT: u16 = longhaul_engine::bench::DEFAULT_PORT;
/// Port of the server of the stock run when iperf3 is missing (a session of the other
/// server may still hold its listener for a moment after it stopped).
pub const STOCK_SERVE_PORT: u16 = SERVE_PORT + 1;
/// Port of the demo's iperf3 server (inside namespace b only).
pub const IPERF_PORT: u16 = 5201;

/// What must be undone if the process is told to stop while guards cannot run: emulator
/// names (their namespaces) and child process ids. Once it has run ([`Cleanup::run_now`])
/// nothing more is started: a child spawned while the signal's clean-up ran was missed by
/// it and outlived the demo (an `iperf3 -s` left in a deleted namespace after
/// `demo_cli`'s SIGTERM test, whose signal came while the stock run was starting).
#[derive(Debug, Clone, Default)]
pub struct Cleanup {
    inner: Arc<Mutex<Registry>>,
}

#[derive(Debug, Default)]
struct Registry {
    emulators: Vec<String>,
    children: Vec<u32>,
    /// The clean-up has run: nothing more may start.
    stopped: bool,
}

impl Cleanup {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers an emulator by name, before it is built; refused once stopped.
    pub fn add_emulator(&self, name: &str) -> anyhow::Result<()> {
        let mut g = self.registry();
        if g.stopped {
            return Err(anyhow!("stopping: emulator {name} not started"));
        }
        g.emulators.push(name.to_owned());
        Ok(())
    }

    /// Spawns `cmd` and remembers the child, both under the registry's lock, so that a
    /// clean-up running meanwhile waits for the child and kills it; refused once stopped.
    pub fn spawn_child(&self, cmd: &mut Command, what: &str) -> anyhow::Result<Child> {
        let mut g = self.registry();
        if g.stopped {
            return Err(anyhow!("stopping: {what} not started"));
        }
        let child = cmd.spawn().with_context(|| format!("starting {what}"))?;
        g.children.push(child.id());
        Ok(child)
    }

    /// Kills every child still alive and removes every emulator's namespaces; nothing
    /// starts after it. Returns what it removed, for the message.
    pub fn run_now(&self) -> Vec<String> {
        let (names, pids) = {
            let mut g = self.registry();
            g.stopped = true;
            (g.emulators.clone(), g.children.clone())
        };
        for pid in pids {
            if longhaul_sys::process::process_alive(pid) {
                // The children inherited the blocked termination signals: only SIGKILL works.
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
        let mut removed = Vec::new();
        for name in names {
            if let Ok(r) = longhaul_emulate::topology::remove_leftovers(&name) {
                removed.extend(r);
            }
        }
        removed
    }
}

/// The emulated path of a demo step.
pub struct Path {
    emulator: Emulator,
}

impl Path {
    /// Builds a path of `rate_bps` (None: unlimited) with `rtt` and `mtu`; the bottleneck
    /// buffer is one BDP (at least 64 packets).
    pub fn start(
        name: &str,
        rate_bps: Option<u64>,
        rtt: Duration,
        mtu: u32,
        cleanup: &Cleanup,
    ) -> anyhow::Result<Path> {
        let queue = match rate_bps {
            Some(r) => {
                let bdp = longhaul_model::buffers::bdp_bytes(r, rtt);
                QueueLimit::Bytes(PathDefaults::DEFAULT.buffer_bytes(bdp, mtu))
            }
            None => QueueLimit::Unlimited,
        };
        let link = LinkConfig {
            rate_bps,
            queue,
            delay: rtt / 2,
            ..LinkConfig::default()
        };
        let mut cfg = EmulatorConfig::symmetric(name, link);
        cfg.mtu = mtu;
        // Left over from a demo that was killed (SIGKILL) with the same pid: remove it.
        let _ = longhaul_emulate::topology::remove_leftovers(name);
        cleanup.add_emulator(name)?;
        let emulator = Emulator::start(cfg).with_context(|| format!("emulator {name}"))?;
        // A new connection must not start from the previous run's cached ssthresh/RTT.
        for end in [End::A, End::B] {
            let ns = emulator.netns(end);
            let _ = netns::command_in(&ns, "sysctl")
                .args(["-qw", "net.ipv4.tcp_no_metrics_save=1"])
                .status();
        }
        Ok(Path { emulator })
    }

    /// Namespace of `end`.
    pub fn netns(&self, end: End) -> String {
        self.emulator.netns(end)
    }

    /// Bottleneck drops (segments) in the a -> b direction so far.
    pub fn drops_a_to_b(&self) -> u64 {
        self.emulator.stats().a_to_b.link.dropped_queue_segments
    }

    /// Stops forwarding and removes both namespaces.
    pub fn shutdown(self) -> anyhow::Result<()> {
        self.emulator.shutdown().context("stopping the emulator")?;
        Ok(())
    }
}

/// A `longhaul serve` running on a thread inside a namespace; stopped on drop.
pub struct ServeGuard {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl ServeGuard {
    /// Binds `[::]:port` inside `ns` and serves until dropped.
    pub fn start(ns: &str, port: u16, keys: DemoKeys) -> anyhow::Result<ServeGuard> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<io::Result<()>>();
        let ns_name = ns.to_owned();
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("lh-demo-serve".into())
            .spawn(move || {
                if let Err(e) = netns::enter(&ns_name) {
                    let _ = tx.send(Err(e));
                    return;
                }
                let log: longhaul_engine::daemon::server::LogFn = Arc::new(|_line: &str| {});
                let cfg = ServeConfig {
                    listen: SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
                    keyring: keys.token.into(),
                    once: false,
                    rx_rate_bps: None,
                    files: Default::default(),
                    tls: keys.tls,
                    keep_setuid: false,
                    caps: Default::default(),
                    relay_from: Default::default(),
                };
                match Server::bind(cfg, log) {
                    Ok(server) => {
                        let _ = tx.send(Ok(()));
                        let _ = server.serve(Some(stop2));
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })
            .context("starting the server thread")?;
        let guard = ServeGuard {
            stop,
            handle: Some(handle),
        };
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(guard),
            Ok(Err(e)) => Err(anyhow!("longhaul serve inside {ns}: {e}")),
            Err(_) => Err(anyhow!(
                "longhaul serve inside {ns} did not start within 10 s"
            )),
        }
    }
}

impl Drop for ServeGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A bench run's outcome: the end report and its JSON Lines log (start, interval, end).
pub struct BenchRun {
    /// The end figures.
    pub end: EndReport,
    /// The JSON Lines `longhaul bench --json` would have printed.
    pub jsonl: String,
}

/// The settings of a bench run from the demo.
pub struct BenchPlan {
    /// Target (`10.99.0.2` or `[fd00:6c68::2]`).
    pub target: String,
    /// Duration.
    pub duration: Duration,
    /// Fixed buffer per stream (None: longhaul's automatic sizing).
    pub window: Option<u64>,
    /// Congestion control (None: longhaul's choice).
    pub congestion: Option<String>,
    /// Print a progress line every this many intervals (0: none).
    pub progress_every: u32,
}

/// Runs `longhaul bench` from a thread inside namespace `ns`.
pub fn bench_in(ns: &str, plan: BenchPlan, keys: DemoKeys) -> anyhow::Result<BenchRun> {
    let cfg = BenchConfig {
        target: plan.target,
        // longhaul's own run takes the path's stream count; a row that shows what a fixed
        // window or another congestion control does runs one stream, as the records did.
        streams: (plan.window.is_some() || plan.congestion.is_some()).then_some(1),
        duration: plan.duration,
        bytes: None,
        reverse: false,
        congestion: plan.congestion,
        rate_bps: None,
        window: plan.window,
        rx_rate_bps: None,
        interval: Duration::from_secs(1),
        send_mode: SendMode::Write,
        read_rate_bps: None,
        security: Security::pinned(keys.tls.fingerprint()),
        token: keys.token,
        // The demo shows a first run's start-up, not a remembered path's.
        jump_start: false,
    };
    let every = plan.progress_every;
    let (end, lines) = netns::run_in(ns, move || {
        let mut obs = Collect {
            lines: Vec::new(),
            every,
            pending: Pending::default(),
        };
        let end = run_bench(&cfg, &mut obs).map_err(|e| io::Error::other(e.to_string()))?;
        obs.flush();
        Ok((end, obs.lines))
    })
    .context("longhaul bench")?;
    let mut jsonl = lines.join("\n");
    let mut v = serde_json::to_value(&end).unwrap_or_default();
    v["type"] = json!("end");
    jsonl.push('\n');
    jsonl.push_str(&v.to_string());
    jsonl.push('\n');
    Ok(BenchRun { end, jsonl })
}

struct Collect {
    lines: Vec<String>,
    every: u32,
    pending: Pending,
}

impl BenchObserver for Collect {
    fn start(&mut self, report: &StartReport) {
        let mut v = serde_json::to_value(report).unwrap_or_default();
        v["type"] = json!("start");
        self.lines.push(v.to_string());
    }

    fn interval(&mut self, view: &IntervalView) {
        let mut v = serde_json::to_value(view).unwrap_or_default();
        v["type"] = json!("interval");
        self.lines.push(v.to_string());
        if self.every == 0 {
            return;
        }
        let p = &mut self.pending;
        if p.count == 0 {
            p.start = view.start;
        }
        p.count += 1;
        p.end = view.end;
        p.bytes += view.crossed_bytes;
        p.retransmits += u64::from(view.retransmits);
        p.cwnd = view.streams.iter().map(|s| s.cwnd_bytes).sum();
        p.rtt_ms = view.streams.first().map_or(0.0, |s| s.rtt_ms);
        if p.count >= self.every {
            self.flush();
        }
    }
}

impl Collect {
    /// Prints the intervals gathered since the last progress line, if any.
    fn flush(&mut self) {
        let p = std::mem::take(&mut self.pending);
        if p.count == 0 || self.every == 0 {
            return;
        }
        let span = (p.end - p.start).max(1e-3);
        super::super::common::say(&format!(
            "      {:>5.1}-{:<5.1} s  {:>14}  {:>6} retransmits   now: cwnd {:>9}, RTT {:>6.1} ms",
            p.start,
            p.end,
            longhaul_report::html::format_rate(p.bytes as f64 * 8.0 / span),
            p.retransmits,
            longhaul_model::units::format_bytes(p.cwnd as f64),
            p.rtt_ms,
        ));
    }
}

/// Intervals gathered for the next progress line.
#[derive(Default)]
struct Pending {
    count: u32,
    start: f64,
    end: f64,
    bytes: u64,
    retransmits: u64,
    cwnd: u64,
    rtt_ms: f64,
}

/// A child process inside a namespace; killed (if still running) and reaped on drop.
pub struct ChildGuard {
    child: Child,
}

impl ChildGuard {
    /// Spawns `cmd`, registering it with `cleanup`.
    pub fn spawn(mut cmd: Command, what: &str, cleanup: &Cleanup) -> anyhow::Result<ChildGuard> {
        let child = cleanup.spawn_child(&mut cmd, what)?;
        Ok(ChildGuard { child })
    }

    /// Waits up to `limit` for the process to end; kills it after that. Returns its stdout
    /// (when piped) and whether it succeeded.
    pub fn finish(mut self, limit: Duration) -> anyhow::Result<(bool, String)> {
        use std::io::Read as _;
        let mut out = String::new();
        let reader = self.child.stdout.take().map(|mut s| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = s.read_to_string(&mut text);
                text
            })
        });
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(st) = self.child.try_wait()? {
                break Some(st);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if let Some(r) = reader {
            out = r.join().unwrap_or_default();
        }
        Ok((status.is_some_and(|s| s.success()), out))
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Whether `program` is on the PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Waits until something listens on TCP `port` inside `ns` (polling `ss`).
pub fn wait_listening(ns: &str, port: u16, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let out = netns::command_in(ns, "ss")
            .args(["-Hltn", &format!("sport = :{port}")])
            .output()
            .context("running ss (iproute2) to see whether the server listens")?;
        if out.status.success() && !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(anyhow!(
                "nothing listens on port {port} inside {ns} after {} s",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The demo's own credentials: a token and a server identity its client pins.
#[derive(Clone)]
pub struct DemoKeys {
    /// The shared token.
    pub token: Token,
    /// The server's TLS identity (in memory only).
    pub tls: ServerTls,
}

/// Fresh credentials for the demo's own server and client.
pub fn demo_keys() -> anyhow::Result<DemoKeys> {
    Ok(DemoKeys {
        token: random_token()?,
        tls: ServerTls::ephemeral()?,
    })
}

fn random_token() -> anyhow::Result<Token> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom for the demo's token")?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Token::new(hex.as_bytes()).map_err(|e| anyhow!("token: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child started before the clean-up is killed by it; after it nothing starts, so a
    /// demo told to stop while it was starting its stock run leaves no process behind.
    #[test]
    fn after_the_clean_up_nothing_starts_and_what_started_is_killed() {
        let cleanup = Cleanup::default();
        let mut sleep = Command::new("sleep");
        sleep.arg("30");
        let mut before = cleanup.spawn_child(&mut sleep, "sleep").unwrap();
        cleanup.run_now();
        // SIGKILL: reaped within a moment.
        let status = before.wait().unwrap();
        assert!(!status.success(), "the child outlived the clean-up");
        let err = cleanup.spawn_child(&mut sleep, "sleep").unwrap_err();
        assert!(err.to_string().contains("stopping"), "{err}");
        assert!(cleanup.add_emulator("late").is_err());
    }
}
