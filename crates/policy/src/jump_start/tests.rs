//! Tests of the jump-start decision, the server's bound and the validator (no timing).

use super::*;

const RTT: Duration = Duration::from_millis(436);
const GBIT: u64 = 1_000_000_000;

fn memory() -> PathMemory {
    PathMemory {
        rate_bps: 980_000_000,
        min_rtt: RTT,
        mss: 4418,
        age: Duration::from_secs(600),
        confirmations: 1,
    }
}

fn inputs() -> JumpInputs {
    JumpInputs {
        memory: Some(memory()),
        rtt_now: RTT + Duration::from_millis(2),
        streams: 4,
        disabled: false,
        probing: true,
        privileged: true,
    }
}

#[test]
fn a_remembered_path_with_the_same_rtt_jumps_close_to_its_rate() {
    let plan = decide(&inputs()).unwrap();
    assert_eq!(plan.remembered_bps, 980_000_000);
    assert_eq!(plan.start_bps, (980_000_000f64 * START_SHARE) as u64);
    // 931 Mbit/s x 438 ms / 8 / 4 streams / 4418 bytes = 2,884.4, so 2,885 segments each.
    assert_eq!(plan.init_cwnd, 2885);
    assert_eq!(plan.init_rwnd, plan.init_cwnd);
}

#[test]
fn no_jump_without_a_record_or_when_turned_off() {
    let mut i = inputs();
    i.memory = None;
    assert_eq!(decide(&i), Err(NoJump::NotSeen));
    let mut i = inputs();
    i.disabled = true;
    assert_eq!(decide(&i), Err(NoJump::Disabled));
    let mut i = inputs();
    i.probing = false;
    assert_eq!(decide(&i), Err(NoJump::FixedRate));
}

#[test]
fn an_old_record_is_not_trusted() {
    let mut i = inputs();
    i.memory = Some(PathMemory {
        age: MAX_AGE + Duration::from_secs(1),
        ..memory()
    });
    assert!(matches!(decide(&i), Err(NoJump::Stale { .. })));
    i.memory = Some(PathMemory {
        age: MAX_AGE,
        ..memory()
    });
    assert!(decide(&i).is_ok());
}

#[test]
fn a_changed_rtt_means_another_path() {
    let mut i = inputs();
    i.rtt_now = RTT.mul_f64(1.11);
    assert!(matches!(decide(&i), Err(NoJump::RttChanged { .. })));
    i.rtt_now = RTT.mul_f64(0.89);
    assert!(matches!(decide(&i), Err(NoJump::RttChanged { .. })));
    i.rtt_now = RTT.mul_f64(1.09);
    assert!(decide(&i).is_ok());
}

#[test]
fn short_paths_get_a_few_ms_of_tolerance() {
    let then = Duration::from_millis(12);
    assert!(rtt_matches(then, Duration::from_millis(15)));
    assert!(!rtt_matches(then, Duration::from_millis(16)));
}

#[test]
fn without_privilege_it_says_what_it_needs() {
    let mut i = inputs();
    i.privileged = false;
    let e = decide(&i).unwrap_err();
    assert_eq!(e, NoJump::NeedsPrivilege);
    assert!(e.describe().contains("CAP_NET_ADMIN"));
}

#[test]
fn slow_or_short_paths_do_not_jump() {
    let mut i = inputs();
    i.memory = Some(PathMemory {
        rate_bps: MIN_RATE_BPS - 1,
        ..memory()
    });
    assert_eq!(decide(&i), Err(NoJump::NotWorth));
    let short = Duration::from_millis(2);
    i.memory = Some(PathMemory {
        min_rtt: short,
        ..memory()
    });
    i.rtt_now = short;
    assert_eq!(decide(&i), Err(NoJump::NotWorth));
}

#[test]
fn init_cwnd_is_bounded_both_ways() {
    assert_eq!(init_cwnd(100_000, RTT, 1448, 1), KERNEL_INIT_CWND);
    assert_eq!(
        init_cwnd(MAX_RATE_BPS, Duration::from_secs(10), 536, 1),
        MAX_INIT_CWND
    );
}

fn view() -> ServerView {
    ServerView {
        rtt: RTT,
        client_rtt: RTT,
        mss: 4418,
        streams: 4,
        buffer_bytes: 64 << 20,
        max_rate_bps: None,
        privileged: true,
    }
}

