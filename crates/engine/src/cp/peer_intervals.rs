//! Interval reports from a pull's sending server. A receiver's own count of what crossed
//! is an estimate behind every hole in the data (see [`crate::telemetry::crossed`]); the
//! sender knows what was delivered. When the client announces
//! [`longhaul_proto::features::TRANSFER_INTERVALS`], a sending server runs a [`Reporter`]:
//! its streams' samples go out as `Interval` frames on the control connection every
//! [`REPORT_EVERY`]; the client keeps them in [`PeerReports`] until its next interval,
//! whose rates [`delivered_by_peer`] then takes from them, and counts every one into the
//! steady rate the client records for the path ([`PeerReports::steady_rate`]).

use std::collections::VecDeque;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhaul_proto::{IntervalReport, JumpOutcome, Message};

use super::Progress;
use crate::steady_rate::ReportedRate;
use crate::telemetry::crossed::RateSource;
use crate::telemetry::{Role, Sampled, Sampler, StreamCounters};
use crate::transport::control::ControlTx;
use crate::transport::secure::SecureStream;

/// How often a sending server reports.
pub const REPORT_EVERY: Duration = Duration::from_millis(100);
/// Most reports a client holds between two of its intervals; more are dropped.
pub const MAX_PENDING: usize = 1024;

