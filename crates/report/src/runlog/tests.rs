//! The reader on real logs of bench and cp, on other programs' logs and on noise.
use super::*;

const SAMPLE: &str = include_str!("../../tests/data/bench-2streams.jsonl");

#[test]
fn reads_the_sample_bench_log() {
    let log = RunLog::parse(SAMPLE).expect("parses");
    assert_eq!(log.skipped_lines, 0);
    assert_eq!(log.streams(), Some(2));
    assert_eq!(log.intervals.len(), 12);
    assert_eq!(log.intervals[0].streams.len(), 2);
    assert_eq!(log.intervals[3].streams[1].id, "1");
    assert!(log.intervals[0].streams[0].cwnd_bytes.is_some());
    assert!(log.intervals[0].streams[0].rtt_us.is_some());
    let end = log.end.as_ref().expect("end");
    assert_eq!(log.bytes(), end.bytes.map(|b| b as u64));
    assert_eq!(
        log.limited_by(),
        Some("the network (loss or a full bottleneck)")
    );
    assert_eq!(log.ipv6(), Some(false));
    // The intervals' bytes add up to the summary's.
    let sum: f64 = log.intervals.iter().map(|i| i.bytes).sum();
    assert!((sum - end.bytes.expect("bytes")).abs() < 1.0);
    let settings = log.settings();
    assert!(
        settings.contains(&("server_host.rmem_max".to_string(), "33554432".to_string())),
        "{settings:?}"
    );
    assert!(
        !settings.iter().any(|(k, _)| k == "bytes"),
        "null values are left out"
    );
    let details = log.summary_details();
    assert!(details.contains(&("sender.cpu_percent".to_string(), "21.5".to_string())));
    assert!(!details.iter().any(|(k, _)| k == "bytes"));
    let (cols, rows) = log.end_streams();
    assert_eq!(cols[0], "id");
    assert_eq!(rows.len(), 2);
    let retr = cols
        .iter()
        .position(|c| c == "retransmits")
        .expect("column");
    assert_eq!(rows[0][retr], "37");
}

/// `longhaul cp --json --interval 500ms -P 2` of a 400 MiB file on loopback, both ways.
const CP_PUSH: &str = include_str!("../../tests/data/cp-push-2streams.jsonl");
const CP_PULL: &str = include_str!("../../tests/data/cp-pull-2streams.jsonl");

#[test]
fn reads_a_cp_push_log() {
    let log = RunLog::parse(CP_PUSH).expect("parses");
    assert_eq!(log.skipped_lines, 0);
    assert_eq!(log.streams(), Some(2));
    assert_eq!(log.intervals.len(), 4);
    for i in &log.intervals {
        assert_eq!(i.streams.len(), 2);
        assert!(i.end_s > i.start_s);
        for s in &i.streams {
            assert!(s.cwnd_bytes.is_some_and(|c| c > 0.0), "{s:?}");
            assert!(s.rtt_us.is_some_and(|r| r > 0.0), "{s:?}");
            assert!(s.bits_per_second.is_some(), "{s:?}");
        }
    }
    // The intervals follow each other from the start.
    assert_eq!(log.intervals[0].start_s, 0.0);
    for w in log.intervals.windows(2) {
        assert_eq!(w[0].end_s, w[1].start_s);
    }
    assert_eq!(log.bytes(), Some(419_430_400));
    assert!(log.seconds().is_some_and(|s| s > 1.0));
    assert_eq!(log.limited_by(), Some("application (sender idle)"));
    assert!(log.retransmits().is_some());
    let (cols, rows) = log.end_streams();
    assert_eq!(cols[0], "id");
    assert_eq!(rows.len(), 2);
    assert!(cols.contains(&"limited_by".to_string()));
}

#[test]
fn reads_a_cp_pull_log_without_a_window() {
    let log = RunLog::parse(CP_PULL).expect("parses");
    assert!(!log.intervals.is_empty());
    // The receiver's view: bytes and RTT, no congestion window.
    let bytes: f64 = log.intervals.iter().map(|i| i.bytes).sum();
    assert_eq!(bytes, 419_430_400.0);
    for s in log.intervals.iter().flat_map(|i| &i.streams) {
        assert_eq!(s.cwnd_bytes, None, "{s:?}");
        assert!(s.rtt_us.is_some(), "{s:?}");
    }
    assert!(log.limited_by().is_some_and(|l| l.starts_with("unknown")));
}

#[test]
fn tolerates_missing_fields_other_names_and_noise() {
    let text = "not json\n\
        {\"type\":\"start\",\"params\":{\"streams\":3},\"remote\":\"[fd00::2]:5201\"}\n\
        {\"type\":\"interval\",\"streams\":[{\"id\":\"a\",\"bits_per_second\":1e9,\"bytes\":125000000,\"rtt_ms\":180}]}\n\
        {\"type\":\"interval\",\"sum\":{\"bits_per_second\":2e9,\"bytes\":250000000}}\n\
        {\"type\":\"progress\"}\n\
        {\"type\":\"error\",\"message\":\"peer went away\"}\n";
    let log = RunLog::parse(text).expect("parses");
    assert_eq!(log.skipped_lines, 2);
    assert_eq!(log.streams(), Some(3));
    assert_eq!(log.ipv6(), Some(true));
    assert_eq!(log.intervals[0].end_s, 1.0);
    assert_eq!(log.intervals[1].end_s, 2.0);
    assert_eq!(log.intervals[0].bits_per_second, 1e9);
    assert_eq!(log.intervals[0].streams[0].rtt_us, Some(180_000.0));
    assert_eq!(log.intervals[1].bits_per_second, 2e9);
    assert_eq!(log.bytes(), Some(375_000_000));
    assert_eq!(log.seconds(), Some(2.0));
    assert_eq!(log.bits_per_second(), Some(1.5e9));
    assert_eq!(log.errors, vec!["peer went away".to_string()]);
    assert!(log.warnings().is_empty());
    let warned =
        RunLog::parse("{\"type\":\"start\",\"warnings\":[\"wmem_max caps the window at 4 MiB\"]}")
            .expect("parses");
    assert_eq!(
        warned.warnings(),
        vec!["wmem_max caps the window at 4 MiB".to_string()]
    );
}

#[test]
fn rejects_what_is_not_a_run() {
    assert_eq!(
        RunLog::parse("hello\n{\"a\":1}\n"),
        Err(RunLogError::NoRun { skipped: 2 })
    );
    let long = format!(
        "{{\"type\":\"start\",\"x\":\"{}\"}}",
        "a".repeat(MAX_LINE_BYTES)
    );
    assert!(matches!(
        RunLog::parse(&long),
        Err(RunLogError::LineTooLong { line: 1, .. })
    ));
}
