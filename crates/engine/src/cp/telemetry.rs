//! What `longhaul cp`'s client reports about its data streams, in bench's terms: an
//! [`IntervalView`] per interval (per-stream bytes, rate, cwnd, RTT, retransmits, kernel
//! rates and `limited_by`) and, at the end, a [`CpVerdict`] (what limited the transfer,
//! advice, balance, per-stream summaries).
//!
//! [`CpTelemetry`] drives the shared [`Sampler`] over the clones of the data sockets that
//! [`super::client::run_cp`] hands out in its [`CpStart`]; turning samples and totals into
//! views is pure ([`interval_view`], [`verdict_of`]).
//!
//! On a push the client sends: its TCP_INFO is the sender's, rates are of the bytes
//! delivered, and the verdict is judged as bench judges it. On a pull the client receives:
//! rates are of the bytes that arrived (the kernel's count, not the chunks the application
//! read between disk writes), `bytes` are what it read, the RTT is its receive-side
//! estimate. A sending server that reports its intervals
//! ([`super::peer_intervals`]) gives a pull the sender's view: rates of what it delivered,
//! its window, RTT, retransmits and kernel rates per stream, `limited_by` judged on its
//! chrono counters per interval, and the verdict judged on its totals as a push's is.
//! The rate the sender's pacer holds goes into each interval too: a push's from its own
//! pacer ([`Progress::set_held_bps`]), a pull's as the server tells it
//! ([`longhaul_proto::Message::HeldRate`]).
//! Without its reports the window and kernel rates are 0 and `limited_by` is `unknown`.

use longhaul_proto::StreamResult;
use serde::Serialize;

use std::sync::Arc;

use super::client::CpStart;
use super::peer_intervals::{delivered_by_peer, PeerReports};
use super::Progress;
use crate::datarun::run::chrono_of;
use crate::telemetry::crossed::RateSource;
use crate::telemetry::view::view;
use crate::telemetry::view::{IntervalView, StreamSummary};
use crate::telemetry::{Role, Sampled, Sampler};
use longhaul_policy::{judge, Chrono, LimitedBy};

/// The sampler of one transfer's data streams at the client.
pub struct CpTelemetry {
    role: Role,
    sampler: Sampler,
    rate_bps: Option<u64>,
    /// The sending server's reports (a pull).
    peer: Arc<PeerReports>,
    /// The rate the sender holds, see [`Progress::set_held_bps`].
    held: super::HeldCell,
    /// Per stream, bytes intervals counted from this end's arrivals (no report had come)
    /// that no report has yet been charged with: the server's reports count every byte
    /// its streams delivered, these too, so the next reported intervals count them no more.
    own_counted: Vec<u64>,
}

impl CpTelemetry {
    /// Starts sampling the streams of a transfer that was just set up (call it from
    /// `run_cp`'s `on_start`); `rate_bps` is the total pacing rate asked for. `None` when
    /// the progress counts no streams (nothing to sample).
    pub fn start(start: &CpStart, progress: &Progress, rate_bps: Option<u64>) -> Option<Self> {
        let counters = progress.stream_counters()?.clone();
        let role = if start.direction == "push" {
            Role::Sender
        } else {
            Role::Receiver
        };
        Some(Self {
            role,
            sampler: Sampler::new(
                role,
                start.sockets.clone(),
                counters,
                std::time::Instant::now(),
            ),
            rate_bps,
            peer: progress.peer_reports().clone(),
            held: progress.held_cell(),
            own_counted: Vec::new(),
        })
    }

    /// The interval since the previous call (or the start); on a pull, its rates are of
    /// what the server reported delivered in the meantime, if it reported.
    pub fn interval(&mut self) -> IntervalView {
        let own = self.sampler.sample();
        let sampled = match self.role {
            Role::Receiver => {
                let mut s = delivered_by_peer(own, &self.peer.take());
                count_once(&mut s, &mut self.own_counted);
                s
            }
            Role::Sender => own,
        };
        interval_view(self.role, &sampled, self.rate_bps, self.held.get())
    }

