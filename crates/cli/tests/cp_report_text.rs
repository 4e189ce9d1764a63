//! What `longhaul cp` and `sync` say about small and unchanged copies, and their usage
//! line (issue 28, item 6): no CPU-per-GB figure over a few bytes (`null` in JSON), an
//! unchanged file is "unchanged", not "resumed", and `cp` without arguments prints a
//! usage a person can read; a stream that carried no chunk is not called the slowest.

#[macro_use]
mod support;

use support::*;

#[test]
fn a_tiny_copy_gives_no_per_gb_cpu_figure() {
    let scratch = Scratch::new("report-tiny");
    let home = scratch.dir("home");
    let root = scratch.dir("root");
    let src = scratch.dir("src").join("six");
    write_file(&src, b"hello!", 0o644);
    let server = Server::start(&home, &root);
    let run = cp!(&home; &src, server.remote("six"));
    run.assert_ok();
    let text = format!("{}{}", run.stdout, run.stderr);
    assert!(!text.contains("s/GB"), "{}", run.describe());
    assert!(
        text.contains("too little data for a per-GB figure"),
        "{}",
        run.describe()
    );
    let json = cp!(&home; "--json", &src, server.remote("six-again"));
    json.assert_ok();
    let end = json.json_of("end");
    assert!(end["cpu_seconds_per_gb"].is_null(), "{end}");
    assert!(end["cpu_seconds"].is_number(), "{end}");
}

/// A pull of one small file (one chunk) on two streams: one stream carries nothing, and
/// its 0 bytes are not "slowest stream 0 % of the fastest".
#[test]
fn a_stream_without_a_chunk_is_not_the_slowest_stream() {
    let scratch = Scratch::new("report-idle-stream");
    let home = scratch.dir("home");
    let root = scratch.dir("root");
    write_file(&root.join("one"), &[7u8; 100_000], 0o644);
    let server = Server::start(&home, &root);
    let got = scratch.join("got");
    let run = cp!(&home; "-P", "2", server.remote("one"), &got);
    run.assert_ok();
    assert!(
        !run.stdout.contains("slowest stream 0 %")
            && run.stdout.contains("1 of 2 streams carried data"),
        "{}",
        run.describe()
    );
}

#[test]
fn an_unchanged_file_is_reported_unchanged_not_resumed() {
    let scratch = Scratch::new("report-unchanged");
    let home = scratch.dir("home");
    let root = scratch.dir("root");
    let src = scratch.dir("src").join("five");
    write_file(&src, b"five!", 0o644);
    let server = Server::start(&home, &root);
    cp!(&home; &src, server.remote("five")).assert_ok();
    let again = cp!(&home; &src, server.remote("five"));
    again.assert_ok();
    let text = format!("{}{}", again.stdout, again.stderr);
    assert!(!text.contains("resumed"), "{}", again.describe());
    assert!(
        text.contains("1 unchanged (5.00 B)"),
        "{}",
        again.describe()
    );
    let json = cp!(&home; "--json", &src, server.remote("five"));
    let end = json.json_of("end");
    assert_eq!(end["unchanged_files"], 1, "{end}");
    assert_eq!(end["unchanged_bytes"], 5, "{end}");
}

#[test]
fn cp_and_sync_without_arguments_print_a_readable_usage() {
    let scratch = Scratch::new("report-usage");
    let home = scratch.dir("home");
    for cmd in ["cp", "sync"] {
        let out = longhaul(&home).arg(cmd).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("Usage: longhaul {cmd} [OPTIONS] SOURCE... DEST")),
            "{err}"
        );
        assert!(!err.contains("SRC... DST"), "{err}");
    }
}
