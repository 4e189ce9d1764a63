//! Per-interval rates are of bytes that crossed the path: over an emulated 1 Gbit/s,
//! 100 ms path that loses one segment in a thousand, no `interval` of `bench` (forward and
//! `--reverse`) or `cp` (push and pull) shows more than the bottleneck carries, beyond a
//! packet, the clock's millisecond and the emulator's own lateness (its packet loops run
//! late on a loaded machine, which bunches arrivals; `emulate stats` says by how much). Counting the cumulative ACK (which jumps when SACK
//! recovery ends) or what a receiver read (in chunks, and behind holes) fails this. The
//! intervals of a copy add up to what it moved.
//! Root only (namespaces and a TUN device); skipped with a message otherwise.

mod support;

use std::fs;

use support::{is_root, json_of, longhaul_via, EmulatedPath, Rng, Scratch, Server, MIB};

/// The emulated bottleneck, bit/s, and its packet size (the MTU), bytes.
const RATE_BPS: f64 = 1e9;
const PACKET_BYTES: f64 = 1500.0;
/// The server's end of the emulated path.
const SERVER: &str = "10.99.0.2";

/// Checks every interval of a run against the bottleneck, allowing `jitter` seconds of the
/// path's lateness; returns the highest rate and the retransmits seen.
fn check(what: &str, lines: &[serde_json::Value], source: &str, jitter: f64) -> (f64, u64) {
    let intervals: Vec<_> = lines.iter().filter(|l| l["type"] == "interval").collect();
    assert!(intervals.len() >= 3, "{what}: too few intervals: {lines:?}");
    let mut peak = 0.0f64;
    let mut retransmits = 0;
    let mut sources = 0;
    for i in &intervals {
        let bps = i["bits_per_second"].as_f64().unwrap();
        let crossed = i["crossed_bytes"].as_u64().unwrap() as f64;
        retransmits += i["retransmits"].as_u64().unwrap();
        sources += usize::from(i["rate_source"] == source);
        if bps <= 0.0 {
            continue;
        }
        // The time the count covers (the interval's, or the sending peer's reports').
        let span = crossed * 8.0 / bps;
        let most = RATE_BPS * (span + 1e-3 + jitter) + PACKET_BYTES * 8.0;
        assert!(
            crossed * 8.0 <= most,
            "{what}: {:.1} Mbit/s over {span:.3} s on a {:.0} Mbit/s path: {i}",
            bps / 1e6,
            RATE_BPS / 1e6
        );
        peak = peak.max(bps);
    }
    assert!(
        sources * 2 > intervals.len(),
        "{what}: most rates should come from the {source} count: {intervals:?}"
    );
    (peak, retransmits)
}

