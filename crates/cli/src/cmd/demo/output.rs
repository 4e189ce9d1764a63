//! What `longhaul demo` prints (text or JSON Lines) and the HTML report it writes.

use std::fmt::Write as _;
use std::path::Path as FsPath;
use std::time::Duration;

use anyhow::Context as _;
use longhaul_emulate::PathDefaults;
use longhaul_model::lsr::format_bit_meters;
use longhaul_model::lsr::history::{history, IpVersion};
use longhaul_model::route::Route;
use longhaul_model::scenario::Scenario;
use longhaul_model::units::format_bytes;
use longhaul_report::svg::{escape, Chart, Series, SeriesStyle};
use longhaul_report::{render_report, ReportInput, RunFigures, RunLog};
use serde_json::json;

use super::super::common::{emit_json, say};

/// One run's figures as the demo shows them.
#[derive(Debug, Clone)]
pub struct RunFigs {
    /// What ran, in words.
    pub label: String,
    /// The command a user would type.
    pub command: String,
    /// Received bit/s.
    pub bits_per_second: f64,
    /// Retransmitted segments (sender).
    pub retransmits: u64,
    /// Segments the emulated bottleneck dropped during the run.
    pub bottleneck_drops: u64,
    /// Congestion control of the sender.
    pub congestion: String,
    /// Seconds measured.
    pub seconds: f64,
    /// Pacing rate the bottleneck probe held, bit/s.
    pub held_rate_bps: Option<u64>,
}

fn held(r: &RunFigs) -> String {
    r.held_rate_bps
        .map_or_else(|| "-".to_string(), |b| rate(b as f64))
}

/// Everything the demo found.
pub struct Outcome {
    /// The scenario.
    pub scenario: &'static Scenario,
    /// What the host carried through the emulator, bit/s.
    pub carried_bps: f64,
    /// The emulated bottleneck, bit/s.
    pub rate_bps: u64,
    /// Its BDP at the scenario's RTT, bytes.
    pub bdp_bytes: u64,
    /// Stock TCP.
    pub stock: RunFigs,
    /// Stock TCP per second.
    pub stock_intervals_bps: Vec<f64>,
    /// longhaul bench.
    pub tuned: RunFigs,
    /// longhaul bench's JSON Lines.
    pub tuned_jsonl: String,
    /// Namespaces made and removed.
    pub namespaces: Vec<String>,
    /// Wall time of the whole demo.
    pub elapsed: Duration,
}

