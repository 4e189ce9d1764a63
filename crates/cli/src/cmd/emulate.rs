//! `longhaul emulate`: a long fat path between two network namespaces, emulated in user
//! space on TUN devices (`up`, `down`, `exec`, `addr`, `stats`, `log-report`).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::common::{emit_text as emit, say, say_text};
use longhaul_emulate::{
    self as emulate, control, state, Emulator, EmulatorConfig, EmulatorStats, End, PathDefaults,
};
use longhaul_linkem::{parse_buffer, parse_loss, Jitter, LinkConfig, QueueLimit, Reorder};
use longhaul_model::units::{
    format_bytes, format_duration, format_rate_bps, parse_duration, parse_rate_bps,
};

/// Emulate a long fat network path between two network namespaces.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Create the namespaces and run the emulator until `down`, Ctrl-C or SIGTERM.
    Up(Box<UpArgs>),
    /// Stop emulator NAME and remove its namespaces (also what a crashed run left behind).
    Down {
        /// Emulator name.
        name: String,
    },
    /// Run a command at one end of the path.
    Exec {
        /// Emulator name.
        name: String,
        /// Which end: a or b.
        end: EndArg,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Print an end's address (IPv4, or IPv6 with --ipv6).
    Addr {
        /// Emulator name.
        name: String,
        /// Which end: a or b.
        end: EndArg,
        /// Print the IPv6 address instead.
        #[arg(long)]
        ipv6: bool,
    },
    /// Print the live counters of a running emulator.
    Stats {
        /// Emulator name.
        name: String,
        /// JSON Lines output (one object of type "stats").
        #[arg(long)]
        json: bool,
    },
    /// Burstiness of a `--log` file: inter-packet gap histogram and rate in 0.25 ms bins.
    LogReport {
        /// The log written by `up --log FILE`.
        file: PathBuf,
        /// Also print every 0.25 ms bin's rate.
        #[arg(long)]
        bins: bool,
        /// JSON Lines output (one object of type "log_report" per direction).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum JitterModel {
    Wander,
    Uniform,
    Normal,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum EndArg {
    A,
    B,
}

impl From<EndArg> for End {
    fn from(e: EndArg) -> End {
        match e {
            EndArg::A => End::A,
            EndArg::B => End::B,
        }
    }
}

/// `emulate up` options.
#[derive(clap::Args, Clone)]
struct UpArgs {
    /// Emulator name (namespaces lh-NAME-a and lh-NAME-b).
    name: String,
    /// Round-trip time; each direction gets half as one-way delay (e.g. 200ms).
    #[arg(long, default_value_t = duration_arg(PathDefaults::DEFAULT.rtt))]
    rtt: String,
    /// Bottleneck rate in both directions (e.g. 1G, 500M); unlimited if not given.
    #[arg(long)]
    rate: Option<String>,
    /// Rate from a to b (overrides --rate).
    #[arg(long)]
    up_rate: Option<String>,
    /// Rate from b to a (overrides --rate).
    #[arg(long)]
    down_rate: Option<String>,
    /// Bottleneck buffer: bytes (25MB), a multiple of the BDP (1bdp) or packets (500pkt).
    /// Default: 1bdp (at least 64 packets) with a rate, unlimited without.
    #[arg(long)]
    buffer: Option<String>,
    /// Random loss per segment: a probability (1e-4, 0.01%) or Gilbert-Elliott ge:P,R,H,K.
    #[arg(long)]
    loss: Option<String>,
    /// Delay variation of up to +-JITTER (packets stay in order unless --reorder).
    #[arg(long)]
    jitter: Option<String>,
    /// How the delay varies: `wander` (a smooth offset; the mean delay stays as
    /// configured), `uniform` (drawn per packet, kept in order: dense traffic is delayed
    /// by about the whole bound) or `normal` (per packet, sigma = JITTER / 3).
    #[arg(long, value_enum, default_value = "wander")]
    jitter_model: JitterModel,
    /// Percentage of packets held back and overtaken by later ones.
    #[arg(long)]
    reorder: Option<f64>,
    /// How long a reordered packet is held back.
    #[arg(long, default_value_t = duration_arg(PathDefaults::DEFAULT.reorder_delay))]
    reorder_delay: String,
    /// Interface MTU at both ends (bytes).
    #[arg(long, default_value_t = PathDefaults::DEFAULT.mtu_bytes)]
    mtu: u32,
    /// Transmit queue length of the TUN interfaces (packets).
    #[arg(long, default_value_t = PathDefaults::DEFAULT.txqueuelen)]
    txqueuelen: u32,
    /// Turn TUN offloads (TSO/USO super-packets) off: one packet per read.
    #[arg(long)]
    no_offload: bool,
    /// With a rate, the longest burst written at once, in bottleneck time: offload
    /// super-packets are cut so that segments arrive spaced as on the wire. 0 writes
    /// each surviving super-packet whole (fewer writes, burstier arrivals).
    #[arg(long, default_value_t = duration_arg(PathDefaults::DEFAULT.max_burst))]
    max_burst: String,
    /// Run the packet loops at normal priority instead of real-time (SCHED_FIFO).
    #[arg(long)]
    no_realtime: bool,
    /// Seed of the model's random choices.
    #[arg(long, default_value_t = PathDefaults::DEFAULT.seed)]
    seed: u64,
    /// Record per-packet timestamps in FILE (see `emulate log-report`).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Return once the path is up and leave the emulator running in the background.
    #[arg(long)]
    daemon: bool,
    /// Internal: started by --daemon; send output to the state directory after "ready".
    #[arg(long, hide = true)]
    detached: bool,
    /// JSON Lines output.
    #[arg(long)]
    json: bool,
}

/// Runs `longhaul emulate ...`.
pub fn run(args: Args) -> Result<ExitCode> {
    match args.action {
        Action::Up(up) => run_up(*up),
        Action::Down { name } => run_down(&name),
        Action::Exec { name, end, command } => run_exec(&name, end.into(), &command),
        Action::Addr { name, end, ipv6 } => run_addr(&name, end.into(), ipv6),
        Action::Stats { name, json } => run_stats(&name, json),
        Action::LogReport { file, bins, json } => run_log_report(&file, bins, json),
    }
}

/// A duration as the exact option value that means it: "0ms", "1ms", "100us".
fn duration_arg(d: Duration) -> String {
    if d.as_nanos() % 1_000_000 == 0 {
        format!("{}ms", d.as_millis())
    } else if d.as_nanos() % 1000 == 0 {
        format!("{}us", d.as_micros())
    } else {
        format!("{}ns", d.as_nanos())
    }
}

fn parse_time(what: &str, text: &str) -> Result<Duration> {
    if text.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(text).with_context(|| format!("--{what}"))
}

fn parse_rate(what: &str, text: &Option<String>) -> Result<Option<u64>> {
    text.as_deref()
        .map(|t| parse_rate_bps(t).with_context(|| format!("--{what}")))
        .transpose()
}

/// Turns `up` options into an emulator configuration; every range is checked.
fn config_from(up: &UpArgs) -> Result<EmulatorConfig> {
    let rtt = parse_time("rtt", &up.rtt)?;
    let rate = parse_rate("rate", &up.rate)?;
    let up_rate = parse_rate("up-rate", &up.up_rate)?.or(rate);
    let down_rate = parse_rate("down-rate", &up.down_rate)?.or(rate);
    let buffer = up
        .buffer
        .as_deref()
        .map(parse_buffer)
        .transpose()
        .context("--buffer")?;
    let loss = match &up.loss {
        Some(spec) => parse_loss(spec).context("--loss")?,
        None => longhaul_linkem::LossModel::None,
    };
    let jitter = match &up.jitter {
        Some(j) => {
            let max = parse_time("jitter", j)?;
            (!max.is_zero()).then_some(match up.jitter_model {
                JitterModel::Wander => Jitter::Wander { max },
                JitterModel::Uniform => Jitter::Uniform { max },
                JitterModel::Normal => Jitter::Normal { sigma: max / 3 },
            })
        }
        None => None,
    };
    let reorder = match up.reorder {
        Some(pct) if !(0.0..=100.0).contains(&pct) || pct.is_nan() => {
            bail!("--reorder {pct} is not a percentage: give 0..100 (e.g. 0.5)")
        }
        Some(pct) if pct > 0.0 => Some(Reorder {
            probability: pct / 100.0,
            extra: parse_time("reorder-delay", &up.reorder_delay)?,
        }),
        _ => None,
    };
    let link = |rate_bps: Option<u64>| -> Result<LinkConfig> {
        let queue = match buffer {
            Some(spec) => spec.resolve(rate_bps, rtt).context("--buffer")?,
            None => PathDefaults::DEFAULT.queue(rate_bps, rtt, up.mtu),
        };
        Ok(LinkConfig {
            rate_bps,
            queue,
            delay: rtt / 2,
            jitter,
            loss,
            reorder,
            ..LinkConfig::default()
        })
    };
    let mut cfg = EmulatorConfig::symmetric(&up.name, link(up_rate)?);
    cfg.b_to_a = link(down_rate)?;
    cfg.mtu = up.mtu;
    cfg.txqueuelen = up.txqueuelen;
    cfg.offload = !up.no_offload;
    cfg.seed = up.seed;
    cfg.realtime = !up.no_realtime;
    let max_burst = parse_time("max-burst", &up.max_burst)?;
    cfg.max_burst = (!max_burst.is_zero()).then_some(max_burst);
    cfg.log = up.log.clone();
    emulate::validate(&cfg)?;
    Ok(cfg)
}

fn run_up(up: UpArgs) -> Result<ExitCode> {
    let cfg = config_from(&up)?;
    emulate::preflight()?;
    if let Some(pid) = state::running_pid(&up.name) {
        bail!(
            "emulator {:?} is already up (pid {pid}); run `longhaul emulate down {}` first or pick another name",
            up.name,
            up.name
        );
    }
    if up.daemon {
        return spawn_daemon(&up);
    }
    // Block the termination signals before any thread exists, so all threads inherit it.
    let signals = longhaul_sys::process::TerminationSignals::block().context("block signals")?;
    let emu = Emulator::start(cfg.clone())?;
    let pid = std::process::id();
    state::write_pid(&up.name).context("write the pid file under /run/longhaul")?;
    let ready = if up.json {
        serde_json::json!({
            "type": "ready", "name": up.name, "pid": pid,
            "a": {"netns": emu.netns(End::A), "ipv4": End::A.ipv4().to_string(), "ipv6": End::A.ipv6().to_string()},
            "b": {"netns": emu.netns(End::B), "ipv4": End::B.ipv4().to_string(), "ipv6": End::B.ipv6().to_string()},
        })
        .to_string()
    } else {
        format!(
            "ready {} a={} b={} ({}; run commands with `longhaul emulate exec {} a|b -- CMD`)",
            up.name,
            End::A.ipv4(),
            End::B.ipv4(),
            describe(&cfg),
            up.name
        )
    };
    let _ = emit(&format!("{ready}\n"));
    if up.detached {
        let log = std::fs::File::create(state::stats_path(&up.name).with_extension("log"))
            .context("create the daemon log")?;
        longhaul_sys::process::redirect_stdio(&log).context("redirect output")?;
    }
    let outcome = control::publish_until_stopped(&emu, &cfg, &signals);
    let final_stats = emu.shutdown();
    state::remove(&up.name);
    outcome?;
    let stats = final_stats?;
    if up.json {
        emit(&format!(
            "{}\n",
            serde_json::json!({"type": "end", "name": up.name, "stats": stats})
        ))?;
    } else {
        print_stats(&up.name, &stats)?;
    }
    if stats.faults() > 0 {
        eprintln!("longhaul: {} packets lost outside the model (kernel TUN ring drops or failed writes): raise --txqueuelen", stats.faults());
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts `up` again in the background and returns once it printed "ready".
fn spawn_daemon(_up: &UpArgs) -> Result<ExitCode> {
    let exe = std::env::current_exe().context("find the longhaul executable")?;
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--daemon")
        .collect();
    args.push("--detached".into());
    let mut child = std::process::Command::new(exe)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .context("start the emulator in the background")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    if line.starts_with("ready") || line.contains("\"ready\"") {
        say_text(&line);
        return Ok(ExitCode::SUCCESS);
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    let _ = child.wait();
    bail!(
        "the emulator did not come up: {}",
        err.trim().trim_start_matches("longhaul: error: ")
    )
}

use std::os::unix::process::CommandExt as _;

fn describe(cfg: &EmulatorConfig) -> String {
    let l = &cfg.a_to_b;
    let rate = |r: Option<u64>| r.map_or("unlimited".to_string(), |r| format_rate_bps(r as f64));
    let mut s = format!(
        "rtt {}, rate {}",
        format_duration(l.delay + cfg.b_to_a.delay),
        if l.rate_bps == cfg.b_to_a.rate_bps {
            rate(l.rate_bps)
        } else {
            format!(
                "{} up / {} down",
                rate(l.rate_bps),
                rate(cfg.b_to_a.rate_bps)
            )
        }
    );
    match l.queue {
        QueueLimit::Bytes(b) => s += &format!(", buffer {}", format_bytes(b as f64)),
        QueueLimit::Packets(p) => s += &format!(", buffer {p} packets"),
        QueueLimit::Unlimited => {}
    }
    if l.loss.mean_loss() > 0.0 {
        s += &format!(", loss {:.3e}", l.loss.mean_loss());
    }
    s += &format!(", mtu {}", cfg.mtu);
    s
}

fn run_down(name: &str) -> Result<ExitCode> {
    let did = control::take_down(name)?;
    if did.is_empty() {
        say(&format!("emulator {name} was not up; nothing to remove"));
    } else {
        say(&format!("emulator {name} down: {}", did.join(", ")));
    }
    Ok(ExitCode::SUCCESS)
}

fn require_up(name: &str) -> Result<()> {
    emulate::topology::check_name(name)?;
    for end in [End::A, End::B] {
        let ns = emulate::topology::ns_name(name, end);
        if !longhaul_sys::netns::exists(&ns) {
            bail!("emulator {name:?} is not up (no namespace {ns}); start it with `longhaul emulate up {name} ...`");
        }
    }
    Ok(())
}

fn run_exec(name: &str, end: End, command: &[String]) -> Result<ExitCode> {
    require_up(name)?;
    let ns = emulate::topology::ns_name(name, end);
    let status = longhaul_sys::netns::command_in(&ns, &command[0])
        .args(&command[1..])
        .status()
        .with_context(|| format!("run {:?} in {ns}", command[0]))?;
    Ok(match status.code() {
        Some(c) => ExitCode::from(c.clamp(0, 255) as u8),
        None => ExitCode::from(2),
    })
}

fn run_addr(name: &str, end: End, ipv6: bool) -> Result<ExitCode> {
    require_up(name)?;
    if ipv6 {
        say(&end.ipv6().to_string());
    } else {
        say(&end.ipv4().to_string());
    }
    Ok(ExitCode::SUCCESS)
}

fn run_stats(name: &str, json: bool) -> Result<ExitCode> {
    let (file, text) = control::read_stats(name)?;
    if json {
        emit(&format!("{}\n", String::from_utf8_lossy(&text)))?;
    } else {
        print_stats(name, &file.stats)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_stats(name: &str, s: &EmulatorStats) -> std::io::Result<()> {
    let mut o = String::new();
    let _ = writeln!(o, "emulator {name}, up {:.1} s", s.uptime_ns as f64 / 1e9);
    for (dir, d) in [("a->b", &s.a_to_b), ("b->a", &s.b_to_a)] {
        let l = &d.link;
        let _ = writeln!(
 o,
            "  {dir}: in {} pkts / {} segs / {}, out {} segs / {}, dropped queue {} loss {} (bursts {}), dup {}, reordered {}",
            l.packets_in,
            l.segments_in,
            format_bytes(l.bytes_in as f64),
            l.segments_out,
            format_bytes(l.bytes_out as f64),
            l.dropped_queue_segments,
            l.dropped_loss_segments,
            l.loss_bursts,
            l.duplicated_segments,
            l.reordered_packets
        );
        let _ = writeln!(
 o,
            "        queue max {} / {} segs, queue delay mean {} max {}, in flight {} pkts, split {}, late mean {} max {}",
            format_bytes(l.queue_high_water_bytes as f64),
            l.queue_high_water_segments,
            format_duration(Duration::from_nanos(l.queue_delay_mean_ns())),
            format_duration(Duration::from_nanos(l.queue_delay_max_ns)),
            d.in_flight_packets,
            d.split_packets,
            format_duration(Duration::from_nanos(d.lateness_mean_ns())),
            format_duration(Duration::from_nanos(d.lateness_max_ns)),
        );
    }
    let _ = writeln!(
        o,
        "  faults: kernel TUN drops a {} b {}, write errors {}, delay line overflow {}{}",
        s.kernel_dropped_a,
        s.kernel_dropped_b,
        s.a_to_b.write_errors + s.b_to_a.write_errors,
        s.a_to_b.overflow_drops + s.b_to_a.overflow_drops,
        if s.a_to_b.realtime && s.b_to_a.realtime {
            ""
        } else {
            " (no real-time priority: releases may be late under load)"
        }
    );
    emit(&o)
}

fn run_log_report(file: &PathBuf, bins: bool, json: bool) -> Result<ExitCode> {
    let f = std::fs::File::open(file).with_context(|| format!("open {}", file.display()))?;
    let reports = emulate::log::report(BufReader::new(f))
        .with_context(|| format!("read {}", file.display()))?;
    if reports.is_empty() {
        bail!(
            "{} holds no delivered packets (was it written by `emulate up --log`?)",
            file.display()
        );
    }
    let mut o = String::new();
    for r in &reports {
        if json {
            let mut v = serde_json::to_value(r)?;
            v["type"] = "log_report".into();
            if !bins {
                v.as_object_mut().map(|o| o.remove("bin_rates_bps"));
            }
            let _ = writeln!(o, "{v}");
            continue;
        }
        let _ = writeln!(
            o,
            "direction {}: {} packets, {} segments, {}",
            r.dir,
            r.packets,
            r.segments,
            format_bytes(r.bytes as f64)
        );
        let _ = writeln!(o, "  inter-packet gap histogram:");
        let mut lower = 0;
        for &(upper, count) in &r.gap_histogram {
            if count > 0 {
                let _ = writeln!(o, "    {:>8} .. {:>8} us  {count}", lower, upper);
            }
            lower = upper;
        }
        let mut rates = r.bin_rates_bps.clone();
        rates.sort_by(|a, b| a.total_cmp(b));
        let pct = |q: f64| rates[((rates.len() - 1) as f64 * q).round() as usize];
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        let _ = writeln!(
            o,
            "  rate in 0.25 ms bins ({} bins): mean {}, min {}, p1 {}, median {}, p99 {}, max {}",
            rates.len(),
            format_rate_bps(mean),
            format_rate_bps(pct(0.0)),
            format_rate_bps(pct(0.01)),
            format_rate_bps(pct(0.5)),
            format_rate_bps(pct(0.99)),
            format_rate_bps(pct(1.0))
        );
        if bins {
            for (i, rate) in r.bin_rates_bps.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "    {:>10.2} ms  {}",
                    i as f64 * 0.25,
                    format_rate_bps(*rate)
                );
            }
        }
    }
    emit(&o)?;
    Ok(ExitCode::SUCCESS)
}
