//! The Internet2 Land Speed Record (I2-LSR, 2000-2006): its metric, its rules and its
//! history.
//!
//! The metric is bit-meters per second: throughput in bit/s times the terrestrial distance in
//! metres, the distance being the sum of great-circle legs between the cities of the path's
//! router hops (see [`crate::route`]). Records were quoted in terabit-meters/second (Tb·m/s)
//! or petabit-meters/second (Pb·m/s).

pub mod history;
pub mod rules;

/// One terabit-meter per second, in bit-meters per second.
pub const TERABIT_METER: f64 = 1e12;
/// One petabit-meter per second, in bit-meters per second.
pub const PETABIT_METER: f64 = 1e15;

/// Bit-meters per second: throughput (bit/s) x terrestrial distance (m).
///
/// SUNET 2004: 4,310.62 Mbit/s over 28,983 km = 1.249e17 bit·m/s (124.9 Pbit·m/s).
pub fn bit_meters_per_second(throughput_bps: f64, distance_m: f64) -> f64 {
    throughput_bps * distance_m
}

/// Throughput in bit/s of `bytes` moved in `seconds` (0 when no time passed).
pub fn bits_per_second(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

/// A bit-meters/second figure in the unit a reader expects: `124.935 Pb·m/s`,
/// `4,278 Tb·m/s`, `512.3 Gb·m/s`.
pub fn format_bit_meters(bmps: f64) -> String {
    if bmps >= PETABIT_METER {
        format!("{:.3} Pb·m/s", bmps / PETABIT_METER)
    } else if bmps >= TERABIT_METER {
        format!("{:.1} Tb·m/s", bmps / TERABIT_METER)
    } else {
        format!("{:.1} Gb·m/s", bmps / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sunet_2004_worked_example() {
        // 1,966,080,000,000 bytes in 3,648.81 s = 4,310.62 Mbit/s; x 28,983 km = 124.935 Pb·m/s.
        let bps = bits_per_second(1_966_080_000_000, 3648.81);
        assert!((bps / 1e6 - 4310.62).abs() < 0.005, "{bps}");
        let bmps = bit_meters_per_second(bps, 28_983_000.0);
        assert_eq!(format!("{:.3}", bmps / PETABIT_METER), "124.935");
        assert_eq!(format_bit_meters(bmps), "124.935 Pb·m/s");
    }

    #[test]
    fn sunet_2004_record() {
        let throughput_bps = 1_966_080_000_000.0 * 8.0 / 3648.81;
        let metric = bit_meters_per_second(throughput_bps, 28_983_000.0);
        assert!((metric / 1e12 - 124_935.0).abs() < 5.0, "{metric}");
    }

    #[test]
    fn units_scale() {
        assert_eq!(format_bit_meters(4278.0 * TERABIT_METER), "4.278 Pb·m/s");
        assert_eq!(format_bit_meters(999.0 * TERABIT_METER), "999.0 Tb·m/s");
        assert_eq!(
            format_bit_meters(bit_meters_per_second(1e9, 100e3)),
            "100.0 Tb·m/s"
        );
        assert_eq!(format_bit_meters(2.5e11), "250.0 Gb·m/s");
        assert_eq!(bits_per_second(10, 0.0), 0.0);
    }
}
