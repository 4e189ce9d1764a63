//! `longhaul demo`: a Land Speed Record run re-enacted on this machine. It measures what
//! this host carries through the emulator, builds an emulated path with the record's real
//! RTT and MTU at a rate the host can carry, runs stock TCP and then `longhaul bench` over
//! it, prints both side by side with the bit-meters/second they would score over the
//! record's distance, writes the HTML report and removes everything it made — also on
//! Ctrl-C, SIGTERM and on failure.
//!
//! `--json` prints JSON Lines: `scenario`, `probe`, `path`, `run` (twice: `which` is
//! `stock` then `longhaul`) and `summary` objects, or `error`.

mod lab;
mod output;
mod stock;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use longhaul_emulate::End;
use longhaul_model::lsr::history::IpVersion;
use longhaul_model::scenario::{self, Scenario};
use longhaul_sys::process::TerminationSignals;
use serde_json::json;

use super::common::{emit_json, say};
use lab::{BenchPlan, Cleanup, Path, ServeGuard};
use output::{Outcome, RunFigs};

/// Arguments of `longhaul demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which record to re-enact: sunet2004 (San Jose-Lulea, 436 ms), caltech2003
    /// (Geneva-Chicago-Sunnyvale, 180 ms) or tokyo2006 (IPv6, 500 ms).
    #[arg(long, default_value = "sunet2004", value_parser = parse_scenario)]
    pub scenario: String,
    /// Seconds of each of the two runs (stock TCP, then longhaul).
    #[arg(long, default_value_t = DEFAULT_SECONDS, value_parser = clap::value_parser!(u64).range(2..=600))]
    pub seconds: u64,
    /// Where to write the HTML report.
    #[arg(long, value_name = "FILE", default_value = "longhaul-demo.html")]
    pub html: PathBuf,
    /// Print JSON Lines instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Seconds per run by default: two runs, the probe and the set-up take about 100 s on the
/// 2-core reference machine (three minutes at most), and slow start at 436-500 ms (5-10 s
/// to fill 1 Gbit/s) is a small part of each run.
pub const DEFAULT_SECONDS: u64 = 40;
/// Length of the probe of what the emulator carries.
const PROBE: Duration = Duration::from_secs(3);
/// Rates the demo may emulate, highest first.
const RATE_LADDER_BPS: [u64; 6] = [
    1_000_000_000,
    500_000_000,
    200_000_000,
    100_000_000,
    50_000_000,
    20_000_000,
];

fn parse_scenario(s: &str) -> Result<String, String> {
    match scenario::find(s) {
        Some(sc) => Ok(sc.name.to_string()),
        None => Err(format!(
            "unknown scenario {s:?}; pick one of {}",
            scenario::names().join(", ")
        )),
    }
}

/// Runs `longhaul demo`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let sc = scenario::find(&args.scenario).context("scenario")?;
    if !longhaul_sys::process::is_root() {
        explain_root(sc, &args);
        return Ok(ExitCode::from(2));
    }
    check_writable(&args.html)?;
    // Block termination signals before any thread starts, so they can be waited for here
    // and everything the demo made removed before exiting.
    let signals = TerminationSignals::block().context("blocking termination signals")?;
    let cleanup = Cleanup::default();
    let json = args.json;
    let worker = {
        let cleanup = cleanup.clone();
        std::thread::Builder::new()
            .name("lh-demo".into())
            .spawn(move || demo(sc, &args, &cleanup))
            .context("starting the demo")?
    };
    loop {
        if let Some(sig) = signals.wait(Duration::from_millis(200)) {
            let removed = cleanup.run_now();
            eprintln!(
                "longhaul demo: stopped by signal {sig}; removed {}",
                if removed.is_empty() {
                    "nothing (nothing was left)".to_string()
                } else {
                    removed.join(", ")
                }
            );
            return Ok(ExitCode::from(130));
        }
        if worker.is_finished() {
            break;
        }
    }
    let result = worker
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the demo panicked")));
    // Guards have run by now; this catches anything a failed step left.
    cleanup.run_now();
    match result {
        Ok(code) => Ok(code),
        Err(e) if json => {
            emit_json(&json!({"type": "error", "error": format!("{e:#}")}));
            Ok(ExitCode::from(2))
        }
        Err(e) => Err(e),
    }
}

