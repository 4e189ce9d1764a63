//! The contest's rules, checked one by one for an attempt, and the standing record it would
//! have to beat in its class.
//!
//! Rules (the later ones, with the earlier 100 MB minimum): at least 100 km of terrestrial
//! distance, at least two router hops in each direction, at least ten continuous minutes, at
//! least 100 megabytes; the attempt is classed by IP version and by single or multiple
//! streams. A new record must beat the standing one of its class by at least 10 %.
//! Rules the tool cannot see (standard TCP, one pair of addresses, every packet carrying
//! different data, commercially available hardware) are the user's to vouch for.

use super::history::{IpVersion, LsrRecord, RecordDate, StreamClass};
use super::{bit_meters_per_second, format_bit_meters, TERABIT_METER};

/// Shortest terrestrial distance, km.
pub const MIN_DISTANCE_KM: f64 = 100.0;
/// Fewest router hops in each direction.
pub const MIN_ROUTER_HOPS: usize = 2;
/// Shortest run, seconds (ten continuous minutes).
pub const MIN_SECONDS: f64 = 600.0;
/// Least data moved, bytes (100 MB).
pub const MIN_BYTES: u64 = 100_000_000;
/// A new record must exceed the standing one by this factor.
pub const NEW_RECORD_FACTOR: f64 = 1.10;

/// What an attempt did, as the rules need it.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// Sum of the great-circle legs, km.
    pub distance_km: f64,
    /// Cities with router hops listed in the route (end sites included).
    pub router_hops: usize,
    /// Duration of the transfer, when known.
    pub seconds: Option<f64>,
    /// Bytes moved, when known.
    pub bytes: Option<u64>,
    /// Throughput, bit/s.
    pub bits_per_second: f64,
    /// TCP streams used.
    pub streams: u32,
    /// IP version.
    pub ip: IpVersion,
}

impl Attempt {
    /// The metric, bit-meters per second.
    pub fn bit_meters_per_second(&self) -> f64 {
        bit_meters_per_second(self.bits_per_second, self.distance_km * 1000.0)
    }

    /// The stream class the attempt competes in.
    pub fn stream_class(&self) -> StreamClass {
        StreamClass::of_streams(self.streams)
    }
}

/// Outcome of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleStatus {
    /// The attempt meets the rule.
    Pass,
    /// The attempt breaks the rule.
    Fail,
    /// The figure the rule needs was not given.
    Unknown,
}

impl RuleStatus {
    /// `pass`, `fail` or `unknown`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Unknown => "unknown",
        }
    }
}

/// One rule checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleCheck {
    /// Short name: `distance`, `router_hops`, `duration`, `volume`, `streams`, `ip_version`.
    pub name: &'static str,
    /// Outcome.
    pub status: RuleStatus,
    /// Why, with the figures.
    pub why: String,
}

/// Checks every rule, in the order the contest listed them.
pub fn check_rules(a: &Attempt) -> Vec<RuleCheck> {
    let pass_if = |ok: bool| {
        if ok {
            RuleStatus::Pass
        } else {
            RuleStatus::Fail
        }
    };
    let mut checks = vec![RuleCheck {
        name: "distance",
        status: pass_if(a.distance_km >= MIN_DISTANCE_KM),
        why: format!(
            "{:.0} km of great-circle legs; at least {MIN_DISTANCE_KM:.0} km needed",
            a.distance_km
        ),
    }];
    checks.push(RuleCheck {
        name: "router_hops",
        status: pass_if(a.router_hops >= MIN_ROUTER_HOPS),
        why: format!(
            "the route lists {} cities with router hops; at least {MIN_ROUTER_HOPS} in each \
             direction needed (confirm with traceroute both ways)",
            a.router_hops
        ),
    });
    checks.push(match a.seconds {
        Some(s) => RuleCheck {
            name: "duration",
            status: pass_if(s >= MIN_SECONDS),
            why: format!("ran {s:.1} s; at least {MIN_SECONDS:.0} s (10 minutes) needed"),
        },
        None => RuleCheck {
            name: "duration",
            status: RuleStatus::Unknown,
            why: "duration not known: give --seconds or --log".to_string(),
        },
    });
    checks.push(match a.bytes {
        Some(b) => RuleCheck {
            name: "volume",
            status: pass_if(b >= MIN_BYTES),
            why: format!(
                "moved {} bytes ({:.3} GB); at least 100 MB needed",
                b,
                b as f64 / 1e9
            ),
        },
        None => RuleCheck {
            name: "volume",
            status: RuleStatus::Unknown,
            why: "bytes moved not known: give --bytes, --seconds or --log".to_string(),
        },
    });
    checks.push(RuleCheck {
        name: "streams",
        status: pass_if(a.streams >= 1),
        why: if a.streams >= 1 {
            format!("{} TCP stream(s): {} class", a.streams, a.stream_class())
        } else {
            "no TCP stream: an attempt needs at least one".to_string()
        },
    });
    checks.push(RuleCheck {
        name: "ip_version",
        status: RuleStatus::Pass,
        why: format!("{} class", a.ip),
    });
    checks
}