    /// What limited the transfer, from the start until now; on a pull, judged on the
    /// sending server's counters when it reported them.
    pub fn verdict(&self) -> CpVerdict {
        let own = self.sampler.totals();
        let peer = match self.role {
            Role::Receiver => self.peer.totals(),
            Role::Sender => Vec::new(),
        };
        if peer.is_empty() {
            return verdict_of(self.role, &own, self.rate_bps);
        }
        verdict_of(Role::Sender, &senders_view(&own, &peer), self.rate_bps)
    }
}

/// Every byte counted once across a pull's intervals: an interval counted from this
/// end's arrivals (no server report yet, or a gap in them) adds to `own_counted`; one
/// counted from the server's reports, which cover those bytes too, is charged with them.
fn count_once(s: &mut Sampled, own_counted: &mut Vec<u64>) {
    if own_counted.len() < s.crossed.len() {
        own_counted.resize(s.crossed.len(), 0);
    }
    for (c, counted) in s.crossed.iter_mut().zip(own_counted.iter_mut()) {
        if s.source == RateSource::Delivered {
            let charged = (*c).min(*counted);
            *c -= charged;
            *counted -= charged;
        } else {
            *counted = counted.saturating_add(*c);
        }
    }
}

/// A pull's totals in the sender's view: the bytes this end read and the time it took
/// (exact, where the peer's last report may be missing), with the sending peer's window,
/// RTTs, retransmits and chrono counters per stream.
fn senders_view(own: &[StreamResult], peer: &[StreamResult]) -> Vec<StreamResult> {
    own.iter()
        .map(|o| match peer.get(usize::from(o.stream)) {
            Some(p) => StreamResult {
                bytes: o.bytes,
                elapsed_us: o.elapsed_us,
                cpu_us: o.cpu_us,
                ..p.clone()
            },
            None => o.clone(),
        })
        .collect()
}

/// The verdict on a transfer: the fields cp's `end` object gains.
#[derive(Debug, Clone, Serialize)]
pub struct CpVerdict {
    /// What limited the transfer as a whole.
    pub limited_by: LimitedBy,
    /// The verdict in words.
    pub limited_by_text: &'static str,
    /// What to do about it.
    pub advice: &'static str,
    /// Slowest stream's share of the fastest stream's bytes (1.0 = balanced).
    pub balance: f64,
    /// Segments retransmitted, all streams (the sender's; 0 on a pull).
    pub retransmits: u64,
    /// Per stream.
    pub streams: Vec<StreamSummary>,
}

impl CpVerdict {
    /// The verdict of a copy carried through ssh ([`crate::ssh::relay`]): this end's
    /// sockets reach only the relay on its loopback, so their counters say nothing of
    /// the path; the ssh connections set the pace.
    pub fn carried_through_ssh(mut self) -> Self {
        (self.limited_by, self.limited_by_text, self.advice) = crate::telemetry::view::THROUGH_SSH;
        self
    }

    /// The slowest stream's share of the fastest among the streams that carried data, and
    /// how many did: a copy of fewer chunks than streams leaves some without one, and
    /// their 0 bytes say nothing of the others' balance ([`Self::balance`] when none did).
    pub fn carrying_balance(&self) -> (f64, usize) {
        let carried = self.streams.iter().map(|s| s.bytes).filter(|&b| b > 0);
        let (lo, hi, n) = carried.fold((u64::MAX, 0, 0), |(lo, hi, n), b| {
            (lo.min(b), hi.max(b), n + 1)
        });
        if n == 0 {
            return (self.balance, 0);
        }
        (lo as f64 / hi as f64, n)
    }
}

/// One interval of this end's samples, as bench prints it; a receiver judges only what
/// the sending peer's counters carry (`limited_by` is `unknown` without them).
pub fn interval_view(
    role: Role,
    r: &Sampled,
    rate_bps: Option<u64>,
    held_bps: Option<u64>,
) -> IntervalView {
    let mut v = view(r, rate_bps, held_bps);
    if role == Role::Receiver && r.source != RateSource::Delivered {
        for s in &mut v.streams {
            s.limited_by = LimitedBy::Unknown;
        }
    }
    v
}

