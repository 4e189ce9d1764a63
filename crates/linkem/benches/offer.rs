//! Micro benchmark (`cargo bench -p longhaul-linkem`): how many packets per second one
//! core pushes through `Link::offer` and a `DelayLine`, in virtual time. Prints one JSON
//! line per case; not a test, asserts nothing.

use std::time::{Duration, Instant};

use longhaul_linkem::{DelayLine, Link, LinkConfig, LossModel, Packet, QueueLimit, Verdict};

fn case(name: &str, cfg: LinkConfig, packet: Packet, gap_ns: u64, count: u64) {
    let mut link = Link::new(cfg, 1);
    let mut verdict = Verdict::default();
    let mut line: DelayLine<u32> = DelayLine::with_capacity(1 << 16);
    #[allow(clippy::disallowed_methods)] // measuring the model itself, outside the crate
    let start = Instant::now();
    let mut delivered = 0u64;
    for i in 0..count {
        let now = i * gap_ns;
        link.offer(now, packet, &mut verdict);
        for run in &verdict.runs {
            line.push(run.release_ns, run.segments);
        }
        while let Some((_, segs)) = line.pop_due(now) {
            delivered += u64::from(segs);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"type\":\"bench\",\"case\":\"{name}\",\"packets\":{count},\"segments_delivered\":{delivered},\"seconds\":{secs:.3},\"mpps\":{:.2}}}",
        count as f64 / secs / 1e6
    );
}

fn main() {
    let path = LinkConfig {
        rate_bps: Some(10_000_000_000),
        queue: QueueLimit::Bytes(25_000_000),
        delay: Duration::from_millis(100),
        loss: LossModel::Bernoulli { p: 1e-4 },
        ..LinkConfig::default()
    };
    // 1500-byte packets offered at 12 Gbit/s into a 10 Gbit/s, 100 ms link.
    case(
        "single_1500_overload",
        path.clone(),
        Packet::single(1500),
        1_000,
        5_000_000,
    );
    // 64 KiB GSO super-packets (45 segments) at 9 Gbit/s.
    case(
        "gso_45x1448",
        path,
        Packet::gso(52, 45 * 1448, 1448),
        58_000,
        500_000,
    );
    // An ideal link: the cost of the bookkeeping alone.
    case(
        "ideal_1500",
        LinkConfig::default(),
        Packet::single(1500),
        1_000,
        5_000_000,
    );
}
