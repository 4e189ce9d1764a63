//! Deterministic, seeded tests of the random elements: jitter (bounded, no reordering),
//! Bernoulli and Gilbert-Elliott loss, reordering, duplication and per-segment loss of
//! GSO super-packets. Every assertion names the seed so a failure can be replayed.

use std::time::Duration;

use longhaul_linkem::{Jitter, Link, LinkConfig, LossModel, Packet, QueueLimit, Reorder, Verdict};

const MS: u64 = 1_000_000;

/// Asserts that `count` successes out of `n` trials agree with probability `p` within
/// three standard deviations.
fn within_3_sigma(seed: u64, what: &str, count: u64, n: u64, p: f64) {
    let mean = n as f64 * p;
    let sigma = (n as f64 * p * (1.0 - p)).sqrt();
    assert!(
        (count as f64 - mean).abs() <= 3.0 * sigma,
        "seed {seed}: {what}: {count} of {n}, expected {mean:.1} +- {:.1} (3 sigma)",
        3.0 * sigma
    );
}

#[test]
fn jitter_is_bounded_and_keeps_order() {
    for (seed, jitter) in [
        (
            21u64,
            Jitter::Uniform {
                max: Duration::from_millis(2),
            },
        ),
        (
            22,
            Jitter::Normal {
                sigma: Duration::from_micros(700),
            },
        ),
        (
            23,
            Jitter::Wander {
                max: Duration::from_millis(2),
            },
        ),
    ] {
        let delay_ns = 50 * MS;
        let bound_ns = jitter.bound().as_nanos() as u64;
        let cfg = LinkConfig {
            delay: Duration::from_nanos(delay_ns),
            jitter: Some(jitter),
            ..Default::default()
        };
        cfg.validate(1500).unwrap();
        let mut l = Link::new(cfg, seed);
        let mut v = Verdict::default();
        let (mut last, mut min_d, mut max_d, mut sum) = (0u64, u64::MAX, 0u64, 0u64);
        let n = 50_000u64;
        for i in 0..n {
            // A packet every 100 us: jitter (ms) far exceeds the gap, so order matters.
            let now = i * 100_000;
            l.offer(now, Packet::single(1500), &mut v);
            let r = v.runs[0].release_ns;
            assert!(
                r >= last,
                "seed {seed}: packet {i} released before its predecessor"
            );
            last = r;
            let d = r - now;
            assert!(
                d + bound_ns >= delay_ns && d <= delay_ns + bound_ns,
                "seed {seed}: delay {d} ns outside {delay_ns} +- {bound_ns}"
            );
            min_d = min_d.min(d);
            max_d = max_d.max(d);
            sum += d;
        }
        // The jitter really varies the delay (the bound is approached on both sides)...
        assert!(max_d > delay_ns + bound_ns / 2, "seed {seed}: max {max_d}");
        assert!(min_d < delay_ns, "seed {seed}: min {min_d}");
        // ...and the FIFO clamp only ever adds delay, so the mean is above the base delay.
        assert!(sum / n >= delay_ns, "seed {seed}: mean {}", sum / n);
        assert_eq!(l.stats().reordered_packets, 0);
    }
}

/// Mean, minimum and maximum of (release - arrival - delay) in ns for packets every
/// `gap_ns`.
fn jitter_profile(seed: u64, jitter: Jitter, gap_ns: u64) -> (f64, i64, i64) {
    let delay_ns = 50 * MS;
    let cfg = LinkConfig {
        delay: Duration::from_nanos(delay_ns),
        jitter: Some(jitter),
        ..Default::default()
    };
    let mut l = Link::new(cfg, seed);
    let mut v = Verdict::default();
    let (mut sum, mut min, mut max) = (0i64, i64::MAX, i64::MIN);
    let n = 40_000u64;
    for i in 0..n {
        let now = i * gap_ns;
        l.offer(now, Packet::single(1500), &mut v);
        let extra = v.runs[0].release_ns as i64 - now as i64 - delay_ns as i64;
        sum += extra;
        min = min.min(extra);
        max = max.max(extra);
    }
    (sum as f64 / n as f64, min, max)
}

