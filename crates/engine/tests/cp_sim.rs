//! `longhaul cp` in deterministic simulation (layer 2 of the house's tests): both ends'
//! real sessions, the real store and real files, over a simulated 1 Gbit/s x 180 ms path
//! in virtual time (see `sim/mod.rs` and the transport model in `sim/transport.rs`).
//!
//! Each test prints its figures (run with `--nocapture` to see them) and, on failure, the
//! seed (`LONGHAUL_SIM_SEED` replays it). Nothing here reads a wall clock.

mod sim;

use std::collections::BTreeSet;
use std::time::Duration;

use sim::transport::{HEADER_BYTES, MSS};
use sim::{Fault, PathSpec, RunResult, Scenario, SeedGuard};

const MIB: u64 = 1 << 20;

/// 1 Gbit/s, 90 ms each way, a drop-tail buffer of one BDP.
fn long_fat_path(loss: f64) -> PathSpec {
    PathSpec {
        rate_bps: 1_000_000_000,
        one_way: Duration::from_millis(90),
        loss,
        queue_bdp: 1.0,
    }
}

/// A tree with one large file (the only one that fills the pipe for long) and small ones,
/// sizes chosen to end off chunk boundaries, an empty file and a file of exactly a chunk.
fn files(big: u64) -> Vec<(&'static str, u64)> {
    vec![
        ("big.bin", big),
        ("mid.bin", 9 * MIB + 123),
        ("a.txt", 1000),
        ("sub/b.bin", 100_000),
        ("sub/c.bin", 4 * MIB),
        ("empty", 0),
    ]
}

fn scenario(name: &'static str, default_seed: u64, loss: f64, big: u64) -> Scenario {
    Scenario {
        name,
        seed: sim::seed(default_seed),
        path: long_fat_path(loss),
        streams: 4,
        chunk_size: 4 * MIB,
        files: files(big),
        window_bdp: 1.25,
        recv_window_bdp: 2.0,
        fault: None,
        max_virtual: Duration::from_secs(120),
    }
}

fn guard(sc: &Scenario) -> SeedGuard {
    SeedGuard(format!("{sc:?} (seed {})", sc.seed))
}

/// Payload share of a full segment on the wire: the most a paced stream can deliver.
fn payload_share() -> f64 {
    MSS as f64 / (MSS + HEADER_BYTES) as f64
}

/// Slow start's rounds from the initial window to a stream's share of `window_bdp`.
fn ramp_rounds(sc: &Scenario) -> f64 {
    let share = sc.path.bdp_bytes() as f64 * sc.window_bdp.min(1.0) / sc.streams as f64;
    (share / (10 * MSS) as f64).log2().ceil()
}

/// Payload bytes in flight once slow start is over: the window, or what pacing at the
/// bottleneck's rate keeps in flight (one BDP).
fn steady_flight(sc: &Scenario) -> f64 {
    sc.path.bdp_bytes() as f64 * sc.window_bdp.min(1.0)
}

/// The steady middle of a run, as fractions of the bytes delivered. It starts once slow
/// start has delivered its windows (a doubling series: about twice the last one) and
/// ends when streams may run dry unevenly: the scheduler hands out whole chunks, so at
/// the end one stream may hold up to a chunk more than another.
fn steady_span(sc: &Scenario) -> (f64, f64) {
    let total = sc.total_bytes() as f64;
    let from = 2.0 * steady_flight(sc) / total;
    let to = 1.0 - (sc.streams as u64 * sc.chunk_size) as f64 / total;
    (from, to.max(from))
}

/// An upper bound of a clean run's virtual time from the model: the file list's round
/// trip, slow start's rounds (counted as if nothing were delivered meanwhile), the bytes
/// at the steady goodput, a chunk at one stream's share (the uneven end) and a round trip
/// for the last chunk's ack and commit.
fn predicted_upper(sc: &Scenario) -> Duration {
    let rtt = sc.path.rtt().as_secs_f64();
    let goodput = sc.path.rate_bps as f64 / 8.0 * payload_share() * sc.window_bdp.min(1.0);
    let secs = (2.0 + ramp_rounds(sc)) * rtt
        + sc.total_bytes() as f64 / goodput
        + sc.chunk_size as f64 / (goodput / sc.streams as f64);
    Duration::from_secs_f64(secs)
}

