//! A copy's progress as gfal2's monitor callbacks take it (FTS3 turns them into its
//! transfer markers): bytes so far, the average rate since the start and the rate since
//! the last report, in bytes per second as gfal2's own copies report them, and whole
//! seconds elapsed. Time comes from the caller, so this is plain arithmetic.

use std::time::Duration;

/// How often a running copy is reported.
pub const REPORT_EVERY: Duration = Duration::from_secs(1);

/// One report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Bytes of the file in place so far.
    pub bytes: u64,
    /// `bytes` over the time since the start, bytes/s.
    pub average_bps: u64,
    /// Bytes since the last report over the time since it, bytes/s.
    pub instant_bps: u64,
    /// Whole seconds since the start.
    pub elapsed_secs: i64,
}

/// Turns (time since the start, bytes so far) readings into [`Sample`]s.
#[derive(Debug, Default)]
pub struct RateMeter {
    last: Option<(Duration, u64)>,
}

impl RateMeter {
    /// The report for `bytes` done `elapsed` after the start.
    pub fn sample(&mut self, elapsed: Duration, bytes: u64) -> Sample {
        let (since, base) = self.last.unwrap_or((Duration::ZERO, 0));
        let rate = |b: u64, d: Duration| -> u64 {
            let secs = d.as_secs_f64();
            if secs > 0.0 {
                (b as f64 / secs) as u64
            } else {
                0
            }
        };
        let sample = Sample {
            bytes,
            average_bps: rate(bytes, elapsed),
            instant_bps: rate(bytes.saturating_sub(base), elapsed.saturating_sub(since)),
            elapsed_secs: elapsed.as_secs() as i64,
        };
        self.last = Some((elapsed, bytes));
        sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_runs_from_the_start_and_the_instant_rate_from_the_last_report() {
        let mut m = RateMeter::default();
        let s = m.sample(Duration::from_secs(2), 200);
        assert_eq!(
            s,
            Sample {
                bytes: 200,
                average_bps: 100,
                instant_bps: 100,
                elapsed_secs: 2
            }
        );
        let s = m.sample(Duration::from_millis(2500), 1200);
        assert_eq!(s.average_bps, 480);
        assert_eq!(s.instant_bps, 2000);
        assert_eq!(s.elapsed_secs, 2);
    }

    #[test]
    fn no_time_and_going_backwards_give_zero_rates_not_a_panic() {
        let mut m = RateMeter::default();
        let s = m.sample(Duration::ZERO, 10);
        assert_eq!((s.average_bps, s.instant_bps), (0, 0));
        let s = m.sample(Duration::from_secs(1), 5);
        assert_eq!(
            s.instant_bps, 0,
            "fewer bytes than before (a restart) count as none"
        );
        assert_eq!(s.average_bps, 5);
    }
}
