//! How many lines about unauthenticated connections a server prints: a token bucket, so
//! a flood of connections that fail their handshake cannot fill a disk or drown the lines
//! that matter. A burst is printed whole; past it one line a second, and the next line
//! printed says how many were left out.

use std::time::{Duration, Instant};

/// A token bucket for log lines.
#[derive(Debug, Clone)]
pub struct LogLimiter {
    burst: u32,
    every: Duration,
    tokens: u32,
    refilled: Instant,
    suppressed: u64,
}

/// Whether a line may be printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLine {
    /// Print it; `suppressed` lines were left out since the last one printed.
    Print {
        /// Lines left out before this one.
        suppressed: u64,
    },
    /// Leave it out (counted).
    Drop,
}

impl LogLimiter {
    /// `burst` lines at once, then one every `every`.
    pub fn new(burst: u32, every: Duration, now: Instant) -> Self {
        Self {
            burst,
            every,
            tokens: burst,
            refilled: now,
            suppressed: 0,
        }
    }

    /// A server's default: 20 lines at once, then one a second.
    pub fn for_server(now: Instant) -> Self {
        Self::new(20, Duration::from_secs(1), now)
    }

    /// Asks to print one line at `now`.
    pub fn line(&mut self, now: Instant) -> LogLine {
        let since = now.saturating_duration_since(self.refilled);
        let earned = (since.as_nanos() / self.every.as_nanos().max(1)).min(u128::from(self.burst));
        if earned > 0 {
            self.tokens = (self.tokens + earned as u32).min(self.burst);
            self.refilled = now;
        }
        if self.tokens == 0 {
            self.suppressed += 1;
            return LogLine::Drop;
        }
        self.tokens -= 1;
        LogLine::Print {
            suppressed: std::mem::take(&mut self.suppressed),
        }
    }
}

impl LogLimiter {
    /// Lines left out since the last one printed, now reported elsewhere (a line that is
    /// always printed, such as a finished session's).
    pub fn take_suppressed(&mut self) -> u64 {
        std::mem::take(&mut self.suppressed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_prints_its_burst_then_one_a_second_with_the_count_left_out() {
        let t0 = crate::test_epoch();
        let mut l = LogLimiter::new(3, Duration::from_secs(1), t0);
        let first: Vec<_> = (0..1000).map(|_| l.line(t0)).collect();
        assert!(first[..3]
            .iter()
            .all(|x| *x == LogLine::Print { suppressed: 0 }));
        assert!(first[3..].iter().all(|x| *x == LogLine::Drop));
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(l.line(ms(500)), LogLine::Drop);
        assert_eq!(l.line(ms(1000)), LogLine::Print { suppressed: 998 });
        assert_eq!(l.line(ms(1001)), LogLine::Drop);
        // A long quiet spell refills the burst, no more.
        let late = ms(3_600_000);
        assert_eq!(l.line(late), LogLine::Print { suppressed: 1 });
        assert_eq!(l.line(late), LogLine::Print { suppressed: 0 });
        assert_eq!(l.line(late), LogLine::Print { suppressed: 0 });
        assert_eq!(l.line(late), LogLine::Drop);
    }
}
