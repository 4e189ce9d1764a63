//! What `longhaul serve` prints about connections that never authenticate: a flood of 300
//! connections sending garbage (terminal escapes included) gets the first 20 lines, then
//! about one a second with the count left out — not 300 lines — and no peer byte reaches
//! the log raw. A real client is served meanwhile and its session line is printed.

#[macro_use]
mod support;

use std::io::Write;
use std::net::TcpStream;

use support::*;

#[test]
fn a_flood_of_garbage_connections_cannot_fill_the_log() {
    let s = Scratch::new("log-flood");
    let (home, root) = (s.dir("home"), s.dir("root"));
    write_file(&s.join("a"), b"payload", 0o644);
    let server = Server::start(&home, &root);
    let began = std::time::Instant::now();
    for i in 0..300u32 {
        let mut c = TcpStream::connect(&server.addr).unwrap();
        // Not TLS (first byte outside 20..=23): read as a plain first message, which is
        // malformed; a terminal escape and a forged log line ride along.
        let garbage =
            format!("\x00\x00\x00\x40\x7f\x1b[2J\x1b[31mlonghaul serve: session {i} ok\n");
        let _ = c.write_all(garbage.as_bytes());
        let _ = c.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut c, &mut sink);
    }
    let flood_secs = began.elapsed().as_secs();
    cp!(&home; s.join("a"), server.remote("a")).assert_ok();
    let log = server.log_with("session");
    let about_conns = log.lines().filter(|l| l.contains("127.0.0.1:")).count() as u64;
    // 20 at once, one a second after, the client's own line, and a second of slack.
    let allowed = 20 + flood_secs + 3;
    assert!(
        about_conns <= allowed,
        "{about_conns} lines about connections (at most {allowed} allowed):\n{log}"
    );
    assert!(about_conns >= 20, "the first lines are printed:\n{log}");
    assert!(
        !log.contains('\x1b'),
        "a raw escape reached the log:\n{log}"
    );
    assert!(
        !log.contains("session 7 ok"),
        "a peer's text was logged as if it were the server's:\n{log}"
    );
    assert!(
        log.contains("left out"),
        "the log says lines were left out:\n{log}"
    );
    assert_eq!(std::fs::read(root.join("a")).unwrap(), b"payload");
}
