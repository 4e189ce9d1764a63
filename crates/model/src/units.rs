//! Human units at the edge: parse what users type (`10G`, `250ms`, `64MiB`, `28983km`,
//! `1e-6`) into plain numbers with the unit in the name, and format numbers back for people
//! (`1.00 Gbit/s`, `45.0 MB`, `180 ms`).
//!
//! Conventions, shared by every longhaul command:
//! - Rates are bits per second. Prefixes are SI (`1G` = 1e9 bit/s); `Ki`/`Mi`/`Gi`/... are
//!   binary. A bare number is bit/s (`1e9`). A capital `B` means bytes (`125MB/s` = 1 Gbit/s).
//!   `/s` and `ps` suffixes are optional (`10Gbit/s`, `10Gbps`, `10Gbit`, `10G`).
//! - Sizes are bytes. `k`/`K`, `M`, `G`, `T`, `P`, `E` are SI (`25MB` = 25e6 bytes),
//!   `KiB`, `MiB`, ... are binary (`64MiB` = 64 x 2^20). The `B` is optional (`64Mi`, `25M`).
//! - Durations need a unit: `ns`, `us` (or `µs`), `ms`, `s`, `min` (or `m`), `h`, `d`.
//! - Distances need a unit: `m`, `km`, `mi` (statute mile, 1609.344 m).
//! - Probabilities are a fraction (`1e-6`, `0.001`) or a percentage (`0.1%`).
//!
//! Formatting uses three significant digits and the largest prefix that keeps the number
//! at or above 1, so `parse(format(x))` gives `x` back to within 0.5 %.

use crate::ModelError;
use std::time::Duration;

/// Accepted forms of a rate, quoted in error messages.
pub const RATE_FORMS: &str = "write a rate in bit/s such as 10G, 1Gbit, 500M, 2.5Gbit/s, \
     1e9 (SI: 1G = 1e9 bit/s; Gi = 2^30) or in bytes per second with a capital B, e.g. 125MB/s";
/// Accepted forms of a duration, quoted in error messages.
pub const DURATION_FORMS: &str =
    "write a duration with a unit such as 250ms, 30s, 1.5h, 180us, 2min, 1d";
/// Accepted forms of a size, quoted in error messages.
pub const SIZE_FORMS: &str = "write a size in bytes such as 64MiB, 25MB, 2GiB, 1PB, 1500 \
     (SI: 1MB = 1e6 bytes; binary: 1MiB = 2^20 bytes)";
/// Accepted forms of a distance, quoted in error messages.
pub const DISTANCE_FORMS: &str = "write a distance with a unit such as 28983km, 100mi, 500m";
/// Accepted forms of a probability, quoted in error messages.
pub const PROBABILITY_FORMS: &str =
    "write a probability between 0 and 1 such as 1e-6 or 0.001, or a percentage such as 0.1%";

/// Meters in one statute mile.
pub const METERS_PER_MILE: f64 = 1609.344;

/// Parses a rate into bits per second, e.g. `"10G"` -> 10_000_000_000.
///
/// Accepts SI and binary prefixes, an optional `bit`/`b` (bits) or `B`/`byte` (bytes, x 8),
/// and an optional `/s` or `ps`. A bare number is bit/s. Rounds to the nearest bit/s;
/// fails on zero, negative, non-finite or larger than u64 values.
pub fn parse_rate_bps(input: &str) -> Result<u64, ModelError> {
    let err = |problem: String| unit_error("rate", input, problem, RATE_FORMS);
    let (value, unit) = split_number(input).map_err(err)?;
    let mut unit = unit;
    // "/s" and "ps" (as in Gbps / GBps) mean "per second": drop them.
    if let Some(rest) = unit.strip_suffix("/s") {
        unit = rest;
    } else if let Some(rest) = unit.strip_suffix("ps") {
        if rest.ends_with('b') || rest.ends_with('B') {
            unit = rest;
        }
    }
    let (multiplier, rest) = split_prefix(unit, true);
    let bits_per_unit = match rest {
        "" | "b" | "bit" | "bits" => 1.0,
        "B" | "byte" | "bytes" => 8.0,
        _ => return Err(err(format!("unknown unit {unit:?}"))),
    };
    let bps = value * multiplier * bits_per_unit;
    if bps < 0.5 {
        return Err(err("a rate must be at least 1 bit/s".into()));
    }
    to_u64(bps).ok_or_else(|| err("too large".into()))
}

