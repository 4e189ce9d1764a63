//! Progress while a copy runs: the bar on stderr and, with `--json`, the `start` line and
//! the `interval` lines, from a ticker thread.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use longhaul_engine::bench::report::IntervalView;
use longhaul_engine::cp::client::CpStart;
use longhaul_engine::cp::telemetry::CpTelemetry;
use longhaul_engine::cp::Progress;
use longhaul_model::units::format_rate_bps;

use super::super::common::emit_record;
use super::records::{interval_record, start_record};

/// What the ticker and the end share: the set-up once known, whether its `start` line is
/// out, and the sampler of the data streams.
#[derive(Default)]
pub(super) struct Reporting {
    pub(super) start: Option<CpStart>,
    printed: bool,
    pub(super) telemetry: Option<CpTelemetry>,
}

/// Prints the JSON `start` line once the set-up and the file list are known.
pub(super) fn emit_start(
    shared: &Mutex<Reporting>,
    progress: &Progress,
    interval: Duration,
) -> bool {
    let Ok(mut l) = shared.lock() else {
        return false;
    };
    if l.printed {
        return true;
    }
    let Some(s) = &l.start else {
        return false;
    };
    emit_record(start_record(s, progress, interval));
    l.printed = true;
    true
}

/// Prints an `interval` line: bench's interval object, then the transfer's progress.
pub(super) fn emit_interval(v: &IntervalView, progress: &Progress) {
    emit_record(interval_record(v, progress));
}

/// The progress bar on stderr (when asked for) and, with `--json`, the `start` line and
/// an `interval` line every `every`, until `done`'s sender is dropped.
pub(super) fn ticker(
    progress: &Progress,
    done: &std::sync::mpsc::Receiver<()>,
    json: bool,
    bar: bool,
    every: Duration,
    shared: &Mutex<Reporting>,
) {
    let pb = if bar {
        ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    pb.set_style(
        ProgressStyle::with_template(
            "[{bar:30}] {percent:>3}% {bytes} / {total_bytes}  {msg}  ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("#> "),
    );
    let mut next = Instant::now() + every;
    let mut rate = 0.0f64;
    let mut ready = false;
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(tick_wait(
        next.saturating_duration_since(Instant::now()),
        ready,
    )) {
        let (bytes, total, files, files_total) = progress.snapshot();
        // Intervals start once the file list is settled (and, with --json, the start line
        // is out); the first one runs from the set-up.
        let was_ready = ready;
        ready = progress.is_listed() && (!json || emit_start(shared, progress, every));
        let now = Instant::now();
        if ready && !was_ready && now >= next {
            // A set-up longer than an interval (a long path's round trips): the first
            // interval runs a whole one from here, not a sliver now and more to catch up.
            next = now + every;
        }
        if ready && now >= next {
            next += every;
            if next <= now {
                // Behind by more than an interval (a stalled host): start afresh.
                next = now + every;
            }
            let view = shared
                .lock()
                .ok()
                .and_then(|mut l| l.telemetry.as_mut().map(CpTelemetry::interval));
            if let Some(v) = view {
                rate = v.bits_per_second;
                if json {
                    emit_interval(&v, progress);
                }
            }
        }
        if bar && total > 0 {
            pb.set_length(total);
            pb.set_position(bytes.min(total));
            pb.set_message(format!(
                "{}  files {files}/{files_total}",
                format_rate_bps(rate)
            ));
        }
    }
    pb.finish_and_clear();
}

/// How often the bar is redrawn at least.
const BAR_EVERY: Duration = Duration::from_millis(200);
/// How often an overdue interval looks again whether the set-up is done.
const NOT_READY_EVERY: Duration = Duration::from_millis(10);

/// How long the ticker sleeps, `until_next` before the next interval is due: to that
/// interval, and at least every [`BAR_EVERY`] for the bar. An interval that is due while the
/// set-up is not done (no file list or no `start` line yet, for seconds on a long path)
/// waits [`NOT_READY_EVERY`], not zero: a zero wait is a loop that spins a core.
fn tick_wait(until_next: Duration, ready: bool) -> Duration {
    let wait = if until_next.is_zero() && !ready {
        NOT_READY_EVERY
    } else {
        until_next
    };
    wait.min(BAR_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overdue_interval_before_the_set_up_is_done_does_not_spin() {
        assert_eq!(tick_wait(Duration::ZERO, false), NOT_READY_EVERY);
        // Once ready, a due interval is written at once; otherwise the ticker sleeps to it,
        // at most a bar's redraw.
        assert_eq!(tick_wait(Duration::ZERO, true), Duration::ZERO);
        assert_eq!(
            tick_wait(Duration::from_millis(70), false),
            Duration::from_millis(70)
        );
        assert_eq!(tick_wait(Duration::from_secs(1), true), BAR_EVERY);
    }
}
