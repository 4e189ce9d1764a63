//! Parsers for the command line's link specs, with no I/O: loss (`1e-4`, `0.5%`,
//! `ge:P,R,H,K`), probabilities, and the bottleneck buffer (`25MB`, `64MiB`, `1bdp`,
//! `500pkt`).

use std::time::Duration;

use crate::config::{LossModel, QueueLimit};
use crate::error::LinkemError;

/// Parses a probability: a fraction in [0, 1] (`1e-4`, `0.25`) or a percentage (`0.01%`).
pub fn parse_probability(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    let v: f64 = number
        .parse()
        .map_err(|_| format!("{t:?} is not a number"))?;
    let p = v * scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("{t:?} is outside [0, 1] (or [0%, 100%])"));
    }
    Ok(p)
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
        let p = parse_probability(t).map_err(err)?;
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
        values[i] = parse_probability(part).map_err(|e| err(format!("{name}: {e}")))?;
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
                let bdp = rate as f64 * rtt.as_secs_f64() / 8.0;
                Ok(QueueLimit::Bytes((k * bdp).ceil() as u64))
            }
        }
    }
}

/// Parses a buffer spec: a size (`25MB`, `64MiB`, `1.5GB`, `150000B`, `150000`; decimal
/// k/M/G and binary Ki/Mi/Gi prefixes, bytes), a multiple of the BDP (`1bdp`, `0.5bdp`,
/// `bdp`), or a packet count (`500pkt`, `500pkts`, `500p`).
pub fn parse_buffer(spec: &str) -> Result<BufferSpec, LinkemError> {
    let err = |reason: &str| LinkemError::BufferSpec {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let t = spec.trim();
    let lower = t.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '_'))
        .unwrap_or(lower.len());
    // "e" is part of a number only when followed by a digit or sign (1e6); "1bdp" has none.
    let (number, unit) = lower.split_at(split);
    let unit = unit.trim();
    let number = number.replace('_', "");
    let value: f64 = if number.is_empty() && unit == "bdp" {
        1.0
    } else {
        number
            .parse()
            .map_err(|_| err("no number in front of the unit"))?
    };
    if !value.is_finite() || value <= 0.0 {
        return Err(err("the buffer must be larger than zero"));
    }
    let bytes = |scale: f64| -> Result<BufferSpec, LinkemError> {
        let b = (value * scale).round();
        if b > u64::MAX as f64 / 2.0 {
            return Err(err("too large"));
        }
        Ok(BufferSpec::Bytes(b as u64))
    };
    match unit {
        "" | "b" => bytes(1.0),
        "k" | "kb" => bytes(1e3),
        "m" | "mb" => bytes(1e6),
        "g" | "gb" => bytes(1e9),
        "ki" | "kib" => bytes(1024.0),
        "mi" | "mib" => bytes(1024.0 * 1024.0),
        "gi" | "gib" => bytes(1024.0 * 1024.0 * 1024.0),
        "bdp" | "xbdp" => Ok(BufferSpec::Bdp(value)),
        "p" | "pkt" | "pkts" | "packets" => {
            if value.fract() != 0.0 || value > f64::from(u32::MAX) {
                return Err(err("a packet count is a whole number up to 4294967295"));
            }
            Ok(BufferSpec::Packets(value as u32))
        }
        _ => Err(err("unknown unit")),
    }
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
        for bad in ["", "MB", "0MB", "-5MB", "25XB", "1.5pkt", "1e30GB"] {
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
