//! `longhaul tune --peer` end to end on loopback: a `longhaul serve` process answers with its
//! own findings for the rate and the RTT the client measured (or was given); a wrong token
//! ends with the usual one-line error.

mod support;

use std::process::Output;

use support::{longhaul, Scratch, Server};

/// Starts `longhaul serve` on a free loopback port; returns it and `127.0.0.1:PORT` once it
/// printed its "listening on" line.
fn serve(home: &Scratch) -> (Server, String) {
    let server = Server::start_without_root(&home.0);
    let addr = server.addr.clone();
    (server, addr)
}

fn tune(home: &Scratch, args: &[&str]) -> Output {
    longhaul(&home.0).arg("tune").args(args).output().unwrap()
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// (key, wanted) of every object of one type: `wanted` depends on the rate and the RTT only.
fn wanted_of(objs: &[serde_json::Value], kind: &str) -> Vec<(String, String)> {
    objs.iter()
        .filter(|o| o["type"] == kind)
        .map(|o| (o["key"].to_string(), o["wanted"].to_string()))
        .collect()
}

#[test]
fn peer_answers_with_its_findings_for_the_measured_rtt() {
    let home = Scratch::new("measured");
    let (_server, addr) = serve(&home);
    let out = tune(&home, &["--peer", &addr, "--rate", "1G", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exit {:?}: {stderr}",
        out.status.code()
    );
    let objs = json_lines(&out);
    let peer = &objs[0];
    assert_eq!(peer["type"], "peer", "{peer}");
    assert_eq!(peer["address"], addr.as_str());
    assert_eq!(peer["rtt_source"], "measured");
    let rtt_ms = peer["rtt_ms"].as_f64().unwrap();
    assert!(
        rtt_ms > 0.0 && rtt_ms < 1000.0,
        "loopback RTT of {rtt_ms} ms"
    );

    let local = wanted_of(&objs, "finding");
    let remote = wanted_of(&objs, "peer_finding");
    assert!(local.len() >= 10, "{local:?}");
    // The server runs on this host and judged it for the same rate and measured RTT, so it
    // wants the same values check by check.
    assert_eq!(local, remote);
    let end = objs.last().unwrap();
    assert_eq!(end["type"], "end");
    let peer_total: u64 = ["peer_critical", "peer_warning", "peer_info", "peer_ok"]
        .iter()
        .map(|k| end[k].as_u64().unwrap())
        .sum();
    assert_eq!(peer_total as usize, remote.len());
    assert_eq!(end["peer_omitted"], 0);
}

#[test]
fn a_given_rtt_is_the_one_the_peer_judges() {
    let home = Scratch::new("given");
    let (_server, addr) = serve(&home);
    let out = tune(
        &home,
        &["--peer", &addr, "--rate", "1G", "--rtt", "180ms", "--json"],
    );
    assert!(matches!(out.status.code(), Some(0 | 1)));
    let objs = json_lines(&out);
    assert_eq!(objs[0]["rtt_source"], "given");
    // 1 Gbit/s at 180 ms needs 45 MB socket buffers (2 x BDP) on both hosts.
    for kind in ["finding", "peer_finding"] {
        let rmem = objs
            .iter()
            .find(|o| o["type"] == kind && o["key"] == "net.ipv4.tcp_rmem")
            .unwrap_or_else(|| panic!("no {kind} for tcp_rmem"));
        assert_eq!(rmem["wanted"], "max >= 45000000", "{rmem}");
    }

    // The text output heads each host's findings.
    let out = tune(&home, &["--peer", &addr, "--rate", "1G", "--rtt", "180ms"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let this = text
        .find("== This host ==")
        .expect("no heading for this host");
    let peer = text.find("== Peer ").expect("no heading for the peer");
    assert!(this < peer, "{text}");
    assert!(text[peer..].contains("net.ipv4.tcp_rmem"), "{text}");
}

#[test]
fn a_wrong_token_says_how_to_share_one() {
    let server_home = Scratch::new("tok-server");
    let client_home = Scratch::new("tok-client");
    let (_server, addr) = serve(&server_home);
    let out = tune(&client_home, &["--peer", &addr, "--rate", "1G"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("same token") && err.contains("LONGHAUL_TOKEN"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "not a one-line error: {err}");
    assert_eq!(
        err.matches("same token").count(),
        1,
        "cause repeated: {err}"
    );
    assert!(out.stdout.is_empty(), "printed findings despite the error");
}

#[test]
fn peer_needs_a_rate() {
    let home = Scratch::new("norate");
    let out = tune(&home, &["--peer", "127.0.0.1:9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rate"));
}
