//! An emulated path you can start from Rust: [`Emulator::start`] builds both namespaces,
//! starts one packet loop per direction and returns; dropping it (or [`Emulator::shutdown`])
//! stops the loops and removes everything it made.

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use longhaul_linkem::{Link, LinkConfig};
use longhaul_sys::netns::NetDevFile;
use longhaul_sys::timer::monotonic_ns;
use longhaul_sys::tun::tx_dropped_from_proc_net_dev;

use super::defaults::PathDefaults;
use super::error::EmulateError;
use super::log::PacketLog;
use super::pump::Pump;
use super::stats::{DirectionStats, EmulatorStats};
use super::topology::{ns_name, End, Topology, IFNAME};
use longhaul_linkem::wire::WirePacing;

/// Everything that describes one emulated path.
#[derive(Debug, Clone, PartialEq)]
pub struct EmulatorConfig {
    /// Emulator name; the namespaces are `lh-NAME-a` and `lh-NAME-b`.
    pub name: String,
    /// Link from a to b.
    pub a_to_b: LinkConfig,
    /// Link from b to a.
    pub b_to_a: LinkConfig,
    /// Interface MTU at both ends (bytes).
    pub mtu: u32,
    /// Transmit queue of each TUN interface (packets the kernel may hold for the emulator
    /// before it drops; those drops are reported as faults).
    pub txqueuelen: u32,
    /// Use TUN offloads (checksum, TSO, USO): reads carry super-packets.
    pub offload: bool,
    /// Seed of the model's random choices.
    pub seed: u64,
    /// Per-packet log file (see [`super::log`]).
    pub log: Option<PathBuf>,
    /// Run the packet loops with real-time (SCHED_FIFO) priority, so that the end hosts'
    /// processes do not delay releases by a scheduler time slice. Falls back to normal
    /// priority where that is not allowed.
    pub realtime: bool,
    /// Most bytes each direction may hold in its delay line; packets beyond are dropped
    /// and counted as faults (`overflow_drops`).
    pub max_held_bytes: u64,
    /// With a rate limit, cut super-packets so that no chunk written at once spans more
    /// than this much bottleneck time (segments then arrive spaced as on the wire);
    /// `None` releases each surviving run whole, at its last segment's time.
    pub max_burst: Option<std::time::Duration>,
}

impl EmulatorConfig {
    /// A symmetric path with `link` in both directions and everything else as
    /// [`PathDefaults`] has it (MTU 1500, offloads on, ...).
    pub fn symmetric(name: &str, link: LinkConfig) -> EmulatorConfig {
        let d = PathDefaults::DEFAULT;
        EmulatorConfig {
            name: name.to_owned(),
            a_to_b: link.clone(),
            b_to_a: link,
            mtu: d.mtu_bytes,
            txqueuelen: d.txqueuelen,
            offload: d.offload,
            seed: d.seed,
            log: None,
            realtime: d.realtime,
            max_held_bytes: d.max_held_bytes,
            max_burst: Some(d.max_burst),
        }
    }
}

/// Default bound of each direction's delay line ([`PathDefaults::max_held_bytes`]).
pub const DEFAULT_MAX_HELD_BYTES: u64 = PathDefaults::DEFAULT.max_held_bytes;

/// Default bound of a burst written at once, in bottleneck time
/// ([`PathDefaults::max_burst`]).
pub const DEFAULT_MAX_BURST: std::time::Duration = PathDefaults::DEFAULT.max_burst;

/// Smallest and largest interface MTU accepted.
pub const MTU_RANGE: std::ops::RangeInclusive<u32> = 1280..=65_000;

/// A running emulated path.
#[derive(Debug)]
pub struct Emulator {
    name: String,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<std::io::Result<()>>>,
    a_to_b: Arc<Mutex<DirectionStats>>,
    b_to_a: Arc<Mutex<DirectionStats>>,
    netdev: Mutex<(NetDevFile, NetDevFile)>,
    kernel_baseline: (u64, u64),
    epoch_ns: u64,
    // Last: dropped after the threads are joined (see Drop).
    topology: Option<Topology>,
}

