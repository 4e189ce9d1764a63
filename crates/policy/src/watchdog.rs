//! When a running bench end gives up, with no I/O: a timed run long past its length
//! (twice the length plus a minute), or a `--bytes` run that has stopped moving bytes for
//! a minute. A `--bytes` run has no length of its own: at a low rate it may rightly take
//! hours, so only a stall ends it.

use std::time::{Duration, Instant};

/// How long a `--bytes` run may move nothing before it is declared stuck.
pub const STALL: Duration = Duration::from_secs(60);

/// Watches one run.
#[derive(Debug, Clone)]
pub struct Watchdog {
    /// Timed runs: the moment past which the run is stuck.
    limit: Option<Instant>,
    last_bytes: u64,
    last_move: Instant,
}

impl Watchdog {
    /// A run that started at `start`: timed (`duration`) or, with `bytes_run`, until a
    /// number of bytes has moved.
    pub fn new(start: Instant, duration: Duration, bytes_run: bool) -> Self {
        let limit = (!bytes_run)
            .then(|| start + duration.max(Duration::from_secs(1)) * 2 + Duration::from_secs(60));
        Self {
            limit,
            last_bytes: 0,
            last_move: start,
        }
    }

    /// Called with the bytes moved so far (all streams) at `now`; says why the run must be
    /// aborted, or `None` while it is fine.
    pub fn check(&mut self, now: Instant, moved: u64) -> Option<String> {
        match self.limit {
            Some(limit) if now > limit => Some("the run outlived its time limit".into()),
            Some(_) => None,
            None => {
                if moved != self.last_bytes {
                    (self.last_bytes, self.last_move) = (moved, now);
                    None
                } else if now > self.last_move + STALL {
                    Some(format!("the run moved no bytes for {} s", STALL.as_secs()))
                } else {
                    None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_runs_end_past_twice_their_length_plus_a_minute() {
        let t0 = crate::test_epoch();
        let mut w = Watchdog::new(t0, Duration::from_secs(10), false);
        assert_eq!(w.check(t0 + Duration::from_secs(80), 5), None);
        assert!(w.check(t0 + Duration::from_secs(81), 5).is_some());
    }

    #[test]
    fn bytes_runs_end_only_when_they_stall() {
        let t0 = crate::test_epoch();
        let mut w = Watchdog::new(t0, Duration::from_secs(10), true);
        // Moving slowly for an hour is fine.
        for m in 1..=60u64 {
            assert_eq!(w.check(t0 + Duration::from_secs(m * 60), m), None);
        }
        let last = t0 + Duration::from_secs(3600);
        assert_eq!(w.check(last + Duration::from_secs(59), 60), None);
        let why = w.check(last + Duration::from_secs(61), 60).unwrap();
        assert!(why.contains("no bytes"), "{why}");
    }
}
