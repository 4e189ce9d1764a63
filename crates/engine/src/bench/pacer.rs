//! Holds a sender's pacing to the bottleneck: samples TCP_INFO of every stream several
//! times a round trip ([`RateProbe::sample_every`]), feeds the [`RateProbe`] and applies
//! what it decides (each stream's pacing cap, a congestion-control switch). Used by bench
//! runs and by `longhaul cp`'s sender.

use crate::transport::secure::SecureStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use longhaul_sys::tcp_info::tcp_info;

use longhaul_policy::{RateProbe, StreamSample};

/// The controller and what it applied, over a set of sockets.
pub struct Pacer {
    socks: Vec<Arc<SecureStream>>,
    probe: RateProbe,
    start: Instant,
    /// The pacing cap last set on each socket (bytes/s; `u64::MAX`: none).
    applied: Vec<u64>,
    cruise: Option<String>,
    /// `LONGHAUL_PACER_TRACE` is set: every sample and decision goes to stderr.
    trace: bool,
}

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
            trace: std::env::var_os("LONGHAUL_PACER_TRACE").is_some(),
        }
    }

    /// How often [`Pacer::step`] should run.
    pub fn every(&self) -> Duration {
        self.probe.sample_every()
    }

    /// The rate held after the start-up (all streams, bit/s).
    pub fn held_bps(&self) -> Option<u64> {
        self.probe.held_bps()
    }

    /// The largest rate held so far (bit/s).
    pub fn peak_held_bps(&self) -> Option<u64> {
        self.probe.peak_held_bps()
    }

    /// The controller (its phase, the start-up's exit, the minimum RTT).
    pub fn probe(&self) -> &RateProbe {
        &self.probe
    }

    /// The congestion control the held run cruises on, if the controller switched it.
    pub fn cruise(&self) -> Option<&str> {
        self.cruise.as_deref()
    }

    /// Samples every stream, feeds the controller and applies its pacing.
    pub fn step(&mut self) {
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
                    busy: i.unacked > 0 || i.notsent_bytes > 0,
                },
                Err(_) => StreamSample::default(),
            })
            .collect();
        let at = self.start.elapsed();
        let pacing = self.probe.on_sample(at, &samples);
        if self.trace {
            let rtt = samples.iter().filter(|s| s.busy).map(|s| s.srtt).min();
            let sent: Option<u64> = pacing.per_stream_bps.iter().copied().sum();
            eprintln!(
                "pacer {:.3} {:?} held {:?} pacing {:?} rtt {:?} delivery {}",
                at.as_secs_f64(),
                self.probe.phase(),
                self.probe.held_bps(),
                sent,
                rtt,
                samples.iter().map(|s| s.delivery_bps).sum::<u64>()
            );
        }
        for ((s, applied), cap) in self
            .socks
            .iter()
            .zip(&mut self.applied)
            .zip(pacing.per_stream_bps)
        {
            let want = cap.map_or(u64::MAX, |bps| (bps / 8).max(1));
            // Only changes of more than half a percent reach the kernel.
            let differs = (want == u64::MAX) != (*applied == u64::MAX)
                || want.abs_diff(*applied) > *applied / 200;
            if differs && longhaul_sys::socket::set_max_pacing_rate(&**s, want).is_ok() {
                *applied = want;
            }
        }
        if let Some(cc) = pacing.congestion {
            for s in &self.socks {
                let _ = longhaul_sys::socket::set_congestion(&**s, cc);
            }
            self.cruise = Some(match &self.cruise {
                None => cc.to_string(),
                Some(_) => format!("{cc} (after non-congestive loss)"),
            });
        }
    }
}
