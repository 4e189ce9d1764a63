//! `longhaul cp` reports bench's telemetry: a real `longhaul serve --root DIR` and real
//! `longhaul cp` processes on loopback; the `--json` log has `interval` lines with
//! per-stream TCP_INFO figures and `limited_by`, an `end` with the verdict, and
//! `longhaul plot` draws it. The text output ends with bench's verdict line. A pull's
//! intervals and verdict carry the sending server's counters (window, RTT, retransmits,
//! `limited_by`), as a push's carry its own; its text ends with a real "Limited by" line.

#[macro_use]
mod support;

use std::fs;
use std::path::Path;

use support::*;

/// What `limited_by` may say (bench's verdicts, and `unknown` at a receiver whose sender
/// has not reported yet).
const VERDICTS: [&str; 6] = [
    "receiver_window",
    "send_buffer",
    "network",
    "application",
    "pacing",
    "unknown",
];

/// Checks a `--json` log of a 2-stream transfer; returns the interval lines' total bytes.
fn check_log(run: &CpRun, direction: &str, bytes: u64) -> u64 {
    let lines = run.json();
    let start = run.json_of("start");
    assert_eq!(start["direction"], direction, "{start}");
    assert_eq!(start["interval_s"], 0.1, "{start}");
    let intervals: Vec<_> = lines.iter().filter(|l| l["type"] == "interval").collect();
    assert!(
        !intervals.is_empty(),
        "no interval line\n{}",
        run.describe()
    );
    assert!(
        !lines.iter().any(|l| l["type"] == "progress"),
        "progress lines are gone\n{}",
        run.describe()
    );
    let mut prev_end = 0.0;
    let mut moved = 0;
    let mut judged_pull_intervals = 0;
    for i in &intervals {
        let (s, e) = (i["start"].as_f64().unwrap(), i["end"].as_f64().unwrap());
        assert_eq!(s, prev_end, "intervals follow each other: {i}");
        assert!(e >= s, "{i}");
        prev_end = e;
        let streams = i["streams"].as_array().unwrap();
        assert_eq!(streams.len(), 2, "{i}");
        let mut sum = 0;
        for (k, st) in streams.iter().enumerate() {
            assert_eq!(st["id"], k as u64, "{i}");
            for key in [
                "bytes",
                "cwnd_bytes",
                "retransmits",
                "delivery_rate_bps",
                "pacing_rate_bps",
            ] {
                assert!(st[key].is_u64(), "{key} in {i}");
            }
            for key in ["bits_per_second", "rtt_ms"] {
                assert!(st[key].is_f64() || st[key].is_u64(), "{key} in {i}");
            }
            let limited = st["limited_by"].as_str().unwrap_or_default();
            assert!(VERDICTS.contains(&limited), "{i}");
            // A pull's intervals carry the sending server's view once it reported.
            let reported = direction == "push" || i["rate_source"] == "delivered";
            assert_eq!(limited == "unknown", !reported, "{i}");
            if direction == "pull" && reported {
                judged_pull_intervals += 1;
            }
            sum += st["bytes"].as_u64().unwrap();
        }
        assert_eq!(i["bytes"], sum, "{i}");
        moved += sum;
        assert_eq!(i["total_bytes"], bytes, "{i}");
        assert!(i["done_bytes"].as_u64().is_some_and(|d| d <= bytes), "{i}");
        assert_eq!(i["total_files"], 1, "{i}");
    }
    if direction == "pull" {
        assert!(
            judged_pull_intervals > 0,
            "no pull interval carries the server's counters\n{}",
            run.describe()
        );
    }
    let end = lines.last().unwrap();
    assert_eq!(end["type"], "end", "{}", run.describe());
    assert_eq!(end["ok"], true, "{end}");
    assert_eq!(end["bytes"], bytes, "{end}");
    assert_eq!(end["streams"], 2, "{end}");
    let limited = end["limited_by"].as_str().unwrap_or_default();
    assert!(VERDICTS.contains(&limited), "{end}");
    // A pull's verdict is judged on the sending server's counters, as a push's is.
    assert_ne!(limited, "unknown", "{end}");
    let window: u64 = end["stream_summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["cwnd_bytes"].as_u64().unwrap_or(0))
        .sum();
    assert!(window > 0, "the sender's window is reported: {end}");
    assert!(
        end["limited_by_text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{end}"
    );
    assert!(
        end["advice"].as_str().is_some_and(|t| !t.is_empty()),
        "{end}"
    );
    assert!(
        end["balance"]
            .as_f64()
            .is_some_and(|b| (0.0..=1.0).contains(&b)),
        "{end}"
    );
    let summaries = end["stream_summaries"].as_array().unwrap();
    assert_eq!(summaries.len(), 2, "{end}");
    let counted: u64 = summaries.iter().map(|s| s["bytes"].as_u64().unwrap()).sum();
    assert_eq!(counted, end["sent_bytes"].as_u64().unwrap(), "{end}");
    moved
}

/// `longhaul plot LOG -o OUT.svg` succeeds and draws the three charts.
fn plots(home: &Path, log: &Path, out: &Path) {
    let status = longhaul(home)
        .arg("plot")
        .arg(log)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "plot failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let svg = fs::read_to_string(out).unwrap();
    assert!(
        svg.starts_with("<svg") || svg.contains("<svg "),
        "not an SVG"
    );
    for title in [
        "Throughput per stream and in total",
        "Congestion window per stream",
        "Round-trip time per stream",
    ] {
        assert!(svg.contains(title), "no {title:?} in the SVG");
    }
}

#[test]
fn cp_json_reports_bench_telemetry_and_plots() {
    let mut rng = Rng::from_env("cp_json_reports_bench_telemetry");
    let s = Scratch::new("telemetry");
    let home = s.dir("home");
    let root = s.dir("root");
    let size = 48 * MIB;
    let src = s.join("src/data.bin");
    write_file(&src, &rng.bytes(size as usize), 0o644);
    let server = Server::start(&home, &root);

    let push = cp!(&home; "--json", "--interval", "100ms", "-P", "2", "--chunk", "1MiB",
        &src, server.remote("data.bin"));
    push.assert_ok();
    assert_eq!(
        fs::read(root.join("data.bin")).unwrap(),
        fs::read(&src).unwrap()
    );
    let acked = check_log(&push, "push", size);
    assert!(acked > 0, "a sender's intervals count acknowledged bytes");
    let push_log = s.join("push.jsonl");
    fs::write(&push_log, &push.stdout).unwrap();
    plots(&home, &push_log, &s.join("push.svg"));

    let pulled = s.join("pulled.bin");
    // Paced to last about a second, so the server reports (every 100 ms) on any machine.
    let pull = cp!(&home; "--json", "--interval", "100ms", "-P", "2", "--chunk", "1MiB",
        "--rate", "400M", server.remote("data.bin"), &pulled);
    pull.assert_ok();
    assert_eq!(fs::read(&pulled).unwrap(), fs::read(&src).unwrap());
    // A receiver's intervals add up to every payload byte it read.
    assert_eq!(check_log(&pull, "pull", size), size);
    let pull_log = s.join("pull.jsonl");
    fs::write(&pull_log, &pull.stdout).unwrap();
    plots(&home, &pull_log, &s.join("pull.svg"));
}

#[test]
fn cp_text_output_ends_with_the_verdict_and_draws_no_bar_off_a_terminal() {
    let mut rng = Rng::from_env("cp_text_output_ends_with_the_verdict");
    let s = Scratch::new("telemetry-text");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.join("src/data.bin");
    write_file(&src, &rng.bytes(3 * MIB as usize), 0o644);
    let server = Server::start(&home, &root);
    let push = cp!(&home; "-P", "2", &src, server.remote("data.bin"));
    push.assert_ok();
    assert!(
        push.stdout.lines().any(|l| l.starts_with("Limited by: ")),
        "no verdict line\n{}",
        push.describe()
    );
    // Paced to last about half a second: long enough for the server's reports.
    let pull = cp!(&home; "-P", "2", "--rate", "50M", server.remote("data.bin"),
        s.join("pulled.bin"));
    pull.assert_ok();
    let limited = pull
        .stdout
        .lines()
        .find(|l| l.starts_with("Limited by: "))
        .unwrap_or_else(|| panic!("no verdict line\n{}", pull.describe()));
    assert!(!limited.contains("unknown"), "{}", pull.describe());
    // stderr is a pipe here: no bar, no carriage returns.
    assert!(!push.stderr.contains('\r'), "{}", push.describe());
    let bad = cp!(&home; "--interval", "1ms", &src, server.remote("data.bin"));
    bad.assert_code(2);
}