fn report(sc: &Scenario, r: &RunResult) {
    let l = &r.link;
    let (from, to) = steady_span(sc);
    println!(
        "{}: seed {} | elapsed {:.3} s virtual (bound {:.3} s) | utilisation {:.3} total, {:.3} \
         over {:.0}-{:.0} % of the bytes \
         | app bytes sent {} of {} | segments {} retransmitted {} duplicates {} rtos {} \
         | link a->b dropped loss {} queue {} (high water {} B), b->a dropped {}",
        sc.name,
        sc.seed,
        r.elapsed().as_secs_f64(),
        predicted_upper(sc).as_secs_f64(),
        r.utilisation(&sc.path),
        r.utilisation_between(&sc.path, from, to),
        from * 100.0,
        to * 100.0,
        r.send.sent_bytes,
        sc.total_bytes(),
        r.data_flows.segments_sent,
        r.data_flows.retransmitted,
        r.data_flows.duplicates,
        r.data_flows.rtos,
        l.a_to_b.dropped_loss_segments,
        l.a_to_b.dropped_queue_segments,
        l.a_to_b.queue_high_water_bytes,
        l.b_to_a.dropped_loss_segments + l.b_to_a.dropped_queue_segments,
    );
}

/// What every clean run must show: all files committed, each payload byte sent once by
/// the application, the transport's retransmissions accounted for by the link's drops.
fn assert_clean(sc: &Scenario, r: &RunResult) {
    let files = sc.files.len() as u64;
    assert_eq!(r.send.files_ok, files, "{:?}", r.send);
    assert!(r.send.failed.is_empty() && r.recv.failed.is_empty());
    assert_eq!(r.recv.files_ok, files, "{:?}", r.recv);
    // No chunk went twice at the application's level (TransferDone's bytes).
    assert_eq!(r.send.sent_bytes, sc.total_bytes());
    assert_eq!(r.recv.received_bytes, sc.total_bytes());
    assert_eq!(r.send.rejected_chunks, 0);
    // Pacing at the bottleneck's rate never fills its buffer.
    assert_eq!(r.link.a_to_b.dropped_queue_segments, 0);
    // Each retransmission replaced a segment the link dropped, or arrived in vain
    // (a duplicate); in vain only after a lost ack or a timeout, so rarely.
    let drops = r.link.a_to_b.dropped_loss_segments;
    let d = &r.data_flows;
    assert!(
        d.retransmitted <= drops + d.duplicates,
        "{} retransmissions for {drops} drops and {} duplicates",
        d.retransmitted,
        d.duplicates
    );
    assert!(
        d.duplicates <= r.link.b_to_a.dropped_loss_segments + 10 * d.rtos,
        "{} needless retransmissions",
        d.duplicates
    );
    assert!(
        r.elapsed() <= predicted_upper(sc),
        "took {:?}, the model bounds it by {:?}",
        r.elapsed(),
        predicted_upper(sc)
    );
}

#[test]
fn lossy_long_fat_path_copies_exactly_at_line_rate() {
    let sc = scenario("lossy 1G x 180ms, p=1e-4", 0x5eed_0001, 1e-4, 160 * MIB);
    let _g = guard(&sc);
    let dirs = sim::make_dirs(&sc);
    let runs = sim::transfer(&sc, &dirs);
    let r = &runs[0];
    report(&sc, r);
    sim::assert_identical(&dirs);
    assert_clean(&sc, r);
    assert!(
        r.link.a_to_b.dropped_loss_segments > 0,
        "the path lost nothing"
    );
    // Paced at the bottleneck with a receive window of two BDPs, a loss is repaired
    // within the window, so the steady middle runs at the paced goodput, less the lost
    // share (3 % allowed for the control traffic and ack timing).
    let (from, to) = steady_span(&sc);
    let middle = r.utilisation_between(&sc.path, from, to);
    let expected = payload_share() * (1.0 - sc.path.loss);
    assert!(
        middle >= expected * 0.97 && middle <= payload_share() + 1e-9,
        "steady utilisation {middle:.3}, the model says {expected:.3}"
    );
}

#[test]
fn clean_path_utilisation_follows_window_over_bdp() {
    for window_bdp in [0.5, 1.25] {
        let mut sc = scenario("clean 1G x 180ms", 0x5eed_0002, 0.0, 128 * MIB);
        sc.window_bdp = window_bdp;
        let _g = guard(&sc);
        let dirs = sim::make_dirs(&sc);
        let runs = sim::transfer(&sc, &dirs);
        let r = &runs[0];
        report(&sc, r);
        sim::assert_identical(&dirs);
        assert_clean(&sc, r);
        assert_eq!(r.data_flows.retransmitted, 0);
        // Window-limited: W / RTT of payload; pace-limited: the payload share of the rate.
        // A window-limited stream delivers in one burst per round trip, so a span of k
        // round trips measures within about 1/(2k) of a burst's share: 3 % allowed.
        let expected = window_bdp.min(payload_share());
        let (from, to) = steady_span(&sc);
        assert!(
            to - from >= 0.3,
            "too short a steady middle ({from:.2}..{to:.2})"
        );
        let middle = r.utilisation_between(&sc.path, from, to);
        assert!(
            (middle - expected).abs() <= 0.03,
            "window {window_bdp} BDP: steady utilisation {middle:.3}, the model says {expected:.3}"
        );
    }
}

