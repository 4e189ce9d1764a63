//! Deterministic virtual-time tests of the bottleneck: delivered rate, drop-tail buffer,
//! queueing delay, fixed delay, per-segment queue accounting and asymmetric directions.

use std::time::Duration;

use longhaul_linkem::{Direction, Duplex, Link, LinkConfig, Packet, QueueLimit, Verdict};

const MS: u64 = 1_000_000;

fn link(cfg: LinkConfig, seed: u64) -> Link {
    cfg.validate(1500)
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    Link::new(cfg, seed)
}

/// Offers `count` packets of `bytes` every `gap_ns` from `start_ns`; returns
/// (arrival, release) of each delivered first copy.
fn flood(link: &mut Link, start_ns: u64, gap_ns: u64, count: u64, bytes: u32) -> Vec<(u64, u64)> {
    let mut v = Verdict::default();
    let mut out = Vec::new();
    for i in 0..count {
        let now = start_ns + i * gap_ns;
        link.offer(now, Packet::single(bytes), &mut v);
        out.extend(v.runs.iter().map(|r| (now, r.release_ns)));
    }
    out
}

#[test]
fn delivered_rate_under_overload_matches_configured_rate() {
    for (seed, rate_bps, bytes, overhead) in [
        (1u64, 100_000_000u64, 1500u32, 0u32),
        (2, 1_000_000_000, 9000, 0),
        (3, 10_000_000_000, 1500, 38),
        (4, 7_777_777, 1000, 0), // not a divisor of anything: the carry must keep it exact
    ] {
        let cfg = LinkConfig {
            rate_bps: Some(rate_bps),
            queue: QueueLimit::Packets(100),
            delay: Duration::from_millis(5),
            per_segment_overhead_bytes: overhead,
            ..Default::default()
        };
        let mut l = link(cfg, seed);
        let wire_bits = u64::from(bytes + overhead) * 8;
        let tx_ns = wire_bits * 1_000_000_000 / rate_bps;
        // Offer at twice the rate, 20 000 packets.
        let out = flood(&mut l, 0, tx_ns / 2, 20_000, bytes);
        let s = l.stats();
        assert!(
            s.dropped_queue_segments > 9_000,
            "seed {seed}: no overload: {s:?}"
        );
        let (first, last) = (out[0].1, out[out.len() - 1].1);
        // Bits carried between the first and the last release (the first packet's bits
        // were sent before its release).
        let bits = (out.len() as u64 - 1) * wire_bits;
        let measured = bits as f64 * 1e9 / (last - first) as f64;
        let err = (measured - rate_bps as f64).abs() / rate_bps as f64;
        assert!(
            err < 1e-3,
            "seed {seed}: rate {measured} vs {rate_bps}: error {err}"
        );
    }
}

#[test]
fn drop_tail_drops_exactly_when_the_byte_buffer_is_full() {
    // 12 Mbit/s: a 1500-byte packet takes exactly 1 ms.
    let cfg = LinkConfig {
        rate_bps: Some(12_000_000),
        queue: QueueLimit::Bytes(15_000),
        ..Default::default()
    };
    let mut l = link(cfg, 9);
    let mut v = Verdict::default();
    let mut admitted = 0;
    for _ in 0..20 {
        l.offer(0, Packet::single(1500), &mut v);
        admitted += usize::from(!v.is_dropped());
    }
    assert_eq!(
        admitted, 10,
        "a 15000-byte buffer holds ten 1500-byte packets"
    );
    assert_eq!(l.backlog(0), (15_000, 10));
    // After one packet time, exactly one more fits.
    l.offer(MS, Packet::single(1500), &mut v);
    assert!(!v.is_dropped());
    l.offer(MS, Packet::single(1500), &mut v);
    assert!(v.is_dropped());
    assert_eq!(v.dropped_queue_segments, 1);
    // Half a packet time later, 750 bytes are free: a 700-byte packet fits, 1500 not.
    l.offer(MS + MS / 2, Packet::single(1500), &mut v);
    assert!(v.is_dropped());
    l.offer(MS + MS / 2, Packet::single(700), &mut v);
    assert!(!v.is_dropped());
    let s = l.stats();
    assert_eq!(s.dropped_queue_segments, 12);
    assert_eq!(s.queue_high_water_bytes, 15_000);
    assert_eq!(s.queue_high_water_segments, 11);
}

#[test]
fn drop_tail_in_packets() {
    let cfg = LinkConfig {
        rate_bps: Some(12_000_000),
        queue: QueueLimit::Packets(5),
        ..Default::default()
    };
    let mut l = link(cfg, 10);
    let mut v = Verdict::default();
    let fates: Vec<bool> = (0..8)
        .map(|_| {
            l.offer(0, Packet::single(100), &mut v);
            v.is_dropped()
        })
        .collect();
    assert_eq!(fates, [false, false, false, false, false, true, true, true]);
    // 100 bytes at 12 Mbit/s take 66 666.67 ns; after the first has left, one more fits.
    l.offer(66_667, Packet::single(100), &mut v);
    assert!(!v.is_dropped());
    l.offer(66_667, Packet::single(100), &mut v);
    assert!(v.is_dropped());
}

