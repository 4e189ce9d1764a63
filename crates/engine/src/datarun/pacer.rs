//! Holds a sender's pacing to the bottleneck: samples TCP_INFO of every stream several
//! times a round trip ([`RateProbe::sample_every`]), feeds the [`RateProbe`] and applies
//! what it decides (each stream's pacing cap, a congestion-control switch). Used by bench
//! runs and by `longhaul cp`'s sender.
//!
//! With jump-start ([`Pacer::with_jump_start`]) the streams start paced at the jump rate
//! (set by the caller before the first byte) and a [`JumpValidator`] sees every sample
//! before the controller: confirmed, the controller holds the remembered rate from there
//! ([`RateProbe::resume_at`]); retreated, the pacing drops to the retreat rate for the
//! drain, then a fresh start-up runs as on a first run.

use crate::transport::secure::SecureStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use longhaul_sys::tcp_info::tcp_info;

use longhaul_policy::{JumpAction, JumpSample, JumpValidator, Pacing, RateProbe, StreamSample};

/// A jump being validated, and what a retreat restarts from.
struct Jump {
    validator: JumpValidator,
    /// The controller as built, for the fresh start-up after a retreat.
    fresh: RateProbe,
    /// After a retreat: until when, and the total rate to pace at meanwhile.
    retreat: Option<(Duration, u64)>,
}

/// The controller and what it applied, over a set of sockets.
pub struct Pacer {
    socks: Vec<Arc<SecureStream>>,
    probe: RateProbe,
    start: Instant,
    /// The pacing cap last set on each socket (bytes/s; `u64::MAX`: none).
    applied: Vec<u64>,
    cruise: Option<String>,
    jump: Option<Jump>,
    /// `LONGHAUL_PACER_TRACE` is set: every sample and decision goes to stderr.
    trace: bool,
    /// Samples skipped in a row as torn ([`TORN_SAMPLE`]).
    torn_in_a_row: u32,
}

/// Reading every socket's TCP_INFO takes well under a millisecond (64 sockets: about
/// 0.1 ms); a sample that took longer was preempted midway.
const TORN_SAMPLE: Duration = Duration::from_millis(2);
/// Torn samples skipped in a row before one is taken anyway (a host that preempts every
/// sample still needs a controller).
const MAX_TORN_IN_A_ROW: u32 = 3;

impl Pacer {
    /// A pacer for these sockets; `start` is when their data began.
    pub fn new(socks: Vec<Arc<SecureStream>>, probe: RateProbe, start: Instant) -> Self {
        let applied = vec![u64::MAX; socks.len()];
        Self {
            socks,
            probe,
            start,
            applied,
            cruise: None,
            jump: None,
            trace: std::env::var_os("LONGHAUL_PACER_TRACE").is_some(),
            torn_in_a_row: 0,
        }
    }

    /// The same pacer for a run that jumps: the caller paced every stream at its share of
    /// the jump's start rate before the first byte; `validator` judges the first round trips.
    pub fn with_jump_start(mut self, validator: JumpValidator) -> Self {
        let start_bps = validator.plan().start_bps;
        let per_stream = start_bps / self.socks.len().max(1) as u64 / 8;
        self.applied = vec![per_stream.max(1); self.socks.len()];
        self.jump = Some(Jump {
            validator,
            fresh: self.probe.clone(),
            retreat: None,
        });
        self
    }

    /// The jump's verdict, once made (`None` without a jump or before the verdict).
    pub fn jump_verdict(&self) -> Option<JumpAction> {
        self.jump.as_ref().and_then(|j| j.validator.verdict())
    }

    /// How often [`Pacer::step`] should run.
    pub fn every(&self) -> Duration {
        self.probe.sample_every()
    }

    /// The rate held after the start-up (all streams, bit/s).
    pub fn held_bps(&self) -> Option<u64> {
        self.probe.held_bps()
    }

    /// The controller (its phase, the start-up's exit, the minimum RTT).
    pub fn probe(&self) -> &RateProbe {
        &self.probe
    }

    /// The congestion control the held run cruises on, if the controller switched it.
    pub fn cruise(&self) -> Option<&str> {
        self.cruise.as_deref()
    }

