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

use longhaul_proto::{IntervalReport, JumpOutcome, Message, StreamResult};

use super::Progress;
use crate::telemetry::crossed::RateSource;
use crate::telemetry::{Role, Sampled, Sampler, StreamCounters};
use crate::transport::control::ControlTx;
use crate::transport::secure::SecureStream;
use longhaul_policy::steady_rate::ReportedRate;

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
        held_rate: bool,
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
        // The pacer's held rate, told with each report once it has one.
        let held = held_rate.then(|| progress.held_cell());
        let thread = std::thread::Builder::new()
            .name("lh-report".into())
            .spawn(move || {
                while wait.recv_timeout(every) == Err(RecvTimeoutError::Timeout) {
                    let report = sampler.sample().report;
                    if control.send_bench(&Message::Interval(report)).is_err() {
                        return;
                    }
                    if let Some(bps) = held.as_ref().and_then(super::HeldCell::get) {
                        if control.send_bench(&Message::HeldRate { bps }).is_err() {
                            return;
                        }
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
    /// Every report summed per stream (none dropped: the sums are bounded).
    totals: Mutex<PeerTotals>,
}

impl PeerReports {
    /// Counts `report` into the steady rate and keeps it for the next interval (dropped
    /// beyond [`MAX_PENDING`]: a peer that floods gets no more memory).
    pub fn push(&self, report: IntervalReport) {
        if let Ok(mut d) = self.delivered.lock() {
            d.add(&report);
        }
        if let Ok(mut t) = self.totals.lock() {
            t.add(&report);
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

    /// The sending peer's per-stream totals over every report so far (empty: it reported
    /// nothing), to judge a pull's verdict on as a push's is judged on its own.
    pub fn totals(&self) -> Vec<StreamResult> {
        self.totals
            .lock()
            .map(|t| t.streams.clone())
            .unwrap_or_default()
    }

    /// The reports received since the previous call, oldest first.
    pub fn take(&self) -> Vec<IntervalReport> {
        self.pending
            .lock()
            .map(|mut q| q.drain(..).collect())
            .unwrap_or_default()
    }
}

/// This end's interval in the sending peer's view, over `peer`'s reports: the bytes it
/// delivered (the time they span by the peer's clock) are the rates, and each stream's
/// window, RTT, retransmits, kernel rates and chrono counters are the sender's (the
/// counters scaled to this end's interval, so a verdict judged on them compares like
/// with like); the bytes this end read stay. `own` stays as it is when there are no
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
    let mut report = own.report;
    // The sender's state, zeroed where it adds up, then summed over the reports.
    for s in &mut report.streams {
        (
            s.retransmits,
            s.busy_us,
            s.rwnd_limited_us,
            s.sndbuf_limited_us,
        ) = (0, 0, 0, 0);
    }
    let own_ms = report.end_ms.saturating_sub(report.start_ms).max(1);
    let scale = |us: u64| (us as u128 * own_ms as u128 / span_ms as u128) as u64;
    for s in peer.iter().flat_map(|r| &r.streams) {
        let i = usize::from(s.stream);
        if let Some(c) = crossed.get_mut(i) {
            *c = c.saturating_add(s.bytes);
        }
        if let Some(mine) = report.streams.iter_mut().find(|m| m.stream == s.stream) {
            mine.cwnd_bytes = s.cwnd_bytes;
            mine.srtt_us = s.srtt_us;
            mine.delivery_rate_bps = s.delivery_rate_bps;
            mine.pacing_rate_bps = s.pacing_rate_bps;
            mine.retransmits = mine.retransmits.saturating_add(s.retransmits);
            mine.busy_us = mine.busy_us.saturating_add(scale(s.busy_us));
            mine.rwnd_limited_us = mine
                .rwnd_limited_us
                .saturating_add(scale(s.rwnd_limited_us));
            mine.sndbuf_limited_us = mine
                .sndbuf_limited_us
                .saturating_add(scale(s.sndbuf_limited_us));
        }
    }
    Sampled {
        report,
        crossed,
        source: RateSource::Delivered,
        crossed_ms: span_ms,
    }
}

/// A sending peer's reports summed per stream over the whole transfer, as a sender's own
/// totals are ([`StreamResult`]): what a pull's verdict is judged on.
#[derive(Debug, Default)]
struct PeerTotals {
    first_start_ms: Option<u64>,
    last_end_ms: u64,
    /// Indexed by stream (at most [`longhaul_proto::limits::MAX_STREAMS`] of them).
    streams: Vec<StreamResult>,
}

impl PeerTotals {
    fn add(&mut self, report: &IntervalReport) {
        let first = *self.first_start_ms.get_or_insert(report.start_ms);
        self.last_end_ms = self.last_end_ms.max(report.end_ms);
        let elapsed_us = self.last_end_ms.saturating_sub(first).saturating_mul(1000);
        for s in &report.streams {
            let i = usize::from(s.stream);
            // A peer names streams by index: only as many as a transfer may have.
            if i >= usize::from(longhaul_proto::limits::MAX_STREAMS) {
                continue;
            }
            if self.streams.len() <= i {
                self.streams.resize_with(i + 1, StreamResult::default);
                for (n, t) in self.streams.iter_mut().enumerate() {
                    t.stream = n as u16;
                }
            }
            let t = &mut self.streams[i];
            t.bytes = t.bytes.saturating_add(s.bytes);
            t.retransmits = t.retransmits.saturating_add(u64::from(s.retransmits));
            t.busy_us = t.busy_us.saturating_add(s.busy_us);
            t.rwnd_limited_us = t.rwnd_limited_us.saturating_add(s.rwnd_limited_us);
            t.sndbuf_limited_us = t.sndbuf_limited_us.saturating_add(s.sndbuf_limited_us);
            if s.srtt_us > 0 {
                t.srtt_us = s.srtt_us;
                t.min_rtt_us = match t.min_rtt_us {
                    0 => s.srtt_us,
                    m => m.min(s.srtt_us),
                };
            }
            t.cwnd_bytes = s.cwnd_bytes;
        }
        for t in &mut self.streams {
            t.elapsed_us = elapsed_us;
        }
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
        let read: Vec<u64> = s.report.streams.iter().map(|x| x.bytes).collect();
        assert_eq!(read, vec![10, 20], "what this end read stays");
    }

    #[test]
    fn the_senders_window_rtt_and_counters_replace_the_receivers() {
        let mut peer = [
            report(900, 1000, &[(0, 100), (1, 200)]),
            report(1000, 1400, &[(0, 25)]),
        ];
        for (r, cwnd) in peer.iter_mut().zip([1000u64, 2000]) {
            for st in &mut r.streams {
                (st.cwnd_bytes, st.srtt_us, st.retransmits) = (cwnd, 150_000, 3);
                (st.busy_us, st.rwnd_limited_us) = (50_000, 10_000);
            }
        }
        let s = delivered_by_peer(own(), &peer);
        let st0 = &s.report.streams[0];
        assert_eq!(
            (st0.cwnd_bytes, st0.srtt_us, st0.retransmits),
            (2000, 150_000, 6)
        );
        // 100 ms busy over the peer's 500 ms, scaled to this end's 1000 ms interval.
        assert_eq!((st0.busy_us, st0.rwnd_limited_us), (200_000, 40_000));
        assert_eq!(s.report.streams[1].retransmits, 3);
    }

    #[test]
    fn totals_sum_every_report_per_stream_and_ignore_impossible_streams() {
        let q = PeerReports::default();
        let mut a = report(0, 1000, &[(0, 10), (1, 20), (u16::MAX, 5)]);
        a.streams[0].srtt_us = 9000;
        a.streams[0].retransmits = 1;
        let mut b = report(1000, 3000, &[(0, 30)]);
        b.streams[0].srtt_us = 7000;
        b.streams[0].retransmits = 2;
        q.push(a);
        q.push(b);
        let t = q.totals();
        assert_eq!(t.len(), 2, "a stream index past the limit is dropped");
        assert_eq!((t[0].bytes, t[0].retransmits), (40, 3));
        assert_eq!((t[0].min_rtt_us, t[0].srtt_us), (7000, 7000));
        assert_eq!((t[1].stream, t[1].bytes), (1, 20));
        assert!(t.iter().all(|s| s.elapsed_us == 3_000_000));
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