/// A rate for people: `951.2 Mbit/s`, `4.311 Gbit/s`.
pub fn rate(bps: f64) -> String {
    longhaul_report::html::format_rate(bps)
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// The scenario header.
pub fn scenario(sc: &Scenario, json: bool) {
    if json {
        emit_json(&json!({
            "type": "scenario", "name": sc.name, "title": sc.title, "route": sc.route,
            "distance_km": sc.distance_km, "rtt_ms": sc.rtt.as_secs_f64() * 1e3, "mtu": sc.mtu,
            "ip": sc.ip.to_string(), "record_date": sc.record_date,
            "record_bits_per_second": sc.record_rate_bps,
            "record_bit_meters_per_second": sc.record_bit_meters_per_second,
            "source": sc.source,
        }));
        return;
    }
    say(&format!("longhaul demo: {}", sc.name));
    say(&format!("  {}", sc.title));
    say(&format!(
        "  record ({}): {} x {} km = {}; RTT {} ms, MTU {}, {}",
        sc.record_date,
        rate(sc.record_rate_bps),
        thousands(sc.distance_km),
        format_bit_meters(sc.record_bit_meters_per_second),
        sc.rtt.as_millis(),
        sc.mtu,
        sc.ip
    ));
}

/// The probe's result and the path chosen.
pub fn path(sc: &Scenario, carried_bps: f64, rate_bps: u64, bdp: u64, json: bool) {
    let why = format!(
        "scaled down from {} to {} because this host carries ~{} through the emulator \
         (the demo keeps to half of that, and to at most 1 Gbit/s so that slow start fills \
         the path within seconds)",
        rate(sc.record_rate_bps),
        rate(rate_bps as f64),
        rate(carried_bps)
    );
    if json {
        emit_json(&json!({"type": "probe", "carried_bits_per_second": carried_bps}));
        emit_json(&json!({
            "type": "path", "rate_bps": rate_bps, "rtt_ms": sc.rtt.as_secs_f64() * 1e3,
            "mtu": sc.mtu, "buffer_bytes": PathDefaults::DEFAULT.buffer_bytes(bdp, sc.mtu), "bdp_bytes": bdp,
            "why": why,
        }));
        return;
    }
    say(&format!("      this host carries ~{}", rate(carried_bps)));
    say(&format!(
        "  emulated path: {}, RTT {} ms, MTU {}, bottleneck buffer {} (1 BDP)",
        rate(rate_bps as f64),
        sc.rtt.as_millis(),
        sc.mtu,
        format_bytes(bdp as f64)
    ));
    say(&format!("  {why}"));
}

/// One run's result line.
pub fn run_line(which: &str, r: &RunFigs, rate_bps: u64, sc: &Scenario, json: bool) {
    if json {
        emit_json(&json!({
            "type": "run", "which": which, "label": r.label, "command": r.command,
            "bits_per_second": r.bits_per_second,
            "percent_of_bottleneck": pct(r.bits_per_second, rate_bps as f64),
            "retransmits": r.retransmits, "bottleneck_drops": r.bottleneck_drops,
            "congestion": r.congestion, "seconds": r.seconds,
            "held_rate_bps": r.held_rate_bps,
            "scaled_bit_meters_per_second": sc.bit_meters_per_second(r.bits_per_second),
        }));
        return;
    }
    say(&format!(
        "      {}: {} ({:.1} % of the bottleneck), {} retransmits",
        which,
        rate(r.bits_per_second),
        pct(r.bits_per_second, rate_bps as f64),
        r.retransmits
    ));
}

/// The side-by-side table and the closing lines.
pub fn summary(o: &Outcome, html: &FsPath, json: bool) {
    let sc = o.scenario;
    let s_bm = sc.bit_meters_per_second(o.stock.bits_per_second);
    let t_bm = sc.bit_meters_per_second(o.tuned.bits_per_second);
    let gain = if o.stock.bits_per_second > 0.0 {
        o.tuned.bits_per_second / o.stock.bits_per_second
    } else {
        0.0
    };
    if json {
        emit_json(&json!({
            "type": "summary", "scenario": sc.name, "rate_bps": o.rate_bps,
            "stock_bits_per_second": o.stock.bits_per_second,
            "longhaul_bits_per_second": o.tuned.bits_per_second,
            "speedup": gain,
            "stock_bit_meters_per_second": s_bm, "longhaul_bit_meters_per_second": t_bm,
            "record_bit_meters_per_second": sc.record_bit_meters_per_second,
            "html": html.display().to_string(), "namespaces_removed": o.namespaces,
            "elapsed_seconds": o.elapsed.as_secs_f64(),
        }));
        return;
    }
    say("");
    say(&format!(
        "{} over {} km, {} ms RTT, emulated at {}:",
        sc.name,
        thousands(sc.distance_km),
        sc.rtt.as_millis(),
        rate(o.rate_bps as f64)
    ));
    say(&format!(
        "  {:<26} {:>18} {:>18}",
        "", "stock TCP", "longhaul bench"
    ));
    let row = |name: &str, a: String, b: String| say(&format!("  {name:<26} {a:>18} {b:>18}"));
    row(
        "rate",
        rate(o.stock.bits_per_second),
        rate(o.tuned.bits_per_second),
    );
    row(
        "% of the bottleneck",
        format!("{:.1} %", pct(o.stock.bits_per_second, o.rate_bps as f64)),
        format!("{:.1} %", pct(o.tuned.bits_per_second, o.rate_bps as f64)),
    );
    row(
        "retransmits",
        o.stock.retransmits.to_string(),
        o.tuned.retransmits.to_string(),
    );
    row(
        "bottleneck drops",
        o.stock.bottleneck_drops.to_string(),
        o.tuned.bottleneck_drops.to_string(),
    );
    row(
        "congestion control",
        o.stock.congestion.clone(),
        o.tuned.congestion.clone(),
    );
    row("pacing held at", held(&o.stock), held(&o.tuned));
    row(
        "bit-meters/s (x distance)",
        format_bit_meters(s_bm),
        format_bit_meters(t_bm),
    );
    say(&format!(
        "  longhaul moved {gain:.1}x what stock TCP did. The {} record: {} ({} x {} km); \
         this emulated run scores {:.1} % of it at {:.1} % of its rate.",
        sc.record_date,
        format_bit_meters(sc.record_bit_meters_per_second),
        rate(sc.record_rate_bps),
        thousands(sc.distance_km),
        pct(t_bm, sc.record_bit_meters_per_second),
        pct(o.rate_bps as f64, sc.record_rate_bps),
    ));
    say(&format!(
        "  commands: `{}` then `{}`",
        o.stock.command, o.tuned.command
    ));
    if !o.stock.command.starts_with("iperf3") {
        say(&format!("  stock run: {}", o.stock.label));
    }
    say(&format!("report: {}", html.display()));
    say(&format!(
        "removed: {} (demo took {:.0} s)",
        o.namespaces.join(", "),
        o.elapsed.as_secs_f64()
    ));
}

/// Writes the HTML report: the longhaul run with its graphs, and the demo's own section.
pub fn write_report(o: &Outcome, html: &FsPath) -> anyhow::Result<()> {
    let sc = o.scenario;
    let route = Route::parse(sc.route).context("the scenario's route")?;
    let log = RunLog::parse(&o.tuned_jsonl).context("the longhaul run's log")?;
    let figures = RunFigures {
        bits_per_second: o.tuned.bits_per_second,
        bytes: log.bytes(),
        seconds: log.seconds(),
        streams: 1,
        ipv6: sc.ip == IpVersion::V6,
        retransmits: Some(o.tuned.retransmits),
        limited_by: log.limited_by().map(str::to_string),
    };
    let page = render_report(&ReportInput {
        title: format!("longhaul demo: {}", sc.name),
        generated_at: super::super::record::utc_now_text(),
        route: Some(&route),
        figures,
        log: Some(&log),
        history: history(),
        settings: vec![
            ("emulated rate".into(), rate(o.rate_bps as f64)),
            ("emulated RTT".into(), format!("{} ms", sc.rtt.as_millis())),
            ("MTU".into(), sc.mtu.to_string()),
            (
                "bottleneck buffer".into(),
                format!("{} (1 BDP)", format_bytes(o.bdp_bytes as f64)),
            ),
        ],
        extra_sections: vec![(
            "Stock TCP and longhaul on the emulated path".into(),
            section(o),
        )],
        counted_distance_km: Some(sc.distance_km),
    });
    std::fs::write(html, page).with_context(|| format!("writing the report {}", html.display()))
}

fn section(o: &Outcome) -> String {
    let sc = o.scenario;
    let mut h = String::new();
    let _ = write!(
        h,
        "<p>{}. Re-enacted on one machine: an emulated path of {} with the record's {} ms RTT \
         and MTU {} ({}).</p><p>The rate is scaled down from the record's {} because this host \
         carried ~{} through the emulator. Bit-meters/second below are each run's rate times \
         the record's {} km (the report's summary above uses the great-circle legs of the \
         route {}, which the contest's real router hops exceeded).</p>",
        escape(sc.title),
        rate(o.rate_bps as f64),
        sc.rtt.as_millis(),
        sc.mtu,
        escape(sc.source),
        rate(sc.record_rate_bps),
        rate(o.carried_bps),
        thousands(sc.distance_km),
        escape(sc.route),
    );
    h.push_str("<table><tr><th></th><th>stock TCP</th><th>longhaul bench</th></tr>");
    let mut row = |name: &str, a: String, b: String| {
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(name),
            escape(&a),
            escape(&b)
        );
    };
    row("command", o.stock.command.clone(), o.tuned.command.clone());
    row(
        "rate",
        rate(o.stock.bits_per_second),
        rate(o.tuned.bits_per_second),
    );
    row(
        "% of the bottleneck",
        format!("{:.1} %", pct(o.stock.bits_per_second, o.rate_bps as f64)),
        format!("{:.1} %", pct(o.tuned.bits_per_second, o.rate_bps as f64)),
    );
    row(
        "retransmits",
        o.stock.retransmits.to_string(),
        o.tuned.retransmits.to_string(),
    );
    row(
        "bottleneck drops",
        o.stock.bottleneck_drops.to_string(),
        o.tuned.bottleneck_drops.to_string(),
    );
    row(
        "congestion control",
        o.stock.congestion.clone(),
        o.tuned.congestion.clone(),
    );
    row("pacing held at", held(&o.stock), held(&o.tuned));
    row(
        "bit-meters/s over the record's distance",
        format_bit_meters(sc.bit_meters_per_second(o.stock.bits_per_second)),
        format_bit_meters(sc.bit_meters_per_second(o.tuned.bits_per_second)),
    );
    row(
        "the record",
        format_bit_meters(sc.record_bit_meters_per_second),
        format!("{} ({})", rate(sc.record_rate_bps), sc.record_date),
    );
    h.push_str("</table>");
    let _ = write!(h, "<figure>{}</figure>", comparison_chart(o).to_svg());
    h
}