    /// Samples every stream, feeds the jump's validator and the controller, and applies
    /// their pacing.
    pub fn step(&mut self) {
        let before = self.start.elapsed();
        let samples: Vec<StreamSample> = self
            .socks
            .iter()
            .map(|s| match tcp_info(&**s) {
                Ok(i) => StreamSample {
                    delivery_bps: i.delivery_rate * 8,
                    // Counting delivered segments times the MSS overstated the rate by
                    // 8 %: writes end in short segments.
                    delivered_bytes: crate::telemetry::crossed::delivered_bytes(&i),
                    held_back_us: i.rwnd_limited_us,
                    in_flight_bytes: u64::from(i.unacked) * u64::from(i.snd_mss),
                    app_limited: i.delivery_rate_app_limited,
                    srtt: Duration::from_micros(u64::from(i.rtt_us)),
                    min_rtt: Duration::from_micros(u64::from(i.min_rtt_us)),
                    retransmits: u64::from(i.total_retrans),
                    acks: u64::from(i.segs_in),
                    busy: i.unacked > 0 || i.notsent_bytes > 0,
                    mss: i.snd_mss,
                },
                Err(_) => StreamSample::default(),
            })
            .collect();
        let at = self.start.elapsed();
        // A sample torn by a preemption between its sockets (a busy host) dates some
        // counts milliseconds before `at`: a round's rate from such a sample at its
        // window's start overstated the bottleneck by 5-10 %. Skipped, a few in a row
        // at most.
        let took = at.saturating_sub(before);
        if took > TORN_SAMPLE && self.torn_in_a_row < MAX_TORN_IN_A_ROW {
            self.torn_in_a_row += 1;
            if self.trace {
                eprintln!(
                    "pacer {:.3} sample torn ({took:?}), skipped",
                    at.as_secs_f64()
                );
            }
            return;
        }
        self.torn_in_a_row = 0;
        let n = self.socks.len().max(1) as u64;
        if let Some(jump) = self.jump.as_mut() {
            if !jump.validator.done() {
                let sample = JumpSample::of_streams(at, &samples);
                if self.trace {
                    let rtts = samples.iter().filter(|s| s.busy).map(|s| s.srtt);
                    eprintln!(
                        "pacer {:.3} jump {:?} delivery {} rtt median {:?} max {:?} in flight {}",
                        at.as_secs_f64(),
                        jump.validator.phase(),
                        sample.delivery_bps,
                        sample.srtt,
                        rtts.max(),
                        samples.iter().map(|s| s.in_flight_bytes).sum::<u64>(),
                    );
                }
                match jump.validator.on_sample(sample) {
                    // Still validating: the jump's pacing stays.
                    None => return,
                    Some(JumpAction::Confirm {
                        rate_bps,
                        path_loss,
                    }) => {
                        let cc = self
                            .probe
                            .resume_at(at, rate_bps, sample.retransmits, path_loss);
                        self.switch(cc, false, false);
                    }
                    Some(JumpAction::Retreat {
                        rate_bps, drain, ..
                    }) => {
                        jump.retreat = Some((at + drain, rate_bps));
                        self.probe = jump.fresh.clone();
                    }
                }
            }
            if let Some(jump) = self.jump.as_mut() {
                match jump.retreat {
                    Some((until, rate_bps)) if at < until => {
                        let caps = vec![Some(rate_bps / n); self.socks.len()];
                        self.apply(caps);
                        return;
                    }
                    Some(_) => {
                        jump.retreat = None;
                        let remembered = jump.validator.plan().remembered_bps;
                        self.probe.begin_after_retreat(at, remembered);
                        self.restart_congestion();
                    }
                    None => {}
                }
            }
        }
        let refilling = self.probe.refilling();
        let pacing = self.probe.on_sample(at, &samples);
        if self.trace {
            self.trace_sample(at, &samples, &pacing);
        }
        self.apply(pacing.per_stream_bps);
        // A refill's switches: its restart (under way after) and its return (before).
        let refill = refilling || self.probe.refilling();
        self.switch(pacing.congestion, pacing.restart_congestion, refill);
    }

