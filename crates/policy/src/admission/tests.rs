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

/// A client accepted before its first bytes came looks like a bare connection until its
/// thread looks; meanwhile a flood of bare connections from its address would push it
/// out (stalest silent first). Asked before it goes, the driver says it has spoken: it is
/// spared, and the flood evicts its own.
#[test]
fn a_client_whose_bytes_came_after_its_accept_is_not_evicted_as_bare() {
    let t0 = crate::test_epoch();
    let run = |check: bool| {
        let mut door = Doorway::new(small());
        let client = door.admit(t0, v4(1)).id;
        let mut asked = 0;
        let mut lost = false;
        let mut evictions = 0;
        for i in 1..50u64 {
            let now = t0 + Duration::from_millis(i);
            let a = door.admit_checking(now, v4(1), |id| {
                asked += 1;
                check && id == client
            });
            lost |= a.evicted.contains(&client);
            evictions += a.evicted.len();
        }
        (lost, asked, evictions)
    };
    let (lost, asked, evictions) = run(true);
    assert!(!lost, "the client was evicted though it had spoken");
    // Each flood connection evicted was asked about, and the client once.
    assert!(
        evictions > 40,
        "the flood filled the source's cap: {evictions}"
    );
    assert_eq!(asked, evictions + 1);
    let (lost, _, _) = run(false);
    assert!(
        lost,
        "unchecked, the flood pushes the silent-looking client out"
    );
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

/// Caps that only bind for the whole door, so the hard cap's choice shows alone.
fn door_only(max_pending: usize) -> DoorLimits {
    DoorLimits {
        max_pending,
        max_per_source: max_pending,
        soft_pending: max_pending,
        soft_per_source: max_pending,
        ..small()
    }
}

#[test]
fn a_full_door_evicts_the_stalest_whatever_the_load_of_its_source() {
    let t0 = crate::test_epoch();
    let t1 = t0 + Duration::from_millis(10);
    let mut door = Doorway::new(small());
    let quiet = door.admit(t0, v4(9)).id;
    for i in 0..3 {
        door.admit(t1, v4(1 + i % 3));
    }
    let heavy: Vec<PendingId> = (0..4).map(|_| door.admit(t1, v4(7)).id).collect();
    assert_eq!(door.pending(), 8);
    // Full: a newcomer from a new source evicts the stalest, from the quiet source,
    // though 10.0.0.7 holds four.
    let a = door.admit(t1, v4(200));
    assert_eq!(a.evicted, vec![quiet]);
    // The next: the oldest of those that came at t1, not one of the heavy source's.
    let b = door.admit(t1, v4(201));
    assert!(!heavy.contains(&b.evicted[0]), "{:?}", b.evicted);
}

/// Issue 28: one bare connection from each of many addresses at the hard cap evicted a
/// real client's connections first, its control and data connections making its address
/// the busiest. Now the flood's stalest go, and the client's proven data connections are
/// not at the door at all.
#[test]
fn a_spread_flood_of_bare_connections_spares_a_client_moving_through_its_handshake() {
    let t0 = crate::test_epoch();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let mut door = Doorway::new(door_only(16));
    let client_ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let flood_ip = |i: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
    // The door is full of the flood's bare connections, one per address.
    for i in 0..16 {
        door.admit(t0, flood_ip(i));
    }
    // The client: a control connection and eight data connections, each evicting one.
    let control = door.admit(ms(1), client_ip).id;
    let data: Vec<PendingId> = (0..8).map(|_| door.admit(ms(1), client_ip).id).collect();
    door.progress(control, Stage::Hello, ms(2));
    for d in &data {
        door.progress(*d, Stage::Hello, ms(2));
    }
    // More flood, from new addresses, while the client's connections say hello: the
    // flood's stalest go, none of the client's (its address holds 9, every other 1).
    let mut n = 16;
    for _ in 0..7 {
        let a = door.admit(ms(3), flood_ip(n));
        n += 1;
        assert!(
            a.evicted.iter().all(|e| *e != control && !data.contains(e)),
            "the client's connection {:?} was evicted",
            a.evicted
        );
    }
    // The control connection proves the token and the data connections their session's
    // secret: no flood, however long, evicts them.
    assert!(door.proved(control));
    for d in &data {
        assert!(door.proved(*d));
    }
    for i in 0..1000 {
        let a = door.admit(ms(4 + i), flood_ip(n));
        n += 1;
        assert!(a.evicted.iter().all(|e| *e != control && !data.contains(e)));
        assert!(door.pending() <= 16);
    }
}

/// A burst of bare connections, each newer than the client's last step: those that said
/// nothing go first, however new, and the client in its handshake stays; with none left,
/// the stalest goes.
#[test]
fn bare_connections_go_before_a_client_in_its_handshake_however_new() {
    let t0 = crate::test_epoch();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let mut door = Doorway::new(door_only(8));
    let client = door.admit(t0, v4(1)).id;
    door.progress(client, Stage::Handshaking, t0);
    let mut bare = Vec::new();
    for i in 0..7u8 {
        bare.push(door.admit(ms(1 + u64::from(i)), v4(100 + i)).id);
    }
    let mut n = 200u8;
    for (i, b) in bare.iter().enumerate() {
        let a = door.admit(ms(8), v4(n));
        n += 1;
        assert_eq!(a.evicted, vec![*b], "arrival {i}");
        door.progress(a.id, Stage::Secured, ms(8));
    }
    // Every other connection spoke after the client's last step: the client goes.
    let c = door.admit(ms(9), v4(n));
    assert_eq!(c.evicted, vec![client]);
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
enum Move {
    Admit(u8),
    Progress(usize, u8),
    Prove(usize),
    Tick(u16),
}

fn door_move() -> impl Strategy<Value = Move> {
    prop_oneof![
        6 => any::<u8>().prop_map(Move::Admit),
        3 => (0usize..64, 1u8..4).prop_map(|(i, s)| Move::Progress(i, s)),
        1 => (0usize..64).prop_map(Move::Prove),
        2 => (0u16..40).prop_map(Move::Tick),
    ]
}

fn stage(n: u8) -> Stage {
    match n {
        0 => Stage::Connected,
        1 => Stage::Handshaking,
        2 => Stage::Secured,
        _ => Stage::Hello,
    }
}

proptest! {
    /// At the hard cap, from any mix of sources: the victim is the stalest pending
    /// connection (then the least far, then the oldest), those that said nothing first, whatever its
    /// source holds, and a connection that proved itself is never evicted.
    #[test]
    fn at_the_hard_cap_the_stalest_unproven_goes(moves in prop::collection::vec(door_move(), 1..400)) {
        let t0 = crate::test_epoch();
        let mut now = t0;
        let mut door = Doorway::new(DoorLimits {
            preauth: Duration::from_secs(3600),
            preauth_known_source: Duration::from_secs(3600),
            ..door_only(8)
        });
        // (id, moved, stage) of each pending connection; the proven.
        let mut live: Vec<(PendingId, Instant, Stage)> = Vec::new();
        let mut proven: Vec<PendingId> = Vec::new();
        for m in moves {
            match m {
                Move::Admit(s) => {
                    let stalest = live
                        .iter()
                        .map(|(id, moved, st)| (*st != Stage::Connected, *moved, *st, *id))
                        .min();
                    let full = live.len() >= 8;
                    let a = door.admit(now, IpAddr::V4(Ipv4Addr::new(10, s % 4, s, 1)));
                    if full {
                        prop_assert_eq!(a.evicted.len(), 1);
                        prop_assert_eq!(Some(a.evicted[0]), stalest.map(|x| x.3));
                    } else {
                        prop_assert!(a.evicted.is_empty());
                    }
                    for e in &a.evicted {
                        prop_assert!(!proven.contains(e), "a proven connection was evicted");
                    }
                    live.retain(|(id, _, _)| !a.evicted.contains(id));
                    live.push((a.id, now, Stage::Connected));
                }
                Move::Progress(i, s) => {
                    if !live.is_empty() {
                        let n = i % live.len();
                        let e = &mut live[n];
                        if stage(s) > e.2 {
                            e.2 = stage(s);
                            e.1 = now;
                        }
                        door.progress(e.0, stage(s), now);
                    }
                }
                Move::Prove(i) => {
                    if !live.is_empty() {
                        let (id, _, _) = live.remove(i % live.len());
                        prop_assert!(door.proved(id));
                        proven.push(id);
                    }
                }
                Move::Tick(ms) => now += Duration::from_millis(ms as u64),
            }
            prop_assert_eq!(door.pending(), live.len());
        }
    }
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
