//! The reader of run logs: the JSON Lines that `longhaul bench --json` and
//! `longhaul cp --json` print.
//!
//! Each line is an object with a `"type"`: `start` (the parameters and host settings),
//! `interval` (per-stream figures and totals for one interval), `end` (bench: with a
//! `summary` of `bytes`, `seconds`, `bits_per_second`, `retransmits`, `limited_by`; cp: the
//! same figures at the top level, per-stream rows under `stream_summaries`) and `error`.
//! A congestion window of 0 is read as unknown (a cp pull logs the receiver's view, which
//! has none). A current `longhaul cp` log's `start` and `end` are read through their
//! types ([`crate::records`], as the writer wrote them: module `own`); any other log is read
//! tolerantly (module `fields`): unknown fields and types are ignored, figures may be
//! missing or come under a few common names, and lines that are not JSON objects are
//! counted and skipped. It is bounded: at most [`MAX_LINES`] lines of at most
//! [`MAX_LINE_BYTES`] bytes and [`MAX_STREAMS`] streams per interval.

use serde_json::{Map, Value};

use crate::records::{read_record, CopyEnd, CopyStart};
use fields::{num, parse_end, parse_interval, text_of};

mod fields;
mod own;

/// Most lines a run log may have (a day at one interval per 0.1 s).
pub const MAX_LINES: usize = 1_000_000;
/// Longest line accepted, bytes.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Most streams read per interval.
pub const MAX_STREAMS: usize = 1024;

/// Why a run log could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RunLogError {
    /// No `start`, `interval` or `end` object was found.
    #[error("no run found: expected JSON Lines from `longhaul bench --json` with \"type\" start/interval/end ({skipped} line(s) skipped)")]
    NoRun {
        /// Lines that were not usable objects.
        skipped: usize,
    },
    /// More lines than [`MAX_LINES`].
    #[error("run log has more than {MAX_LINES} lines; cut it or use a longer --interval")]
    TooManyLines,
    /// A line longer than [`MAX_LINE_BYTES`].
    #[error("line {line} is {bytes} bytes long; at most {MAX_LINE_BYTES} are accepted")]
    LineTooLong {
        /// 1-based line number.
        line: usize,
        /// Its length.
        bytes: usize,
    },
}

/// One stream's figures in one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSample {
    /// Stream id as the log gives it.
    pub id: String,
    /// Bytes moved in the interval.
    pub bytes: Option<f64>,
    /// Throughput in the interval, bit/s.
    pub bits_per_second: Option<f64>,
    /// Congestion window, bytes.
    pub cwnd_bytes: Option<f64>,
    /// Smoothed RTT, microseconds.
    pub rtt_us: Option<f64>,
    /// Retransmitted segments in the interval.
    pub retransmits: Option<f64>,
}

/// One interval of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// Seconds since the start when the interval began.
    pub start_s: f64,
    /// Seconds since the start when it ended.
    pub end_s: f64,
    /// Total throughput, bit/s (from the log's total, else the sum of its streams).
    pub bits_per_second: f64,
    /// Total bytes in the interval.
    pub bytes: f64,
    /// Which count the rates come from (`delivered`, `arrived`), when the log says.
    pub rate_source: Option<String>,
    /// Total retransmits in the interval.
    pub retransmits: f64,
    /// Per-stream figures.
    pub streams: Vec<StreamSample>,
}

/// The `end` object's summary.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EndSummary {
    /// Bytes moved.
    pub bytes: Option<f64>,
    /// Duration, seconds.
    pub seconds: Option<f64>,
    /// Mean throughput, bit/s.
    pub bits_per_second: Option<f64>,
    /// Retransmitted segments.
    pub retransmits: Option<f64>,
    /// What limited the transfer (receiver window, send buffer, network, CPU...), in words
    /// when the log has them (`limited_by_text`), else the short code (`limited_by`).
    pub limited_by: Option<String>,
    /// The whole `end` object, for fields this reader does not know.
    pub raw: Map<String, Value>,
}

/// A parsed run log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunLog {
    /// The `start` object as it came (parameters and host settings).
    pub start: Option<Map<String, Value>>,
    /// The `start` object as a current `longhaul cp` wrote it, typed.
    pub copy_start: Option<CopyStart>,
    /// The intervals in order.
    pub intervals: Vec<Interval>,
    /// The `end` summary.
    pub end: Option<EndSummary>,
    /// The `end` object as a current `longhaul cp` wrote it, typed.
    pub copy_end: Option<CopyEnd>,
    /// Messages of `error` objects.
    pub errors: Vec<String>,
    /// Lines skipped because they were not JSON objects with a known type.
    pub skipped_lines: usize,
}

