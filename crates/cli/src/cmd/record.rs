//! `longhaul record`: a run measured as the Internet2 Land Speed Record measured it. The
//! distance is the sum of great-circle legs between the cities of the route's router hops;
//! the metric is bit-meters per second; the contest's rules are checked one by one and the
//! run is compared with the standing record of its class.
//!
//! `--json` prints one JSON object (JSON Lines) of `"type":"record"` with `route`,
//! `legs_km`, `legs`, `distance_km`, `bits_per_second`, `bytes`, `seconds`, `streams`, `ip`,
//! `class`, `bit_meters_per_second`, `terabit_meters_per_second`, `petabit_meters_per_second`,
//! `rules` (`name`, `status` pass/fail/unknown, `pass`, `why`), `all_rules_pass` and
//! `standing_record` (`date`, `team`, `terabit_meters_per_second`, `ratio`,
//! `needed_terabit_meters_per_second`, `new_record`).
//!
//! Exit status: 0 when every rule passes, 1 when one fails or cannot be checked, 2 on error.

use anyhow::{bail, Context as _};
use longhaul_model::lsr::history::history;
use longhaul_model::lsr::rules::{all_pass, check_rules, compare, format_percent, RuleStatus};
use longhaul_model::lsr::{format_bit_meters, PETABIT_METER, TERABIT_METER};
use longhaul_model::route::Route;
use longhaul_model::units;
use longhaul_report::html::format_rate;
use longhaul_report::{render_report, ReportInput, RunFigures, RunLog};
use serde_json::json;

use super::common::{emit_json, say};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Largest run log read, bytes.
const MAX_LOG_BYTES: u64 = 512 << 20;

/// Arguments of `longhaul record`.
#[derive(clap::Args)]
pub struct Args {
    /// Cities where the path has router hops, end to end: IATA airport codes or lat:lon
    /// pairs, comma-separated (e.g. GVA,ORD,SJC or 46.24:6.11,41.98:-87.91).
    #[arg(long, value_name = "HOPS")]
    pub route: String,
    /// Run log: the JSON Lines printed by `longhaul bench --json`.
    #[arg(
        long,
        value_name = "RUN.jsonl",
        required_unless_present = "rate",
        conflicts_with = "rate"
    )]
    pub log: Option<PathBuf>,
    /// Throughput instead of a log, bit/s with an optional k/M/G/T suffix (e.g. 9.08G,
    /// 4310.62Mbit/s).
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// Duration of the run (with --rate): seconds, or with s/min/h (e.g. 3648.81, 10min).
    #[arg(long, value_name = "S", requires = "rate")]
    pub seconds: Option<String>,
    /// Bytes moved (with --rate): a number, or with kB/MB/GB/TB or KiB/MiB/GiB/TiB
    /// (e.g. 1966080000000, 2TB).
    #[arg(long, value_name = "B", requires = "rate")]
    pub bytes: Option<String>,
    /// The run used IPv6 (otherwise taken from the log, else IPv4).
    #[arg(long)]
    pub ipv6: bool,
    /// Number of TCP streams (otherwise taken from the log, else 1).
    #[arg(long, value_name = "N")]
    pub streams: Option<u32>,
    /// Print one JSON object (JSON Lines) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML report to this file.
    #[arg(long, value_name = "REPORT.html")]
    pub html: Option<PathBuf>,
}