/// A run's intervals (Mbit/s, retransmits, held rate) and its jump, for a failure's
/// message.
fn run_summary(lines: &[serde_json::Value]) -> String {
    let intervals: Vec<String> = lines
        .iter()
        .filter(|l| l["type"] == "interval")
        .map(|i| {
            format!(
                "{:.0}/{}/{:.0}",
                i["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6,
                i["retransmits"],
                i["held_rate_bps"].as_f64().unwrap_or(0.0) / 1e6
            )
        })
        .collect();
    let end = lines.iter().find(|l| l["type"] == "end");
    let jump = end.map(|e| e["jump_start"].clone()).unwrap_or_default();
    format!(
        "intervals (Mbit/s/retransmits/held Mbit/s): {}; jump: {jump}",
        intervals.join(" ")
    )
}

#[test]
fn no_interval_shows_more_than_the_bottleneck_on_a_lossy_path() {
    if !is_root() || !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!(
            "SKIP: no_interval_shows_more_than_the_bottleneck_on_a_lossy_path needs root and \
             /dev/net/tun"
        );
        return;
    }
    let name = format!("intv{}", std::process::id() % 100_000);
    let path = EmulatedPath::up(&name, &["--rtt", "100ms", "--rate", "1G", "--loss", "1e-3"]);
    let (ns_a, ns_b) = (path.ns('a'), path.ns('b'));
    let (via_a, via_b) = (
        ["ip", "netns", "exec", ns_a.as_str()],
        ["ip", "netns", "exec", ns_b.as_str()],
    );
    let s = Scratch::new("honest-intervals");
    let home = s.dir("home");
    let root = s.dir("root");
    // 192 MiB: about 1.6 s at the bottleneck, after the start-up.
    let mut rng = Rng::from_env("no_interval_shows_more_than_the_bottleneck");
    let block = rng.bytes(MIB as usize);
    let src = s.join("src.bin");
    fs::write(&src, block.repeat(192)).unwrap();
    let root_s = root.to_str().unwrap();
    let _server = Server::start_args(&via_b, &home, &["--listen", SERVER, "--root", root_s]);

    let bench = |extra: &[&str]| {
        json_of(
            longhaul_via(&via_a, &home)
                .args(["bench", SERVER, "-t", "3s", "-i", "0.5s", "--json"])
                .args(extra)
                .output()
                .unwrap(),
        )
    };
    let cp = |from: &str, to: &str, extra: &[&str]| {
        json_of(
            longhaul_via(&via_a, &home)
                .args(["cp", "--json", "-i", "0.5s", from, to])
                .args(extra)
                .output()
                .unwrap(),
        )
    };
    let remote = format!("longhaul://{SERVER}/data.bin");
    let pulled = s.join("pulled.bin");
    let remote2 = format!("longhaul://{SERVER}/data2.bin");
    let pulled2 = s.join("pulled2.bin");
    let runs = [
        ("bench", bench(&[]), "delivered"),
        ("bench --reverse", bench(&["--reverse"]), "delivered"),
        // The path is remembered: these jump.
        (
            "cp push",
            cp(src.to_str().unwrap(), &remote, &[]),
            "delivered",
        ),
        // The client receives; the server reports what its streams delivered.
        (
            "cp pull",
            cp(&remote, pulled.to_str().unwrap(), &[]),
            "delivered",
        ),
        // Not jumping, a push's streams send warm-up runs first (cp::warmup), which are
        // no payload: they must not show in the intervals. A pull's server sends none.
        (
            "cp push, warm-up",
            cp(src.to_str().unwrap(), &remote2, &["--no-jump-start"]),
            "delivered",
        ),
        (
            "cp pull, no jump",
            cp(&remote2, pulled2.to_str().unwrap(), &["--no-jump-start"]),
            "delivered",
        ),
    ];
    assert_eq!(fs::read(&pulled).unwrap(), fs::read(&src).unwrap());
    assert_eq!(fs::read(&pulled2).unwrap(), fs::read(&src).unwrap());
    // The emulator's worst lateness, data and ACK directions.
    let stats = json_of(
        std::process::Command::new(support::BIN)
            .args(["emulate", "stats", &path.0, "--json"])
            .output()
            .unwrap(),
    );
    let late_ns = |dir: &str| stats[0]["stats"][dir]["lateness_max_ns"].as_u64().unwrap();
    let jitter = (late_ns("a_to_b") + late_ns("b_to_a")) as f64 / 1e9;
    eprintln!("emulator lateness: {:.1} ms", jitter * 1e3);
    let mut slow = Vec::new();
    for (what, lines, source) in &runs {
        let (peak, retransmits) = check(what, lines, source, jitter);
        eprintln!(
            "{what}: peak {:.1} Mbit/s, {retransmits} retransmits",
            peak / 1e6
        );
        // The path was used, and lost packets on the way: the check had work to do.
        // (0.4 for all runs but one, 0.05 for that one: since fad6f2d a 3 s `bench
        // --reverse` here peaked at 0.44-0.57 of the path in 4 of 13 runs, 0.79-0.95 in
        // the rest, before it 0.94-0.96; and at ebb6538 and f8dcee8 a CI run's cp push
        // retreated from its jump on loss (960-1,449 retransmits in its first seconds),
        // held 9-22 Mbit/s and climbed to 0.08 of the path in 29 s: a start-up that ended
        // on the plateau of a burst's repair, fixed since (docs/paths.md). This test is
        // about honest intervals, not that rate.)
        assert!(
            peak > 0.05 * RATE_BPS,
            "{what}: peak {peak}; {}",
            run_summary(lines)
        );
        if peak <= 0.4 * RATE_BPS {
            slow.push(format!(
                "{what}: peak {:.1} Mbit/s; {}",
                peak / 1e6,
                run_summary(lines)
            ));
        }
        // Every byte is counted, once: a cp push counted its chunks only once they had all
        // gone, and dropped what had crossed beyond them (at 436 ms, 190 MB of 2 GiB, and
        // 0 bit/s for the first 1.3 s of data).
        if what.starts_with("cp") {
            let counted: u64 = lines
                .iter()
                .filter(|l| l["type"] == "interval")
                .map(|l| l["crossed_bytes"].as_u64().unwrap())
                .sum();
            let end = lines.iter().find(|l| l["type"] == "end").unwrap();
            let moved = end["bytes"].as_u64().unwrap();
            let warmup = end["warmup_bytes"].as_u64().unwrap();
            eprintln!("{what}: {warmup} B of warm-up runs");
            assert_eq!(warmup > 0, what.ends_with("warm-up"), "{what}: {end}");
            // A pull's rates are the sending server's reports, sent every 100 ms: its last
            // one may still be on its way when the client ends (CI: 6.8 MB short of 201
            // MB at 1 Gbit/s), so a pull may lack one report's worth at the bottleneck.
            let lag = if what.starts_with("cp pull") {
                RATE_BPS / 8.0 * 0.1
            } else {
                0.0
            };
            assert!(
                counted as f64 >= moved as f64 * 0.97 - lag && counted <= moved + MIB,
                "{what}: the intervals count {counted} of {moved} bytes"
            );
        }
        if !what.starts_with("cp pull") {
            assert!(retransmits > 0, "{what}: no loss seen");
        }
        // A copy's intervals say the rate its sender's pacer holds, as bench's do, once
        // its jump is confirmed (the rate it holds from then on): a push's own, a pull's
        // as the sending server tells it.
        if *what == "cp push" || *what == "cp pull" {
            let end = lines.iter().find(|l| l["type"] == "end").unwrap();
            let held = lines
                .iter()
                .filter(|l| l["type"] == "interval")
                .filter_map(|l| l["held_rate_bps"].as_u64())
                .max();
            eprintln!(
                "{what}: jump {}, held {held:?}",
                end["jump_start"]["verdict"]
            );
            if end["jump_start"]["verdict"] == "confirmed" {
                assert!(
                    held.is_some_and(|h| h > 0),
                    "{what}: no held rate: {lines:?}"
                );
            }
        }
    }
    assert!(
        slow.len() <= 1,
        "more than one run used under 0.4 of the path: {slow:#?}"
    );
    drop(_server);
    drop(path);
    assert!(
        !std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains(&ns_a))
            .unwrap_or(false),
        "the namespaces are gone"
    );
}