impl RunLog {
    /// Parses JSON Lines text.
    pub fn parse(text: &str) -> Result<Self, RunLogError> {
        let mut log = RunLog::default();
        let mut found = false;
        for (idx, line) in text.lines().enumerate() {
            if idx >= MAX_LINES {
                return Err(RunLogError::TooManyLines);
            }
            if line.len() > MAX_LINE_BYTES {
                return Err(RunLogError::LineTooLong {
                    line: idx + 1,
                    bytes: line.len(),
                });
            }
            if line.trim().is_empty() {
                continue;
            }
            let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
                log.skipped_lines += 1;
                continue;
            };
            match obj.get("type").and_then(Value::as_str) {
                Some("start") => {
                    log.copy_start = read_record(&obj);
                    log.start = Some(obj);
                    found = true;
                }
                Some("interval") => {
                    let prev_end = log.intervals.last().map_or(0.0, |i| i.end_s);
                    let step = log.interval_step_s();
                    log.intervals.push(parse_interval(&obj, prev_end, step));
                    found = true;
                }
                Some("end") => {
                    log.copy_end = read_record(&obj);
                    log.end = Some(match &log.copy_end {
                        Some(end) => own::end_summary(end, obj),
                        None => parse_end(obj),
                    });
                    found = true;
                }
                Some("error") => {
                    let msg = text_of(&obj, &["message", "error", "msg"])
                        .unwrap_or_else(|| Value::Object(obj.clone()).to_string());
                    log.errors.push(msg);
                }
                _ => log.skipped_lines += 1,
            }
        }
        if found {
            Ok(log)
        } else {
            Err(RunLogError::NoRun {
                skipped: log.skipped_lines,
            })
        }
    }

    /// The interval length the `start` object announces, else 1 s.
    fn interval_step_s(&self) -> f64 {
        let own = self.copy_start.as_ref().map(|s| s.interval_s);
        own.or_else(|| {
            self.start.as_ref().and_then(|s| {
                num(
                    s,
                    &[
                        "interval_s",
                        "params.interval_s",
                        "interval",
                        "params.interval",
                    ],
                )
            })
        })
        .filter(|v| *v > 0.0)
        .unwrap_or(1.0)
    }

    /// Bytes moved: the summary's, else the sum of the intervals.
    pub fn bytes(&self) -> Option<u64> {
        let from_end = self.end.as_ref().and_then(|e| e.bytes);
        let from_intervals = (!self.intervals.is_empty())
            .then(|| self.intervals.iter().map(|i| i.bytes).sum::<f64>());
        from_end
            .or(from_intervals)
            .filter(|b| *b >= 0.0)
            .map(|b| b.round() as u64)
    }

    /// Duration: the summary's, else the end of the last interval.
    pub fn seconds(&self) -> Option<f64> {
        self.end
            .as_ref()
            .and_then(|e| e.seconds)
            .or_else(|| self.intervals.last().map(|i| i.end_s))
            .filter(|s| *s > 0.0)
    }

    /// Which count most intervals' rates come from (`delivered`, `arrived`), if the log
    /// says (bench and cp logs since the rates are of bytes that crossed the path).
    pub fn rate_source(&self) -> Option<&str> {
        let delivered = self.sources("delivered");
        let arrived = self.sources("arrived");
        match (delivered, arrived) {
            (0, 0) => None,
            (d, a) if d >= a => Some("delivered"),
            _ => Some("arrived"),
        }
    }

    fn sources(&self, name: &str) -> usize {
        self.intervals
            .iter()
            .filter(|i| i.rate_source.as_deref() == Some(name))
            .count()
    }

    /// Mean throughput: the summary's, else bytes / seconds.
    pub fn bits_per_second(&self) -> Option<f64> {
        self.end
            .as_ref()
            .and_then(|e| e.bits_per_second)
            .or_else(|| {
                let (b, s) = (self.bytes()?, self.seconds()?);
                Some(b as f64 * 8.0 / s)
            })
    }

    /// Retransmits: the summary's, else the sum of the intervals.
    pub fn retransmits(&self) -> Option<u64> {
        self.end
            .as_ref()
            .and_then(|e| e.retransmits)
            .or_else(|| {
                (!self.intervals.is_empty())
                    .then(|| self.intervals.iter().map(|i| i.retransmits).sum())
            })
            .map(|r| r.round() as u64)
    }

    /// Number of streams: the start's parameter, else the most seen in one interval.
    pub fn streams(&self) -> Option<u32> {
        let own = self.copy_start.as_ref().map(|s| f64::from(s.streams));
        let from_start = own.or_else(|| {
            self.start.as_ref().and_then(|s| {
                num(
                    s,
                    &["streams", "params.streams", "parallel", "params.parallel"],
                )
            })
        });
        let seen = self.intervals.iter().map(|i| i.streams.len()).max();
        from_start
            .map(|v| v.round() as u32)
            .or(seen.filter(|n| *n > 0).map(|n| n as u32))
    }

    /// IP version of the run when the log tells it: a `family`/`ip` field or an address.
    pub fn ipv6(&self) -> Option<bool> {
        let s = self.start.as_ref()?;
        if let Some(v) = s.get("ipv6").and_then(Value::as_bool) {
            return Some(v);
        }
        for key in ["family", "ip", "ip_version", "params.family"] {
            if let Some(t) = text_of(s, &[key]) {
                let t = t.to_ascii_lowercase();
                if t.contains('6') {
                    return Some(true);
                }
                if t.contains('4') {
                    return Some(false);
                }
            }
        }
        for key in ["remote", "peer", "server", "remote_addr", "connect"] {
            if let Some(addr) = text_of(s, &[key]) {
                // "[::1]:5201" or "2001:db8::1" have more than one colon; "10.0.0.2:5201" one.
                return Some(addr.matches(':').count() > 1);
            }
        }
        None
    }

    /// What limited the transfer, when the summary says.
    pub fn limited_by(&self) -> Option<&str> {
        self.end.as_ref()?.limited_by.as_deref()
    }

    /// Warnings the run reported in its `start` object (`warnings: ["..."]`), at most 50.
    pub fn warnings(&self) -> Vec<String> {
        self.start
            .as_ref()
            .and_then(|s| s.get("warnings"))
            .and_then(Value::as_array)
            .map(|w| {
                w.iter()
                    .take(50)
                    .map(|v| match v {
                        Value::String(t) => t.chars().take(1000).collect(),
                        other => other.to_string().chars().take(1000).collect(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The end summary's other figures (advice, CPU per host, balance...), flattened to
    /// `a.b = value` pairs and sorted by key; the headline figures are left out.
    pub fn summary_details(&self) -> Vec<(String, String)> {
        const HEADLINE: [&str; 6] = [
            "bytes",
            "seconds",
            "bits_per_second",
            "retransmits",
            "limited_by",
            "limited_by_text",
        ];
        let mut out = Vec::new();
        let Some(end) = &self.end else { return out };
        if let Some(Value::Object(summary)) = end.raw.get("summary") {
            for (k, v) in summary {
                if !HEADLINE.contains(&k.as_str()) && !v.is_null() {
                    flatten(k, v, &mut out);
                }
            }
        }
        out
    }

    /// Per-stream rows of the `end` object (`streams: [...]`, or cp's `stream_summaries`):
    /// the column names in order of
    /// first appearance and one row of values per stream (`-` where missing). At most
    /// [`MAX_STREAMS`] rows and 12 columns.
    pub fn end_streams(&self) -> (Vec<String>, Vec<Vec<String>>) {
        // bench: `streams`; cp: `stream_summaries` (its `streams` is the count).
        let rows = self.end.as_ref().and_then(|e| {
            ["streams", "stream_summaries"]
                .iter()
                .find_map(|k| e.raw.get(*k).filter(|v| v.is_array()))
        });
        let Some(Value::Array(streams)) = rows else {
            return (Vec::new(), Vec::new());
        };
        let objs: Vec<&Map<String, Value>> = streams
            .iter()
            .take(MAX_STREAMS)
            .filter_map(Value::as_object)
            .collect();
        let mut cols: Vec<String> = Vec::new();
        for o in &objs {
            for k in o.keys() {
                if !cols.contains(k) && cols.len() < 12 {
                    cols.push(k.clone());
                }
            }
        }
        if let Some(i) = cols.iter().position(|c| c == "id") {
            let id = cols.remove(i);
            cols.insert(0, id);
        }
        let rows = objs
            .iter()
            .map(|o| {
                cols.iter()
                    .map(|c| match o.get(c) {
                        None | Some(Value::Null) => "-".to_string(),
                        Some(Value::String(t)) => t.chars().take(200).collect(),
                        Some(Value::Number(n)) => format_number(n.as_f64().unwrap_or(0.0)),
                        Some(v) => v.to_string().chars().take(200).collect(),
                    })
                    .collect()
            })
            .collect();
        (cols, rows)
    }

    /// The settings the log carries (the `start` object, flattened to `a.b = value` pairs,
    /// without `type`), sorted by key. Capped at 500 entries.
    pub fn settings(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(start) = &self.start {
            for (k, v) in start {
                if k != "type" && !v.is_null() {
                    flatten(k, v, &mut out);
                }
            }
        }
        out.truncate(500);
        out
    }
}

/// A number without float noise: integers as integers, others to 4 significant decimals.
fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let t = if v.abs() >= 100.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.4}")
        };
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    if out.len() >= 500 {
        return;
    }
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        Value::Number(n) => {
            out.push((prefix.to_string(), format_number(n.as_f64().unwrap_or(0.0))))
        }
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

#[cfg(test)]
mod tests;