/// Runs `longhaul record`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let route = Route::parse(&args.route).context("--route")?;
    let log = match &args.log {
        Some(path) => Some(read_run_log(path)?),
        None => None,
    };
    let figures = figures(&args, log.as_ref())?;
    let attempt = figures.attempt(&route);
    let checks = check_rules(&attempt);
    let cmp = compare(history(), &attempt);
    let bmps = attempt.bit_meters_per_second();

    if let Some(path) = &args.html {
        let html = render_report(&ReportInput {
            title: format!("longhaul record: {}", route.to_spec()),
            generated_at: utc_now_text(),
            route: Some(&route),
            figures: figures.clone(),
            log: log.as_ref(),
            history: history(),
            settings: Vec::new(),
            extra_sections: Vec::new(),
            counted_distance_km: None,
        });
        std::fs::write(path, html)
            .with_context(|| format!("writing the report {}", path.display()))?;
    }
    if args.json {
        let legs = route.legs();
        let out = json!({
            "type": "record",
            "route": route.to_spec(),
            "stops": route.stops().iter().map(|s| json!({
                "label": s.label, "name": s.describe(),
                "lat": s.point.lat_deg, "lon": s.point.lon_deg,
            })).collect::<Vec<_>>(),
            "legs_km": legs.iter().map(|l| l.km).collect::<Vec<_>>(),
            "legs": legs.iter().map(|l| json!({"from": l.from, "to": l.to, "km": l.km})).collect::<Vec<_>>(),
            "distance_km": attempt.distance_km,
            "bits_per_second": attempt.bits_per_second,
            "bytes": attempt.bytes,
            "seconds": attempt.seconds,
            "streams": attempt.streams,
            "ip": attempt.ip.to_string(),
            "class": attempt.stream_class().to_string(),
            "bit_meters_per_second": bmps,
            "terabit_meters_per_second": bmps / TERABIT_METER,
            "petabit_meters_per_second": bmps / PETABIT_METER,
            "rules": checks.iter().map(|c| json!({
                "name": c.name, "status": c.status.as_str(),
                "pass": c.status == RuleStatus::Pass, "why": c.why,
            })).collect::<Vec<_>>(),
            "all_rules_pass": all_pass(&checks),
            "standing_record": cmp.record.as_ref().map(|r| json!({
                "date": r.date.to_string(),
                "team": r.team,
                "ip": r.ip.to_string(),
                "classes": r.classes_label(),
                "terabit_meters_per_second": r.terabit_meters_per_second,
                "ratio": cmp.ratio,
                "needed_terabit_meters_per_second": cmp.needed_bit_meters_per_second / TERABIT_METER,
                "new_record": cmp.new_record,
            })),
            "html": args.html.as_ref().map(|p| p.display().to_string()),
        });
        emit_json(&out);
    } else {
        print_text(&route, &figures, &checks, bmps, &cmp.describe(bmps));
        if let Some(r) = &cmp.record {
            say(&format!(
                "  this run is {} of {} ({})",
                format_percent(cmp.ratio),
                format_bit_meters(r.terabit_meters_per_second * TERABIT_METER),
                r.date
            ));
        }
        if let Some(path) = &args.html {
            say(&format!("report: {}", path.display()));
        }
        if let Some(l) = &log {
            if l.skipped_lines > 0 {
                eprintln!("longhaul: warning: {} line(s) of the log were not run records and were skipped", l.skipped_lines);
            }
        }
    }

    Ok(if all_pass(&checks) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_text(
    route: &Route,
    f: &RunFigures,
    checks: &[longhaul_model::lsr::rules::RuleCheck],
    bmps: f64,
    standing: &str,
) {
    let names: Vec<String> = route.stops().iter().map(|s| s.describe()).collect();
    say(&format!("route: {}", names.join(" -> ")));
    for (i, leg) in route.legs().iter().enumerate() {
        say(&format!(
            "  leg {:<3} {:<28} {:>10.1} km",
            i + 1,
            format!("{} -> {}", leg.from, leg.to),
            leg.km
        ));
    }
    say(&format!(
        "  total {:>39.1} km (sum of great-circle legs)",
        route.distance_km()
    ));
    let mut detail = Vec::new();
    if let Some(b) = f.bytes {
        detail.push(format!("{b} bytes"));
    }
    if let Some(s) = f.seconds {
        detail.push(format!("{s:.2} s"));
    }
    detail.push(format!("{} stream(s)", f.streams));
    detail.push(if f.ipv6 { "IPv6" } else { "IPv4" }.to_string());
    say(&format!(
        "throughput: {} ({})",
        format_rate(f.bits_per_second),
        detail.join(", ")
    ));
    if let Some(l) = &f.limited_by {
        say(&format!("limited by: {l}"));
    }
    say(&format!(
        "metric: {} ({:.1} Tb·m/s, {:.4e} bit·m/s)",
        format_bit_meters(bmps),
        bmps / TERABIT_METER,
        bmps
    ));
    say("rules:");
    for c in checks {
        say(&format!(
            "  {:<8} {:<11} {}",
            c.status.as_str(),
            c.name,
            c.why
        ));
    }
    say(&format!("record: {standing}"));
}

/// The run's figures from the log or the command line; flags override the log.
fn figures(args: &Args, log: Option<&RunLog>) -> anyhow::Result<RunFigures> {
    let ipv6 = args.ipv6 || log.and_then(RunLog::ipv6).unwrap_or(false);
    let streams = args
        .streams
        .or_else(|| log.and_then(RunLog::streams))
        .unwrap_or(1);
    if let Some(log) = log {
        let Some(bps) = log.bits_per_second() else {
            bail!("the log has no throughput: it needs an \"end\" summary or \"interval\" records");
        };
        return Ok(RunFigures {
            bits_per_second: bps,
            bytes: log.bytes(),
            seconds: log.seconds(),
            streams,
            ipv6,
            retransmits: log.retransmits(),
            limited_by: log.limited_by().map(str::to_string),
        });
    }
    let Some(rate_text) = &args.rate else {
        bail!("give --log RUN.jsonl or --rate RATE");
    };
    let rate = units::parse_rate_bps(rate_text).context("--rate")? as f64;
    let mut seconds = match &args.seconds {
        Some(s) => Some(parse_seconds(s).context("--seconds")?),
        None => None,
    };
    let mut bytes = match &args.bytes {
        Some(b) => Some(units::parse_bytes(b).context("--bytes")?),
        None => None,
    };
    match (bytes, seconds) {
        (None, Some(s)) => bytes = Some((rate * s / 8.0).round() as u64),
        (Some(b), None) if rate > 0.0 => seconds = Some(b as f64 * 8.0 / rate),
        _ => {}
    }
    Ok(RunFigures {
        bits_per_second: rate,
        bytes,
        seconds,
        streams,
        ipv6,
        retransmits: None,
        limited_by: None,
    })
}

/// Reads and parses a run log, bounded in size.
pub fn read_run_log(path: &Path) -> anyhow::Result<RunLog> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("reading the run log {}", path.display()))?;
    if meta.len() > MAX_LOG_BYTES {
        bail!(
            "run log {} is {} bytes; at most {MAX_LOG_BYTES} are read",
            path.display(),
            meta.len()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the run log {}", path.display()))?;
    RunLog::parse(&text).with_context(|| format!("run log {}", path.display()))
}

/// The current time as `YYYY-MM-DD HH:MM:SS UTC`, for reports.
pub fn utc_now_text() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `--seconds`: a bare number is seconds (the flag's unit); `10min`, `1h` also work.
fn parse_seconds(text: &str) -> anyhow::Result<f64> {
    if let Ok(v) = text.trim().parse::<f64>() {
        if v.is_finite() && v >= 0.0 {
            return Ok(v);
        }
        bail!("{text:?} must be a finite, non-negative number of seconds");
    }
    Ok(units::parse_duration(text)?.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_bare_numbers_or_durations() {
        assert_eq!(parse_seconds("10min").unwrap(), 600.0);
        assert_eq!(parse_seconds("3648.81").unwrap(), 3648.81);
        assert!(parse_seconds("-5").is_err());
        assert!(parse_seconds("soon").is_err());
    }

    #[test]
    fn utc_text_has_the_shape() {
        let t = utc_now_text();
        assert_eq!(t.len(), "2026-11-22 06:17:12 UTC".len(), "{t}");
        assert!(t.starts_with("20") && t.ends_with(" UTC"));
    }
}