#[test]
fn wandering_jitter_keeps_the_mean_delay_under_dense_traffic() {
    let bound = 1_000_000i64;
    let ms1 = Duration::from_millis(1);
    // Dense traffic (a packet every 10 us, jitter bound 1 ms): the FIFO clamp pushes
    // uniform jitter towards the bound, while the wandering offset keeps the mean at
    // the configured delay and still spans most of the range.
    let (mean_u, _, _) = jitter_profile(24, Jitter::Uniform { max: ms1 }, 10_000);
    assert!(
        mean_u > 0.5 * bound as f64,
        "seed 24: uniform mean {mean_u}"
    );
    let (mean_w, min_w, max_w) = jitter_profile(25, Jitter::Wander { max: ms1 }, 10_000);
    assert!(
        mean_w.abs() < 0.1 * bound as f64,
        "seed 25: wander mean {mean_w}"
    );
    assert!(
        min_w < -bound / 2 && max_w > bound / 2,
        "seed 25: {min_w}..{max_w}"
    );
    assert!(
        min_w >= -bound && max_w <= bound,
        "seed 25: {min_w}..{max_w}"
    );
    // Sparse traffic (a packet every 10 ms): every packet sees a fresh draw.
    let (mean_s, min_s, max_s) = jitter_profile(26, Jitter::Wander { max: ms1 }, 10 * MS);
    assert!(mean_s.abs() < 0.05 * bound as f64, "seed 26: {mean_s}");
    assert!(
        min_s < -bound * 9 / 10 && max_s > bound * 9 / 10,
        "seed 26: {min_s}..{max_s}"
    );
}

#[test]
fn bernoulli_loss_within_three_sigma() {
    for (seed, p) in [(31u64, 1e-2), (32, 1e-3), (33, 0.3)] {
        let cfg = LinkConfig {
            loss: LossModel::Bernoulli { p },
            ..Default::default()
        };
        let mut l = Link::new(cfg, seed);
        let mut v = Verdict::default();
        let n = 200_000u64;
        let mut lost = 0;
        for i in 0..n {
            l.offer(i * 1000, Packet::single(1500), &mut v);
            lost += u64::from(v.is_dropped());
        }
        within_3_sigma(seed, "Bernoulli losses", lost, n, p);
        let s = l.stats();
        assert_eq!(s.dropped_loss_segments, lost);
        assert_eq!(s.dropped_queue_segments, 0);
    }
}

/// Runs `n` single-segment packets through a loss model; returns the loss pattern.
fn loss_pattern(seed: u64, loss: LossModel, n: u64) -> (Vec<bool>, Link) {
    let cfg = LinkConfig {
        loss,
        ..Default::default()
    };
    cfg.validate(1500).unwrap();
    let mut l = Link::new(cfg, seed);
    let mut v = Verdict::default();
    let pattern = (0..n)
        .map(|i| {
            l.offer(i * 1000, Packet::single(100), &mut v);
            v.is_dropped()
        })
        .collect();
    (pattern, l)
}

#[test]
fn gilbert_elliott_loss_rate_matches_stationary_formula() {
    for (seed, (p, r, h, k)) in [
        (41u64, (0.01, 0.25, 0.8, 0.001)),
        (42, (0.002, 0.1, 0.5, 0.0)),
    ] {
        let model = LossModel::GilbertElliott {
            p,
            r,
            one_minus_h: h,
            one_minus_k: k,
        };
        let pi_b = p / (p + r);
        let want = (1.0 - pi_b) * k + pi_b * h;
        assert!((model.mean_loss() - want).abs() < 1e-15);
        let n = 2_000_000u64;
        let (pattern, l) = loss_pattern(seed, model, n);
        let lost = pattern.iter().filter(|&&x| x).count() as f64;
        let rate = lost / n as f64;
        // Losses are correlated, so the spread is wider than binomial; at ~2e4 good/bad
        // cycles the estimate is within a few percent.
        assert!(
            (rate - want).abs() < 0.06 * want,
            "seed {seed}: loss rate {rate} vs pi_G(1-k) + pi_B(1-h) = {want}"
        );
        assert_eq!(l.stats().dropped_loss_segments as f64, lost);
    }
}

