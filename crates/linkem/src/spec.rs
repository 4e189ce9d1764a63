//! Parsers for the command line's link specs, with no I/O: loss (`1e-4`, `0.5%`,
//! `ge:P,R,H,K`), probabilities, and the bottleneck buffer (`25MB`, `64MiB`, `1bdp`,
//! `500pkt`).

use std::time::Duration;

use longhaul_model::{units, ModelError};

use crate::config::{LossModel, QueueLimit};
use crate::error::LinkemError;

/// Parses a probability: a fraction in [0, 1] (`1e-4`, `0.25`) or a percentage (`0.01%`),
/// with the project's shared unit parser; the error is a sentence naming the input.
pub fn parse_probability(text: &str) -> Result<f64, String> {
    units::parse_probability(text).map_err(|e| e.to_string())
}

/// The bare problem of a unit error ("no number at the start"), for messages that list
/// the accepted forms themselves.
fn problem(e: ModelError) -> String {
    match e {
        ModelError::Unit { input, problem, .. } => format!("{input:?}: {problem}"),
        other => other.to_string(),
    }
}

/// Parses a loss spec: `none`/`0`, a Bernoulli probability (`1e-4`, `0.01%`), or
/// `ge:P,R[,H[,K]]` for Gilbert-Elliott with netem's gemodel parameters, each a
/// probability: P = P(good->bad), R = P(bad->good), H = loss probability in the bad
/// state (netem's 1-h, default 1), K = loss probability in the good state (netem's 1-k,
/// default 0).
pub fn parse_loss(spec: &str) -> Result<LossModel, LinkemError> {
    let err = |reason: String| LinkemError::LossSpec {
        spec: spec.to_string(),
        reason,
    };
    let t = spec.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(LossModel::None);
    }
    let ge = t
        .strip_prefix("ge:")
        .or_else(|| t.strip_prefix("GE:"))
        .or_else(|| t.strip_prefix("gemodel:"));
    let Some(params) = ge else {
        let p = units::parse_probability(t).map_err(|e| err(problem(e)))?;
        return Ok(if p == 0.0 {
            LossModel::None
        } else {
            LossModel::Bernoulli { p }
        });
    };
    let parts: Vec<&str> = params.split(',').collect();
    if !(2..=4).contains(&parts.len()) {
        return Err(err(format!(
            "ge: takes 2 to 4 comma-separated values, got {}",
            parts.len()
        )));
    }
    let mut values = [0.0, 0.0, 1.0, 0.0];
    for (i, part) in parts.iter().enumerate() {
        let name = ["P", "R", "H", "K"][i];
        values[i] =
            units::parse_probability(part).map_err(|e| err(format!("{name}: {}", problem(e))))?;
    }
    let [p, r, one_minus_h, one_minus_k] = values;
    Ok(LossModel::GilbertElliott {
        p,
        r,
        one_minus_h,
        one_minus_k,
    })
}

/// A bottleneck buffer as the user gave it, before the rate and RTT are known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BufferSpec {
    /// A size in bytes.
    Bytes(u64),
    /// A multiple of the bandwidth-delay product (rate x RTT).
    Bdp(f64),
    /// A number of packets (segments).
    Packets(u32),
}

impl BufferSpec {
    /// Turns the spec into a queue limit for a link of `rate_bps` and round-trip `rtt`.
    /// A BDP-relative buffer needs a rate; it is rounded up to whole bytes.
    pub fn resolve(&self, rate_bps: Option<u64>, rtt: Duration) -> Result<QueueLimit, LinkemError> {
        match *self {
            BufferSpec::Bytes(b) => Ok(QueueLimit::Bytes(b)),
            BufferSpec::Packets(p) => Ok(QueueLimit::Packets(p)),
            BufferSpec::Bdp(k) => {
                let rate = rate_bps.ok_or_else(|| LinkemError::BdpWithoutRate {
                    spec: format!("{k}bdp"),
                })?;
                let bdp = longhaul_model::buffers::bdp_bytes(rate, rtt) as f64;
                Ok(QueueLimit::Bytes((k * bdp).ceil() as u64))
            }
        }
    }
}