/// Parses a duration with a unit, e.g. `"250ms"`, `"1.5h"`, `"180us"`.
///
/// A bare number is refused: `180` could be seconds or milliseconds.
pub fn parse_duration(input: &str) -> Result<Duration, ModelError> {
    let err = |problem: String| unit_error("duration", input, problem, DURATION_FORMS);
    let (value, unit) = split_number(input).map_err(err)?;
    let seconds_per_unit = match unit {
        "" => return Err(err("missing unit".into())),
        "ns" => 1e-9,
        "us" | "µs" | "μs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        _ => return Err(err(format!("unknown unit {unit:?}"))),
    };
    Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| err("too large".into()))
}

/// Parses a size into bytes, e.g. `"64MiB"` -> 67_108_864, `"25MB"` -> 25_000_000.
///
/// The trailing `B` is optional; a bare number is bytes. Rounds to the nearest byte.
pub fn parse_bytes(input: &str) -> Result<u64, ModelError> {
    let err = |problem: String| unit_error("size", input, problem, SIZE_FORMS);
    let (value, unit) = split_number(input).map_err(err)?;
    let (multiplier, rest) = split_prefix(unit, false);
    match rest {
        "" | "B" | "byte" | "bytes" => {}
        "b" | "bit" | "bits" => {
            return Err(err(format!(
                "{unit:?} is bits; sizes are in bytes (use B, e.g. 25MB)"
            )))
        }
        _ => return Err(err(format!("unknown unit {unit:?}"))),
    }
    to_u64(value * multiplier).ok_or_else(|| err("too large".into()))
}

/// Parses a distance into meters, e.g. `"28983km"` -> 28_983_000.0.
pub fn parse_distance_m(input: &str) -> Result<f64, ModelError> {
    let err = |problem: String| unit_error("distance", input, problem, DISTANCE_FORMS);
    let (value, unit) = split_number(input).map_err(err)?;
    let meters_per_unit = match unit {
        "" => return Err(err("missing unit".into())),
        "m" => 1.0,
        "km" => 1000.0,
        "mi" | "mile" | "miles" => METERS_PER_MILE,
        _ => return Err(err(format!("unknown unit {unit:?}"))),
    };
    Ok(value * meters_per_unit)
}

/// Parses a probability, e.g. `"1e-6"` -> 1e-6, `"0.1%"` -> 0.001. Must lie in [0, 1].
pub fn parse_probability(input: &str) -> Result<f64, ModelError> {
    let err = |problem: String| unit_error("probability", input, problem, PROBABILITY_FORMS);
    let (value, unit) = split_number(input).map_err(err)?;
    let p = match unit {
        "" => value,
        "%" => value / 100.0,
        _ => return Err(err(format!("unknown unit {unit:?}"))),
    };
    if p > 1.0 {
        return Err(err("more than 1 (100 %)".into()));
    }
    Ok(p)
}

/// Formats a rate in bit/s with three significant digits: `1e9` -> `"1.00 Gbit/s"`.
pub fn format_rate_bps(rate_bps: f64) -> String {
    format!("{}bit/s", scaled_si(rate_bps))
}

/// Formats a size in bytes with SI prefixes: `45e6` -> `"45.0 MB"`.
pub fn format_bytes(bytes: f64) -> String {
    format!("{}B", scaled_si(bytes))
}

/// Formats a size in bytes with binary prefixes: `4194304` -> `"4.00 MiB"`.
pub fn format_bytes_binary(bytes: f64) -> String {
    const PREFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut value = bytes;
    let mut i = 0;
    while value.abs() >= 1023.5 && i + 1 < PREFIXES.len() {
        value /= 1024.0;
        i += 1;
    }
    if i == 0 {
        return format!("{} B", three_digits(value));
    }
    format!("{} {}B", three_digits(value), PREFIXES[i])
}