/// True when every rule passed.
pub fn all_pass(checks: &[RuleCheck]) -> bool {
    checks.iter().all(|c| c.status == RuleStatus::Pass)
}

/// The standing record of a class: the best record that holds it, set before `before` when
/// given (all of history otherwise).
pub fn standing_record(
    history: &[LsrRecord],
    ip: IpVersion,
    class: StreamClass,
    before: Option<RecordDate>,
) -> Option<&LsrRecord> {
    history
        .iter()
        .filter(|r| r.holds(ip, class))
        .filter(|r| before.is_none_or_before(r.date))
        .max_by(|a, b| {
            a.terabit_meters_per_second
                .total_cmp(&b.terabit_meters_per_second)
        })
}

trait BeforeFilter {
    fn is_none_or_before(&self, date: RecordDate) -> bool;
}

impl BeforeFilter for Option<RecordDate> {
    fn is_none_or_before(&self, date: RecordDate) -> bool {
        match self {
            None => true,
            Some(limit) => date < *limit,
        }
    }
}

/// How an attempt compares with the standing record of one class.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// IP version class.
    pub ip: IpVersion,
    /// Stream class.
    pub class: StreamClass,
    /// The record to beat; `None` when the class has none.
    pub record: Option<LsrRecord>,
    /// Attempt / record (infinite when there is no record).
    pub ratio: f64,
    /// What a new record needs: record x 1.10, bit-meters/second (0 with no record).
    pub needed_bit_meters_per_second: f64,
    /// True when the attempt beats the record by at least 10 %.
    pub new_record: bool,
}

impl Comparison {
    /// One line for people: "IPv4 single stream: record 124.935 Pb·m/s (2004-09-12, SUNET...);
    /// this run is 0.01 % of it; a new record needs 137.4 Pb·m/s".
    pub fn describe(&self, attempt_bmps: f64) -> String {
        let Some(r) = &self.record else {
            return format!(
                "{} {}: no record in the history; any valid attempt would set one",
                self.ip, self.class
            );
        };
        let verdict = if self.new_record {
            "a new record".to_string()
        } else {
            format!(
                "{} short of a new record",
                format_bit_meters((self.needed_bit_meters_per_second - attempt_bmps).max(0.0))
            )
        };
        format!(
            "{} {}: standing record {} ({}, {}); this run is {} of it; a new record needs {} \
             (+10 %): {}",
            self.ip,
            self.class,
            format_bit_meters(r.terabit_meters_per_second * TERABIT_METER),
            r.date,
            r.team,
            format_percent(self.ratio),
            format_bit_meters(self.needed_bit_meters_per_second),
            verdict
        )
    }
}

/// A ratio as a percentage with enough digits to be non-zero: `0.0042 %`, `87.3 %`.
pub fn format_percent(ratio: f64) -> String {
    let pct = ratio * 100.0;
    if !pct.is_finite() {
        "-".to_string()
    } else if pct >= 10.0 || pct == 0.0 {
        format!("{pct:.1} %")
    } else {
        let digits = (1.0 - pct.log10().floor()).clamp(1.0, 12.0) as usize;
        format!("{pct:.digits$} %")
    }
}

/// Compares the attempt with the standing record of its own class (IP version and stream
/// class) over the whole history.
pub fn compare(history: &[LsrRecord], a: &Attempt) -> Comparison {
    compare_in_class(
        history,
        a.bit_meters_per_second(),
        a.ip,
        a.stream_class(),
        None,
    )
}