/// A sending server's reports, sampled on a thread of their own until dropped.
pub struct Reporter {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Reporter {
    /// Reports on `streams` (`streams[i]` is stream `i`) every `every` over `control`.
    /// Call it before the stream threads write: they count what they write into
    /// `progress`'s stream counters, which bound what is reported.
    pub fn start(
        streams: &[SecureStream],
        progress: &Progress,
        control: ControlTx,
        every: Duration,
    ) -> Self {
        let none = Self {
            stop: None,
            thread: None,
        };
        let Ok(socks) = streams
            .iter()
            .map(|s| s.try_clone().map(Arc::new))
            .collect::<std::io::Result<Vec<_>>>()
        else {
            // Reports are a view: without clones of the sockets there are none.
            return none;
        };
        progress.count_streams(Arc::new(StreamCounters::new(socks.len())));
        let Some(counters) = progress.stream_counters().cloned() else {
            return none;
        };
        let (stop, wait) = mpsc::channel::<()>();
        let mut sampler = Sampler::new(Role::Sender, socks, counters, Instant::now());
        let thread = std::thread::Builder::new()
            .name("lh-report".into())
            .spawn(move || {
                while wait.recv_timeout(every) == Err(RecvTimeoutError::Timeout) {
                    let report = sampler.sample().report;
                    if control.send_bench(&Message::Interval(report)).is_err() {
                        return;
                    }
                }
            })
            .ok();
        Self {
            stop: Some(stop),
            thread,
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        // Dropping the sender wakes the thread at once.
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reports a client received and has not yet used, and the steady rate of all of
/// them (for the path's record).
#[derive(Debug, Default)]
pub struct PeerReports {
    pending: Mutex<VecDeque<IntervalReport>>,
    delivered: Mutex<ReportedRate>,
    /// The sending server's jump-start verdict, once told (the last one counts).
    jump: Mutex<Option<JumpOutcome>>,
}

impl PeerReports {
    /// Counts `report` into the steady rate and keeps it for the next interval (dropped
    /// beyond [`MAX_PENDING`]: a peer that floods gets no more memory).
    pub fn push(&self, report: IntervalReport) {
        if let Ok(mut d) = self.delivered.lock() {
            d.add(&report);
        }
        if let Ok(mut q) = self.pending.lock() {
            if q.len() < MAX_PENDING {
                q.push_back(report);
            }
        }
    }

    /// The steady rate the sending peer delivered, bit/s: the median of the second half
    /// of its reports' windows (`None` for a transfer too short to have one).
    pub fn steady_rate(&self) -> Option<u64> {
        self.delivered.lock().ok().and_then(|d| d.rate())
    }

    /// Keeps what a sending server tells on the control connection during a transfer (its
    /// interval reports, its jump-start verdict); any other message is handed back.
    pub fn absorb(&self, msg: Message) -> Option<Message> {
        match msg {
            Message::Interval(r) => self.push(r),
            Message::JumpVerdict { outcome } => {
                if let Ok(mut j) = self.jump.lock() {
                    *j = Some(outcome);
                }
            }
            other => return Some(other),
        }
        None
    }

    /// The sending server's jump-start verdict, if it told one.
    pub fn jump(&self) -> Option<JumpOutcome> {
        self.jump.lock().ok().and_then(|j| *j)
    }

    /// The reports received since the previous call, oldest first.
    pub fn take(&self) -> Vec<IntervalReport> {
        self.pending
            .lock()
            .map(|mut q| q.drain(..).collect())
            .unwrap_or_default()
    }
}

/// This end's interval with the bytes the sending peer delivered over `peer`'s reports
/// (the time they span by the peer's clock). `own` stays as it is when there are no
/// reports, or they span no time.
pub fn delivered_by_peer(own: Sampled, peer: &[IntervalReport]) -> Sampled {
    let (Some(first), Some(last)) = (peer.first(), peer.last()) else {
        return own;
    };
    let span_ms = last.end_ms.saturating_sub(first.start_ms);
    if span_ms == 0 {
        return own;
    }
    let mut crossed = vec![0u64; own.crossed.len()];
    for s in peer.iter().flat_map(|r| &r.streams) {
        if let Some(c) = crossed.get_mut(usize::from(s.stream)) {
            *c = c.saturating_add(s.bytes);
        }
    }
    Sampled {
        report: own.report,
        crossed,
        source: RateSource::Delivered,
        crossed_ms: span_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_proto::StreamSample;

    fn report(start_ms: u64, end_ms: u64, bytes: &[(u16, u64)]) -> IntervalReport {
        IntervalReport {
            start_ms,
            end_ms,
            streams: bytes
                .iter()
                .map(|&(stream, bytes)| StreamSample {
                    stream,
                    bytes,
                    ..StreamSample::default()
                })
                .collect(),
        }
    }

    fn own() -> Sampled {
        Sampled {
            report: report(1000, 2000, &[(0, 10), (1, 20)]),
            crossed: vec![7, 8],
            source: RateSource::Arrived,
            crossed_ms: 1000,
        }
    }

    #[test]
    fn the_peers_delivered_bytes_and_span_replace_the_estimate() {
        let peer = [
            report(900, 1000, &[(0, 100), (1, 200)]),
            report(1000, 1100, &[(1, 50), (0, 25)]),
        ];
        let s = delivered_by_peer(own(), &peer);
        assert_eq!(s.crossed, vec![125, 250]);
        assert_eq!((s.source, s.crossed_ms), (RateSource::Delivered, 200));
        assert_eq!(s.report, own().report, "what this end read stays");
    }

    #[test]
    fn no_reports_or_no_time_keep_this_ends_count() {
        assert_eq!(delivered_by_peer(own(), &[]), own());
        let still = [report(500, 500, &[(0, 1)])];
        assert_eq!(delivered_by_peer(own(), &still), own());
    }

    #[test]
    fn streams_this_end_does_not_have_are_ignored() {
        let peer = [report(0, 100, &[(0, 1), (9, u64::MAX), (1, u64::MAX)])];
        let s = delivered_by_peer(own(), &[peer[0].clone(), peer[0].clone()]);
        assert_eq!(s.crossed, vec![2, u64::MAX], "saturates, never wraps");
    }

    #[test]
    fn a_flood_of_reports_is_cut() {
        let q = PeerReports::default();
        for i in 0..MAX_PENDING as u64 + 10 {
            q.push(report(i, i + 1, &[]));
        }
        let got = q.take();
        assert_eq!(got.len(), MAX_PENDING);
        assert_eq!(got[0].start_ms, 0);
        assert!(q.take().is_empty());
    }
}