/// Chunk bytes sent before the fault whose ack the sender had not seen.
fn unacked_bytes(r: &RunResult) -> u64 {
    r.sent
        .iter()
        .filter(|(k, _)| !r.acked.contains(k))
        .map(|(_, &len)| len)
        .sum()
}

#[test]
fn a_cut_stream_leaves_the_copy_to_the_others() {
    let mut sc = scenario("cut stream 1 at 40 %", 0x5eed_0003, 1e-5, 96 * MIB);
    sc.fault = Some((0.4, Fault::CutStream(1)));
    let _g = guard(&sc);
    let dirs = sim::make_dirs(&sc);
    let runs = sim::transfer(&sc, &dirs);
    assert_eq!(runs.len(), 1, "the transfer finished without a rerun");
    let r = &runs[0];
    report(&sc, r);
    sim::assert_identical(&dirs);
    let files = sc.files.len() as u64;
    assert_eq!((r.send.files_ok, r.recv.files_ok), (files, files));
    let resent = r.send.sent_bytes - sc.total_bytes();
    let bound = unacked_bytes(r);
    println!("  re-sent {resent} B after the cut; unacked at the cut {bound} B");
    assert!(resent > 0, "the cut stream's chunks were sent again");
    assert!(
        resent <= bound,
        "re-sent {resent} B, unacked at the cut {bound} B"
    );
}

/// A crash at 45 % and a rerun: the rerun completes, sends no chunk acked before the
/// crash, and re-sends at most what was unacked then.
fn crash_and_rerun(name: &'static str, seed: u64, fault: Fault) {
    let mut sc = scenario(name, seed, 3e-5, 96 * MIB);
    sc.fault = Some((0.45, fault));
    let _g = guard(&sc);
    let dirs = sim::make_dirs(&sc);
    let runs = sim::transfer(&sc, &dirs);
    assert_eq!(runs.len(), 2, "the crash stopped the first run");
    let (first, rerun) = (&runs[0], &runs[1]);
    report(&sc, rerun);
    sim::assert_identical(&dirs);
    let files = sc.files.len() as u64;
    assert_eq!(rerun.send.files_ok, files, "{:?}", rerun.send);
    assert_eq!(rerun.recv.files_ok, files, "{:?}", rerun.recv);
    let again: BTreeSet<_> = rerun
        .sent
        .keys()
        .filter(|k| first.acked.contains(k))
        .collect();
    assert!(
        again.is_empty(),
        "chunks acked before the crash sent again: {again:?}"
    );
    let resent: u64 = rerun
        .sent
        .iter()
        .filter(|(k, _)| first.sent.contains_key(k))
        .map(|(_, &len)| len)
        .sum();
    let bound = unacked_bytes(first);
    println!(
        "  crash at {:.3} s: {} chunks sent, {} acked; rerun {:.3} s, sent {} B, resumed {} B, \
         re-sent {resent} B (unacked at the crash {bound} B)",
        first.fault_ns.unwrap_or(0) as f64 / 1e9,
        first.sent.len(),
        first.acked.len(),
        rerun.elapsed().as_secs_f64(),
        rerun.send.sent_bytes,
        rerun.send.resumed_bytes,
    );
    assert!(
        resent <= bound,
        "re-sent {resent} B, unacked at the crash {bound} B"
    );
    assert!(rerun.send.resumed_bytes > 0, "the rerun resumed nothing");
    // Everything is sent once over both runs, except the re-sent share.
    let never_sent: u64 = sc.total_bytes() - first.sent.values().sum::<u64>();
    assert_eq!(rerun.send.sent_bytes, never_sent + resent);
}

#[test]
fn receiver_crash_then_rerun_resends_only_unacked_chunks() {
    crash_and_rerun("receiver crash at 45 %", 0x5eed_0004, Fault::CrashReceiver);
}

#[test]
fn sender_crash_then_rerun_resends_only_unacked_chunks() {
    crash_and_rerun("sender crash at 45 %", 0x5eed_0005, Fault::CrashSender);
}

#[test]
fn same_seed_same_run() {
    let mut sc = scenario("determinism", 0x5eed_0006, 1e-4, 48 * MIB);
    sc.fault = Some((0.5, Fault::CutStream(2)));
    let _g = guard(&sc);
    let a = sim::transfer(&sc, &sim::make_dirs(&sc));
    let b = sim::transfer(&sc, &sim::make_dirs(&sc));
    report(&sc, &a[0]);
    assert!(a[0].link.a_to_b.dropped_loss_segments > 0);
    assert_eq!(a[0].sender_done_ns, b[0].sender_done_ns);
    assert_eq!(a, b, "two runs of one seed differ");
}