/// Checks what `up` needs before anything is made: root and a usable /dev/net/tun.
pub fn preflight() -> Result<(), EmulateError> {
    if !longhaul_sys::process::is_root() {
        return Err(EmulateError::NotRoot);
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(|source| EmulateError::NoTun { source })?;
    Ok(())
}

/// Checks a configuration without touching the system.
pub fn validate(cfg: &EmulatorConfig) -> Result<(), EmulateError> {
    super::topology::check_name(&cfg.name)?;
    if !MTU_RANGE.contains(&cfg.mtu) {
        return Err(EmulateError::Config(format!(
            "MTU {} is out of range: give {}..={} bytes",
            cfg.mtu,
            MTU_RANGE.start(),
            MTU_RANGE.end()
        )));
    }
    if cfg.txqueuelen == 0 || cfg.txqueuelen > 1_000_000 {
        return Err(EmulateError::Config(format!(
            "txqueuelen {} is out of range: give 1..=1000000 packets",
            cfg.txqueuelen
        )));
    }
    for (dir, link) in [("a->b", &cfg.a_to_b), ("b->a", &cfg.b_to_a)] {
        link.validate(cfg.mtu)
            .map_err(|e| EmulateError::Config(format!("direction {dir}: {e}")))?;
    }
    Ok(())
}

impl Emulator {
    /// Validates `cfg`, builds the path and starts forwarding. On error nothing is left.
    pub fn start(cfg: EmulatorConfig) -> Result<Emulator, EmulateError> {
        validate(&cfg)?;
        preflight()?;
        let topology = Topology::create(&cfg.name, cfg.mtu, cfg.txqueuelen, cfg.offload)?;
        let ns_a = ns_name(&cfg.name, End::A);
        let ns_b = ns_name(&cfg.name, End::B);
        let mut netdev_a =
            NetDevFile::open(&ns_a).map_err(EmulateError::setup("open /proc/net/dev"))?;
        let mut netdev_b =
            NetDevFile::open(&ns_b).map_err(EmulateError::setup("open /proc/net/dev"))?;
        let kernel_baseline = (tx_dropped(&mut netdev_a), tx_dropped(&mut netdev_b));
        let log_file = match &cfg.log {
            Some(path) => Some(Arc::new(Mutex::new(
                std::fs::File::create(path)
                    .map_err(EmulateError::setup("create the packet log"))?,
            ))),
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let epoch_ns = monotonic_ns();
        let a_to_b = Arc::new(Mutex::new(DirectionStats::default()));
        let b_to_a = Arc::new(Mutex::new(DirectionStats::default()));
        let mut me = Emulator {
            name: cfg.name.clone(),
            stop: stop.clone(),
            threads: Vec::new(),
            a_to_b: a_to_b.clone(),
            b_to_a: b_to_a.clone(),
            netdev: Mutex::new((netdev_a, netdev_b)),
            kernel_baseline,
            epoch_ns,
            topology: None,
        };
        let pumps = [
            (
                "ab",
                topology.tun_a.clone(),
                topology.tun_b.clone(),
                cfg.a_to_b.clone(),
                a_to_b,
                cfg.seed.wrapping_mul(2),
            ),
            (
                "ba",
                topology.tun_b.clone(),
                topology.tun_a.clone(),
                cfg.b_to_a.clone(),
                b_to_a,
                cfg.seed.wrapping_mul(2).wrapping_add(1),
            ),
        ];
        me.topology = Some(topology);
        let cpus =
            super::pump::loop_cpus(&longhaul_sys::process::allowed_cpus().unwrap_or_default());
        for (i, (dir, rx, tx, link, stats, seed)) in pumps.into_iter().enumerate() {
            let pacing = WirePacing {
                rate_bps: link.rate_bps,
                overhead_bytes: link.per_segment_overhead_bytes,
                max_burst_ns: cfg
                    .max_burst
                    .map(|d| d.as_nanos().min(u64::MAX as u128) as u64),
            };
            let pump = Pump {
                rx,
                tx,
                link: Link::new(link, seed),
                stats,
                stop: stop.clone(),
                epoch_ns,
                realtime: cfg.realtime,
                cpu: cpus[i],
                max_held_bytes: cfg.max_held_bytes,
                pacing,
                log: log_file.as_ref().map(|f| PacketLog::new(f.clone(), dir)),
            };
            let handle = std::thread::Builder::new()
                .name(format!("lh-emulate-{dir}"))
                .spawn(move || pump.run())
                .map_err(EmulateError::setup("start a packet loop"))?;
            me.threads.push(handle);
        }
        Ok(me)
    }

    /// The emulator's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Namespace of `end`.
    pub fn netns(&self, end: End) -> String {
        ns_name(&self.name, end)
    }

    /// Whether both packet loops still run (a loop stops only on a fatal I/O error).
    pub fn is_running(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// Current counters.
    pub fn stats(&self) -> EmulatorStats {
        let (ka, kb) = match self.netdev.lock() {
            Ok(mut files) => {
                let (a, b) = &mut *files;
                (tx_dropped(a), tx_dropped(b))
            }
            Err(_) => (0, 0),
        };
        let snap = |m: &Mutex<DirectionStats>| m.lock().map(|s| s.clone()).unwrap_or_default();
        EmulatorStats {
            uptime_ns: monotonic_ns().saturating_sub(self.epoch_ns),
            a_to_b: snap(&self.a_to_b),
            b_to_a: snap(&self.b_to_a),
            kernel_dropped_a: ka.saturating_sub(self.kernel_baseline.0),
            kernel_dropped_b: kb.saturating_sub(self.kernel_baseline.1),
        }
    }

    /// Stops forwarding, removes the namespaces and returns the final counters.
    pub fn shutdown(mut self) -> Result<EmulatorStats, EmulateError> {
        let errors = self.stop_threads();
        let stats = self.stats();
        self.topology.take();
        match errors.into_iter().next() {
            Some(e) => Err(EmulateError::Setup {
                what: "forward packets",
                source: e,
            }),
            None => Ok(stats),
        }
    }

    fn stop_threads(&mut self) -> Vec<std::io::Error> {
        self.stop.store(true, Ordering::Relaxed);
        let mut errors = Vec::new();
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errors.push(e),
                Err(_) => errors.push(std::io::Error::other("packet loop panicked")),
            }
        }
        errors
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop_threads();
        self.topology.take();
    }
}

fn tx_dropped(file: &mut NetDevFile) -> u64 {
    file.read()
        .ok()
        .and_then(|text| tx_dropped_from_proc_net_dev(&text, IFNAME))
        .unwrap_or(0)
}
