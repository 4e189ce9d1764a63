//! Jump-start end to end on an emulated 1 Gbit/s, 100 ms path (root and /dev/net/tun; skipped
//! with a message otherwise): a first run writes the path's record and does not jump; a
//! second run jumps (the JSON says so) with the route metrics set at both ends during the
//! run and removed after it; `--no-jump-start` does not jump; a record whose RTT differs
//! from the path's does not jump. The path cache is private to the test (XDG_CACHE_HOME).

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use support::{is_root, longhaul_via, EmulatedPath, Scratch, Server};

const SERVER: &str = "10.99.0.2";
const CLIENT: &str = "10.99.0.1";

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// The host route to `dest` in namespace `ns`, as `ip route show` prints it ("" if none).
fn host_route(ns: &str, dest: &str) -> String {
    let out = Command::new("ip")
        .args(["-n", ns, "route", "show", &format!("{dest}/32")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn bench(ns_a: &str, home: &Path, cache: &Path, extra: &[&str]) -> Command {
    let mut c = longhaul_via(&["ip", "netns", "exec", ns_a], home);
    c.env("XDG_CACHE_HOME", cache)
        .args(["bench", SERVER, "-t", "3s", "-i", "0.5s", "--json"])
        .args(extra);
    c
}

fn ok(out: Output) -> (serde_json::Value, serde_json::Value) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let objs = json_lines(&out.stdout);
    let start = objs.first().unwrap().clone();
    let end = objs.last().unwrap().clone();
    assert_eq!(start["type"], "start");
    assert_eq!(end["type"], "end");
    (start, end)
}

#[test]
fn a_second_run_to_a_path_jumps_and_restores_the_route() {
    if !is_root() || !Path::new("/dev/net/tun").exists() {
        eprintln!("SKIP: jump-start test needs root and /dev/net/tun");
        return;
    }
    let name = format!("js{}", std::process::id() % 100_000);
    let _path = EmulatedPath::up(&name, &["--rtt", "100ms", "--rate", "1G"]);
    let (ns_a, ns_b) = (format!("lh-{name}-a"), format!("lh-{name}-b"));
    let home = Scratch::new("jump");
    let cache = home.dir("cache");
    let _server = Server::start_args(
        &["ip", "netns", "exec", &ns_b],
        &home.0,
        &["--listen", SERVER],
    );

    // First run: nothing remembered, so no jump; the record is written.
    let (start, end) = ok(bench(&ns_a, &home.0, &cache, &[]).output().unwrap());
    assert_eq!(start["jump_start"]["used"], false, "{start}");
    assert_eq!(
        start["jump_start"]["not_used"], "no earlier run to this path",
        "{start}"
    );
    assert_eq!(end["jump_start"]["used"], false);
    let dialed = end["summary"]["data_dialed_rtts"].as_f64().unwrap_or(0.0);
    assert!(
        dialed >= 0.9,
        "a path not remembered dialed {dialed} RTT in: {end}"
    );
    let file = cache.join("longhaul").join("paths");
    let record = std::fs::read_to_string(&file).unwrap();
    assert!(record.contains(&format!("{SERVER} {CLIENT} ")), "{record}");

    // Second run: jumps; both ends' host routes carry the metrics while it runs.
    let child = bench(&ns_a, &home.0, &cache, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = (String::new(), String::new());
    // Bounded: the run lasts 3 s plus its set-up; 400 x 25 ms is 10 s.
    for _ in 0..400 {
        let a = host_route(&ns_a, SERVER);
        let b = host_route(&ns_b, CLIENT);
        if a.contains("initcwnd") && b.contains("initrwnd") {
            seen = (a, b);
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let (start, end) = ok(child.wait_with_output().unwrap());
    assert_eq!(start["jump_start"]["used"], true, "{start}");
    // Decided before the connect from the record: the data connections left with the
    // control connection's SYN (about 0 round trips in; the first run's waited for the
    // connect's RTT, 1), so data flowed after 3 round trips, not 4.
    let dialed = end["summary"]["data_dialed_rtts"].as_f64().unwrap_or(9.0);
    assert!(
        dialed < 0.5,
        "data connections dialed {dialed} RTT in: {end}"
    );
    assert_eq!(end["streams"].as_array().map(Vec::len), Some(8), "{end}");
    let cwnd = start["jump_start"]["initcwnd"].as_u64().unwrap();
    assert!(cwnd > 10, "{start}");
    assert!(
        seen.0.contains(&format!("initcwnd {cwnd}")),
        "client route {seen:?}"
    );
    assert!(seen.0.contains("proto 76"), "client route {seen:?}");
    assert!(seen.1.contains("initrwnd"), "server route {seen:?}");
    let verdict = end["jump_start"]["verdict"].as_str().unwrap_or("");
    assert!(
        ["confirmed", "retreated", "pending"].contains(&verdict),
        "{end}"
    );
    // Restored at both ends: the client's before it exits, the server's when its session
    // ends (it may still be closing when the client is done; 400 x 25 ms bounds the wait).
    assert_eq!(host_route(&ns_a, SERVER), "");
    let mut left = host_route(&ns_b, CLIENT);
    for _ in 0..400 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
        left = host_route(&ns_b, CLIENT);
    }
    assert_eq!(left, "", "the server kept its host route");

    // --no-jump-start: not used, and says why.
    let (start, _) = ok(bench(&ns_a, &home.0, &cache, &["--no-jump-start"])
        .output()
        .unwrap());
    assert_eq!(start["jump_start"]["used"], false);
    assert_eq!(
        start["jump_start"]["not_used"],
        "turned off (--no-jump-start)"
    );

    // A record whose RTT is not the path's (twice as long): another path, no jump.
    let text = std::fs::read_to_string(&file).unwrap();
    let changed: String = text
        .lines()
        .map(|l| {
            let mut f: Vec<String> = l.split(' ').map(str::to_string).collect();
            if f.len() == 7 {
                f[3] = (f[3].parse::<u64>().unwrap() * 2).to_string();
            }
            f.join(" ") + "\n"
        })
        .collect();
    std::fs::write(&file, changed).unwrap();
    let (start, end) = ok(bench(&ns_a, &home.0, &cache, &[]).output().unwrap());
    assert_eq!(start["jump_start"]["used"], false, "{start}");
    // The guess from the record (and its route) was dropped at the connect, and the data
    // connections dialed again for the RTT measured.
    let dialed = end["summary"]["data_dialed_rtts"].as_f64().unwrap_or(0.0);
    assert!(
        dialed >= 0.9,
        "a wrong guess was kept ({dialed} RTT in): {end}"
    );
    assert!(
        start["jump_start"]["not_used"]
            .as_str()
            .unwrap()
            .contains("the RTT is"),
        "{start}"
    );
    assert_eq!(host_route(&ns_a, SERVER), "");
}
