//! The stock-TCP run: what a default host gets on the path. `iperf3` with no options when
//! it is installed (the tool people reach for first); otherwise `longhaul bench` held to
//! what a default host allows: a fixed buffer at the kernel's default autotuning ceiling
//! (half of `tcp_wmem`'s maximum, which the kernel doubles back), the kernel's default
//! congestion control, no pacing and no bottleneck probe.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use longhaul_sys::netns;
use serde_json::Value;

use super::lab::{self, BenchPlan, ChildGuard, Cleanup, ServeGuard, IPERF_PORT};

/// The figures of the stock run.
#[derive(Debug, Clone)]
pub struct StockRun {
    /// The command as a user would type it.
    pub command: String,
    /// What it is, for the table header.
    pub label: String,
    /// Received bit/s.
    pub bits_per_second: f64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Seconds.
    pub seconds: f64,
    /// Congestion control used.
    pub congestion: String,
    /// Throughput per second (for the report's table).
    pub intervals_bps: Vec<f64>,
}

/// Runs the stock run from namespace `ns_a` to `target_ip` in `ns_b`.
pub fn run(
    ns_a: &str,
    ns_b: &str,
    target_ip: &str,
    seconds: u64,
    token: lab::DemoKeys,
    cleanup: &Cleanup,
) -> anyhow::Result<StockRun> {
    if lab::on_path("iperf3") {
        return iperf3(ns_a, ns_b, target_ip, seconds, cleanup);
    }
    bench_at_stock_limits(ns_a, ns_b, target_ip, seconds, token)
}

fn iperf3(
    ns_a: &str,
    ns_b: &str,
    target_ip: &str,
    seconds: u64,
    cleanup: &Cleanup,
) -> anyhow::Result<StockRun> {
    let mut server = netns::command_in(ns_b, "iperf3");
    server
        .args(["-s", "-1", "-p", &IPERF_PORT.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let server = ChildGuard::spawn(server, "iperf3 -s", cleanup)?;
    lab::wait_listening(ns_b, IPERF_PORT, Duration::from_secs(10))?;
    let mut client = netns::command_in(ns_a, "iperf3");
    client
        .args([
            "-c",
            target_ip,
            "-p",
            &IPERF_PORT.to_string(),
            "-t",
            &seconds.to_string(),
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let client = ChildGuard::spawn(client, "iperf3 -c", cleanup)?;
    let (ok, out) = client.finish(Duration::from_secs(seconds + 60))?;
    drop(server);
    let v: Value = serde_json::from_str(&out)
        .map_err(|e| anyhow!("iperf3 printed no JSON ({e}); its output: {}", out.trim()))?;
    if let Some(err) = v.get("error").and_then(Value::as_str) {
        bail!("iperf3 failed: {err}");
    }
    if !ok {
        bail!("iperf3 -c {target_ip} failed or did not end in time");
    }
    parse_iperf3(&v, target_ip, seconds)
}

/// The figures of an `iperf3 --json` client report.
pub fn parse_iperf3(v: &Value, target_ip: &str, seconds: u64) -> anyhow::Result<StockRun> {
    let end = v.get("end").context("iperf3 JSON has no \"end\"")?;
    let received = end
        .get("sum_received")
        .context("iperf3 JSON has no end.sum_received")?;
    let sent = end.get("sum_sent");
    let num = |o: Option<&Value>, k: &str| o.and_then(|o| o.get(k)).and_then(Value::as_f64);
    let intervals_bps = v
        .get("intervals")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|i| i.get("sum").and_then(|s| s.get("bits_per_second")))
                .filter_map(Value::as_f64)
                .collect()
        })
        .unwrap_or_default();
    Ok(StockRun {
        command: format!("iperf3 -c {target_ip} -t {seconds}"),
        label: "stock TCP (iperf3, no options)".into(),
        bits_per_second: num(Some(received), "bits_per_second").unwrap_or(0.0),
        retransmits: num(sent, "retransmits").unwrap_or(0.0) as u64,
        seconds: num(Some(received), "seconds").unwrap_or(0.0),
        congestion: end
            .get("sender_tcp_congestion")
            .and_then(Value::as_str)
            .unwrap_or("kernel default")
            .to_string(),
        intervals_bps,
    })
}

fn bench_at_stock_limits(
    ns_a: &str,
    ns_b: &str,
    target_ip: &str,
    seconds: u64,
    token: lab::DemoKeys,
) -> anyhow::Result<StockRun> {
    let facts = netns::run_in(ns_a, || Ok(longhaul_engine::host::host_facts()))
        .context("reading the namespace's TCP settings")?;
    let window = (facts.tcp_wmem_max / 2).max(64 * 1024);
    let cc = facts.default_congestion.clone();
    let _server = ServeGuard::start(ns_b, lab::STOCK_SERVE_PORT, token.clone())?;
    let target = if target_ip.contains(':') {
        format!("[{target_ip}]:{}", lab::STOCK_SERVE_PORT)
    } else {
        format!("{target_ip}:{}", lab::STOCK_SERVE_PORT)
    };
    let run = lab::bench_in(
        ns_a,
        BenchPlan {
            target: target.clone(),
            duration: Duration::from_secs(seconds),
            window: Some(window),
            congestion: (!cc.is_empty()).then(|| cc.clone()),
            progress_every: 0,
        },
        token,
    )?;
    let s = &run.end.summary;
    let log = longhaul_report::RunLog::parse(&run.jsonl).ok();
    Ok(StockRun {
        command: format!("longhaul bench {target} -t {seconds} --window {window} -C {cc}"),
        label: "stock limits (iperf3 not installed: longhaul bench held to the kernel's default buffer ceiling)".into(),
        bits_per_second: s.bits_per_second,
        retransmits: s.retransmits,
        seconds: s.seconds,
        congestion: cc,
        intervals_bps: log
            .map(|l| l.intervals.iter().map(|i| i.bits_per_second).collect())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_iperf3_report() {
        let text = r#"{"start":{},"intervals":[{"sum":{"bits_per_second":5e7}},{"sum":{"bits_per_second":7e7}}],
            "end":{"sum_sent":{"bytes":300000000,"bits_per_second":8.1e7,"retransmits":3},
                   "sum_received":{"bytes":290000000,"seconds":30.4,"bits_per_second":7.6e7},
                   "sender_tcp_congestion":"bbr"}}"#;
        let v: Value = serde_json::from_str(text).unwrap();
        let r = parse_iperf3(&v, "10.99.0.2", 30).unwrap();
        assert_eq!(r.bits_per_second, 7.6e7);
        assert_eq!(r.retransmits, 3);
        assert_eq!(r.congestion, "bbr");
        assert_eq!(r.intervals_bps, vec![5e7, 7e7]);
        assert_eq!(r.command, "iperf3 -c 10.99.0.2 -t 30");
        assert!(parse_iperf3(&serde_json::json!({"start":{}}), "x", 1).is_err());
    }
}
