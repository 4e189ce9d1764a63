//! The Internet2 Land Speed Record metric: throughput times terrestrial distance.

/// Bit-meters per second: throughput (bit/s) x terrestrial distance (m).
///
/// SUNET 2004: 4,310.62 Mbit/s over 28,983 km = 1.249e17 bit·m/s (124.9 Pbit·m/s).
pub fn bit_meters_per_second(throughput_bps: f64, distance_m: f64) -> f64 {
    throughput_bps * distance_m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sunet_2004_record() {
        let throughput_bps = 1_966_080_000_000.0 * 8.0 / 3648.81;
        let metric = bit_meters_per_second(throughput_bps, 28_983_000.0);
        assert!((metric / 1e12 - 124_935.0).abs() < 5.0, "{metric}");
    }
}
