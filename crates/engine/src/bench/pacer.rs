//! Holds a sender's pacing to the bottleneck: feeds the [`RateProbe`] with TCP_INFO of
//! every stream, and when the probe ends, drains the start-up's queue, caps each stream's
//! pacing at its share of the rate found and switches congestion control as the probe
//! says. Used by bench runs and by `longhaul cp`'s sender.
//!
//! With jump-start ([`Pacer::with_jump_start`]) the streams start paced at the jump rate and
//! a [`JumpValidator`] sees every sample before the probe: confirmed, the pacing rises to
//! the remembered rate and the probe holds from there; retreated, the pacing drops to the
//! retreat rate for one RTT, then the cap is lifted and a fresh probe starts.

use crate::transport::secure::SecureStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use longhaul_sys::tcp_info::{bbr_info, tcp_info};

use longhaul_policy::{
    drain_time, JumpAction, JumpSample, JumpValidator, ProbeAction, ProbeSample, RateProbe,
    DRAIN_GAIN,
};

/// The probe and what it decided, over a set of sockets.
pub struct Pacer {
    socks: Vec<Arc<SecureStream>>,
    probe: RateProbe,
    start: Instant,
    held_bps: Option<u64>,
    cruise: Option<String>,
    /// End of the drain after the hold, and the per-stream rate to pace at then.
    drain_until: Option<(Duration, u64)>,
    /// Jump-start: the validator of the first round trips, and the probe as built (restarted
    /// after a safe retreat).
    jump: Option<(JumpValidator, RateProbe)>,
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
            jump: None,
        }
    }

    /// The same pacer for a run that jumps: the caller paced every stream at its share of
    /// the jump's start rate before the first byte; `validator` judges the first round trips.
    pub fn with_jump_start(mut self, validator: JumpValidator) -> Self {
        self.jump = Some((validator, self.probe.clone()));
        self
    }

    /// The jump's verdict, once made (`None` without a jump or before the verdict).
    pub fn jump_verdict(&self) -> Option<JumpAction> {
        self.jump.as_ref().and_then(|(v, _)| v.verdict())
    }

    /// Feeds the jump's validator; applies its verdict to the sockets.
    fn jump_step(&mut self) {
        let Some((validator, fresh)) = self.jump.as_mut() else {
            return;
        };
        if validator.done() {
            return;
        }
        let mut sample = JumpSample {
            at: self.start.elapsed(),
            ..JumpSample::default()
        };
        let mut min_rtt = u64::MAX;
        for info in self.socks.iter().filter_map(|s| tcp_info(&**s).ok()) {
            sample.delivery_bps += info.delivery_rate * 8;
            sample.retransmits += info.total_retrans as u64;
            sample.srtt = sample.srtt.max(Duration::from_micros(info.rtt_us as u64));
            if info.min_rtt_us > 0 {
                min_rtt = min_rtt.min(info.min_rtt_us as u64);
            }
        }
        if min_rtt != u64::MAX {
            sample.min_rtt = Duration::from_micros(min_rtt);
        }
        let n = self.socks.len().max(1) as u64;
        match validator.on_sample(sample) {
            Some(JumpAction::Confirm { rate_bps }) => {
                for s in &self.socks {
                    let _ = longhaul_sys::socket::set_max_pacing_rate(&**s, rate_bps / n / 8);
                }
            }
            Some(JumpAction::Retreat {
                rate_bps, drain, ..
            }) => {
                for s in &self.socks {
                    let _ = longhaul_sys::socket::set_max_pacing_rate(&**s, rate_bps / n / 8);
                }
                // After the drain the cap is lifted (u64::MAX / 8 bytes/s: none) and a
                // fresh probe finds the rate as a first run would.
                self.drain_until = Some((self.start.elapsed() + drain, u64::MAX));
                self.probe = fresh.clone();
            }
            None => {}
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
        self.jump_step();
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
