//! A deterministic simulation of `longhaul cp`: both ends' real sessions, the real
//! receiver store on a temporary directory and real source files, over a simulated
//! network in virtual time (in the manner of mozilla/neqo's `test-fixture/src/sim`).
//! Only the network and the clock are simulated.
//!
//! - [`transport`]: a reliable byte stream (window, pacing, per-segment acks, loss
//!   detection, retransmission); its module docs state the model and what it leaves out.
//! - [`net`]: the path (`longhaul-linkem`'s links in both directions) and the streams.
//! - [`sender`], [`receiver`]: the two ends, driven as the threaded drivers drive them.
//! - Here: a scenario ([`Scenario`]), the event loop of one run ([`run_once`]), faults
//!   (a stream cut, a crash of either end) and a transfer with its rerun ([`transfer`]).
//!
//! Everything random comes from one seed ([`seed`]: `LONGHAUL_SIM_SEED` or the
//! scenario's default); a [`SeedGuard`] prints it and the scenario when a test fails.

pub mod net;
pub mod receiver;

/// The session's chunk key both simulated ends use (the real ends derive it from the
/// session secret).
pub static SIM_CHUNK_KEY: std::sync::LazyLock<longhaul_proto::ChunkKey> =
    std::sync::LazyLock::new(|| longhaul_proto::ChunkKey::from_bytes([0x5a; 32]));
pub mod sender;
pub mod transport;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use longhaul_engine::cp::walk::{walk_local, SourceFile};
use longhaul_linkem::rng::{derive_seed, Rng};
use longhaul_linkem::{Direction, DuplexStats, LinkConfig, LossModel, QueueLimit};
use longhaul_sys::served_root::ServedRoot;
use longhaul_testkit::tree::{assert_same_tree, work_files, EXACT};
use longhaul_transfer::session::{RecvOutcome, SendOutcome};

use net::Net;
use receiver::SimReceiver;
use sender::{ChunkKey, SimSender};
use transport::{FlowStats, TransportConfig, HEADER_BYTES, MSS};

/// The seed: `LONGHAUL_SIM_SEED` if set, else `default`.
pub fn seed(default: u64) -> u64 {
    match std::env::var("LONGHAUL_SIM_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("LONGHAUL_SIM_SEED={s:?} is not a u64")),
        Err(_) => default,
    }
}

/// Prints the seed and the scenario if the test panics while it is alive.
pub struct SeedGuard(pub String);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "cp simulation failed: {}\n  rerun with LONGHAUL_SIM_SEED=<seed> to replay",
                self.0
            );
        }
    }
}

/// The path: a bottleneck in the data direction, the same delay and loss back.
#[derive(Debug, Clone, Copy)]
pub struct PathSpec {
    /// Bottleneck rate, bit/s (both directions).
    pub rate_bps: u64,
    /// One-way delay.
    pub one_way: Duration,
    /// Bernoulli loss per segment (both directions).
    pub loss: f64,
    /// Drop-tail buffer, in BDPs.
    pub queue_bdp: f64,
}

impl PathSpec {
    /// Round-trip time without queueing.
    pub fn rtt(&self) -> Duration {
        self.one_way * 2
    }

    /// Bandwidth-delay product, bytes.
    pub fn bdp_bytes(&self) -> u64 {
        (self.rate_bps as f64 / 8.0 * self.rtt().as_secs_f64()) as u64
    }

    fn link(&self) -> LinkConfig {
        let cfg = LinkConfig {
            rate_bps: Some(self.rate_bps),
            queue: QueueLimit::Bytes((self.bdp_bytes() as f64 * self.queue_bdp) as u64),
            delay: self.one_way,
            loss: if self.loss > 0.0 {
                LossModel::Bernoulli { p: self.loss }
            } else {
                LossModel::None
            },
            ..LinkConfig::default()
        };
        cfg.validate((MSS + HEADER_BYTES) as u32)
            .expect("a valid link");
        cfg
    }
}

/// Something that goes wrong during a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Data stream `i` is reset: both ends lose it and what it had in flight.
    CutStream(usize),
    /// The receiving process is killed: its state is gone, its files stay on disk.
    CrashReceiver,
    /// The sending process is killed; the receiver hears of it a one-way delay later.
    CrashSender,
}

