//! The Land Speed Record history chart: every record's Tb·m/s over the years on a log scale,
//! IPv4 and IPv6 apart, with the best-so-far of each drawn as a step line and a run placed
//! after the last record.

use crate::svg::{Callout, Chart, Series, SeriesStyle};
use longhaul_model::lsr::history::{IpVersion, LsrRecord};
use longhaul_model::lsr::{format_bit_meters, TERABIT_METER};

const IPV4_BLUE: &str = "#1f77b4";
const IPV6_GREEN: &str = "#2ca02c";
const RUN_RED: &str = "#d62728";

/// A run to place on the history chart.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPoint {
    /// Label shown before the figure, e.g. `this run`.
    pub label: String,
    /// The run's metric, bit-meters per second.
    pub bit_meters_per_second: f64,
    /// IPv6 run (else IPv4).
    pub ipv6: bool,
}

/// The history chart with `run` (if any) placed one year after the last record.
pub fn history_chart(history: &[LsrRecord], run: Option<&RunPoint>) -> Chart {
    let mut chart = Chart::new(
        "Internet2 Land Speed Record history (log scale)",
        "year",
        "Tb·m/s",
    );
    chart.y_log = true;
    chart.y_from_zero = false;
    chart.x_pad = 0.03;
    for (ip, color) in [(IpVersion::V4, IPV4_BLUE), (IpVersion::V6, IPV6_GREEN)] {
        let records: Vec<&LsrRecord> = history.iter().filter(|r| r.ip == ip).collect();
        let mut best = 0.0_f64;
        let mut envelope = Vec::new();
        for r in &records {
            if r.terabit_meters_per_second > best {
                best = r.terabit_meters_per_second;
                envelope.push((r.date.fractional_year(), best));
            }
        }
        chart.series.push(Series {
            name: format!("{ip} records"),
            color: color.to_string(),
            width: 1.0,
            style: SeriesStyle::Dots,
            points: records
                .iter()
                .map(|r| (r.date.fractional_year(), r.terabit_meters_per_second))
                .collect(),
        });
        chart.series.push(Series {
            name: format!("{ip} best so far"),
            color: color.to_string(),
            width: 1.4,
            style: SeriesStyle::Step,
            points: envelope,
        });
    }
    if let Some(run) = run {
        let last = history
            .iter()
            .map(|r| r.date.fractional_year())
            .fold(2000.0, f64::max);
        chart.callouts.push(Callout {
            x: last.floor() + 1.5,
            y: run.bit_meters_per_second / TERABIT_METER,
            label: format!(
                "{} ({}): {}",
                run.label,
                if run.ipv6 { "IPv6" } else { "IPv4" },
                format_bit_meters(run.bit_meters_per_second)
            ),
            color: RUN_RED.to_string(),
        });
    }
    chart
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_model::lsr::history::history;

    #[test]
    fn places_every_record_and_the_run() {
        let run = RunPoint {
            label: "this run".into(),
            bit_meters_per_second: 2.5e15,
            ipv6: false,
        };
        let c = history_chart(history(), Some(&run));
        let dots: usize = c
            .series
            .iter()
            .filter(|s| s.style == SeriesStyle::Dots)
            .map(|s| s.points.len())
            .sum();
        assert_eq!(dots, history().len());
        assert_eq!(c.callouts[0].y, 2500.0);
        assert!(c.callouts[0].label.contains("2.500 Pb·m/s"));
        let svg = c.to_svg();
        assert!(svg.contains("this run (IPv4): 2.500 Pb·m/s"));
        assert!(svg.contains(">1,000,000</text>"), "{svg}");
    }
}
