//! How loss-based TCP responds to loss on a long fat path: Reno's recovery time, the Mathis
//! throughput bound, and the loss rate Reno, CUBIC (RFC 9438) and HighSpeed TCP (RFC 3649)
//! can tolerate at a given window; CUBIC's K; utilisation of N parallel Reno flows.
//!
//! Windows are in segments of `mss_bytes`; rates in bit/s; loss is a probability per packet.

use std::time::Duration;

/// sqrt(3/2) ~ 1.22: the constant of the Mathis et al. bound for Reno with a periodic loss.
pub const MATHIS_CONSTANT: f64 = 1.224_744_871_391_589;
/// CUBIC's scaling constant C (RFC 9438), in segments / s^3.
pub const CUBIC_C: f64 = 0.4;
/// CUBIC's multiplicative decrease factor beta (RFC 9438).
pub const CUBIC_BETA: f64 = 0.7;
/// HighSpeed TCP response: w = 0.12 / p^0.835 segments (RFC 3649).
pub const HSTCP_COEFFICIENT: f64 = 0.12;
/// Exponent of the HighSpeed TCP response function (RFC 3649).
pub const HSTCP_EXPONENT: f64 = 0.835;
/// Below this window (segments) HighSpeed TCP behaves as Reno (RFC 3649 Low_Window).
pub const HSTCP_LOW_WINDOW: f64 = 38.0;

/// Time for Reno to climb from `from_bps` to `to_bps` in congestion avoidance.
///
/// Reno adds one MSS per RTT, so the rate grows by MSS x 8 / RTT^2 bit/s every second; with
/// delayed ACKs (one ACK per two segments) half as fast. 180 ms, MSS 1448, delayed ACKs,
/// 200 -> 1000 Mbit/s: 4475 s (1.24 h).
pub fn reno_climb_seconds(
    from_bps: f64,
    to_bps: f64,
    rtt: Duration,
    mss_bytes: u32,
    delayed_acks: bool,
) -> f64 {
    let rtt_s = rtt.as_secs_f64();
    let mut growth_bps_per_s = f64::from(mss_bytes) * 8.0 / (rtt_s * rtt_s);
    if delayed_acks {
        growth_bps_per_s /= 2.0;
    }
    (to_bps - from_bps).max(0.0) / growth_bps_per_s
}

/// Time for Reno to regain `rate_bps` after one loss halves it: C x RTT^2 / (2 x MSS), with C
/// in bytes/s; twice that with delayed ACKs.
///
/// 1 Gbit/s, 180 ms, MSS 1448: 1399 s without delayed ACKs, 2797 s with them.
pub fn reno_recovery_seconds(
    rate_bps: f64,
    rtt: Duration,
    mss_bytes: u32,
    delayed_acks: bool,
) -> f64 {
    reno_climb_seconds(rate_bps / 2.0, rate_bps, rtt, mss_bytes, delayed_acks)
}

/// The Mathis et al. bound on Reno's throughput: (MSS x 8 / RTT) x 1.22 / sqrt(p), in bit/s.
pub fn mathis_throughput_bps(mss_bytes: u32, rtt: Duration, loss: f64) -> f64 {
    f64::from(mss_bytes) * 8.0 / rtt.as_secs_f64() * MATHIS_CONSTANT / loss.sqrt()
}

/// Window, in segments, that carries `rate_bps` over `rtt` with segments of `mss_bytes`.
pub fn window_segments(rate_bps: f64, rtt: Duration, mss_bytes: u32) -> f64 {
    rate_bps * rtt.as_secs_f64() / (8.0 * f64::from(mss_bytes))
}

/// Highest loss probability at which Reno can average a window of `window_segments`
/// (Mathis inverted): p = (1.22 / W)^2.
pub fn reno_max_loss(window_segments: f64) -> f64 {
    (MATHIS_CONSTANT / window_segments).powi(2)
}

/// CUBIC's average window in segments at loss `p` and RTT (RFC 9438 section 5.1):
/// max((C (3 + beta) / (4 (1 - beta)))^(1/4) x RTT^(3/4) / p^(3/4), Reno's 1.22 / sqrt(p)).
///
/// The second term is CUBIC's Reno-friendly region.
pub fn cubic_average_window_segments(loss: f64, rtt: Duration) -> f64 {
    let cubic = cubic_window_factor() * rtt.as_secs_f64().powf(0.75) / loss.powf(0.75);
    cubic.max(MATHIS_CONSTANT / loss.sqrt())
}

/// Highest loss probability at which CUBIC can average `window_segments` at this RTT:
/// the larger of the CUBIC-region p = (k x RTT^(3/4) / W)^(4/3) and Reno's (1.22 / W)^2,
/// with k = (C (3 + beta) / (4 (1 - beta)))^(1/4) ~ 1.054.
pub fn cubic_max_loss(window_segments: f64, rtt: Duration) -> f64 {
    let cubic =
        (cubic_window_factor() * rtt.as_secs_f64().powf(0.75) / window_segments).powf(4.0 / 3.0);
    cubic.max(reno_max_loss(window_segments))
}