#[test]
fn a_server_caps_a_hostile_request_by_its_own_view() {
    let req = JumpRequest {
        start_bps: u64::MAX,
        remembered_bps: u64::MAX,
        init_cwnd: u32::MAX,
    };
    let plan = bound_request(&req, &view()).unwrap();
    // 4 streams x 64 MiB per 436 ms = 4.9 Gbit/s.
    let cap = ((64u64 << 20) as f64 * 8.0 / 0.436 * 4.0) as u64;
    assert_eq!(plan.remembered_bps, cap);
    assert_eq!(plan.start_bps, cap);
    assert_eq!(plan.init_cwnd, init_cwnd(cap, RTT, 4418, 4));
    let capped = bound_request(
        &req,
        &ServerView {
            max_rate_bps: Some(GBIT),
            ..view()
        },
    )
    .unwrap();
    assert_eq!(capped.start_bps, GBIT);
}

#[test]
fn a_server_declines_when_the_rtts_disagree_or_it_may_not() {
    let req = JumpRequest {
        start_bps: GBIT,
        remembered_bps: GBIT,
        init_cwnd: 100,
    };
    let v = ServerView {
        client_rtt: RTT * 2,
        ..view()
    };
    assert!(matches!(
        bound_request(&req, &v),
        Err(NoJump::PeerDeclined { .. })
    ));
    let v = ServerView {
        privileged: false,
        ..view()
    };
    assert_eq!(bound_request(&req, &v), Err(NoJump::NeedsPrivilege));
    // A smaller window than the rate needs is kept.
    assert_eq!(bound_request(&req, &view()).unwrap().init_cwnd, 100);
}

fn plan() -> JumpPlan {
    decide(&inputs()).unwrap()
}

fn sample(at_rtts: f64, delivery_bps: u64, srtt: Duration, retransmits: u64) -> JumpSample {
    JumpSample {
        at: RTT.mul_f64(at_rtts),
        delivery_bps,
        srtt,
        min_rtt: RTT,
        retransmits,
        delivered_segments: 0,
    }
}

#[test]
fn a_clean_jump_is_confirmed_after_two_round_trips() {
    let p = plan();
    let mut v = JumpValidator::new(p, RTT);
    assert_eq!(v.on_sample(sample(0.5, 0, RTT, 0)), None);
    assert_eq!(v.phase(), JumpPhase::Unvalidated);
    assert_eq!(v.on_sample(sample(1.0, p.start_bps, RTT, 0)), None);
    assert_eq!(v.phase(), JumpPhase::Validating);
    assert_eq!(
        v.on_sample(sample(2.0, p.start_bps, RTT, 0)),
        Some(JumpAction::Confirm {
            rate_bps: p.remembered_bps,
            path_loss: false,
        })
    );
    assert_eq!(v.phase(), JumpPhase::Confirmed);
    // Decided once.
    assert_eq!(v.on_sample(sample(3.0, 0, RTT * 2, 9)), None);
}

/// `sample` with `segments` delivered so far.
fn counted(mut s: JumpSample, segments: u64) -> JumpSample {
    s.delivered_segments = segments;
    s
}

#[test]
fn the_paths_own_random_loss_does_not_retreat_but_a_lossy_overshoot_does() {
    let p = plan();
    // One in a thousand segments lost, the RTT at its minimum: confirmed.
    let mut v = JumpValidator::new(p, RTT);
    v.on_sample(counted(sample(0.5, 0, RTT, 2), 0));
    assert_eq!(
        v.on_sample(counted(sample(1.0, p.start_bps, RTT, 8), 6_000)),
        None
    );
    assert_eq!(
        v.on_sample(counted(sample(2.0, p.start_bps, RTT, 14), 12_000)),
        Some(JumpAction::Confirm {
            rate_bps: p.remembered_bps,
            path_loss: true,
        })
    );
    // Two in a hundred with no queue (an overshoot into a shallow buffer): a retreat.
    let mut v = JumpValidator::new(p, RTT);
    v.on_sample(counted(sample(0.5, 0, RTT, 0), 0));
    let a = v.on_sample(counted(sample(1.0, p.start_bps, RTT, 120), 6_000));
    assert!(
        matches!(
            a,
            Some(JumpAction::Retreat {
                why: Retreat::Loss,
                ..
            })
        ),
        "{a:?}"
    );
    // One in a thousand with a queue: a retreat.
    let mut v = JumpValidator::new(p, RTT);
    v.on_sample(counted(sample(0.5, 0, RTT, 0), 0));
    let a = v.on_sample(counted(sample(1.0, p.start_bps, RTT * 2, 6), 6_000));
    assert!(
        matches!(
            a,
            Some(JumpAction::Retreat {
                why: Retreat::Loss,
                ..
            })
        ),
        "{a:?}"
    );
}