/// Formats a duration: `"180 us"`, `"250 ms"`, `"30.0 s"`, `"37.3 min"`, `"1.24 h"`, `"3.00 d"`.
pub fn format_duration(duration: Duration) -> String {
    format_seconds(duration.as_secs_f64())
}

/// Formats a number of seconds like [`format_duration`]; also takes infinity (`"forever"`).
pub fn format_seconds(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "forever".into();
    }
    let (value, unit) = if seconds < 1e-6 {
        (seconds * 1e9, "ns")
    } else if seconds < 1e-3 {
        (seconds * 1e6, "us")
    } else if seconds < 1.0 {
        (seconds * 1e3, "ms")
    } else if seconds < 60.0 {
        (seconds, "s")
    } else if seconds < 3600.0 {
        (seconds / 60.0, "min")
    } else if seconds < 86400.0 {
        (seconds / 3600.0, "h")
    } else {
        (seconds / 86400.0, "d")
    };
    format!("{} {unit}", three_digits(value))
}

/// Formats a distance in meters: `28_983_000.0` -> `"28983 km"`, `500.0` -> `"500 m"`.
pub fn format_distance_m(meters: f64) -> String {
    if meters >= 1000.0 {
        let km = meters / 1000.0;
        if km >= 1000.0 {
            format!("{km:.0} km")
        } else {
            format!("{} km", three_digits(km))
        }
    } else {
        format!("{} m", three_digits(meters))
    }
}

/// Formats a Land Speed Record metric: `1.249e17` -> `"124.9 Pbit·m/s"` (four digits,
/// as records are compared to within 10 %).
pub fn format_bit_meters_per_second(bit_m_per_s: f64) -> String {
    let (value, prefix) = si_scale(bit_m_per_s);
    format!("{value:.1} {prefix}bit·m/s")
}

/// Formats a probability in scientific notation: `2.01e-8`.
pub fn format_probability(p: f64) -> String {
    format!("{p:.2e}")
}

fn unit_error(
    kind: &'static str,
    input: &str,
    problem: String,
    accepted: &'static str,
) -> ModelError {
    ModelError::Unit {
        kind,
        input: input.to_string(),
        problem,
        accepted,
    }
}

/// Splits `"2.5 Gbit/s"` into `(2.5, "Gbit/s")`. The number may use `_` as a digit
/// separator and an exponent (`1e9`); it must be finite and not negative.
fn split_number(input: &str) -> Result<(f64, &str), String> {
    let text = input.trim();
    if text.is_empty() {
        return Err("empty".into());
    }
    let bytes = text.as_bytes();
    let mut end = 0;
    let digits = |end: &mut usize| {
        let start = *end;
        while *end < bytes.len() && (bytes[*end].is_ascii_digit() || bytes[*end] == b'_') {
            *end += 1;
        }
        *end > start
    };
    if end < bytes.len() && bytes[end] == b'+' {
        end += 1;
    }
    if end < bytes.len() && bytes[end] == b'-' {
        return Err("negative".into());
    }
    let mut any = digits(&mut end);
    if end < bytes.len() && bytes[end] == b'.' {
        end += 1;
        any |= digits(&mut end);
    }
    if !any {
        return Err("no number at the start".into());
    }
    // An exponent only when 'e' is followed by digits: "1e9" yes, "1EB" (exabyte) no.
    if end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
        let mut probe = end + 1;
        if probe < bytes.len() && (bytes[probe] == b'+' || bytes[probe] == b'-') {
            probe += 1;
        }
        if probe < bytes.len() && bytes[probe].is_ascii_digit() {
            end = probe;
            digits(&mut end);
        }
    }
    let number: String = text[..end].chars().filter(|&c| c != '_').collect();
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{:?} is not a number", &text[..end]))?;
    if !value.is_finite() {
        return Err("too large".into());
    }
    Ok((value, text[end..].trim()))
}