/// CUBIC's K: seconds after a loss until the window is back at W_max,
/// K = cbrt(W_max (1 - beta) / C) with W_max in segments (RFC 9438 section 4.2).
pub fn cubic_k_seconds(w_max_segments: f64) -> f64 {
    (w_max_segments * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt()
}

/// HighSpeed TCP's average window at loss `p` (RFC 3649): 0.12 / p^0.835 segments, and
/// never below Reno's window.
pub fn hstcp_window_segments(loss: f64) -> f64 {
    (HSTCP_COEFFICIENT / loss.powf(HSTCP_EXPONENT)).max(MATHIS_CONSTANT / loss.sqrt())
}

/// Highest loss probability at which HighSpeed TCP can average `window_segments`
/// (RFC 3649 inverted): p = (0.12 / W)^(1 / 0.835); Reno's below Low_Window (38 segments).
pub fn hstcp_max_loss(window_segments: f64) -> f64 {
    if window_segments <= HSTCP_LOW_WINDOW {
        return reno_max_loss(window_segments);
    }
    (HSTCP_COEFFICIENT / window_segments)
        .powf(1.0 / HSTCP_EXPONENT)
        .max(reno_max_loss(window_segments))
}

/// Link utilisation that N parallel, synchronised Reno flows reach: 1 - 1 / (1 + 3N).
pub fn parallel_reno_utilisation(streams: u32) -> f64 {
    1.0 - 1.0 / (1.0 + 3.0 * f64::from(streams))
}

fn cubic_window_factor() -> f64 {
    (CUBIC_C * (3.0 + CUBIC_BETA) / (4.0 * (1.0 - CUBIC_BETA))).powf(0.25)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn close(actual: f64, expected: f64, rel: f64) -> bool {
        (actual - expected).abs() <= rel * expected.abs()
    }

    #[test]
    fn reno_needs_over_an_hour_from_200_to_1000_mbit_at_180ms() {
        // The 2003 record teams: 180 ms, 1500-byte MTU, delayed ACKs.
        let t = reno_climb_seconds(200e6, 1000e6, MS(180), 1448, true);
        assert!(t > 3600.0, "{t}");
        assert!(close(t, 800e6 / (1448.0 * 8.0 / 0.0324 / 2.0), 1e-9), "{t}");
        // Without delayed ACKs it is half as long.
        let fast = reno_climb_seconds(200e6, 1000e6, MS(180), 1448, false);
        assert!(close(fast * 2.0, t, 1e-12));
        // Jumbo frames (MSS 8948) recover about 6x faster.
        let jumbo = reno_climb_seconds(200e6, 1000e6, MS(180), 8948, true);
        assert!(close(t / jumbo, 8948.0 / 1448.0, 1e-12));
        assert!(t / jumbo > 6.0);
    }

    #[test]
    fn reno_recovery_matches_c_rtt2_over_2mss() {
        // C (bytes/s) x RTT^2 / (2 x MSS)
        let expected = 125e6 * 0.18 * 0.18 / (2.0 * 1448.0);
        let t = reno_recovery_seconds(1e9, MS(180), 1448, false);
        assert!(close(t, expected, 1e-12), "{t} vs {expected}");
        assert!(close(
            reno_recovery_seconds(1e9, MS(180), 1448, true),
            2.0 * expected,
            1e-12
        ));
    }

    #[test]
    fn rfc3649_10g_100ms_1500_byte_packets() {
        // RFC 3649 section 1: 10 Gbit/s, 100 ms, 1500-byte packets need an average window of
        // 83,333 segments and a drop rate of at most ~2e-10 for standard TCP.
        let w = window_segments(10e9, MS(100), 1500);
        assert!(close(w, 83_333.3, 1e-4), "{w}");
        // RFC 9438 Table 1 (from RFC 3649): HSTCP averages 83,981 segments at p = 1e-7,
        // 12,279 at 1e-6, 574,356 at 1e-8.
        assert!(close(hstcp_window_segments(1e-7), 83_981.0, 1e-4));
        assert!(close(hstcp_window_segments(1e-6), 12_279.0, 1e-4));
        assert!(close(hstcp_window_segments(1e-8), 574_356.0, 1e-4));
    }

    #[test]
    fn rfc9438_table_1_rtt_100ms() {
        // RFC 9438 Table 1 (RTT = 0.1 s), CUBIC with C = 0.4: p = 1e-5 -> 1054 segments,
        // 1e-6 -> 5926, 1e-7 -> 33,325, 1e-8 -> 187,400; at 1e-2 and 1e-3 the Reno-friendly
        // region gives 12 and 38 (the table rounds 1.2 / sqrt(p)).
        let rtt = MS(100);
        for (p, w) in [
            (1e-5, 1054.0),
            (1e-6, 5926.0),
            (1e-7, 33_325.0),
            (1e-8, 187_400.0),
        ] {
            let got = cubic_average_window_segments(p, rtt);
            assert!(close(got, w, 1e-3), "p={p}: {got} vs {w}");
        }
        assert!(close(cubic_average_window_segments(1e-2, rtt), 12.0, 0.03));
        assert!(close(cubic_average_window_segments(1e-3, rtt), 38.0, 0.03));
    }

    #[test]
    fn tolerable_loss_at_1g_and_10g_100ms_rfc3649_and_rfc9438() {
        // RFC 9438 Table 3: 1500-byte packets, RTT 0.1 s.
        //   1000 Mbit/s: W 8333.3, TCP 2.0e-8, HSTCP 1.5e-6, CUBIC 6.3e-7
        //  10000 Mbit/s: W 83333, TCP 2.0e-10, HSTCP 1.0e-7, CUBIC 2.9e-8
        // The table's TCP column uses 1.2 / sqrt(p); Mathis' sqrt(3/2) gives 8 % more. The
        // table truncates HSTCP's 1.59e-6 to 1.5e-6.
        let rtt = MS(100);
        let rows = [
            (1e9, 2.0e-8, 1.5e-6, 6.3e-7),
            (10e9, 2.0e-10, 1.0e-7, 2.9e-8),
        ];
        for (rate, reno, hstcp, cubic) in rows {
            let w = window_segments(rate, rtt, 1500);
            let got = (reno_max_loss(w), hstcp_max_loss(w), cubic_max_loss(w, rtt));
            assert!(close(got.0, reno, 0.09), "{rate}: reno {}", got.0);
            assert!(close(got.1, hstcp, 0.07), "{rate}: hstcp {}", got.1);
            assert!(close(got.2, cubic, 0.02), "{rate}: cubic {}", got.2);
            // Inverse of the response functions.
            assert!(close(cubic_average_window_segments(got.2, rtt), w, 1e-9));
            assert!(close(hstcp_window_segments(got.1), w, 1e-9));
        }
    }

    #[test]
    fn cubic_k_after_a_loss() {
        // W_max = 1 Gbit/s x 180 ms / 1448 bytes = 15,539 segments -> K = cbrt(11,654) = 22.7 s
        let w = window_segments(1e9, MS(180), 1448);
        let k = cubic_k_seconds(w);
        assert!(close(k, (w * 0.3 / 0.4).cbrt(), 1e-12));
        assert!((22.5..22.8).contains(&k), "{k}");
    }

    #[test]
    fn mathis_bound() {
        let bps = mathis_throughput_bps(1448, MS(100), 1e-6);
        assert!(
            close(bps, 1448.0 * 8.0 / 0.1 * 1.2247 / 1e-3, 1e-4),
            "{bps}"
        );
        // Mathis and reno_max_loss are inverses.
        let w = window_segments(bps, MS(100), 1448);
        assert!(close(reno_max_loss(w), 1e-6, 1e-9));
    }

    #[test]
    fn parallel_reno() {
        assert!(close(parallel_reno_utilisation(1), 0.75, 1e-12));
        assert!(close(
            parallel_reno_utilisation(10),
            1.0 - 1.0 / 31.0,
            1e-12
        ));
    }

    proptest! {
        #[test]
        fn worse_with_longer_rtt_and_higher_rate(
            rate in 1e6f64..4e11,
            rate_factor in 1.0f64..10.0,
            rtt_us in 100u64..2_000_000,
            rtt_factor in 1.0f64..10.0,
            mss in 536u32..65483,
        ) {
            let rtt = Duration::from_micros(rtt_us);
            let longer = Duration::from_secs_f64(rtt.as_secs_f64() * rtt_factor);
            let faster = rate * rate_factor;
            // Recovery takes longer, the tolerable loss shrinks.
            let t = reno_recovery_seconds(rate, rtt, mss, true);
            prop_assert!(reno_recovery_seconds(rate, longer, mss, true) >= t);
            prop_assert!(reno_recovery_seconds(faster, rtt, mss, true) >= t);
            let w = window_segments(rate, rtt, mss);
            let w_long = window_segments(rate, longer, mss);
            let w_fast = window_segments(faster, rtt, mss);
            prop_assert!(w_long >= w && w_fast >= w);
            prop_assert!(reno_max_loss(w_long) <= reno_max_loss(w));
            prop_assert!(reno_max_loss(w_fast) <= reno_max_loss(w));
            prop_assert!(hstcp_max_loss(w_fast) <= hstcp_max_loss(w));
            prop_assert!(cubic_max_loss(w_fast, rtt) <= cubic_max_loss(w, rtt));
            // At a fixed rate, a longer RTT means a bigger window and less tolerable loss.
            prop_assert!(cubic_max_loss(w_long, longer) <= cubic_max_loss(w, rtt) * (1.0 + 1e-12));
            prop_assert!(cubic_k_seconds(w_fast) >= cubic_k_seconds(w));
            // Mathis: more loss, less throughput.
            prop_assert!(mathis_throughput_bps(mss, longer, 1e-6) <= mathis_throughput_bps(mss, rtt, 1e-6));
        }
    }
}