#[test]
fn simple_gilbert_mean_burst_is_one_over_r() {
    for (seed, p, r) in [(51u64, 0.01, 0.3), (52, 0.001, 0.05)] {
        let model = LossModel::GilbertElliott {
            p,
            r,
            one_minus_h: 1.0,
            one_minus_k: 0.0,
        };
        let (pattern, l) = loss_pattern(seed, model, 2_000_000);
        // Count bursts from the pattern itself, independently of the link's counters.
        let bursts = pattern.windows(2).filter(|w| w[1] && !w[0]).count() + usize::from(pattern[0]);
        let lost = pattern.iter().filter(|&&x| x).count();
        let mean = lost as f64 / bursts as f64;
        let s = l.stats();
        assert_eq!(s.loss_bursts, bursts as u64, "seed {seed}");
        // Burst lengths are geometric: sd of the mean = sqrt(1-r)/r / sqrt(bursts).
        let sd = (1.0 - r).sqrt() / r / (bursts as f64).sqrt();
        assert!(
            (mean - 1.0 / r).abs() < 4.0 * sd,
            "seed {seed}: mean burst {mean} vs 1/r = {} (sd {sd}, {bursts} bursts)",
            1.0 / r
        );
    }
}

#[test]
fn reordering_rate_and_overtaking() {
    let seed = 61;
    let prob = 0.05;
    let cfg = LinkConfig {
        rate_bps: Some(1_000_000_000),
        queue: QueueLimit::Packets(1000),
        delay: Duration::from_millis(10),
        reorder: Some(Reorder {
            probability: prob,
            extra: Duration::from_micros(500),
        }),
        ..Default::default()
    };
    cfg.validate(1500).unwrap();
    let mut l = Link::new(cfg, seed);
    let mut v = Verdict::default();
    let n = 100_000u64;
    let mut releases = Vec::new();
    let mut marked = 0u64;
    let mut last_in_order = 0;
    for i in 0..n {
        l.offer(i * 100_000, Packet::single(1500), &mut v);
        let run = v.runs[0];
        if v.reordered {
            marked += 1;
        } else {
            assert!(
                run.release_ns >= last_in_order,
                "seed {seed}: in-order packets reordered"
            );
            last_in_order = run.release_ns;
        }
        releases.push((run.release_ns, v.reordered));
    }
    within_3_sigma(seed, "reordered packets", marked, n, prob);
    assert_eq!(l.stats().reordered_packets, marked);
    // A held-back packet is overtaken by the next in-order one (gap 100 us < 500 us
    // extra), and an in-order packet is overtaken by nothing but held-back ones.
    for w in releases.windows(2) {
        let ((r0, re0), (r1, re1)) = (w[0], w[1]);
        if re0 && !re1 {
            assert!(r1 < r0, "seed {seed}: held-back packet not overtaken");
        } else {
            assert!(r1 >= r0 || re1, "seed {seed}: in-order packet overtaken");
        }
    }
}

