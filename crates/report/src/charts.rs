//! The graphs of one run, as the record teams published them: throughput per stream and in
//! total, congestion window and RTT over time, with intervals that had retransmissions
//! marked.

use crate::runlog::{RunLog, StreamSample};
use crate::svg::{stack, Chart, Marker, Series, SeriesStyle, PALETTE};

/// Most streams drawn one by one (the total is always drawn).
const MAX_STREAM_SERIES: usize = 32;
/// Colour of retransmission markers.
const RETRANSMIT_RED: &str = "#d62728";

/// Throughput per stream and in total over time.
pub fn throughput_chart(log: &RunLog) -> Chart {
    let peak = log
        .intervals
        .iter()
        .map(|i| i.bits_per_second)
        .fold(0.0, f64::max);
    let (unit, div) = if peak >= 1e9 {
        ("Gbit/s", 1e9)
    } else {
        ("Mbit/s", 1e6)
    };
    let mean = log.bits_per_second().map_or(String::new(), |b| {
        let digits = if div >= 1e9 { 3 } else { 1 };
        format!(" (mean {:.digits$} {unit})", b / div)
    });
    // Say which count the rates are of: bytes that crossed the path.
    let source = match log.rate_source() {
        Some("delivered") => ", bytes delivered",
        Some(_) => ", bytes arrived",
        None => "",
    };
    let mut chart = Chart::new(
        &format!("Throughput per stream and in total{mean}{source}"),
        "time (s)",
        unit,
    );
    chart.series = per_stream(log, |s| s.bits_per_second.map(|b| b / div));
    if chart.series.len() != 1 {
        chart.series.push(Series {
            name: "total".to_string(),
            color: "#111111".to_string(),
            width: 2.6,
            style: SeriesStyle::Line,
            points: log
                .intervals
                .iter()
                .map(|i| (i.end_s, i.bits_per_second / div))
                .collect(),
        });
    }
    chart.markers = retransmit_markers(log, true);
    chart
}

/// Congestion window per stream over time, in MB.
pub fn cwnd_chart(log: &RunLog) -> Chart {
    let mut chart = Chart::new("Congestion window per stream", "time (s)", "cwnd (MB)");
    chart.series = per_stream(log, |s| s.cwnd_bytes.map(|b| b / 1e6));
    chart.markers = retransmit_markers(log, false);
    chart
}

/// Smoothed RTT per stream over time, in ms.
pub fn rtt_chart(log: &RunLog) -> Chart {
    let mut chart = Chart::new("Round-trip time per stream", "time (s)", "RTT (ms)");
    chart.y_from_zero = false;
    chart.series = per_stream(log, |s| s.rtt_us.map(|us| us / 1e3));
    chart.markers = retransmit_markers(log, false);
    chart
}

/// The three run charts, in the order `longhaul plot` stacks them.
pub fn run_charts(log: &RunLog) -> Vec<Chart> {
    vec![throughput_chart(log), cwnd_chart(log), rtt_chart(log)]
}

/// The three run charts stacked into one SVG document.
pub fn run_figure_svg(log: &RunLog) -> String {
    stack(&run_charts(log))
}

/// One series per stream id (in order of first appearance) of `value` over time.
fn per_stream(log: &RunLog, value: impl Fn(&StreamSample) -> Option<f64>) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for interval in &log.intervals {
        for sample in &interval.streams {
            let Some(v) = value(sample) else { continue };
            let name = format!("stream {}", sample.id);
            let idx = match series.iter().position(|s| s.name == name) {
                Some(i) => i,
                None if series.len() < MAX_STREAM_SERIES => {
                    series.push(Series {
                        color: PALETTE[series.len() % PALETTE.len()].to_string(),
                        name,
                        width: 1.5,
                        style: SeriesStyle::Line,
                        points: Vec::new(),
                    });
                    series.len() - 1
                }
                None => continue,
            };
            series[idx].points.push((interval.end_s, v));
        }
    }
    series
}

fn retransmit_markers(log: &RunLog, labelled: bool) -> Vec<Marker> {
    log.intervals
        .iter()
        .filter(|i| i.retransmits > 0.0)
        .map(|i| Marker {
            x: (i.start_s + i.end_s) / 2.0,
            label: if labelled {
                format!("{:.0} retr", i.retransmits)
            } else {
                String::new()
            },
            color: RETRANSMIT_RED.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../tests/data/bench-2streams.jsonl");

    #[test]
    fn charts_carry_streams_total_and_retransmits() {
        let log = RunLog::parse(SAMPLE).expect("sample parses");
        let tp = throughput_chart(&log);
        let names: Vec<_> = tp.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["stream 0", "stream 1", "total"]);
        assert_eq!(tp.series[2].points.len(), log.intervals.len());
        let retr_intervals = log.intervals.iter().filter(|i| i.retransmits > 0.0).count();
        assert_eq!(tp.markers.len(), retr_intervals);
        assert!(retr_intervals >= 1);
        let mean = log.bits_per_second().expect("mean") / 1e6;
        assert!(
            tp.title.contains(&format!("{mean:.1} Mbit/s")),
            "{}",
            tp.title
        );
        let cw = cwnd_chart(&log);
        assert_eq!(cw.series.len(), 2);
        let first = log.intervals[0].streams[0].cwnd_bytes.expect("cwnd") / 1e6;
        assert_eq!(cw.series[0].points[0], (1.0, first));
        let svg = run_figure_svg(&log);
        assert!(svg.contains("37 retr") && svg.contains("Round-trip time"));
        assert!(
            !tp.title.contains("bytes delivered"),
            "an older log says nothing"
        );
    }

    #[test]
    fn the_throughput_title_says_which_count_the_rates_are_of() {
        let line = |source: &str| {
            format!(
                "{{\"type\":\"interval\",\"start\":0,\"end\":1,\"bits_per_second\":1e9,\
                 \"bytes\":1,\"rate_source\":\"{source}\"}}\n"
            )
        };
        let log = RunLog::parse(&(line("delivered") + &line("arrived") + &line("delivered")))
            .expect("parses");
        assert_eq!(log.rate_source(), Some("delivered"));
        assert!(throughput_chart(&log).title.ends_with(", bytes delivered"));
        let pull = RunLog::parse(&line("arrived")).expect("parses");
        assert!(throughput_chart(&pull).title.ends_with(", bytes arrived"));
    }
}
