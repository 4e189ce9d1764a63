//! Holds a sender's pacing to the bottleneck: feeds the [`RateProbe`] with TCP_INFO of
//! every stream, and when the probe ends, drains the start-up's queue, caps each stream's
//! pacing at its share of the rate found and switches congestion control as the probe
//! says. Used by bench runs and by `longhaul cp`'s sender.

use crate::transport::secure::SecureStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use longhaul_sys::tcp_info::{bbr_info, tcp_info};

use longhaul_policy::{drain_time, ProbeAction, ProbeSample, RateProbe, DRAIN_GAIN};

/// The probe and what it decided, over a set of sockets.
pub struct Pacer {
    socks: Vec<Arc<SecureStream>>,
    probe: RateProbe,
    start: Instant,
    held_bps: Option<u64>,
    cruise: Option<String>,
    /// End of the drain after the hold, and the per-stream rate to pace at then.
    drain_until: Option<(Duration, u64)>,
}

impl Pacer {
    /// A pacer for these sockets; `start` is when their data began.
    pub fn new(socks: Vec<Arc<SecureStream>>, probe: RateProbe, start: Instant) -> Self {
        Self {
            socks,
            probe,
            start,
            held_bps: None,
            cruise: None,
            drain_until: None,
        }
    }

    /// The rate held after the probe, bit/s.
    pub fn held_bps(&self) -> Option<u64> {
        self.held_bps
    }

    /// The congestion control the held run cruises on, if the probe switched it.
    pub fn cruise(&self) -> Option<&str> {
        self.cruise.as_deref()
    }

    /// Feeds the rate probe (sender only); when it ends, caps every stream's pacing at
    /// its share of the rate found and switches congestion control as the probe says.
    pub fn step(&mut self) -> Option<ProbeAction> {
        if let Some((until, per_stream)) = self.drain_until {
            if self.start.elapsed() >= until {
                for s in &self.socks {
                    let _ = longhaul_sys::socket::set_max_pacing_rate(&**s, per_stream / 8);
                }
                self.drain_until = None;
            }
        }
        let probe = &mut self.probe;
        let mut delivery = 0u64;
        let mut bbr = Some(0u64);
        let mut retrans = 0u64;
        let mut app_limited = true;
        for s in &self.socks {
            let Ok(info) = tcp_info(&**s) else {
                continue;
            };
            app_limited &= info.delivery_rate_app_limited;
            delivery += info.delivery_rate * 8;
            retrans += info.total_retrans as u64;
            bbr = match (bbr, bbr_info(&**s)) {
                (Some(sum), Some(b)) => Some(sum + b.bandwidth * 8),
                _ => None,
            };
        }
        let action = probe.on_sample(ProbeSample {
            at: self.start.elapsed(),
            delivery_bps: delivery,
            bbr_bps: bbr,
            retransmits: retrans,
            app_limited,
        })?;
        match action {
            ProbeAction::Hold {
                rate_bps,
                congestion,
            } => {
                let per_stream = rate_bps / self.socks.len().max(1) as u64;
                // Empty the queue the start-up left behind before holding the rate, or the
                // held run keeps it standing (and its RTT doubled) to the end.
                let (srtt, min_rtt) = self
                    .socks
                    .iter()
                    .filter_map(|s| tcp_info(&**s).ok())
                    .map(|i| (i.rtt_us as u64, i.min_rtt_us as u64))
                    .fold((0, u64::MAX), |(a, b), (r, m)| (a.max(r), b.min(m)));
                let drain = drain_time(
                    Duration::from_micros(srtt),
                    Duration::from_micros(min_rtt.min(srtt)),
                );
                let pace = match drain {
                    Some(d) => {
                        self.drain_until = Some((self.start.elapsed() + d, per_stream));
                        (per_stream as f64 * DRAIN_GAIN) as u64
                    }
                    None => per_stream,
                };
                for s in &self.socks {
                    let _ = longhaul_sys::socket::set_max_pacing_rate(&**s, pace / 8);
                    if let Some(cc) = congestion {
                        let _ = longhaul_sys::socket::set_congestion(&**s, cc);
                    }
                }
                self.held_bps = Some(rate_bps);
                self.cruise = congestion.map(str::to_string);
            }
            ProbeAction::Switch(cc) => {
                for s in &self.socks {
                    let _ = longhaul_sys::socket::set_congestion(&**s, cc);
                }
                self.cruise = Some(format!("{cc} (after non-congestive loss)"));
            }
        }
        Some(action)
    }
}
