//! What one direction of an emulated link looks like: rate, bottleneck buffer, delay,
//! jitter, loss, reordering and duplication, with validation.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::LinkemError;

/// The largest rate the model accepts (10 Tbit/s); keeps the fixed-point arithmetic exact.
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;
/// The largest one-way delay or jitter bound the model accepts (60 s).
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// One direction of a link. Build it with [`LinkConfig::default`] (an ideal link: no rate
/// limit, no delay, no loss) and set the fields you need, then check it with
/// [`LinkConfig::validate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkConfig {
    /// Bottleneck rate in bits per second counted over the wire bytes of each segment
    /// (plus [`LinkConfig::per_segment_overhead_bytes`]); `None` = unlimited (no queue).
    pub rate_bps: Option<u64>,
    /// The drop-tail bottleneck buffer in front of the rate limiter.
    pub queue: QueueLimit,
    /// Fixed one-way propagation delay, added after the bottleneck.
    pub delay: Duration,
    /// Random variation of the delay; packets stay in order unless `reorder` is set.
    pub jitter: Option<Jitter>,
    /// Random loss, drawn per segment after the bottleneck (on the "long wire").
    pub loss: LossModel,
    /// Reordering: some packets are held back and overtaken by later ones.
    pub reorder: Option<Reorder>,
    /// Probability that a packet (all its surviving segments) is delivered twice.
    pub duplicate: f64,
    /// Extra bytes counted per segment for the rate and the buffer (e.g. 38 for Ethernet
    /// framing, preamble and inter-frame gap); 0 counts IP packets as they are.
    pub per_segment_overhead_bytes: u32,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_bps: None,
            queue: QueueLimit::Unlimited,
            delay: Duration::ZERO,
            jitter: None,
            loss: LossModel::None,
            reorder: None,
            duplicate: 0.0,
            per_segment_overhead_bytes: 0,
        }
    }
}

/// The size of the drop-tail bottleneck buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueLimit {
    /// No limit: nothing is ever dropped at the queue.
    Unlimited,
    /// At most this many bytes waiting or in transmission (counted as remaining work).
    Bytes(u64),
    /// At most this many segments waiting or in transmission.
    Packets(u32),
}

impl std::fmt::Display for QueueLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueLimit::Unlimited => write!(f, "unlimited"),
            QueueLimit::Bytes(b) => write!(f, "{b}B"),
            QueueLimit::Packets(p) => write!(f, "{p}pkt"),
        }
    }
}

/// How the delay varies from packet to packet. The drawn offset is added to the fixed
/// delay and the sum is clamped at zero; without [`Reorder`] a packet is never released
/// before the one ahead of it (release = max(drawn release, previous release)), so jitter
/// bunches packets instead of reordering them. Consequence: when packets follow each other
/// much more closely than the jitter bound (bulk TCP), most of them wait for the latest
/// draw so far and their delay approaches delay + bound; sparse packets (ping) see the
/// full spread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Jitter {
    /// Uniform in [-max, +max].
    Uniform {
        /// The bound of the offset.
        max: Duration,
    },
    /// Normal with standard deviation `sigma`, truncated at +-3 sigma.
    Normal {
        /// The standard deviation of the offset.
        sigma: Duration,
    },
    /// An offset that wanders over time within [-max, +max]: linear between values drawn
    /// uniformly every 4 x max, so it changes at most half as fast as time passes. Packets
    /// keep their order by themselves, dense traffic sees the whole spread, and the mean
    /// delay stays at the configured delay (unlike `Uniform` under dense traffic).
    Wander {
        /// The bound of the offset.
        max: Duration,
    },
}

impl Jitter {
    /// The largest absolute offset this jitter can draw.
    pub fn bound(&self) -> Duration {
        match *self {
            Jitter::Uniform { max } | Jitter::Wander { max } => max,
            Jitter::Normal { sigma } => sigma.saturating_mul(3),
        }
    }
}

/// Random loss, drawn once per segment that left the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum LossModel {
    /// No random loss.
    None,
    /// Each segment is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert-Elliott two-state loss with netem's `gemodel p r 1-h 1-k` parameters
    /// (as fractions, not percentages). The stationary loss rate is
    /// pi_G (1-k) + pi_B (1-h) with pi_B = p / (p + r); with `one_minus_h` = 1 and
    /// `one_minus_k` = 0 (the simple Gilbert model) the mean loss burst is 1/r segments.
    GilbertElliott {
        /// P(good -> bad) per segment.
        p: f64,
        /// P(bad -> good) per segment.
        r: f64,
        /// Loss probability in the bad state.
        one_minus_h: f64,
        /// Loss probability in the good state.
        one_minus_k: f64,
    },
}

