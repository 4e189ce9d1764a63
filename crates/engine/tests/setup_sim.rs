//! Round trips from the control connection's SYN to a run's first data byte, counted
//! exactly in a simulation of the set-up (`setup`: both ends' real machines on a
//! simulated link), for every way a run starts: push, pull, a pull answered ahead, a
//! jumping push and pull, bench and `bench --reverse`, on a path remembered or not, and
//! on the first contact with a server. docs/startup.md draws the same timelines; the
//! binaries measure them on an emulated path (`bench/startup-rtts.sh`).

mod setup;

use longhaul_policy::data_start::Leave;
use setup::net::{Conn, Side};
use setup::{run, Case, Mode, Path, Timeline};

/// Runs `case` and checks it reached its first byte without an error.
fn first_byte(case: Case) -> Timeline {
    let t = run(case.clone());
    assert!(t.error.is_none(), "{case:?}: {:?}\n{:#?}", t.error, t.trace);
    assert!(
        t.first_byte.is_some(),
        "{case:?}: no first byte\n{:#?}",
        t.trace
    );
    t
}

#[test]
fn a_push_s_first_byte_leaves_at_three_round_trips_whatever_the_path_cache_knows() {
    for path in [Path::NotRemembered, Path::Remembered, Path::RememberedJump] {
        let t = first_byte(Case::new(Mode::Push, path));
        assert_eq!(t.first_byte, Some(3.0), "{path:?}: {:#?}", t.trace);
        assert_eq!(
            t.data_dialed,
            [0.0],
            "{path:?}: the data connections go with the SYN"
        );
        assert_eq!(t.leave, Some(Leave::WithControl), "{path:?}");
    }
}

#[test]
fn a_pull_waits_a_round_trip_for_its_list_s_answer_unless_it_answered_ahead() {
    for path in [Path::NotRemembered, Path::Remembered] {
        let t = first_byte(Case::new(Mode::Pull, path));
        assert_eq!(t.first_byte, Some(4.0), "{path:?}: {:#?}", t.trace);
        let t = first_byte(Case::new(Mode::PullAhead, path));
        assert_eq!(t.first_byte, Some(3.0), "{path:?} ahead: {:#?}", t.trace);
    }
}

#[test]
fn a_jumping_pull_s_data_connections_leave_behind_the_request_and_meet_the_server_s_route() {
    for mode in [Mode::Pull, Mode::PullAhead, Mode::BenchReverse] {
        let t = first_byte(Case::new(mode, Path::RememberedJump));
        assert_eq!(t.first_byte, Some(5.0), "{mode:?}: {:#?}", t.trace);
        assert_eq!(t.leave, Some(Leave::BehindRequest), "{mode:?}");
        assert_eq!(t.data_dialed, [2.0], "{mode:?}");
        // The server set its route as it read the request, before any data connection's
        // handshake completed there (the kernel gives the child socket the route then).
        let route = t.server_route.expect("the server's route");
        assert_eq!(route, 2.5, "{mode:?}");
        assert!(!t.accepted.is_empty(), "{mode:?}");
        assert!(
            t.accepted.iter().all(|a| *a > route),
            "{mode:?}: {:?}",
            t.accepted
        );
    }
}

#[test]
fn a_jumping_push_sets_its_route_before_its_data_connections_leave() {
    let t = first_byte(Case::new(Mode::Push, Path::RememberedJump));
    assert_eq!(t.client_route, Some(0.0));
    assert_eq!(t.data_dialed, [0.0]);
    assert_eq!(t.first_byte, Some(3.0));
}

#[test]
fn bench_sends_at_three_round_trips_and_bench_reverse_receives_at_three() {
    for path in [Path::NotRemembered, Path::Remembered] {
        let t = first_byte(Case::new(Mode::Bench, path));
        assert_eq!(t.first_byte, Some(3.0), "bench {path:?}: {:#?}", t.trace);
        let t = first_byte(Case::new(Mode::BenchReverse, path));
        assert_eq!(t.first_byte, Some(3.0), "bench -R {path:?}: {:#?}", t.trace);
    }
    let t = first_byte(Case::new(Mode::Bench, Path::RememberedJump));
    assert_eq!(t.first_byte, Some(3.0));
}

#[test]
fn the_first_contact_with_a_server_costs_its_data_connections_a_round_trip() {
    for (mode, rtts) in [
        (Mode::Bench, 4.0),
        (Mode::BenchReverse, 4.0),
        (Mode::PullAhead, 4.0),
    ] {
        let case = Case {
            first_contact: true,
            ..Case::new(mode, Path::NotRemembered)
        };
        let t = first_byte(case);
        assert_eq!(t.first_byte, Some(rtts), "{mode:?}: {:#?}", t.trace);
    }
}

#[test]
fn the_user_s_stream_count_goes_with_the_syn() {
    let case = Case {
        user_streams: Some(4),
        ..Case::new(Mode::Push, Path::NotRemembered)
    };
    let t = first_byte(case);
    assert_eq!((t.first_byte, t.data_dialed), (Some(3.0), vec![0.0]));
}

/// A lost packet of each step, and what the run does: the machines' error, or nothing
/// more on the wire (the driver's timeout ends the run: the dial's and the opening's
/// read timeout, or the server's wait for a data hello).
#[test]
fn a_lost_message_at_each_step_ends_in_an_error_or_a_driver_s_timeout_never_a_first_byte() {
    let lost = |to, conn, name| Case {
        lose: vec![(to, conn, name)],
        ..Case::new(Mode::Pull, Path::Remembered)
    };
    for case in [
        lost(Side::Client, Some(Conn::Control), "ServerHello"),
        lost(Side::Server, Some(Conn::Control), "ClientProof"),
        lost(Side::Server, Some(Conn::Control), "TransferParams"),
        lost(Side::Client, Some(Conn::Control), "Welcome"),
        lost(Side::Client, Some(Conn::Control), "TransferReady"),
        lost(Side::Server, None, "DataHello"),
    ] {
        let t = run(case.clone());
        assert_eq!(t.lost.len(), 1, "{case:?}: nothing lost? {:#?}", t.trace);
        assert!(
            t.first_byte.is_none(),
            "{case:?}: a first byte at {:?}",
            t.first_byte
        );
        eprintln!("{:?} lost: {:?}", case.lose, t.error);
    }
}