    /// Sets each socket's pacing cap where it changed by more than half a percent.
    fn apply(&mut self, caps: Vec<Option<u64>>) {
        for ((s, applied), cap) in self.socks.iter().zip(&mut self.applied).zip(caps) {
            let want = cap.map_or(u64::MAX, |bps| (bps / 8).max(1));
            let differs = (want == u64::MAX) != (*applied == u64::MAX)
                || want.abs_diff(*applied) > *applied / 200;
            if differs && longhaul_sys::socket::set_max_pacing_rate(&**s, want).is_ok() {
                *applied = want;
            }
        }
    }

    /// Restarts every stream's congestion control where it stands, for the fresh start-up
    /// after a retreat: the kernel keeps a connection's BBR state through a loss, and a
    /// BBR that the retreat's stall left in its cruise with a small estimate of the path
    /// climbs by a quarter per eight round trips (a cp push on a 1 Gbit/s, 100 ms, 1e-3
    /// loss path whose emulator stalled for 250 ms in the jump's first round trip held
    /// 150-350 Mbit/s for the rest of the copy).
    fn restart_congestion(&mut self) {
        for s in &self.socks {
            if let Ok(cc) = longhaul_sys::socket::congestion(&**s) {
                restart(s, &cc);
            }
        }
        if self.trace {
            eprintln!("pacer: congestion control restarted after the retreat");
        }
    }

    /// Switches every stream's congestion control.
    /// `restart`: from the algorithm's first state (see [`restart`]). `refill`: for a
    /// refill of the windows (BBR's start-up, then back to the cruise), which leaves the
    /// cruise as it was.
    fn switch(&mut self, cc: Option<&'static str>, restart_it: bool, refill: bool) {
        let Some(cc) = cc else { return };
        for s in &self.socks {
            if restart_it {
                restart(s, cc);
            } else {
                let _ = longhaul_sys::socket::set_congestion(&**s, cc);
            }
        }
        if refill {
            if self.trace {
                let what = if restart_it { "restarted" } else { "back" };
                eprintln!("pacer: windows short of the held rate: {cc} {what}");
            }
            return;
        }
        let phase = self.probe.phase();
        if phase == longhaul_policy::probe::Phase::StartUp {
            // A start-up begun again after a burst of loss: no cruise yet.
            if self.trace {
                eprintln!("pacer: start-up begun again ({cc} restarted) after a repair");
            }
            return;
        }
        let competing = matches!(phase, longhaul_policy::probe::Phase::Compete { .. });
        self.cruise = Some(match &self.cruise {
            _ if competing => format!("{cc} (sharing the bottleneck with another flow)"),
            None => cc.to_string(),
            Some(_) => format!("{cc} (after non-congestive loss)"),
        });
    }

    fn trace_sample(&self, at: Duration, samples: &[StreamSample], pacing: &Pacing) {
        let rtt = samples.iter().filter(|s| s.busy).map(|s| s.srtt).min();
        let sent: Option<u64> = pacing.per_stream_bps.iter().copied().sum();
        eprintln!(
            "pacer {:.3} {:?} held {:?} pacing {:?} rtt {:?} delivery {} in flight {} resent {}",
            at.as_secs_f64(),
            self.probe.phase(),
            self.probe.held_bps(),
            sent,
            rtt,
            samples.iter().map(|s| s.delivery_bps).sum::<u64>(),
            samples.iter().map(|s| s.in_flight_bytes).sum::<u64>(),
            samples.iter().map(|s| s.retransmits).sum::<u64>(),
        );
    }
}

/// Sets a stream's congestion control to `cc` from its first state: setting the algorithm
/// a socket already runs does nothing, so it goes through another first. Through BBR where
/// the target is not BBR: BBR's start forgets the slow-start threshold earlier losses set,
/// so the target slow-starts again. Through reno to BBR: BBR's start-up doubles per round
/// trip again.
fn restart(s: &SecureStream, cc: &str) {
    let via = if cc == "bbr" { "reno" } else { "bbr" };
    if longhaul_sys::socket::set_congestion(s, via).is_err() {
        let _ = longhaul_sys::socket::set_congestion(s, "reno");
    }
    let _ = longhaul_sys::socket::set_congestion(s, cc);
}