impl LossModel {
    /// The long-run fraction of segments this model loses.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                if p + r == 0.0 {
                    // Never leaves the initial (good) state.
                    return one_minus_k;
                }
                let pi_bad = p / (p + r);
                (1.0 - pi_bad) * one_minus_k + pi_bad * one_minus_h
            }
        }
    }
}

/// Reordering: with probability `probability` a packet is held back by an extra `extra`
/// delay and released out of order, so later packets overtake it. Packets not chosen keep
/// FIFO order among themselves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reorder {
    /// Fraction of packets held back.
    pub probability: f64,
    /// How long a chosen packet is held back beyond its normal release.
    pub extra: Duration,
}

impl LinkConfig {
    /// Checks every field; `mtu_bytes` is the largest packet the link will carry (the
    /// buffer must hold at least one).
    pub fn validate(&self, mtu_bytes: u32) -> Result<(), LinkemError> {
        match self.rate_bps {
            Some(0) => return Err(LinkemError::ZeroRate),
            Some(r) if r > MAX_RATE_BPS => {
                return Err(LinkemError::RateTooHigh {
                    rate_bps: r,
                    max_bps: MAX_RATE_BPS,
                })
            }
            _ => {}
        }
        check_duration("delay", self.delay)?;
        if let Some(j) = self.jitter {
            check_duration("jitter bound", j.bound())?;
        }
        let fits = match self.queue {
            QueueLimit::Unlimited => true,
            QueueLimit::Bytes(b) => {
                b >= u64::from(mtu_bytes) + u64::from(self.per_segment_overhead_bytes)
            }
            QueueLimit::Packets(p) => p >= 1,
        };
        if !fits {
            return Err(LinkemError::BufferBelowMtu {
                limit: self.queue.to_string(),
                mtu_bytes,
            });
        }
        match self.loss {
            LossModel::None => {}
            LossModel::Bernoulli { p } => check_probability("loss", p)?,
            LossModel::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                check_probability("ge P (good->bad)", p)?;
                check_probability("ge R (bad->good)", r)?;
                check_probability("ge H (loss in bad state)", one_minus_h)?;
                check_probability("ge K (loss in good state)", one_minus_k)?;
            }
        }
        if let Some(ro) = self.reorder {
            check_probability("reorder", ro.probability)?;
            check_duration("reorder extra delay", ro.extra)?;
        }
        check_probability("duplicate", self.duplicate)?;
        Ok(())
    }
}

fn check_probability(what: &'static str, p: f64) -> Result<(), LinkemError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(LinkemError::Probability {
            what,
            value: p.to_string(),
        })
    }
}

fn check_duration(what: &'static str, d: Duration) -> Result<(), LinkemError> {
    if d <= MAX_DELAY {
        Ok(())
    } else {
        Err(LinkemError::DurationTooLong {
            what,
            value_ns: d.as_nanos(),
            max_ns: MAX_DELAY.as_nanos(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        LinkConfig::default().validate(65535).unwrap();
    }

    #[test]
    fn rejects_out_of_range_values() {
        let bad = [
            LinkConfig {
                rate_bps: Some(0),
                ..Default::default()
            },
            LinkConfig {
                rate_bps: Some(MAX_RATE_BPS + 1),
                ..Default::default()
            },
            LinkConfig {
                delay: Duration::from_secs(61),
                ..Default::default()
            },
            LinkConfig {
                loss: LossModel::Bernoulli { p: 1.5 },
                ..Default::default()
            },
            LinkConfig {
                loss: LossModel::Bernoulli { p: f64::NAN },
                ..Default::default()
            },
            LinkConfig {
                duplicate: -0.1,
                ..Default::default()
            },
            LinkConfig {
                queue: QueueLimit::Bytes(1499),
                ..Default::default()
            },
            LinkConfig {
                queue: QueueLimit::Packets(0),
                ..Default::default()
            },
        ];
        for cfg in bad {
            assert!(cfg.validate(1500).is_err(), "{cfg:?} accepted");
        }
    }

    #[test]
    fn buffer_error_names_value_and_mtu() {
        let cfg = LinkConfig {
            queue: QueueLimit::Bytes(1000),
            ..Default::default()
        };
        let msg = cfg.validate(9000).unwrap_err().to_string();
        assert!(msg.contains("1000B") && msg.contains("9000"), "{msg}");
    }

    #[test]
    fn gilbert_elliott_mean_loss() {
        let ge = LossModel::GilbertElliott {
            p: 0.01,
            r: 0.09,
            one_minus_h: 0.5,
            one_minus_k: 0.001,
        };
        let want = 0.9 * 0.001 + 0.1 * 0.5;
        assert!((ge.mean_loss() - want).abs() < 1e-12);
    }
}