/// A transfer to simulate.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// For messages.
    pub name: &'static str,
    /// Seed of the links' randomness and of the files' contents.
    pub seed: u64,
    /// The path.
    pub path: PathSpec,
    /// Data streams.
    pub streams: usize,
    /// Chunk size.
    pub chunk_size: u64,
    /// Files below the source directory `data/`: (relative path, size).
    pub files: Vec<(&'static str, u64)>,
    /// The data streams' congestion window held after slow start, all together, in BDPs.
    pub window_bdp: f64,
    /// The data streams' receive windows, all together, in BDPs.
    pub recv_window_bdp: f64,
    /// The fault, once this fraction of the file bytes was delivered.
    pub fault: Option<(f64, Fault)>,
    /// Virtual time after which a run counts as hung.
    pub max_virtual: Duration,
}

impl Scenario {
    /// Bytes of all files.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.1).sum()
    }

    fn data_transport(&self) -> TransportConfig {
        let n = self.streams as f64;
        let bdp = self.path.bdp_bytes() as f64;
        let recv = (bdp * self.recv_window_bdp / n) as u64;
        TransportConfig {
            initial_window_segments: 10,
            max_window_bytes: (bdp * self.window_bdp / n) as u64,
            recv_window_bytes: recv,
            send_buffer_bytes: recv,
            pace_bps: self.path.rate_bps / self.streams as u64,
        }
    }

    fn control_transport(&self) -> TransportConfig {
        let bdp = self.path.bdp_bytes();
        TransportConfig {
            initial_window_segments: 10,
            max_window_bytes: bdp,
            recv_window_bytes: 2 * bdp,
            send_buffer_bytes: u64::MAX,
            pace_bps: self.path.rate_bps,
        }
    }
}

/// The source tree and the destination of a scenario, on disk.
pub struct Dirs {
    _tmp: tempfile::TempDir,
    /// The source directory (`.../src/data`).
    pub src: PathBuf,
    /// The destination root.
    pub dst: PathBuf,
}

/// Writes the scenario's source files (contents from the seed) and an empty destination.
pub fn make_dirs(sc: &Scenario) -> Dirs {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let src = tmp.path().join("src/data");
    let dst = tmp.path().join("dst");
    fs::create_dir_all(&src).expect("source dir");
    fs::create_dir_all(&dst).expect("destination dir");
    let mut rng = Rng::new(derive_seed(sc.seed, 99));
    for (rel, size) in &sc.files {
        let path = src.join(rel);
        fs::create_dir_all(path.parent().expect("a parent")).expect("source sub-dir");
        let mut bytes = Vec::with_capacity(*size as usize + 8);
        while (bytes.len() as u64) < *size {
            bytes.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        bytes.truncate(*size as usize);
        fs::write(&path, &bytes).expect("source file");
        // A fixed mtime: the file list's bytes, and so the run, depend on the seed alone.
        let mtime = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + sc.seed % 1000);
        fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(mtime))
            .expect("setting the source's mtime");
    }
    Dirs {
        _tmp: tmp,
        src,
        dst,
    }
}

/// What one run (one pair of processes) did.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Virtual start, ns.
    pub start_ns: u64,
    /// When the sender saw every file committed.
    pub sender_done_ns: Option<u64>,
    /// When the receiver handled `TransferDone`.
    pub receiver_done_ns: Option<u64>,
    /// When the fault struck.
    pub fault_ns: Option<u64>,
    /// The sender's outcome (at the end, or at its crash).
    pub send: SendOutcome,
    /// The receiver's outcome (at the end, or at its crash).
    pub recv: RecvOutcome,
    /// Chunks put into streams, with their bytes.
    pub sent: BTreeMap<ChunkKey, u64>,
    /// Chunks the sender had seen acked (at the end, or when the fault struck).
    pub acked: BTreeSet<ChunkKey>,
    /// Data-stream payload bytes that reached the receiver over time: (ns, cumulative).
    pub delivered: Vec<(u64, u64)>,
    /// The links' counters.
    pub link: DuplexStats,
    /// The data streams' transport counters, summed.
    pub data_flows: FlowStats,
}