/// Parses a buffer spec: a size in bytes with the project's shared unit parser (`25MB`,
/// `64MiB`, `1.5GB`, `150000`), a multiple of the BDP (`1bdp`, `0.5bdp`, `bdp`), or a
/// packet count (`500pkt`, `500pkts`, `500packets`).
pub fn parse_buffer(spec: &str) -> Result<BufferSpec, LinkemError> {
    let err = |reason: String| LinkemError::BufferSpec {
        spec: spec.to_string(),
        reason,
    };
    let t = spec.trim();
    let lower = t.to_ascii_lowercase();
    if let Some(number) = lower.strip_suffix("bdp") {
        let number = number.trim();
        let k: f64 = if number.is_empty() {
            1.0
        } else {
            number
                .parse()
                .map_err(|_| err(format!("{number:?} is not a number")))?
        };
        if !k.is_finite() || k <= 0.0 || k > 1e6 {
            return Err(err(
                "the multiple of the BDP must be above 0 and at most 1e6".into(),
            ));
        }
        return Ok(BufferSpec::Bdp(k));
    }
    for unit in ["packets", "pkts", "pkt"] {
        if let Some(number) = lower.strip_suffix(unit) {
            let n: u32 = number
                .trim()
                .parse()
                .map_err(|_| err("a packet count is a whole number up to 4294967295".into()))?;
            if n == 0 {
                return Err(err("the buffer must hold at least one packet".into()));
            }
            return Ok(BufferSpec::Packets(n));
        }
    }
    let bytes = units::parse_bytes(t).map_err(|e| err(problem(e)))?;
    if bytes == 0 {
        return Err(err("the buffer must be larger than zero".into()));
    }
    Ok(BufferSpec::Bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("1e-4"), Ok(1e-4));
        assert_eq!(parse_probability("0.5"), Ok(0.5));
        assert!((parse_probability("0.01%").unwrap() - 1e-4).abs() < 1e-18);
        assert_eq!(parse_probability(" 100% "), Ok(1.0));
        for bad in ["", "x", "1.5", "-0.1", "101%", "NaN", "inf"] {
            assert!(parse_probability(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn loss_specs() {
        assert_eq!(parse_loss("1e-4"), Ok(LossModel::Bernoulli { p: 1e-4 }));
        assert_eq!(parse_loss("0"), Ok(LossModel::None));
        assert_eq!(parse_loss("none"), Ok(LossModel::None));
        assert_eq!(
            parse_loss("ge:0.01,0.3,0.9,0.001"),
            Ok(LossModel::GilbertElliott {
                p: 0.01,
                r: 0.3,
                one_minus_h: 0.9,
                one_minus_k: 0.001
            })
        );
        assert_eq!(
            parse_loss("ge:1%,30%"),
            Ok(LossModel::GilbertElliott {
                p: 0.01,
                r: 0.3,
                one_minus_h: 1.0,
                one_minus_k: 0.0
            })
        );
        for bad in [
            "2",
            "ge:",
            "ge:0.1",
            "ge:0.1,0.2,0.3,0.4,0.5",
            "ge:0.1,x",
            "gx:1,2",
        ] {
            let e = parse_loss(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad:?}: {e}");
        }
    }

    #[test]
    fn buffer_specs() {
        assert_eq!(parse_buffer("25MB"), Ok(BufferSpec::Bytes(25_000_000)));
        assert_eq!(parse_buffer("64MiB"), Ok(BufferSpec::Bytes(64 << 20)));
        assert_eq!(parse_buffer("150000"), Ok(BufferSpec::Bytes(150_000)));
        assert_eq!(parse_buffer("1500B"), Ok(BufferSpec::Bytes(1500)));
        assert_eq!(parse_buffer("1.5kB"), Ok(BufferSpec::Bytes(1500)));
        assert_eq!(parse_buffer("1bdp"), Ok(BufferSpec::Bdp(1.0)));
        assert_eq!(parse_buffer("bdp"), Ok(BufferSpec::Bdp(1.0)));
        assert_eq!(parse_buffer("0.5bdp"), Ok(BufferSpec::Bdp(0.5)));
        assert_eq!(parse_buffer("500pkt"), Ok(BufferSpec::Packets(500)));
        assert_eq!(parse_buffer("500 pkts"), Ok(BufferSpec::Packets(500)));
        assert_eq!(parse_buffer("2packets"), Ok(BufferSpec::Packets(2)));
        for bad in [
            "", "MB", "0MB", "-5MB", "25XB", "1.5pkt", "0pkt", "1e30EB", "25Mb", "0bdp", "xbdp",
        ] {
            let e = parse_buffer(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{bad:?}: {e}");
        }
    }

    #[test]
    fn bdp_resolves_against_rate_and_rtt() {
        let q = BufferSpec::Bdp(1.0)
            .resolve(Some(1_000_000_000), Duration::from_millis(200))
            .unwrap();
        assert_eq!(q, QueueLimit::Bytes(25_000_000));
        assert!(BufferSpec::Bdp(1.0)
            .resolve(None, Duration::from_millis(200))
            .is_err());
        assert_eq!(
            BufferSpec::Packets(9).resolve(None, Duration::ZERO),
            Ok(QueueLimit::Packets(9))
        );
    }
}
