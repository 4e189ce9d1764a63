//! The Land Speed Record history: every record with the figures known, from
//! `data/lsr-records.csv` (embedded).
//!
//! The file's columns are `date, ip, streams, terabit_meters_per_second, gbit_per_second,
//! distance_km, bytes, seconds, team, note`. Columns are found by name, so their order may
//! change; the figures after the metric may be empty. `streams` is `single`, `multiple` or
//! `single+multiple` (one run that set the record of both classes); `date` is `YYYY-MM-DD`
//! or `YYYY-MM` when only the month is known.

use std::fmt;
use std::sync::OnceLock;

const HISTORY_CSV: &str = include_str!("../../data/lsr-records.csv");
/// Most rows a history file may have (the contest set 27 records).
const MAX_ROWS: usize = 10_000;

/// Why the history could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HistoryError {
    /// A column the history cannot do without is missing from the header.
    #[error("history header lacks the column {0:?}")]
    MissingColumn(&'static str),
    /// A row could not be parsed.
    #[error("history line {line}: {why}")]
    BadRow {
        /// 1-based line number.
        line: usize,
        /// What was wrong, with the value.
        why: String,
    },
    /// More rows than a history can have.
    #[error("history has more than {MAX_ROWS} rows")]
    TooManyRows,
}

/// IP version class of the contest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl fmt::Display for IpVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        })
    }
}

/// Stream class of the contest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamClass {
    /// One TCP stream.
    Single,
    /// Several TCP streams.
    Multiple,
}

impl StreamClass {
    /// The class of a run with this many streams.
    pub fn of_streams(streams: u32) -> Self {
        if streams <= 1 {
            Self::Single
        } else {
            Self::Multiple
        }
    }
}

impl fmt::Display for StreamClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Single => "single stream",
            Self::Multiple => "multiple streams",
        })
    }
}

/// A record's date; the day is unknown for some.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordDate {
    /// Year, e.g. 2004.
    pub year: u16,
    /// Month 1..=12.
    pub month: u8,
    /// Day 1..=31 when known.
    pub day: Option<u8>,
}

impl RecordDate {
    /// Parses `YYYY-MM-DD` or `YYYY-MM`.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim().split('-');
        let year: u16 = parts.next()?.parse().ok()?;
        let month: u8 = parts.next()?.parse().ok()?;
        let day: Option<u8> = match parts.next() {
            Some(d) => Some(d.parse().ok()?),
            None => None,
        };
        let ok = parts.next().is_none()
            && (1900..=2200).contains(&year)
            && (1..=12).contains(&month)
            && !matches!(day, Some(d) if !(1..=31).contains(&d));
        ok.then_some(Self { year, month, day })
    }

    /// The date as a fractional year (mid-month when the day is unknown), for charts.
    pub fn fractional_year(&self) -> f64 {
        let day = self.day.map_or(15.0, f64::from);
        f64::from(self.year) + (f64::from(self.month) - 1.0) / 12.0 + (day - 1.0) / 365.0
    }
}

impl fmt::Display for RecordDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.day {
            Some(d) => write!(f, "{:04}-{:02}-{:02}", self.year, self.month, d),
            None => write!(f, "{:04}-{:02}", self.year, self.month),
        }
    }
}

/// One record of the history.
#[derive(Debug, Clone, PartialEq)]
pub struct LsrRecord {
    /// When it was set.
    pub date: RecordDate,
    /// IP version class.
    pub ip: IpVersion,
    /// Stream classes it set the record of (one, or both for `single+multiple`).
    pub classes: Vec<StreamClass>,
    /// The metric, terabit-meters per second.
    pub terabit_meters_per_second: f64,
    /// Throughput in Gbit/s, when known.
    pub gbit_per_second: Option<f64>,
    /// Route distance in km, when known.
    pub distance_km: Option<f64>,
    /// Bytes moved, when known (often a rounded press figure).
    pub bytes: Option<u64>,
    /// Duration in seconds, when known (often rounded).
    pub seconds: Option<f64>,
    /// Who set it.
    pub team: String,
    /// Route, tools, caveats.
    pub note: String,
}

impl LsrRecord {
    /// True when this record counts in `class`.
    pub fn holds(&self, ip: IpVersion, class: StreamClass) -> bool {
        self.ip == ip && self.classes.contains(&class)
    }