#[test]
fn duplication_rate() {
    let seed = 71;
    let prob = 0.02;
    let cfg = LinkConfig {
        duplicate: prob,
        ..Default::default()
    };
    let mut l = Link::new(cfg, seed);
    let mut v = Verdict::default();
    let n = 100_000u64;
    let mut copies = 0u64;
    for i in 0..n {
        l.offer(i, Packet::single(1000), &mut v);
        assert_eq!(v.duplicated, v.runs[0].copies == 2);
        copies += u64::from(v.runs[0].copies);
    }
    within_3_sigma(seed, "duplicates", copies - n, n, prob);
    let s = l.stats();
    assert_eq!(s.duplicated_segments, copies - n);
    assert_eq!(s.duplicated_bytes, (copies - n) * 1000);
    assert_eq!(s.segments_out, n);
}

#[test]
fn super_packets_lose_segments_not_whole_packets() {
    let seed = 81;
    let p = 0.02;
    let cfg = LinkConfig {
        loss: LossModel::Bernoulli { p },
        ..Default::default()
    };
    let mut l = Link::new(cfg, seed);
    let mut v = Verdict::default();
    let pkt = Packet::gso(52, 44 * 1448, 1448);
    let segs = pkt.segments();
    assert_eq!(segs, 44);
    let (mut partial, mut whole, mut gone) = (0, 0, 0);
    let n = 5_000u64;
    for i in 0..n {
        l.offer(i * 1000, pkt, &mut v);
        // Runs are disjoint, in order, separated by at least one lost segment, and with
        // the losses they cover the packet exactly.
        let mut next = 0;
        let mut delivered = 0;
        for run in &v.runs {
            assert!(run.first_segment >= next && (next == 0 || run.first_segment > next));
            let bytes: u64 = (run.first_segment..run.first_segment + run.segments)
                .map(|s| u64::from(pkt.segment_bytes(s)))
                .sum();
            assert_eq!(run.bytes, bytes);
            next = run.first_segment + run.segments;
            delivered += run.segments;
        }
        assert_eq!(delivered + v.dropped_loss_segments, segs, "seed {seed}");
        match v.runs.len() {
            0 => gone += 1,
            _ if v.is_whole() => whole += 1,
            _ => partial += 1,
        }
    }
    let s = l.stats();
    within_3_sigma(
        seed,
        "segment losses",
        s.dropped_loss_segments,
        n * u64::from(segs),
        p,
    );
    // P(whole) = 0.98^44 ~ 0.41; nearly every other packet loses only some segments.
    assert!(
        partial > 2_000 && whole > 1_500 && gone == 0,
        "{partial} {whole} {gone}"
    );
}

#[test]
fn same_seed_same_fates() {
    let cfg = LinkConfig {
        rate_bps: Some(50_000_000),
        queue: QueueLimit::Bytes(100_000),
        delay: Duration::from_millis(3),
        jitter: Some(Jitter::Uniform {
            max: Duration::from_millis(1),
        }),
        loss: LossModel::Bernoulli { p: 0.05 },
        reorder: Some(Reorder {
            probability: 0.01,
            extra: Duration::from_millis(1),
        }),
        duplicate: 0.01,
        ..Default::default()
    };
    let run = |seed| {
        let mut l = Link::new(cfg.clone(), seed);
        let mut v = Verdict::default();
        let mut out = Vec::new();
        for i in 0..5_000u64 {
            l.offer(i * 150_000, Packet::gso(40, 6000, 1460), &mut v);
            out.push(v.clone());
        }
        (out, l.stats().clone())
    };
    assert_eq!(run(91), run(91));
    assert_ne!(run(91).0, run(92).0);
}

#[test]
fn stats_serialize_as_json() {
    let mut l = Link::new(LinkConfig::default(), 1);
    let mut v = Verdict::default();
    l.offer(0, Packet::single(1500), &mut v);
    let json = serde_json::to_value(l.stats()).unwrap();
    assert_eq!(json["bytes_in"], 1500);
    assert_eq!(json["segments_out"], 1);
    assert_eq!(json["queue_delay_histogram"].as_array().unwrap().len(), 28);
    let back: longhaul_linkem::LinkStats = serde_json::from_value(json).unwrap();
    assert_eq!(&back, l.stats());
}
