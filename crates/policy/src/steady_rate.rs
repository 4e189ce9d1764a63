//! The steady delivered rate of a run, the figure the path cache records for the next
//! run's jump-start (`docs/jump-start.md`): the median of the second half of the run's
//! interval rates, so the start-up never counts. Bench feeds [`SteadyRate`] its sender's
//! intervals (with `--reverse`, the server's reports); a cp pull's client feeds
//! [`ReportedRate`] the sending server's interval reports, which come every 100 ms and are
//! summed into windows of [`REPORT_WINDOW_MS`] first.

use longhaul_proto::IntervalReport;

/// The interval rates of a run, bit/s.
#[derive(Debug, Default)]
pub struct SteadyRate(Vec<f64>);

impl SteadyRate {
    /// Most intervals kept (a day at 1 s).
    const MAX: usize = 86_400;

    /// One interval's rate, bit/s (beyond `MAX` intervals, dropped).
    pub fn push(&mut self, bps: f64) {
        if self.0.len() < Self::MAX {
            self.0.push(bps);
        }
    }

    /// The median of the second half of the intervals (the start-up excluded); `None` for
    /// fewer than four intervals.
    pub fn rate(&self) -> Option<u64> {
        if self.0.len() < 4 {
            return None;
        }
        let mut late: Vec<f64> = self.0[self.0.len() / 2..].to_vec();
        late.sort_by(f64::total_cmp);
        Some(late[late.len() / 2] as u64)
    }
}

/// The span of the sender's reports summed into one interval of [`ReportedRate`] (by the
/// sender's clock): long enough to even out the 100 ms reports, short enough that a
/// transfer of a few seconds has the four intervals a steady rate needs.
pub const REPORT_WINDOW_MS: u64 = 500;

/// The steady rate of what a sending peer reported delivered (a pull's server): its
/// reports' bytes, all streams, summed into windows of [`REPORT_WINDOW_MS`].
#[derive(Debug, Default)]
pub struct ReportedRate {
    steady: SteadyRate,
    window_start_ms: Option<u64>,
    window_bytes: u64,
}

impl ReportedRate {
    /// Counts one report. A report's times are the peer's: a window whose end is not
    /// after its start (a peer's clock going back) closes without a rate.
    pub fn add(&mut self, report: &IntervalReport) {
        let start = *self.window_start_ms.get_or_insert(report.start_ms);
        let bytes = report
            .streams
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.bytes));
        self.window_bytes = self.window_bytes.saturating_add(bytes);
        let span_ms = report.end_ms.saturating_sub(start);
        if span_ms >= REPORT_WINDOW_MS || report.end_ms < start {
            if span_ms > 0 {
                self.steady
                    .push(self.window_bytes as f64 * 8.0 * 1e3 / span_ms as f64);
            }
            self.window_start_ms = Some(report.end_ms);
            self.window_bytes = 0;
        }
    }

    /// The steady rate over the windows closed so far ([`SteadyRate::rate`]).
    pub fn rate(&self) -> Option<u64> {
        self.steady.rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_proto::StreamSample;

    fn report(start_ms: u64, end_ms: u64, bytes: &[u64]) -> IntervalReport {
        IntervalReport {
            start_ms,
            end_ms,
            streams: bytes
                .iter()
                .enumerate()
                .map(|(i, &bytes)| StreamSample {
                    stream: i as u16,
                    bytes,
                    ..StreamSample::default()
                })
                .collect(),
        }
    }

    #[test]
    fn the_steady_rate_is_the_median_of_the_second_half() {
        let mut s = SteadyRate::default();
        for bps in [1.0, 2.0, 3.0] {
            s.push(bps);
        }
        assert_eq!(s.rate(), None, "three intervals are too few");
        for bps in [100.0, 90.0, 110.0] {
            s.push(bps);
        }
        assert_eq!(s.rate(), Some(100));
    }

    #[test]
    fn reports_are_summed_into_windows_without_the_start_up() {
        let mut r = ReportedRate::default();
        // 100 ms reports over two streams: a slow first second, then 1 Gbit/s
        // (12.5 MB per 100 ms).
        for i in 0..40u64 {
            let each = if i < 10 { 125_000 } else { 6_250_000 };
            r.add(&report(i * 100, (i + 1) * 100, &[each, each]));
        }
        assert_eq!(r.rate(), Some(1_000_000_000));
    }

    #[test]
    fn a_peer_clock_going_back_or_standing_still_gives_no_rate() {
        let mut still = ReportedRate::default();
        let mut back = ReportedRate::default();
        for _ in 0..10 {
            still.add(&report(1000, 1000, &[u64::MAX, u64::MAX]));
            back.add(&report(900, 500, &[1]));
        }
        assert_eq!((still.rate(), back.rate()), (None, None));
    }
}