    /// The classes as the CSV writes them: `single`, `multiple` or `single+multiple`.
    pub fn classes_label(&self) -> String {
        let names: Vec<&str> = self
            .classes
            .iter()
            .map(|c| match c {
                StreamClass::Single => "single",
                StreamClass::Multiple => "multiple",
            })
            .collect();
        names.join("+")
    }
}

/// The embedded history, oldest first.
pub fn history() -> &'static [LsrRecord] {
    static HISTORY: OnceLock<Vec<LsrRecord>> = OnceLock::new();
    HISTORY.get_or_init(|| {
        // The embedded file is fixed at build time and a unit test parses it, so a parse
        // failure here is a build defect, not an input error.
        parse_history(HISTORY_CSV).expect("embedded lsr-records.csv parses")
    })
}

/// Parses a history CSV (see the module docs), oldest record first.
pub fn parse_history(text: &str) -> Result<Vec<LsrRecord>, HistoryError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or(HistoryError::MissingColumn("date"))?;
    let header: Vec<String> = split_csv_line(header)
        .into_iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .collect();
    let col = |name: &'static str| header.iter().position(|h| h == name);
    let need = |name: &'static str| col(name).ok_or(HistoryError::MissingColumn(name));
    let (c_date, c_ip, c_streams, c_tbms) = (
        need("date")?,
        need("ip")?,
        need("streams")?,
        need("terabit_meters_per_second")?,
    );
    let (c_gbps, c_km, c_bytes, c_secs, c_team, c_note) = (
        col("gbit_per_second"),
        col("distance_km"),
        col("bytes"),
        col("seconds"),
        col("team"),
        col("note"),
    );

    let mut records = Vec::new();
    for (idx, line) in lines {
        if records.len() >= MAX_ROWS {
            return Err(HistoryError::TooManyRows);
        }
        let line_no = idx + 1;
        let bad = |why: String| HistoryError::BadRow { line: line_no, why };
        let fields = split_csv_line(line);
        let get =
            |c: Option<usize>| -> &str { c.and_then(|c| fields.get(c)).map_or("", |s| s.trim()) };
        let date = RecordDate::parse(get(Some(c_date))).ok_or_else(|| {
            bad(format!(
                "date {:?} is not YYYY-MM-DD or YYYY-MM",
                get(Some(c_date))
            ))
        })?;
        let ip_text = get(Some(c_ip));
        let ip = match ip_text.to_ascii_lowercase().as_str() {
            "ipv4" | "v4" | "4" => IpVersion::V4,
            "ipv6" | "v6" | "6" => IpVersion::V6,
            _ => return Err(bad(format!("ip {ip_text:?} is not IPv4 or IPv6"))),
        };
        let mut classes = Vec::new();
        for part in get(Some(c_streams)).split(['+', '/']) {
            match part.trim().to_ascii_lowercase().as_str() {
                "single" => classes.push(StreamClass::Single),
                "multiple" => classes.push(StreamClass::Multiple),
                other => {
                    return Err(bad(format!(
                        "streams class {other:?} is not single or multiple"
                    )))
                }
            }
        }
        classes.sort();
        classes.dedup();
        let tbms = parse_num(get(Some(c_tbms)))
            .filter(|v| *v > 0.0)
            .ok_or_else(|| {
                bad(format!(
                    "metric {:?} is not a positive number",
                    get(Some(c_tbms))
                ))
            })?;
        let opt = |c: Option<usize>, what: &str| -> Result<Option<f64>, HistoryError> {
            let s = get(c);
            if s.is_empty() {
                return Ok(None);
            }
            parse_num(s)
                .filter(|v| *v >= 0.0)
                .map(Some)
                .ok_or_else(|| bad(format!("{what} {s:?} is not a number")))
        };
        records.push(LsrRecord {
            date,
            ip,
            classes,
            terabit_meters_per_second: tbms,
            gbit_per_second: opt(c_gbps, "gbit_per_second")?,
            distance_km: opt(c_km, "distance_km")?,
            bytes: opt(c_bytes, "bytes")?.map(|b| b.round() as u64),
            seconds: opt(c_secs, "seconds")?,
            team: get(c_team).to_string(),
            note: get(c_note).to_string(),
        });
    }
    records.sort_by_key(|a| a.date);
    Ok(records)
}