/// Splits an SI (`k`, `K`, `M`, `G`, `T`, `P`, `E`) or binary (`Ki`, `Mi`, ...) prefix off
/// a unit. With `lower_case_ok`, `m`, `g`, `t`, `p` are also taken as SI prefixes (as iperf
/// does for rates); without it, they are left for the caller (meters, bits).
fn split_prefix(unit: &str, lower_case_ok: bool) -> (f64, &str) {
    let mut chars = unit.chars();
    let Some(first) = chars.next() else {
        return (1.0, unit);
    };
    let power = match first {
        'k' | 'K' => 1,
        'M' => 2,
        'G' => 3,
        'T' => 4,
        'P' => 5,
        'E' => 6,
        'm' if lower_case_ok => 2,
        'g' if lower_case_ok => 3,
        't' if lower_case_ok => 4,
        'p' if lower_case_ok => 5,
        _ => return (1.0, unit),
    };
    let rest = chars.as_str();
    // "E" alone or "EB" is exa, but "e" never reaches here (it is read as an exponent or
    // refused). "Bytes"/"bit" start with B/b, not a prefix, so no clash.
    if let Some(after) = rest.strip_prefix('i') {
        return (1024f64.powi(power), after);
    }
    (1000f64.powi(power), rest)
}

fn to_u64(value: f64) -> Option<u64> {
    let rounded = value.round();
    // u64::MAX as f64 rounds up to 2^64, which does not fit: compare with <.
    if rounded.is_finite() && rounded >= 0.0 && rounded < u64::MAX as f64 {
        Some(rounded as u64)
    } else {
        None
    }
}

/// Scales to the SI prefix that leaves 1 <= value < 1000 and returns `"1.00 G"`-style text.
fn scaled_si(value: f64) -> String {
    let (scaled, prefix) = si_scale(value);
    format!("{} {prefix}", three_digits(scaled))
}

fn si_scale(value: f64) -> (f64, &'static str) {
    const PREFIXES: [&str; 8] = ["", "k", "M", "G", "T", "P", "E", "Z"];
    let mut scaled = value;
    let mut i = 0;
    // 999.5 would print as "1000": move it to the next prefix instead.
    while scaled.abs() >= 999.5 && i + 1 < PREFIXES.len() {
        scaled /= 1000.0;
        i += 1;
    }
    (scaled, PREFIXES[i])
}

