//! Unit and property tests of the door and the session line.

use super::*;
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

fn small() -> DoorLimits {
    DoorLimits {
        max_pending: 8,
        max_per_source: 4,
        soft_pending: 6,
        soft_per_source: 3,
        grace: Duration::from_secs(1),
        preauth: Duration::from_secs(5),
        preauth_known_source: Duration::from_secs(20),
    }
}

#[test]
fn a_flood_from_the_clients_own_address_evicts_the_oldest_not_the_newcomer() {
    let t0 = crate::test_epoch();
    let mut door = Doorway::new(small());
    let flood: Vec<PendingId> = (0..4).map(|_| door.admit(t0, v4(1)).id).collect();
    // The real client, from the same address, arrives last: the oldest flood
    // connection goes, the client is let in.
    let client = door.admit(t0, v4(1));
    assert_eq!(client.evicted, vec![flood[0]]);
    // More flood pushes out older flood first; the client survives three more.
    for (i, id) in flood.iter().enumerate().skip(1) {
        let a = door.admit(t0, v4(1));
        assert_eq!(a.evicted, vec![*id], "arrival {i}");
    }
    assert!(door.leave(client.id), "the client was still pending");
    assert_eq!(door.pending(), 3);
}

#[test]
fn connections_that_got_least_far_go_first_so_a_bare_tcp_flood_spares_handshakes() {
    let t0 = crate::test_epoch();
    let mut door = Doorway::new(small());
    let client = door.admit(t0, v4(1)).id;
    door.progress(client, Stage::Handshaking, t0);
    let staller = door.admit(t0, v4(1)).id;
    door.progress(staller, Stage::Secured, t0);
    // A sustained flood of bare connections from the same address only evicts its own.
    let mut flood = Vec::new();
    for _ in 0..100 {
        let a = door.admit(t0, v4(1));
        for e in &a.evicted {
            assert!(
                *e != client && *e != staller,
                "a handshaking connection was evicted"
            );
        }
        flood.push(a.id);
    }
    door.progress(client, Stage::Connected, t0);
    // With no bare connections left, the oldest of the least advanced goes.
    door.progress(client, Stage::Hello, t0);
    for id in flood.iter().rev().take(2) {
        door.progress(*id, Stage::Hello, t0);
    }
    let mut evicted = Vec::new();
    for _ in 0..2 {
        let a = door.admit(t0, v4(1));
        door.progress(a.id, Stage::Hello, t0);
        evicted.extend(a.evicted);
    }
    assert_eq!(evicted, vec![staller, client]);
}

#[test]
fn past_the_soft_caps_only_connections_past_their_grace_make_room() {
    let t0 = crate::test_epoch();
    let mut door = Doorway::new(small());
    let old = door.admit(t0, v4(1)).id;
    let t1 = t0 + Duration::from_millis(1500);
    let young: Vec<PendingId> = (0..2).map(|_| door.admit(t1, v4(1)).id).collect();
    // Source at its soft cap (3): the one past its grace goes, though the young are
    // still in their handshakes and the old one said hello.
    door.progress(old, Stage::Hello, t0);
    let a = door.admit(t1, v4(1));
    assert_eq!(a.evicted, vec![old]);
    // Now all are young: the soft cap lets the burst grow to the hard cap (4).
    assert!(door.admit(t1, v4(1)).evicted.is_empty());
    assert_eq!(door.pending(), 4);
    let b = door.admit(t1, v4(1));
    assert_eq!(b.evicted, vec![young[0]]);
}

#[test]
fn a_full_door_evicts_from_the_heaviest_source_and_spares_the_others() {
    let t0 = crate::test_epoch();
    let mut door = Doorway::new(small());
    let quiet = door.admit(t0, v4(9)).id;
    let mut loud = Vec::new();
    for i in 0..3 {
        loud.push(door.admit(t0, v4(1 + i % 3)).id);
    }
    let heavy: Vec<PendingId> = (0..4).map(|_| door.admit(t0, v4(7)).id).collect();
    assert_eq!(door.pending(), 8);
    // Full: a newcomer from a new source evicts the oldest of 10.0.0.7 (4 pending).
    let a = door.admit(t0, v4(200));
    assert_eq!(a.evicted, vec![heavy[0]]);
    assert!(door.leave(quiet), "the quiet source kept its connection");
}