/// A number, tolerating thousands separators (`1,966,080,000,000` once quoted).
fn parse_num(text: &str) -> Option<f64> {
    let cleaned: String = text.chars().filter(|c| *c != ',' && *c != '_').collect();
    cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Splits one CSV line, honouring double quotes and `""` escapes.
fn split_csv_line(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, in_quotes) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => in_quotes = !in_quotes,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsr::{bit_meters_per_second, bits_per_second, TERABIT_METER};

    #[test]
    fn embedded_history_parses_every_row() {
        let rows = HISTORY_CSV
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .count();
        assert_eq!(history().len(), rows);
        let last = history().last().expect("non-empty");
        assert_eq!(last.date.to_string(), "2006-12-31");
        assert_eq!(last.ip, IpVersion::V6);
        let april = history()
            .iter()
            .find(|r| r.date.day.is_none())
            .expect("2006-04");
        assert_eq!(april.date.to_string(), "2006-04");
        assert_eq!(
            april.classes,
            vec![StreamClass::Single, StreamClass::Multiple]
        );
        assert!(april.team.contains("Tokyo"));
    }

    #[test]
    fn rate_times_distance_reproduces_every_quoted_metric() {
        let mut checked = 0;
        for r in history() {
            if let (Some(gbps), Some(km)) = (r.gbit_per_second, r.distance_km) {
                let tbms = bit_meters_per_second(gbps * 1e9, km * 1000.0) / TERABIT_METER;
                let rel = (tbms / r.terabit_meters_per_second - 1.0).abs();
                // The rates are quoted to 3-5 digits; 2006-04's 8.805 Gbit/s is the coarsest.
                assert!(
                    rel < 2e-5,
                    "{}: {tbms} vs {}",
                    r.date,
                    r.terabit_meters_per_second
                );
                checked += 1;
            }
        }
        assert!(checked >= 10, "only {checked} rows have rate and distance");
    }

    #[test]
    fn bytes_and_seconds_reproduce_the_rate() {
        // SUNET 2004 quoted exact figures; the other rows' bytes and seconds are rounded press
        // figures ("about 1 TB in an hour"), within 10 % of the quoted rate.
        for r in history() {
            let (Some(bytes), Some(secs), Some(gbps)) = (r.bytes, r.seconds, r.gbit_per_second)
            else {
                continue;
            };
            let got = bits_per_second(bytes, secs) / 1e9;
            let tolerance = if r.team.starts_with("SUNET") {
                1e-5
            } else {
                0.10
            };
            assert!(
                (got / gbps - 1.0).abs() < tolerance,
                "{}: {got} vs {gbps}",
                r.date
            );
        }
        let sunet = history()
            .iter()
            .find(|r| r.date.to_string() == "2004-09-12")
            .expect("SUNET 2004");
        let pbms = bit_meters_per_second(
            bits_per_second(sunet.bytes.expect("bytes"), sunet.seconds.expect("seconds")),
            sunet.distance_km.expect("km") * 1000.0,
        ) / 1e15;
        assert_eq!(format!("{pbms:.3}"), "124.935");
    }

    #[test]
    fn tolerant_of_column_order_quotes_and_blank_lines() {
        let csv = "streams,ip,date,terabit_meters_per_second,team\n\n\
                   single+multiple,IPv4,2006-04,\"264,147\",\"Tokyo, and partners\"\n\
                   multiple,ipv6,2002-08-22,40,\"Oregon \"\"Gigapop\"\"\"\n";
        let h = parse_history(csv).expect("parses");
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].date.to_string(), "2002-08-22");
        assert_eq!(h[0].team, "Oregon \"Gigapop\"");
        assert_eq!(h[1].terabit_meters_per_second, 264_147.0);
        assert_eq!(h[1].team, "Tokyo, and partners");
        assert_eq!(h[1].gbit_per_second, None);
    }

    #[test]
    fn bad_rows_name_line_and_value() {
        let csv = "date,ip,streams,terabit_meters_per_second\n2004-13-01,IPv4,single,5\n";
        let err = parse_history(csv).unwrap_err();
        assert!(err.to_string().contains("line 2") && err.to_string().contains("2004-13-01"));
        let csv = "date,ip,streams,terabit_meters_per_second\n2004-01-01,IPv5,single,5\n";
        assert!(parse_history(csv).unwrap_err().to_string().contains("IPv5"));
        let csv = "date,ip,streams,terabit_meters_per_second\n2004-01-01,IPv4,several,5\n";
        assert!(parse_history(csv).is_err());
        assert_eq!(
            parse_history("date,ip\n"),
            Err(HistoryError::MissingColumn("streams"))
        );
    }
}