/// Throughput per second of both runs, with the bottleneck rate.
fn comparison_chart(o: &Outcome) -> Chart {
    let mut chart = Chart::new(
        "Throughput per second: stock TCP and longhaul on the same emulated path",
        "time (s)",
        "Mbit/s",
    );
    let longhaul: Vec<(f64, f64)> = RunLog::parse(&o.tuned_jsonl)
        .map(|l| {
            l.intervals
                .iter()
                .map(|i| (i.end_s, i.bits_per_second / 1e6))
                .collect()
        })
        .unwrap_or_default();
    let stock: Vec<(f64, f64)> = o
        .stock_intervals_bps
        .iter()
        .enumerate()
        .map(|(i, b)| ((i + 1) as f64, b / 1e6))
        .collect();
    let end = longhaul
        .last()
        .map_or(0.0, |p| p.0)
        .max(stock.last().map_or(0.0, |p| p.0));
    let line = |name: String, color: &str, width: f64, points: Vec<(f64, f64)>| Series {
        name,
        color: color.to_string(),
        width,
        style: SeriesStyle::Line,
        points,
    };
    chart.series = vec![
        line(
            "bottleneck".into(),
            "#999999",
            1.2,
            vec![
                (0.0, o.rate_bps as f64 / 1e6),
                (end, o.rate_bps as f64 / 1e6),
            ],
        ),
        line("stock TCP".into(), "#b3261e", 2.0, stock),
        line("longhaul".into(), "#1a73e8", 2.4, longhaul),
    ];
    chart
}

/// `28983` -> `28,983`.
fn thousands(v: f64) -> String {
    let n = v.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(28_983.0), "28,983");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1_000_000.0), "1,000,000");
    }

    #[test]
    fn percent_of_nothing_is_zero() {
        assert_eq!(pct(5.0, 0.0), 0.0);
        assert_eq!(pct(5e8, 1e9), 50.0);
    }
}
