//! The tolerant reading of a run log's objects, field by field: figures under a few common
//! names (longhaul's, iperf3's, older longhaul's), dotted paths into nested objects, and
//! numbers written as text.

use serde_json::{Map, Value};

use super::{EndSummary, Interval, StreamSample, MAX_STREAMS};

pub(super) fn parse_interval(obj: &Map<String, Value>, prev_end: f64, step: f64) -> Interval {
    let end_s = num(
        obj,
        &["end_s", "elapsed_s", "t_s", "time_s", "t", "end", "sum.end"],
    )
    .unwrap_or(prev_end + step);
    let start_s = num(obj, &["start_s", "start", "sum.start"]).unwrap_or(prev_end);
    let streams: Vec<StreamSample> = obj
        .get("streams")
        .and_then(Value::as_array)
        .map(|arr| {
            arr.iter()
                .take(MAX_STREAMS)
                .enumerate()
                .filter_map(|(i, s)| s.as_object().map(|s| parse_stream(s, i)))
                .collect()
        })
        .unwrap_or_default();
    let sum = |f: fn(&StreamSample) -> Option<f64>| -> f64 { streams.iter().filter_map(f).sum() };
    let bits_per_second = num(
        obj,
        &[
            "bits_per_second",
            "sum.bits_per_second",
            "total.bits_per_second",
        ],
    )
    .unwrap_or_else(|| sum(|s| s.bits_per_second));
    let bytes =
        num(obj, &["bytes", "sum.bytes", "total.bytes"]).unwrap_or_else(|| sum(|s| s.bytes));
    let retransmits = num(
        obj,
        &["retransmits", "sum.retransmits", "total.retransmits"],
    )
    .unwrap_or_else(|| sum(|s| s.retransmits));
    Interval {
        start_s,
        end_s,
        bits_per_second,
        bytes,
        rate_source: text_of(obj, &["rate_source"]).map(|s| s.chars().take(32).collect()),
        retransmits,
        streams,
    }
}

fn parse_stream(s: &Map<String, Value>, index: usize) -> StreamSample {
    let id = match s.get("id").or_else(|| s.get("stream")) {
        Some(Value::String(t)) => t.chars().take(32).collect(),
        Some(Value::Number(n)) => n.to_string(),
        _ => index.to_string(),
    };
    let rtt_us =
        num(s, &["rtt_us", "srtt_us"]).or_else(|| num(s, &["rtt_ms"]).map(|ms| ms * 1000.0));
    StreamSample {
        id,
        bytes: num(s, &["bytes"]),
        bits_per_second: num(s, &["bits_per_second"]),
        cwnd_bytes: num(s, &["cwnd_bytes", "snd_cwnd_bytes", "cwnd"]).filter(|c| *c > 0.0),
        rtt_us,
        retransmits: num(s, &["retransmits", "retrans"]),
    }
}

pub(super) fn parse_end(obj: Map<String, Value>) -> EndSummary {
    let sum = obj
        .get("summary")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_else(|| obj.clone());
    EndSummary {
        bytes: num(&sum, &["bytes"]),
        seconds: num(&sum, &["seconds", "duration_s", "elapsed_s"]),
        bits_per_second: num(&sum, &["bits_per_second"]),
        retransmits: num(&sum, &["retransmits"]),
        limited_by: text_of(&sum, &["limited_by_text", "limited_by"]),
        raw: obj,
    }
}

/// The first of `paths` (dotted, `a.b`) that holds a finite number.
pub(super) fn num(obj: &Map<String, Value>, paths: &[&str]) -> Option<f64> {
    paths.iter().find_map(|p| {
        let v = lookup(obj, p)?;
        let n = match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        n.filter(|x: &f64| x.is_finite())
    })
}

/// The first of `paths` that holds a string (numbers and booleans are shown as text).
pub(super) fn text_of(obj: &Map<String, Value>, paths: &[&str]) -> Option<String> {
    paths.iter().find_map(|p| match lookup(obj, p)? {
        Value::String(s) => Some(s.chars().take(4096).collect()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    })
}

fn lookup<'a>(obj: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut cur = obj.get(parts.next()?)?;
    for p in parts {
        cur = cur.as_object()?.get(p)?;
    }
    Some(cur)
}
