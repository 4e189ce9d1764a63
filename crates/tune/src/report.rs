//! A host's findings as JSON text, for `longhaul tune --peer`: a `longhaul serve` writes its
//! own findings with [`report_to_json`], the client reads them back with [`report_from_json`].
//! The text is network input to the reader: it is bounded in size and count and every field
//! is checked.
//!
//! Schema: `{"host": "name", "findings": [{"key", "severity": "ok|info|warning|critical",
//! "current", "wanted": str|null, "why", "fix": str|null,
//! "change": {"name", "value"}|null}], "omitted": n}` (`omitted`: findings left out to stay
//! within the size bound, least severe first).

use crate::findings::{Finding, Severity, SysctlChange};
use crate::TuneError;
use serde::{Deserialize, Serialize};

/// Most findings a report may carry.
pub const MAX_REPORT_FINDINGS: usize = 256;

/// A host's findings as another host reported them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostReport {
    /// The reporting host's name (may be empty).
    pub host: String,
    /// Its findings, in its order.
    pub findings: Vec<Finding>,
    /// Findings it left out to keep the report within its size bound.
    pub omitted: usize,
}

#[derive(Serialize, Deserialize)]
struct WireReport {
    #[serde(default)]
    host: String,
    findings: Vec<WireFinding>,
    #[serde(default)]
    omitted: usize,
}

#[derive(Serialize, Deserialize)]
struct WireFinding {
    key: String,
    severity: String,
    current: String,
    wanted: Option<String>,
    why: String,
    fix: Option<String>,
    change: Option<WireChange>,
}

#[derive(Serialize, Deserialize)]
struct WireChange {
    name: String,
    value: String,
}

impl From<&Finding> for WireFinding {
    fn from(f: &Finding) -> Self {
        WireFinding {
            key: f.key.clone(),
            severity: f.severity.as_str().to_string(),
            current: f.current.clone(),
            wanted: f.wanted.clone(),
            why: f.why.clone(),
            fix: f.fix.clone(),
            change: f.change.as_ref().map(|c| WireChange {
                name: c.name.clone(),
                value: c.value.clone(),
            }),
        }
    }
}

/// `host`'s findings as JSON of at most `max_bytes` bytes: when they do not fit, the least
/// severe findings (the last of equal severity first) are left out and counted in `omitted`.
pub fn report_to_json(host: &str, findings: &[Finding], max_bytes: usize) -> String {
    let mut kept: Vec<&Finding> = findings.iter().take(MAX_REPORT_FINDINGS).collect();
    let mut host: String = host.chars().take(255).collect();
    loop {
        let wire = WireReport {
            host: host.clone(),
            findings: kept.iter().map(|f| WireFinding::from(*f)).collect(),
            omitted: findings.len() - kept.len(),
        };
        let text = serde_json::to_string(&wire).unwrap_or_default();
        if text.len() <= max_bytes {
            return text;
        }
        if kept.is_empty() {
            if host.is_empty() {
                // Not even an empty report fits: the bound is absurdly small.
                return String::new();
            }
            host.clear();
            continue;
        }
        let least = kept
            .iter()
            .enumerate()
            .min_by_key(|(i, f)| (f.severity, std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
            .unwrap_or(0);
        kept.remove(least);
    }
}

/// Reads a report written by [`report_to_json`]; refuses unknown severities and more than
/// [`MAX_REPORT_FINDINGS`] findings.
pub fn report_from_json(text: &str) -> Result<HostReport, TuneError> {
    let bad = |why: String| TuneError::BadReport(why);
    let wire: WireReport = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    if wire.findings.len() > MAX_REPORT_FINDINGS {
        return Err(bad(format!(
            "{} findings exceed the limit of {MAX_REPORT_FINDINGS}",
            wire.findings.len()
        )));
    }
    let findings = wire
        .findings
        .into_iter()
        .map(|f| {
            let severity = match f.severity.as_str() {
                "ok" => Severity::Ok,
                "info" => Severity::Info,
                "warning" => Severity::Warning,
                "critical" => Severity::Critical,
                other => {
                    return Err(bad(format!(
                        "finding {:?} has the unknown severity {other:?}",
                        f.key
                    )))
                }
            };
            Ok(Finding {
                key: f.key,
                severity,
                current: f.current,
                wanted: f.wanted,
                why: f.why,
                fix: f.fix,
                change: f.change.map(|c| SysctlChange {
                    name: c.name,
                    value: c.value,
                }),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HostReport {
        host: wire.host,
        findings,
        omitted: wire.omitted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{inspect, HostFacts, Target};
    use std::time::Duration;

    fn stock_findings() -> Vec<Finding> {
        let mut facts = HostFacts {
            page_size_bytes: 4096,
            ..HostFacts::default()
        };
        for (k, v) in [
            ("net.core.rmem_max", "212992"),
            ("net.core.wmem_max", "212992"),
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
            ("net.ipv4.tcp_congestion_control", "cubic"),
            ("net.ipv4.tcp_available_congestion_control", "reno cubic"),
        ] {
            facts.sysctls.insert(k.into(), v.into());
        }
        inspect(
            &facts,
            &Target {
                rate_bps: 1_000_000_000,
                rtt: Duration::from_millis(180),
            },
        )
    }

    #[test]
    fn findings_round_trip_through_json() {
        let findings = stock_findings();
        assert!(findings.iter().any(|f| f.severity == Severity::Critical));
        assert!(findings.iter().any(|f| f.change.is_some()));
        let text = report_to_json("serverhost", &findings, 48 * 1024);
        let back = report_from_json(&text).unwrap();
        assert_eq!(back.host, "serverhost");
        assert_eq!(back.findings, findings);
        assert_eq!(back.omitted, 0);
    }

    #[test]
    fn a_small_bound_drops_the_least_severe_findings_first() {
        let findings = stock_findings();
        let full = report_to_json("h", &findings, usize::MAX).len();
        let text = report_to_json("h", &findings, full / 2);
        assert!(text.len() <= full / 2);
        let back = report_from_json(&text).unwrap();
        assert!(back.omitted > 0);
        assert_eq!(back.omitted + back.findings.len(), findings.len());
        let worst = findings.iter().map(|f| f.severity).max().unwrap();
        assert!(back.findings.iter().any(|f| f.severity == worst));
        let dropped_max = findings
            .iter()
            .filter(|f| !back.findings.contains(f))
            .map(|f| f.severity)
            .max()
            .unwrap();
        let kept_min = back.findings.iter().map(|f| f.severity).min().unwrap();
        assert!(dropped_max <= kept_min);
        assert!(report_to_json("h", &findings, 5).is_empty());
    }

    #[test]
    fn hostile_reports_are_refused() {
        for text in [
            "",
            "[]",
            "{\"findings\": 3}",
            "{\"findings\":[{\"key\":\"k\",\"severity\":\"dire\",\"current\":\"\",\"why\":\"\"}]}",
            &"[".repeat(10_000),
        ] {
            assert!(report_from_json(text).is_err(), "{text:.40}");
        }
        let many = format!(
            "{{\"findings\":[{}]}}",
            vec!["{\"key\":\"k\",\"severity\":\"ok\",\"current\":\"\",\"why\":\"\"}"; 300]
                .join(",")
        );
        let err = report_from_json(&many).unwrap_err();
        assert!(err.to_string().contains("300"), "{err}");
    }
}