#[test]
fn ipv6_sources_are_counted_by_their_64_and_mapped_ipv4_as_ipv4() {
    let a: IpAddr = "2001:db8:1:2::10".parse().unwrap();
    let b: IpAddr = "2001:db8:1:2:ffff::1".parse().unwrap();
    let c: IpAddr = "2001:db8:1:3::10".parse().unwrap();
    assert_eq!(Source::from(a), Source::from(b));
    assert_ne!(Source::from(a), Source::from(c));
    let mapped = IpAddr::V6(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped());
    assert_eq!(
        Source::from(mapped),
        Source::from(IpAddr::V4(Ipv4Addr::LOCALHOST))
    );
    assert_ne!(
        Source::from(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        Source::from(IpAddr::V4(Ipv4Addr::LOCALHOST))
    );
}

#[test]
fn the_whole_preauth_phase_has_a_deadline_longer_for_a_source_with_a_session() {
    let t0 = crate::test_epoch();
    let mut door = Doorway::new(small());
    let stranger = door.admit(t0, v4(1)).id;
    let known = door.admit(t0, v4(2)).id;
    door.session_began(v4(2));
    assert_eq!(door.next_deadline(), Some(t0 + Duration::from_secs(5)));
    assert!(door.expire(t0 + Duration::from_millis(4999)).is_empty());
    assert_eq!(door.expire(t0 + Duration::from_secs(5)), vec![stranger]);
    assert_eq!(door.next_deadline(), Some(t0 + Duration::from_secs(20)));
    door.session_ended(v4(2));
    // Its session over, the source is a stranger again.
    assert_eq!(door.expire(t0 + Duration::from_secs(6)), vec![known]);
    assert_eq!(door.pending(), 0);
    assert!(
        !door.leave(known),
        "an expired connection is no longer pending"
    );
}

#[test]
fn the_line_is_first_come_first_served_and_bounded() {
    let mut q = SessionQueue::new(2, 2);
    assert_eq!(q.arrive(), Arrival::Run);
    assert_eq!(q.arrive(), Arrival::Run);
    let Arrival::Wait(a) = q.arrive() else {
        panic!("third should wait")
    };
    let Arrival::Wait(b) = q.arrive() else {
        panic!("fourth should wait")
    };
    assert_eq!(q.arrive(), Arrival::Refuse);
    assert!(!q.try_start(a), "no slot yet");
    q.finish();
    assert!(!q.try_start(b), "b may not overtake a");
    assert!(q.try_start(a));
    q.finish();
    // A newcomer does not overtake b either.
    let Arrival::Wait(c) = q.arrive() else {
        panic!("b is still in line")
    };
    assert!(q.try_start(b));
    q.give_up(c);
    assert_eq!((q.running(), q.waiting()), (2, 0));
    q.finish();
    assert_eq!(q.arrive(), Arrival::Run);
}

#[derive(Debug, Clone)]
enum Op {
    Admit(u8),
    Leave(usize),
    Tick(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6).prop_map(Op::Admit),
        2 => (0usize..64).prop_map(Op::Leave),
        1 => (0u16..3000).prop_map(Op::Tick),
    ]
}

proptest! {
    /// Whatever arrives: the caps hold, the newcomer is always let in, nothing evicted is
    /// still pending, and every pending connection is younger than its deadline.
    #[test]
    fn the_caps_hold_and_newcomers_always_get_in(ops in prop::collection::vec(op(), 1..300)) {
        let t0 = crate::test_epoch();
        let mut now = t0;
        let mut door = Doorway::new(small());
        let mut live: Vec<(PendingId, Instant)> = Vec::new();
        for op in ops {
            match op {
                Op::Admit(s) => {
                    let a = door.admit(now, v4(s));
                    for e in &a.evicted {
                        prop_assert!(live.iter().any(|(id, _)| id == e), "evicted an unknown id");
                        live.retain(|(id, _)| id != e);
                    }
                    prop_assert!(!a.evicted.contains(&a.id));
                    live.push((a.id, now));
                }
                Op::Leave(i) => {
                    if !live.is_empty() {
                        let (id, _) = live.remove(i % live.len());
                        prop_assert!(door.leave(id));
                    }
                }
                Op::Tick(ms) => {
                    now += Duration::from_millis(ms as u64);
                    for id in door.expire(now) {
                        live.retain(|(x, _)| *x != id);
                    }
                }
            }
            prop_assert_eq!(door.pending(), live.len());
            prop_assert!(door.pending() <= 8);
            for (id, since) in &live {
                prop_assert!(now < *since + Duration::from_secs(5), "{:?} outlived its deadline", id);
            }
            for n in door.per_source.values() {
                prop_assert!(*n <= 4);
            }
        }
    }
}
