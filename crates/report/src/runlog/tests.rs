//! The reader on real logs of bench and cp, on other programs' logs and on noise.
use super::*;
use crate::records::Record;

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

/// A copy's `end` as `longhaul cp` writes it, with or without the verdict.
fn copy_end(verdict: bool) -> CopyEnd {
    use crate::records::{CpuByStage, StreamSummary, Verdict};
    let stream = |id, bytes| StreamSummary {
        id,
        bytes,
        bits_per_second: bytes as f64 * 8.0 / 2.5,
        retransmits: u64::from(id) * 7,
        min_rtt_ms: 10.5,
        cwnd_bytes: 4 << 20,
        limited_by: "receiver_window".into(),
    };
    CopyEnd {
        ok: true,
        files: 3,
        bytes: 300_000_000,
        seconds: 2.5,
        bits_per_second: 9.6e8,
        sent_bytes: 300_000_000,
        resumed_bytes: 0,
        skipped_files: 0,
        failed_files: 0,
        failures: Vec::new(),
        rejected_chunks: 0,
        cpu_seconds: 1.25,
        cpu_seconds_per_gb: Some(4.0),
        cpu_by_stage: CpuByStage {
            cipher_seconds: 0.5,
            hash_seconds: 0.25,
            disk_seconds: 0.25,
            socket_and_rest_seconds: 0.25,
        },
        streams: 2,
        chunk_bytes: 4 << 20,
        direction: "push".into(),
        deleted_files: 0,
        unchanged_files: 0,
        unchanged_bytes: 0,
        compared_files: 0,
        created_files: 3,
        reused_bytes: 0,
        first_byte_ms: None,
        first_byte_rtts: None,
        data_dialed_rtts: Some(1.0),
        warmup_bytes: 0,
        answered_ahead: false,
        jump_start: serde_json::json!({"used": false, "not_used": "first run on this path"}),
        verdict: verdict.then(|| Verdict {
            limited_by: "receiver_window".into(),
            limited_by_text: "receiver window".into(),
            advice: "raise the receiver's buffer".into(),
            balance: 0.5,
            retransmits: 7,
            stream_summaries: vec![stream(0, 100_000_000), stream(1, 200_000_000)],
        }),
    }
}

#[test]
fn a_copy_end_written_by_its_type_is_read_back_by_it() {
    let start = Record::new(CopyStart {
        direction: "push".into(),
        streams: 2,
        chunk_bytes: 4 << 20,
        rtt_ms: 10.5,
        window_bytes: 0,
        congestion: "bbr".into(),
        files: 3,
        bytes: 300_000_000,
        interval_s: 0.5,
    });
    let end = Record::new(copy_end(true));
    let text = format!("{}\n{}\n", start.to_line(), end.to_line());
    let log = RunLog::parse(&text).expect("parses");
    assert_eq!(log.copy_start.as_ref(), Some(&start.body));
    assert_eq!(log.copy_end.as_ref(), Some(&end.body));
    assert_eq!(log.streams(), Some(2));
    assert_eq!(log.bytes(), Some(300_000_000));
    assert_eq!(log.seconds(), Some(2.5));
    assert_eq!(log.bits_per_second(), Some(9.6e8));
    assert_eq!(log.retransmits(), Some(7));
    assert_eq!(log.limited_by(), Some("receiver window"));
    let (cols, rows) = log.end_streams();
    assert_eq!(cols[0], "id");
    assert_eq!(rows.len(), 2);
    // The typed reading and the tolerant one agree on the figures.
    let raw = log.end.as_ref().expect("end").raw.clone();
    assert_eq!(log.end, Some(fields::parse_end(raw)));
}

#[test]
fn a_copy_end_without_a_verdict_leaves_its_fields_out() {
    let line = Record::new(copy_end(false)).to_line();
    let obj: Map<String, Value> = serde_json::from_str(&line).expect("an object");
    assert!(line.starts_with(r#"{"type":"end","ok":true,"#), "{line}");
    for absent in [
        "limited_by",
        "limited_by_text",
        "advice",
        "balance",
        "retransmits",
    ] {
        assert!(!obj.contains_key(absent), "{absent} in {line}");
    }
    assert!(!obj.contains_key("stream_summaries"));
    // Known but empty figures are null, as the README says.
    assert_eq!(obj["first_byte_ms"], Value::Null);
    let log = RunLog::parse(&line).expect("parses");
    assert_eq!(log.copy_end, Some(copy_end(false)));
    assert_eq!(log.limited_by(), None);
    assert_eq!(log.retransmits(), None);
}

#[test]
fn an_older_copy_log_is_read_field_by_field() {
    // The sample predates `cpu_by_stage` and the other late fields: not a current `end`.
    let log = RunLog::parse(CP_PUSH).expect("parses");
    assert!(log.copy_end.is_none());
    assert!(log.copy_start.is_some());
    assert_eq!(log.bytes(), Some(419_430_400));
}