#[test]
fn queueing_delay_under_overload_is_buffer_over_rate() {
    let rate_bps = 100_000_000u64;
    let buffer = 1_250_000u64; // 100 ms at 100 Mbit/s
    let delay_ns = 20 * MS;
    let cfg = LinkConfig {
        rate_bps: Some(rate_bps),
        queue: QueueLimit::Bytes(buffer),
        delay: Duration::from_nanos(delay_ns),
        ..Default::default()
    };
    let mut l = link(cfg, 11);
    // 150 Mbit/s of 1500-byte packets for 2 s: the buffer fills after ~0.2 s.
    let out = flood(&mut l, 0, 80_000, 25_000, 1500);
    let want_ns = buffer * 8 * 1_000_000_000 / rate_bps; // 100 ms
    let tx_ns = 120_000;
    let late: Vec<u64> = out[out.len() / 2..]
        .iter()
        .map(|(a, r)| r - a - delay_ns)
        .collect();
    for sojourn in &late {
        // Sojourn = wait + own transmission; the wait is at most buffer/rate minus one
        // packet, and at least that minus one packet (drop-tail keeps it nearly full).
        assert!(
            *sojourn <= want_ns + tx_ns && *sojourn + 2 * tx_ns >= want_ns,
            "sojourn {sojourn} ns vs buffer/rate {want_ns} ns"
        );
    }
    let s = l.stats();
    assert!(s.queue_delay_max_ns <= want_ns && s.queue_delay_max_ns + 2 * tx_ns >= want_ns);
    assert!(s.queue_high_water_bytes <= buffer && s.queue_high_water_bytes + 1500 >= buffer);
}

#[test]
fn delay_is_exact() {
    let delay_ns = 123_456_789;
    let cfg = LinkConfig {
        delay: Duration::from_nanos(delay_ns),
        ..Default::default()
    };
    let mut l = link(cfg, 12);
    for (a, r) in flood(&mut l, 17, 1_003, 10_000, 1500) {
        assert_eq!(r - a, delay_ns);
    }
    // With a rate, an isolated packet waits only for its own transmission.
    let cfg = LinkConfig {
        rate_bps: Some(1_000_000_000),
        queue: QueueLimit::Packets(10),
        delay: Duration::from_nanos(delay_ns),
        ..Default::default()
    };
    let mut l = link(cfg, 13);
    for (a, r) in flood(&mut l, 5, MS, 1_000, 1250) {
        assert_eq!(r - a, delay_ns + 10_000);
    }
    assert_eq!(l.stats().queue_delay_max_ns, 0);
}

#[test]
fn super_packet_is_queued_per_segment() {
    // A 45-segment super-packet into a 10-segment buffer: the first ten are admitted,
    // the rest dropped, and the survivors leave one segment time apart.
    let cfg = LinkConfig {
        rate_bps: Some(12_000_000),
        queue: QueueLimit::Packets(10),
        ..Default::default()
    };
    let mut l = link(cfg, 14);
    let mut v = Verdict::default();
    let p = Packet::gso(52, 45 * 1448, 1448);
    assert_eq!(p.segments(), 45);
    l.offer(0, p, &mut v);
    assert_eq!(v.runs.len(), 1);
    assert_eq!((v.runs[0].first_segment, v.runs[0].segments), (0, 10));
    assert_eq!(v.runs[0].bytes, 15_000);
    assert_eq!(v.runs[0].release_ns, 10 * MS);
    assert_eq!(v.dropped_queue_segments, 35);
    assert!(!v.is_whole());
    let s = l.stats();
    assert_eq!(
        (s.segments_in, s.packets_in, s.bytes_in),
        (45, 1, p.wire_bytes())
    );
    // The queue is counted in bytes per segment on the wire, headers included.
    let cfg = LinkConfig {
        rate_bps: Some(12_000_000),
        queue: QueueLimit::Bytes(4 * 1500),
        ..Default::default()
    };
    let mut l = link(cfg, 15);
    l.offer(0, p, &mut v);
    assert_eq!(v.runs[0].segments, 4);
}

#[test]
fn directions_are_independent_and_asymmetric() {
    let ab = LinkConfig {
        rate_bps: Some(100_000_000),
        queue: QueueLimit::Packets(1000),
        delay: Duration::from_millis(10),
        loss: longhaul_linkem::LossModel::Bernoulli { p: 0.1 },
        ..Default::default()
    };
    let ba = LinkConfig {
        rate_bps: Some(10_000_000),
        delay: Duration::from_millis(30),
        ..ab.clone()
    };
    let mut d = Duplex::new(ab, ba, 16);
    let mut v = Verdict::default();
    let mut fates = [Vec::new(), Vec::new()];
    for (k, dir) in Direction::BOTH.into_iter().enumerate() {
        for i in 0..2_000u64 {
            let now = i * 10 * MS;
            d.link_mut(dir).offer(now, Packet::single(1250), &mut v);
            fates[k].push(v.runs.first().map(|r| r.release_ns - now));
        }
    }
    let ab_sojourns: Vec<u64> = fates[0].iter().flatten().copied().collect();
    let ba_sojourns: Vec<u64> = fates[1].iter().flatten().copied().collect();
    assert!(ab_sojourns.iter().all(|&s| s == 10 * MS + 100_000));
    assert!(ba_sojourns.iter().all(|&s| s == 30 * MS + MS));
    // Same loss probability, independent streams: the loss patterns differ.
    let lost = |f: &Vec<Option<u64>>| f.iter().map(Option::is_none).collect::<Vec<_>>();
    assert_ne!(lost(&fates[0]), lost(&fates[1]));
    let stats = d.stats();
    assert_eq!(stats.a_to_b.packets_in, 2_000);
    assert_eq!(stats.b_to_a.packets_in, 2_000);
}