/// Fails now, not after the runs, when the report cannot be written.
fn check_writable(path: &std::path::Path) -> anyhow::Result<()> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| {
            format!(
                "cannot write the report {}; give another place with --html FILE",
                path.display()
            )
        })?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

fn explain_root(sc: &Scenario, args: &Args) {
    let text = format!(
        "longhaul demo needs root (CAP_NET_ADMIN): it builds an emulated long fat path on this \
         machine out of two network namespaces joined by TUN devices, and that needs root.\n\
         As root it would:\n\
         1. measure what this host carries through the emulator ({} s, no delay);\n\
         2. build a path with the {} record's real RTT ({} ms) and MTU ({}) at a rate this \
         host can carry (at most 1 Gbit/s);\n\
         3. run stock TCP over it ({} s), then longhaul bench ({} s), and print both side by \
         side with the bit-meters/second they would score over {} km;\n\
         4. write the HTML report to {} and remove the namespaces.\n\
         Nothing outside the two namespaces is changed. Run: sudo longhaul demo",
        PROBE.as_secs(),
        sc.name,
        sc.rtt.as_millis(),
        sc.mtu,
        args.seconds,
        args.seconds,
        sc.distance_km,
        args.html.display()
    );
    if args.json {
        emit_json(&json!({"type": "error", "error": text, "needs_root": true}));
    } else {
        eprintln!("{text}");
    }
}

/// The largest rate of the ladder at most half of what the host carried and at most the
/// record's rate.
pub fn choose_rate(carried_bps: f64, record_bps: f64) -> u64 {
    RATE_LADDER_BPS
        .iter()
        .copied()
        .find(|&r| (r as f64) <= carried_bps / 2.0 && (r as f64) <= record_bps)
        .unwrap_or(RATE_LADDER_BPS[RATE_LADDER_BPS.len() - 1])
}