/// Three significant digits for 0 <= value < 1000: "1.00", "45.0", "180".
fn three_digits(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude == 0.0 {
        "0".into()
    } else if magnitude < 9.995 {
        format!("{value:.2}")
    } else if magnitude < 99.95 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rates_in_common_spellings() {
        assert_eq!(parse_rate_bps("10G").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate_bps("1Gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate_bps("1Gbit/s").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate_bps("1 Gbps").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate_bps("500M").unwrap(), 500_000_000);
        assert_eq!(parse_rate_bps("500m").unwrap(), 500_000_000);
        assert_eq!(parse_rate_bps("1e9").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate_bps("2.5G").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate_bps("125MB/s").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate_bps("1Gibit").unwrap(), 1 << 30);
        assert_eq!(parse_rate_bps("100k").unwrap(), 100_000);
    }

    #[test]
    fn rate_errors_name_the_value_and_the_forms() {
        let msg = parse_rate_bps("10X").unwrap_err().to_string();
        assert!(msg.contains("\"10X\""), "{msg}");
        assert!(msg.contains("unknown unit \"X\""), "{msg}");
        assert!(msg.contains("10G"), "{msg}");
        assert!(parse_rate_bps("").is_err());
        assert!(parse_rate_bps("-1G").is_err());
        assert!(parse_rate_bps("0").is_err());
        assert!(parse_rate_bps("G").is_err());
        assert!(parse_rate_bps("1e400").is_err());
        assert!(parse_rate_bps("1e30").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("180us").unwrap(), Duration::from_micros(180));
        assert_eq!(parse_duration("180µs").unwrap(), Duration::from_micros(180));
        assert_eq!(parse_duration("2min").unwrap(), Duration::from_secs(120));
        let msg = parse_duration("180").unwrap_err().to_string();
        assert!(
            msg.contains("missing unit") && msg.contains("250ms"),
            "{msg}"
        );
        assert!(parse_duration("1e30d").is_err());
    }

    #[test]
    fn sizes_si_and_binary() {
        assert_eq!(parse_bytes("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_bytes("25MB").unwrap(), 25_000_000);
        assert_eq!(parse_bytes("25M").unwrap(), 25_000_000);
        assert_eq!(parse_bytes("1PB").unwrap(), 1_000_000_000_000_000);
        assert_eq!(parse_bytes("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_bytes("1500").unwrap(), 1500);
        assert_eq!(parse_bytes("1EB").unwrap(), 1_000_000_000_000_000_000);
        assert_eq!(parse_bytes("4k").unwrap(), 4000);
        let msg = parse_bytes("25Mb").unwrap_err().to_string();
        assert!(msg.contains("bits"), "{msg}");
        assert!(parse_bytes("100EB").is_err());
    }

    #[test]
    fn distances_and_probabilities() {
        assert_eq!(parse_distance_m("28983km").unwrap(), 28_983_000.0);
        assert!((parse_distance_m("100mi").unwrap() - 160_934.4).abs() < 1e-6);
        assert_eq!(parse_distance_m("500m").unwrap(), 500.0);
        assert!(parse_distance_m("28983").is_err());
        assert_eq!(parse_probability("1e-6").unwrap(), 1e-6);
        assert!((parse_probability("0.1%").unwrap() - 0.001).abs() < 1e-15);
        assert!(parse_probability("2").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(format_rate_bps(1e9), "1.00 Gbit/s");
        assert_eq!(format_rate_bps(142e6), "142 Mbit/s");
        assert_eq!(format_bytes(45e6), "45.0 MB");
        assert_eq!(format_bytes(999.7e6), "1.00 GB");
        assert_eq!(format_bytes(12.0), "12.0 B");
        assert_eq!(format_bytes_binary(4_194_304.0), "4.00 MiB");
        assert_eq!(format_duration(Duration::from_millis(180)), "180 ms");
        assert_eq!(format_seconds(4475.0), "1.24 h");
        assert_eq!(format_distance_m(28_983_000.0), "28983 km");
        assert_eq!(format_bit_meters_per_second(1.24935e17), "124.9 Pbit·m/s");
    }

    proptest! {
        #[test]
        fn rate_round_trips(rate in 1u64..400_000_000_000_000u64) {
            let text = format_rate_bps(rate as f64);
            let back = parse_rate_bps(&text).unwrap();
            let err = (back as f64 - rate as f64).abs() / rate as f64;
            prop_assert!(err <= 0.005 + 1.0 / rate as f64, "{rate} -> {text} -> {back}");
        }

        #[test]
        fn size_round_trips(bytes in 1u64..(1u64 << 62), binary in any::<bool>()) {
            let text = if binary { format_bytes_binary(bytes as f64) } else { format_bytes(bytes as f64) };
            let back = parse_bytes(&text).unwrap();
            let err = (back as f64 - bytes as f64).abs() / bytes as f64;
            prop_assert!(err <= 0.005 + 1.0 / bytes as f64, "{bytes} -> {text} -> {back}");
        }

        #[test]
        fn duration_round_trips(nanos in 1u64..(400u64 * 86_400 * 1_000_000_000)) {
            let d = Duration::from_nanos(nanos);
            let text = format_duration(d);
            let back = parse_duration(&text).unwrap();
            let err = (back.as_secs_f64() - d.as_secs_f64()).abs() / d.as_secs_f64();
            prop_assert!(err <= 0.005 + 1e-9 / d.as_secs_f64(), "{d:?} -> {text} -> {back:?}");
        }

        #[test]
        fn distance_round_trips(meters in 1.0f64..1e8) {
            let text = format_distance_m(meters);
            let back = parse_distance_m(&text).unwrap();
            prop_assert!((back - meters).abs() / meters <= 0.005, "{meters} -> {text} -> {back}");
        }

        #[test]
        fn parsers_never_panic(text in "\\PC{0,24}") {
            let _ = parse_rate_bps(&text);
            let _ = parse_duration(&text);
            let _ = parse_bytes(&text);
            let _ = parse_distance_m(&text);
            let _ = parse_probability(&text);
        }
    }
}