impl RunResult {
    /// Virtual time from the start to the sender's success.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.sender_done_ns.expect("the run finished") - self.start_ns)
    }

    /// Data-stream payload bytes that reached the receiver.
    pub fn delivered_bytes(&self) -> u64 {
        self.delivered.last().map_or(0, |d| d.1)
    }

    /// Delivered bytes / (rate x elapsed), over the whole run.
    pub fn utilisation(&self, path: &PathSpec) -> f64 {
        self.delivered_bytes() as f64 / (path.rate_bps as f64 / 8.0 * self.elapsed().as_secs_f64())
    }

    /// The same between the moments fractions `from` and `to` of the bytes had arrived.
    pub fn utilisation_between(&self, path: &PathSpec, from: f64, to: f64) -> f64 {
        let total = self.delivered_bytes() as f64;
        let at = |f: f64| {
            let i = self
                .delivered
                .partition_point(|d| (d.1 as f64) < f * total)
                .min(self.delivered.len() - 1);
            self.delivered[i]
        };
        let (a, b) = (at(from), at(to));
        let secs = (b.0 - a.0) as f64 / 1e9;
        (b.1 - a.1) as f64 / (path.rate_bps as f64 / 8.0 * secs)
    }
}

/// One run from `start_ns`: new sessions at both ends, new connections; `fault` strikes
/// once its fraction of the scenario's bytes was delivered in this run.
pub fn run_once(
    sc: &Scenario,
    dirs: &Dirs,
    run: u64,
    start_ns: u64,
    fault: Option<(f64, Fault)>,
) -> RunResult {
    let link = sc.path.link();
    let mut net = Net::new(start_ns, link.clone(), link, derive_seed(sc.seed, run));
    let ctl_fwd = net.open(Direction::AToB, sc.control_transport(), false);
    let ctl_back = net.open(Direction::BToA, sc.control_transport(), false);
    let data: Vec<usize> = (0..sc.streams)
        .map(|_| net.open(Direction::AToB, sc.data_transport(), true))
        .collect();
    let files: Vec<SourceFile> = walk_local(std::slice::from_ref(&dirs.src), true, &mut |w| {
        panic!("walk warned: {w}")
    })
    .expect("the source walk");
    let root = Arc::new(ServedRoot::open(&dirs.dst).expect("the destination root"));
    let mut receiver = Some(SimReceiver::new(
        root,
        sc.chunk_size,
        (ctl_fwd, ctl_back),
        &data,
    ));
    let mut sender = Some(SimSender::new(
        &files,
        sc.chunk_size,
        (ctl_fwd, ctl_back),
        &data,
        &mut net,
    ));
    let mut fault = fault;
    let mut fault_ns = None;
    let mut receiver_stop_ns: Option<u64> = None;
    let mut last = (
        SendOutcome::default(),
        RecvOutcome::default(),
        BTreeMap::new(),
        BTreeSet::new(),
    );
    let mut done = (None, None);
    let mut spins = 0u32;
    let deadline = start_ns + sc.max_virtual.as_nanos() as u64;
    loop {
        net.deliver_due();
        net.fire_timers();
        if receiver_stop_ns.is_some_and(|t| t <= net.now) {
            // The sender's reset arrived: the receiver stops where it is.
            if let Some(r) = receiver.take() {
                last.1 = r.outcome();
            }
            receiver_stop_ns = None;
        }
        if let Some(r) = receiver.as_mut() {
            if let Err(e) = r.step(&mut net) {
                panic!("the receiver failed at {} ns: {e}", net.now);
            }
            done.1 = r.done_at;
        }
        if let Some(s) = sender.as_mut() {
            if let Err(e) = s.step(&mut net) {
                panic!("the sender failed at {} ns: {e}", net.now);
            }
            done.0 = s.done_at;
        }
        if let Some((frac, f)) = fault {
            if net.delivered_total() as f64 >= frac * sc.total_bytes() as f64 {
                fault = None;
                fault_ns = Some(net.now);
                if let Some(s) = sender.as_ref() {
                    last.2 = s.sent.clone();
                    last.3 = s.acked.clone();
                }
                match f {
                    Fault::CutStream(i) => {
                        net.flows[data[i]].cut();
                        if let Some(r) = receiver.as_mut() {
                            r.stream_lost(i);
                        }
                        if let Some(s) = sender.as_mut() {
                            s.stream_failed(i).expect("other streams live");
                        }
                    }
                    Fault::CrashReceiver => {
                        // Its sockets reset; the sender fails when it hears of it, having
                        // learnt nothing more that matters.
                        for fl in &mut net.flows {
                            fl.cut();
                        }
                        last.1 = receiver.take().map(|r| r.outcome()).unwrap_or_default();
                        last.0 = sender.take().map(|s| s.outcome()).unwrap_or_default();
                    }
                    Fault::CrashSender => {
                        for fl in &mut net.flows {
                            fl.halt();
                        }
                        last.0 = sender.take().map(|s| s.outcome()).unwrap_or_default();
                        receiver_stop_ns = Some(net.now + sc.path.one_way.as_nanos() as u64);
                    }
                }
            }
        }
        net.transmit();
        if done.0.is_some() && done.1.is_some() {
            break;
        }
        if sender.is_none() && receiver.is_none() {
            break;
        }
        let next = [net.next_event(), receiver_stop_ns]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else {
            panic!(
                "{}: nothing left to happen at {} ns but the transfer is not done",
                sc.name, net.now
            );
        };
        assert!(
            next <= deadline,
            "{}: still running after {:?} of virtual time",
            sc.name,
            sc.max_virtual
        );
        if next <= net.now {
            spins += 1;
            assert!(spins < 10_000, "{}: no progress at {} ns", sc.name, net.now);
        } else {
            spins = 0;
        }
        net.now = next.max(net.now);
    }
    if let Some(s) = &sender {
        last.0 = s.outcome();
        if fault_ns.is_none() {
            last.2 = s.sent.clone();
            last.3 = s.acked.clone();
        }
    }
    if let Some(r) = &receiver {
        last.1 = r.outcome();
    }
    let mut data_flows = FlowStats::default();
    for &i in &data {
        let s = net.flows[i].stats;
        data_flows.segments_sent += s.segments_sent;
        data_flows.retransmitted += s.retransmitted;
        data_flows.retransmitted_bytes += s.retransmitted_bytes;
        data_flows.duplicates += s.duplicates;
        data_flows.rtos += s.rtos;
    }
    let sent = sender.as_ref().map_or(last.2.clone(), |s| s.sent.clone());
    RunResult {
        start_ns,
        sender_done_ns: done.0,
        receiver_done_ns: done.1,
        fault_ns,
        send: last.0,
        recv: last.1,
        sent: if fault_ns.is_some() { last.2 } else { sent },
        acked: last.3,
        delivered: std::mem::take(&mut net.delivered),
        link: net.link_stats(),
        data_flows,
    }
}

/// A transfer: a run, and after a crash a second run (new processes, a second later).
pub fn transfer(sc: &Scenario, dirs: &Dirs) -> Vec<RunResult> {
    let first = run_once(sc, dirs, 1, 0, sc.fault);
    let crashed = first.sender_done_ns.is_none();
    let mut runs = vec![first];
    if crashed {
        let start = runs[0].fault_ns.expect("a crash") + 1_000_000_000;
        runs.push(run_once(sc, dirs, 2, start, None));
    }
    runs
}

/// Every source file is at the destination (`data/` in it) with the same bytes, mode and
/// mtime (directories too: the simulated receiver runs the real store), the
/// destination holds nothing else, and no work file is left.
pub fn assert_identical(dirs: &Dirs) {
    let work = work_files(&dirs.dst);
    assert!(work.is_empty(), "work files left behind: {work:?}");
    let top: Vec<_> = fs::read_dir(&dirs.dst)
        .expect("a readable destination")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    assert_eq!(top, ["data"], "the destination holds other files");
    assert_same_tree(&dirs.src, &dirs.dst.join("data"), EXACT);
}