fn demo(sc: &'static Scenario, args: &Args, cleanup: &Cleanup) -> anyhow::Result<ExitCode> {
    let t0 = Instant::now();
    let text = !args.json;
    let base = format!("demo{}", std::process::id());
    let token = lab::demo_keys()?;
    let ipv6 = sc.ip == IpVersion::V6;
    let (iperf_target, bench_target) = if ipv6 {
        let a = End::B.ipv6().to_string();
        (a.clone(), format!("[{a}]"))
    } else {
        let a = End::B.ipv4().to_string();
        (a.clone(), a)
    };
    output::scenario(sc, args.json);

    // 1. What the emulator carries here: an unlimited path with no delay.
    if text {
        say(&format!(
            "[1/3] probing what this host carries through the emulator ({} s, no delay, no rate limit) ...",
            PROBE.as_secs()
        ));
    }
    let carried_bps = {
        let path = Path::start(&format!("{base}p"), None, Duration::ZERO, sc.mtu, cleanup)?;
        let _server = ServeGuard::start(&path.netns(End::B), lab::SERVE_PORT, token.clone())?;
        let run = lab::bench_in(
            &path.netns(End::A),
            BenchPlan {
                target: bench_target.clone(),
                duration: PROBE,
                window: None,
                congestion: None,
                progress_every: 0,
            },
            token.clone(),
        )
        .context("probing the emulator")?;
        drop(_server);
        path.shutdown()?;
        run.end.summary.bits_per_second
    };
    let rate_bps = choose_rate(carried_bps, sc.record_rate_bps);
    let bdp = sc.bdp_bytes(rate_bps);
    output::path(sc, carried_bps, rate_bps, bdp, args.json);
    if carried_bps < 2.0 * RATE_LADDER_BPS[RATE_LADDER_BPS.len() - 1] as f64 {
        bail!(
            "this host carried only {} through the emulator; the demo needs at least {}. Is the machine busy?",
            output::rate(carried_bps),
            output::rate(2.0 * RATE_LADDER_BPS[RATE_LADDER_BPS.len() - 1] as f64)
        );
    }

    // 2. The path with the record's RTT; stock TCP, then longhaul.
    let path = Path::start(&base, Some(rate_bps), sc.rtt, sc.mtu, cleanup)?;
    let ns_a = path.netns(End::A);
    let ns_b = path.netns(End::B);
    let drops0 = path.drops_a_to_b();
    if text {
        say(&format!(
            "[2/3] stock TCP: {} for {} s (kernel defaults: no buffer tuning, no pacing) ...",
            if lab::on_path("iperf3") {
                format!("iperf3 -c {iperf_target}")
            } else {
                format!("longhaul bench {bench_target} at the kernel's default buffer ceiling")
            },
            args.seconds
        ));
    }
    let stock = stock::run(
        &ns_a,
        &ns_b,
        &iperf_target,
        args.seconds,
        token.clone(),
        cleanup,
    )?;
    let drops1 = path.drops_a_to_b();
    let stock_figs = RunFigs {
        label: stock.label.clone(),
        command: stock.command.clone(),
        bits_per_second: stock.bits_per_second,
        retransmits: stock.retransmits,
        bottleneck_drops: drops1.saturating_sub(drops0),
        congestion: stock.congestion.clone(),
        seconds: stock.seconds,
        held_rate_bps: None,
    };
    output::run_line("stock", &stock_figs, rate_bps, sc, args.json);

    if text {
        say(&format!(
            "[3/3] longhaul bench {bench_target} -t {} (no options: window from the measured RTT, buffers forced past the sysctl caps, bottleneck probe, pacing) ...",
            args.seconds
        ));
    }
    let server = ServeGuard::start(&ns_b, lab::SERVE_PORT, token.clone())?;
    let tuned = lab::bench_in(
        &ns_a,
        BenchPlan {
            target: bench_target.clone(),
            duration: Duration::from_secs(args.seconds),
            window: None,
            congestion: None,
            progress_every: if text { 5 } else { 0 },
        },
        token,
    )?;
    drop(server);
    let drops2 = path.drops_a_to_b();
    path.shutdown()?;
    let s = &tuned.end.summary;
    let tuned_figs = RunFigs {
        label: "longhaul bench (no options)".into(),
        command: format!("longhaul bench {bench_target} -t {}", args.seconds),
        bits_per_second: s.bits_per_second,
        retransmits: s.retransmits,
        bottleneck_drops: drops2.saturating_sub(drops1),
        congestion: {
            let first = tuned
                .jsonl
                .lines()
                .next()
                .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .and_then(|v| v["congestion"].as_str().map(str::to_string))
                .unwrap_or_default();
            // The bench may annotate its cruise ("bbr (after non-congestive loss)"): only
            // the algorithm's name goes in the table.
            match s
                .cruise_congestion
                .as_deref()
                .and_then(|c| c.split_whitespace().next())
            {
                Some(c) if c != first => format!("{first}, then {c}"),
                _ => first,
            }
        },
        seconds: s.seconds,
        held_rate_bps: s.held_rate_bps,
    };
    output::run_line("longhaul", &tuned_figs, rate_bps, sc, args.json);

    // 3. Side by side, the report, and what was removed.
    let outcome = Outcome {
        scenario: sc,
        carried_bps,
        rate_bps,
        bdp_bytes: bdp,
        stock: stock_figs,
        stock_intervals_bps: stock.intervals_bps,
        tuned: tuned_figs,
        tuned_jsonl: tuned.jsonl,
        namespaces: vec![format!("lh-{base}-a"), format!("lh-{base}-b")],
        elapsed: t0.elapsed(),
    };
    output::write_report(&outcome, &args.html)?;
    output::summary(&outcome, &args.html, args.json);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_half_of_what_the_host_carries_at_most_1g_and_the_record() {
        assert_eq!(choose_rate(9e9, 4.31e9), 1_000_000_000);
        assert_eq!(choose_rate(1.5e9, 4.31e9), 500_000_000);
        assert_eq!(choose_rate(450e6, 4.31e9), 200_000_000);
        assert_eq!(choose_rate(9e9, 0.3e9), 200_000_000);
        assert_eq!(choose_rate(1e6, 4.31e9), 20_000_000);
    }

    #[test]
    fn scenario_names_parse() {
        assert_eq!(parse_scenario("SUNET2004").unwrap(), "sunet2004");
        let err = parse_scenario("x").unwrap_err();
        assert!(err.contains("tokyo2006"), "{err}");
    }
}