/// Compares a metric with the standing record of a class, optionally as of a date.
pub fn compare_in_class(
    history: &[LsrRecord],
    bmps: f64,
    ip: IpVersion,
    class: StreamClass,
    before: Option<RecordDate>,
) -> Comparison {
    let record = standing_record(history, ip, class, before).cloned();
    let (ratio, needed, new_record) = match &record {
        Some(r) => {
            let rec = r.terabit_meters_per_second * TERABIT_METER;
            let needed = rec * NEW_RECORD_FACTOR;
            (bmps / rec, needed, bmps >= needed)
        }
        None => (f64::INFINITY, 0.0, bmps > 0.0),
    };
    Comparison {
        ip,
        class,
        record,
        ratio,
        needed_bit_meters_per_second: needed,
        new_record,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsr::history::history;

    fn sunet() -> Attempt {
        Attempt {
            distance_km: 28_983.0,
            router_hops: 9,
            seconds: Some(3648.81),
            bytes: Some(1_966_080_000_000),
            bits_per_second: 1_966_080_000_000.0 * 8.0 / 3648.81,
            streams: 1,
            ip: IpVersion::V4,
        }
    }

    #[test]
    fn sunet_2004_passes_every_rule() {
        let checks = check_rules(&sunet());
        let names: Vec<_> = checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "distance",
                "router_hops",
                "duration",
                "volume",
                "streams",
                "ip_version"
            ]
        );
        assert!(all_pass(&checks), "{checks:?}");
        assert!(checks[4].why.contains("single stream"));
    }

    #[test]
    fn each_rule_fails_on_its_own_boundary() {
        let status = |a: &Attempt, name: &str| {
            check_rules(a)
                .into_iter()
                .find(|c| c.name == name)
                .expect("rule present")
                .status
        };
        let mut a = sunet();
        a.distance_km = 99.9;
        assert_eq!(status(&a, "distance"), RuleStatus::Fail);
        a.distance_km = 100.0;
        assert_eq!(status(&a, "distance"), RuleStatus::Pass);
        a.router_hops = 1;
        assert_eq!(status(&a, "router_hops"), RuleStatus::Fail);
        a.seconds = Some(599.9);
        assert_eq!(status(&a, "duration"), RuleStatus::Fail);
        a.seconds = Some(600.0);
        assert_eq!(status(&a, "duration"), RuleStatus::Pass);
        a.seconds = None;
        assert_eq!(status(&a, "duration"), RuleStatus::Unknown);
        a.bytes = Some(MIN_BYTES - 1);
        assert_eq!(status(&a, "volume"), RuleStatus::Fail);
        a.bytes = Some(MIN_BYTES);
        assert_eq!(status(&a, "volume"), RuleStatus::Pass);
        a.streams = 0;
        assert_eq!(status(&a, "streams"), RuleStatus::Fail);
        assert!(!all_pass(&check_rules(&a)));
    }

    #[test]
    fn every_historic_record_beat_its_class_by_ten_percent() {
        // Replays the history: each record, in each class it claims, beats the standing
        // record of that class just before its date by the required 10 %.
        let h = history();
        let mut compared = 0;
        for r in h {
            for &class in &r.classes {
                let bmps = r.terabit_meters_per_second * TERABIT_METER;
                let c = compare_in_class(h, bmps, r.ip, class, Some(r.date));
                if c.record.is_some() {
                    compared += 1;
                    assert!(
                        c.new_record,
                        "{} {} {class}: ratio {}",
                        r.date, r.ip, c.ratio
                    );
                }
            }
        }
        assert!(compared >= 20, "{compared}");
    }

    #[test]
    fn attempt_is_placed_against_its_class() {
        let h = history();
        let c = compare(h, &sunet());
        let rec = c.record.as_ref().expect("IPv4 single has records");
        assert_eq!(rec.date.to_string(), "2006-04");
        assert!((c.ratio - 124_935.0 / 264_147.0).abs() < 1e-3);
        assert!(!c.new_record);
        assert!((c.needed_bit_meters_per_second / TERABIT_METER - 264_147.0 * 1.1).abs() < 1e-6);
        let text = c.describe(sunet().bit_meters_per_second());
        assert!(
            text.contains("264.147 Pb·m/s") && text.contains("short of"),
            "{text}"
        );

        let mut v6 = sunet();
        v6.ip = IpVersion::V6;
        v6.streams = 4;
        v6.bits_per_second = 10e9;
        v6.distance_km = 30_000.0; // 300 Pb·m/s vs 272.4 -> 1.101
        let c = compare(h, &v6);
        assert_eq!(c.class, StreamClass::Multiple);
        assert_eq!(
            c.record.as_ref().expect("record").date.to_string(),
            "2006-12-31"
        );
        assert!(c.new_record, "ratio {}", c.ratio);
    }

    #[test]
    fn percentages_keep_significant_digits() {
        assert_eq!(format_percent(0.873), "87.3 %");
        assert_eq!(format_percent(0.000042), "0.0042 %");
        assert_eq!(format_percent(0.05), "5.0 %");
    }
}