/// The verdict from this end's per-stream totals: judged from the chrono counters at a
/// sender (pacing wins when a stream reached 90 % of its share of `rate_bps`), `unknown`
/// at a receiver.
pub fn verdict_of(role: Role, totals: &[StreamResult], rate_bps: Option<u64>) -> CpVerdict {
    let n = totals.len().max(1) as f64;
    let mut all = Chrono::default();
    let mut all_bytes = 0u64;
    let mut longest_us = 0u64;
    let streams: Vec<StreamSummary> = totals
        .iter()
        .map(|s| {
            let c = chrono_of(s);
            all.elapsed_us += c.elapsed_us;
            all.busy_us += c.busy_us;
            all.rwnd_limited_us += c.rwnd_limited_us;
            all.sndbuf_limited_us += c.sndbuf_limited_us;
            all_bytes += s.bytes;
            longest_us = longest_us.max(s.elapsed_us);
            let bps = s.bytes as f64 * 8.0 / (s.elapsed_us as f64 / 1e6).max(1e-6);
            StreamSummary {
                id: s.stream,
                bytes: s.bytes,
                bits_per_second: bps,
                retransmits: s.retransmits,
                min_rtt_ms: s.min_rtt_us as f64 / 1e3,
                // A receiver's own window says nothing about the path.
                cwnd_bytes: if role == Role::Sender {
                    s.cwnd_bytes
                } else {
                    0
                },
                limited_by: match role {
                    Role::Sender => judge(c, rate_bps.map(|r| bps / (r as f64 / n))),
                    Role::Receiver => LimitedBy::Unknown,
                },
            }
        })
        .collect();
    let limited_by = match role {
        Role::Sender => {
            let bps = all_bytes as f64 * 8.0 / (longest_us as f64 / 1e6).max(1e-6);
            judge(all, rate_bps.map(|r| bps / r as f64))
        }
        Role::Receiver => LimitedBy::Unknown,
    };
    let max = streams.iter().map(|s| s.bytes).max().unwrap_or(0).max(1) as f64;
    let min = streams.iter().map(|s| s.bytes).min().unwrap_or(0) as f64;
    CpVerdict {
        limited_by,
        limited_by_text: limited_by.describe(),
        advice: limited_by.advice(),
        balance: min / max,
        retransmits: streams.iter().map(|s| s.retransmits).sum(),
        streams,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_proto::{IntervalReport, StreamSample};

    fn total(stream: u16, bytes: u64, busy: u64, rwnd: u64) -> StreamResult {
        StreamResult {
            stream,
            bytes,
            elapsed_us: 1_000_000,
            retransmits: 2,
            busy_us: busy,
            rwnd_limited_us: rwnd,
            sndbuf_limited_us: 0,
            min_rtt_us: 1500,
            srtt_us: 2000,
            cwnd_bytes: 64_000,
            cpu_us: 0,
        }
    }

    fn sample(stream: u16, bytes: u64, rwnd: u64) -> StreamSample {
        StreamSample {
            stream,
            bytes,
            cwnd_bytes: 10_000,
            srtt_us: 1000,
            retransmits: 1,
            delivery_rate_bps: 0,
            pacing_rate_bps: 0,
            busy_us: 500_000,
            rwnd_limited_us: rwnd,
            sndbuf_limited_us: 0,
        }
    }

    #[test]
    fn a_sender_is_judged_per_stream_and_as_a_whole() {
        let v = verdict_of(
            Role::Sender,
            &[
                total(0, 1000, 1_000_000, 900_000),
                total(1, 500, 1_000_000, 0),
            ],
            None,
        );
        assert_eq!(v.streams[0].limited_by, LimitedBy::ReceiverWindow);
        assert_eq!(v.streams[1].limited_by, LimitedBy::Network);
        // 900 ms of 2 s receiver-window limited against 1.1 s of congestion window.
        assert_eq!(v.limited_by, LimitedBy::Network);
        assert_eq!(v.limited_by_text, LimitedBy::Network.describe());
        assert_eq!(v.balance, 0.5);
        assert_eq!(v.retransmits, 4);
        assert_eq!(v.streams[0].bits_per_second, 8000.0);
        assert_eq!(v.streams[1].min_rtt_ms, 1.5);
    }

    #[test]
    fn a_sender_at_its_asked_rate_is_limited_by_pacing() {
        // 1000 bytes in 1 s per stream = 8 kbit/s each; asked for 16 kbit/s in all.
        let v = verdict_of(
            Role::Sender,
            &[total(0, 1000, 1_000_000, 0), total(1, 1000, 1_000_000, 0)],
            Some(16_000),
        );
        assert_eq!(v.limited_by, LimitedBy::Pacing);
        assert!(v.streams.iter().all(|s| s.limited_by == LimitedBy::Pacing));
    }

    #[test]
    fn a_receiver_cannot_judge_the_sender() {
        let v = verdict_of(Role::Receiver, &[total(0, 1000, 0, 0)], None);
        assert_eq!(v.limited_by, LimitedBy::Unknown);
        assert_eq!(v.streams[0].limited_by, LimitedBy::Unknown);
        assert_eq!(v.streams[0].cwnd_bytes, 0);
        // The application read 125 bytes; 250 arrived (the rest waits in the socket).
        let r = Sampled {
            report: IntervalReport {
                start_ms: 0,
                end_ms: 1000,
                streams: vec![sample(0, 125, 0)],
            },
            crossed: vec![250],
            crossed_ms: 1000,
            source: RateSource::Arrived,
        };
        let i = interval_view(Role::Receiver, &r, None, None);
        assert_eq!(i.streams[0].limited_by, LimitedBy::Unknown);
        assert_eq!((i.bytes, i.crossed_bytes), (125, 250));
        assert_eq!(i.bits_per_second, 2000.0, "the rate of what arrived");
        assert_eq!(i.streams[0].bits_per_second, 2000.0);
        assert_eq!(i.rate_source, RateSource::Arrived);
    }

    #[test]
    fn a_sender_interval_is_judged_as_bench_judges_it() {
        let r = IntervalReport {
            start_ms: 1000,
            end_ms: 2000,
            streams: vec![sample(0, 250, 400_000), sample(1, 250, 0)],
        };
        let i = interval_view(Role::Sender, &Sampled::from_sender(r), None, None);
        // Half the interval idle beats 400 ms of receiver window.
        assert_eq!(i.streams[0].limited_by, LimitedBy::Application);
        assert_eq!((i.start, i.end, i.bytes), (1.0, 2.0, 500));
        assert_eq!(i.retransmits, 2);
    }

    #[test]
    fn a_pull_counts_bytes_its_arrivals_counted_before_the_first_report_once() {
        let mut counted = Vec::new();
        let mut arrived = Sampled {
            report: IntervalReport::default(),
            crossed: vec![300, 100],
            crossed_ms: 100,
            source: RateSource::Arrived,
        };
        count_once(&mut arrived, &mut counted);
        assert_eq!(arrived.crossed, vec![300, 100], "counted as they arrived");
        // The server's first report covers those bytes and more.
        let mut reported = Sampled {
            crossed: vec![1000, 50],
            source: RateSource::Delivered,
            ..arrived.clone()
        };
        count_once(&mut reported, &mut counted);
        assert_eq!(reported.crossed, vec![700, 0]);
        let mut next = Sampled {
            crossed: vec![1000, 1000],
            source: RateSource::Delivered,
            ..arrived
        };
        count_once(&mut next, &mut counted);
        assert_eq!(
            next.crossed,
            vec![1000, 950],
            "what was left is charged next"
        );
    }

    #[test]
    fn no_streams_do_not_divide_by_zero() {
        let v = verdict_of(Role::Sender, &[], None);
        assert!(v.streams.is_empty());
        assert_eq!(v.balance, 0.0);
        assert_eq!(v.limited_by, LimitedBy::Network);
    }
}