#[test]
fn a_loss_retreats_to_half_of_what_was_delivered() {
    let p = plan();
    let mut v = JumpValidator::new(p, RTT);
    v.on_sample(sample(0.5, 0, RTT, 3));
    let a = v.on_sample(sample(1.0, 600_000_000, RTT, 4)).unwrap();
    assert_eq!(
        a,
        JumpAction::Retreat {
            rate_bps: 300_000_000,
            drain: RTT,
            why: Retreat::Loss
        }
    );
    assert_eq!(v.phase(), JumpPhase::Retreated);
}

#[test]
fn a_queue_in_the_jumps_acks_retreats_but_not_the_handshakes_srtt() {
    let p = plan();
    let mut v = JumpValidator::new(p, RTT);
    // Before the first RTT the srtt is not the jump's: ignored.
    assert_eq!(v.on_sample(sample(0.5, 0, RTT * 2, 0)), None);
    let a = v.on_sample(sample(1.2, p.start_bps, RTT.mul_f64(1.2), 0));
    assert!(matches!(
        a,
        Some(JumpAction::Retreat {
            why: Retreat::Queue,
            ..
        })
    ));
}

#[test]
fn a_small_rtt_rise_is_not_a_queue() {
    let p = plan();
    let mut v = JumpValidator::new(p, RTT);
    let srtt = RTT.mul_f64(1.05);
    assert_eq!(v.on_sample(sample(1.0, p.start_bps, srtt, 0)), None);
    assert!(matches!(
        v.on_sample(sample(2.0, p.start_bps, srtt, 0)),
        Some(JumpAction::Confirm { .. })
    ));
}

#[test]
fn a_shortfall_retreats_to_what_was_delivered_after_five_round_trips() {
    let p = plan();
    let mut v = JumpValidator::new(p, RTT);
    for k in 1..5 {
        assert_eq!(v.on_sample(sample(k as f64, p.start_bps / 2, RTT, 0)), None);
    }
    assert_eq!(
        v.on_sample(sample(5.0, p.start_bps / 2, RTT, 0)),
        Some(JumpAction::Retreat {
            rate_bps: p.start_bps / 2,
            drain: RTT,
            why: Retreat::Shortfall
        })
    );
}

fn stream(srtt_ms: u64, busy: bool) -> crate::StreamSample {
    crate::StreamSample {
        delivery_bps: 60_000_000,
        srtt: Duration::from_millis(srtt_ms),
        min_rtt: RTT,
        retransmits: 0,
        busy,
        ..Default::default()
    }
}

#[test]
fn one_stream_s_rtt_hiccup_is_not_a_queue_but_a_queue_all_streams_see_is() {
    let p = plan();
    let base = RTT.as_millis() as u64;
    // 16 streams during validation: one of them shows 60 ms more (a stall it alone was
    // caught in), and a stream with nothing in flight carries a stale 300 ms.
    let mut streams = vec![stream(base + 1, true); 15];
    streams.push(stream(base + 60, true));
    streams.push(stream(300, false));
    let s = JumpSample::of_streams(RTT.mul_f64(1.5), &streams);
    assert_eq!(s.delivery_bps, 17 * 60_000_000);
    assert_eq!(s.srtt, Duration::from_millis(base + 1));
    let mut v = JumpValidator::new(p, RTT);
    assert_eq!(v.on_sample(s), None, "a hiccup retreated the jump");
    // A queue at the bottleneck delays them all: the median shows it, and the jump retreats.
    let queued = vec![stream(base + 60, true); 16];
    let s = JumpSample::of_streams(RTT.mul_f64(1.6), &queued);
    assert!(matches!(
        v.on_sample(s),
        Some(JumpAction::Retreat {
            why: Retreat::Queue,
            ..
        })
    ));
    // With no stream busy, the stale RTTs are all there is.
    let idle = vec![stream(base + 2, false); 4];
    assert_eq!(
        JumpSample::of_streams(RTT, &idle).srtt,
        Duration::from_millis(base + 2)
    );
    assert_eq!(JumpSample::of_streams(RTT, &[]).srtt, Duration::ZERO);
}

#[test]
fn a_confirmed_jump_keeps_the_memory_unless_the_path_delivered_well_under_it() {
    let was = Some(930_000_000);
    // Held near its own start (95 %): the memory stays, no 5 % off per run.
    assert_eq!(rate_to_remember(870_000_000, was, true), 930_000_000);
    // More than remembered: it rises.
    assert_eq!(rate_to_remember(960_000_000, was, true), 960_000_000);
    // Well under it (the path slowed): what was delivered.
    assert_eq!(rate_to_remember(700_000_000, was, true), 700_000_000);
    // A retreat, or no jump: what was delivered.
    assert_eq!(rate_to_remember(870_000_000, was, false), 870_000_000);
    assert_eq!(rate_to_remember(870_000_000, None, true), 870_000_000);
}
