//! Round trips from the control connection's SYN to a run's first data byte, counted
//! exactly in a simulation of the set-up (`setup`: both ends' real machines on a
//! simulated link), for every way a run starts: push, pull, a pull answered ahead, a
//! jumping push and pull, bench and `bench --reverse`, on a path remembered or not, and
//! on the first contact with a server; a copy carried on to its commit; and what a lost
//! message at each step leads to. docs/startup.md draws the same timelines; the
//! binaries measure them on an emulated path (`bench/startup-rtts.sh`).

mod setup;

use std::time::Duration;

use longhaul_policy::data_start::Leave;
use longhaul_proto::Wait;
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
    // TLS on the data connections costs their handshake's round trip behind the request;
    // bench's plain data connections send their hello behind the ACK.
    let encrypted_bench = Case {
        encrypted_data: true,
        ..Case::new(Mode::BenchReverse, Path::RememberedJump)
    };
    for (case, rtts) in [
        (Case::new(Mode::Pull, Path::RememberedJump), 5.0),
        (Case::new(Mode::PullAhead, Path::RememberedJump), 5.0),
        (Case::new(Mode::BenchReverse, Path::RememberedJump), 4.0),
        (encrypted_bench, 5.0),
    ] {
        let t = first_byte(case.clone());
        assert_eq!(t.first_byte, Some(rtts), "{case:?}: {:#?}", t.trace);
        assert_eq!(t.leave, Some(Leave::BehindRequest), "{case:?}");
        assert_eq!(t.data_dialed, [2.0], "{case:?}");
        // The server set its route as it read the request, before any data connection's
        // handshake completed there (the kernel gives the child socket the route then).
        let route = t.server_route.expect("the server's route");
        assert_eq!(route, 2.5, "{case:?}");
        assert!(!t.accepted.is_empty(), "{case:?}");
        assert!(
            t.accepted.iter().all(|a| *a > route),
            "{case:?}: {:?}",
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
fn the_first_contact_with_a_server_costs_its_encrypted_data_connections_a_round_trip() {
    // Their TLS waits for the control connection's to pin the certificate; bench's plain
    // data connections wait for nothing.
    for (mode, encrypted_data, rtts) in [
        (Mode::Bench, false, 3.0),
        (Mode::BenchReverse, false, 3.0),
        (Mode::Bench, true, 4.0),
        (Mode::BenchReverse, true, 4.0),
        (Mode::PullAhead, true, 4.0),
    ] {
        let case = Case {
            first_contact: true,
            encrypted_data,
            ..Case::new(mode, Path::NotRemembered)
        };
        let t = first_byte(case.clone());
        assert_eq!(t.first_byte, Some(rtts), "{case:?}: {:#?}", t.trace);
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

/// What a lost packet leads to.
#[derive(Debug)]
enum Outcome {
    /// A machine's error (its text, as the run reports it).
    Error(&'static str),
    /// Nothing more on the wire: these ends' set-up machines wait, each at most its wait's
    /// limit (the driver's read timeout), then the run ends in an error naming the wait.
    Waits(&'static [(Side, Wait)]),
}

/// Loses `name` on the way to `to` in a run of `mode`, and checks what follows.
fn lose(mode: Mode, to: Side, conn: Option<Conn>, name: &'static str, expected: Outcome) {
    let case = Case {
        lose: vec![(to, conn, name)],
        ..Case::new(mode, Path::Remembered)
    };
    let t = run(case.clone());
    assert_eq!(t.lost.len(), 1, "{case:?}: nothing lost? {:#?}", t.trace);
    assert_eq!(t.first_byte, None, "{case:?}: {:#?}", t.trace);
    match expected {
        Outcome::Error(e) => assert_eq!(t.error.as_deref(), Some(e), "{case:?}: {:#?}", t.trace),
        Outcome::Waits(waits) => {
            assert_eq!(t.error, None, "{case:?}: {:#?}", t.trace);
            assert_eq!(t.waits, waits, "{case:?}: {:#?}", t.trace);
            for (_, w) in waits {
                assert!(w.limit() <= Duration::from_secs(60), "{w}");
            }
        }
    }
}

#[test]
fn a_lost_message_at_each_step_of_a_copy_ends_in_its_error_or_a_bounded_wait() {
    use Outcome::{Error, Waits};
    use Side::{Client, Server};
    let control = Some(Conn::Control);
    // The server's proof: the client's dial waits for it, the server for the client's.
    lose(
        Mode::Pull,
        Client,
        control,
        "ServerHello",
        Waits(&[(Client, Wait::ServerHello), (Server, Wait::ClientProof)]),
    );
    // Our proof: the server's session refuses what follows it (and tells the client).
    lose(
        Mode::Pull,
        Server,
        control,
        "ClientProof",
        Error("unexpected TransferParams message while waiting for the client's proof"),
    );
    // The request: its rules come first.
    lose(
        Mode::Pull,
        Server,
        control,
        "TransferParams",
        Error("unexpected Transfer(FilterRules { rules: [] })"),
    );
    // The welcome, then the answer: the opening's errors.
    lose(
        Mode::Pull,
        Client,
        control,
        "Welcome",
        Error("the server sent TransferReady before its welcome"),
    );
    lose(
        Mode::Pull,
        Client,
        control,
        "TransferReady",
        Error("expected TransferReady, got FileEntries"),
    );
    // A push's: the receiver's answer to the list follows it.
    lose(
        Mode::Push,
        Client,
        control,
        "TransferReady",
        Error("expected TransferReady, got FileListEnd"),
    );
    // A data hello: the server's session waits for its stream, and sends nothing before
    // every stream is there.
    let one_missing = &[(Server, Wait::DataStreams { missing: 1 })];
    lose(Mode::Pull, Server, None, "DataHello", Waits(one_missing));
    lose(
        Mode::PullAhead,
        Server,
        None,
        "DataHello",
        Waits(one_missing),
    );
    // A pull's answer to the list: the sending server waits for it as long as the
    // receiving client keeps the connection alive, and that ends with the answer it sent.
    lose(
        Mode::Pull,
        Server,
        control,
        "FileListEnd",
        Waits(&[(Server, Wait::ListAnswer)]),
    );
}

#[test]
fn a_lost_message_at_each_step_of_a_bench_ends_in_its_error_or_a_bounded_wait() {
    use Outcome::{Error, Waits};
    use Side::{Client, Server};
    let control = Some(Conn::Control);
    lose(
        Mode::Bench,
        Server,
        control,
        "BenchParams",
        Waits(&[(Client, Wait::BenchReady), (Server, Wait::Request)]),
    );
    lose(
        Mode::Bench,
        Client,
        control,
        "BenchReady",
        Error("unexpected Start message while waiting for the server to accept the parameters"),
    );
    // Start: the client waits for it.
    lose(
        Mode::Bench,
        Client,
        control,
        "Start",
        Waits(&[(Client, Wait::Start)]),
    );
    lose(
        Mode::BenchReverse,
        Server,
        None,
        "DataHello",
        Waits(&[
            (Client, Wait::Start),
            (Server, Wait::DataStreams { missing: 1 }),
        ]),
    );
}

/// A copy from connect to its commit: the sessions move the whole source (its chunks
/// checked against their BLAKE3 and the file's digest) and the client ends as its driver
/// does. The link has no rate, so the data takes no time: what is counted is the round
/// trips around it.
#[test]
fn a_copy_runs_from_connect_to_its_commit() {
    let cases = [
        // A push's sender learns of the commit a round trip after its last chunk left.
        (Mode::Push, Path::NotRemembered, 3.0, 4.0),
        (Mode::Push, Path::RememberedJump, 3.0, 4.0),
        // A pull's receiver ends as it commits the last file: the sender's `TransferDone`
        // would only confirm it, a round trip later.
        (Mode::Pull, Path::Remembered, 4.0, 4.0),
        (Mode::PullAhead, Path::NotRemembered, 3.0, 3.0),
        (Mode::Pull, Path::RememberedJump, 5.0, 5.0),
    ];
    for (mode, path, first, committed) in cases {
        let case = Case {
            to_commit: true,
            ..Case::new(mode, path)
        };
        let t = run(case.clone());
        assert_eq!(t.error, None, "{case:?}: {:#?}", t.trace);
        assert_eq!(
            (t.first_byte, t.committed, t.files_ok),
            (Some(first), Some(committed), 1),
            "{case:?}: {:#?}",
            t.trace
        );
    }
}
