//! Tokens that are secrets (issue 28, item 5): `longhaul serve --token-file` refuses a
//! passphrase-shaped token, saying why and how to make one (so do `cp --token-file` and
//! `LONGHAUL_TOKEN`), and accepts what `longhaul token` prints or writes (`--out FILE`:
//! mode 0600, never overwriting).

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use support::*;

/// How long a command that should end at once may run; one that does not (a server
/// that took the token and serves) is killed then, and the test fails.
const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn serve_refuses_a_passphrase_token_and_says_how_to_make_one() {
    let scratch = Scratch::new("token-weak");
    let home = scratch.dir("home");
    let file = scratch.join("token");
    write_file(&file, b"correcthorsebatterystaple\n", 0o600);
    let serve = run(
        longhaul(&home)
            .args([
                "serve",
                "--listen",
                "127.0.0.1",
                "--port",
                "0",
                "--token-file",
            ])
            .arg(&file),
        LIMIT,
    );
    let err = &serve.stderr;
    assert_eq!(serve.code(), Some(2), "{err}");
    assert!(!err.contains("listening on"), "{err}");
    assert!(
        err.contains(&file.display().to_string())
            && err.contains("shape of text")
            && err.contains("longhaul token --out FILE"),
        "{err}"
    );
    // The same from cp's --token-file and from LONGHAUL_TOKEN.
    let cp = run(
        longhaul(&home)
            .args(["cp", "--token-file"])
            .arg(&file)
            .args(["longhaul://127.0.0.1:9/x", scratch.0.to_str().unwrap()]),
        LIMIT,
    );
    assert_eq!(cp.code(), Some(2), "{}", cp.describe());
    assert!(cp.stderr.contains("shape of text"), "{}", cp.describe());
    let env = run(
        longhaul(&home)
            .env("LONGHAUL_TOKEN", "correcthorsebatterystaple")
            .args(["serve", "--listen", "127.0.0.1", "--port", "0"]),
        LIMIT,
    );
    assert_eq!(env.code(), Some(2), "{}", env.describe());
    assert!(
        env.stderr.contains("LONGHAUL_TOKEN") && env.stderr.contains("shape of text"),
        "{}",
        env.describe()
    );
}

#[test]
fn what_longhaul_token_makes_is_accepted() {
    let scratch = Scratch::new("token-made");
    let home = scratch.dir("home");
    // Printed: 64 hex digits, a fresh one each time.
    let printed = || {
        let out = run(longhaul(&home).arg("token"), LIMIT);
        out.assert_ok();
        out.stdout
    };
    let (a, b) = (printed(), printed());
    assert_eq!(a.trim().len(), 64, "{a:?}");
    assert!(a.trim().bytes().all(|c| c.is_ascii_hexdigit()), "{a:?}");
    assert_ne!(a, b);
    let file = scratch.join("printed");
    write_file(&file, a.as_bytes(), 0o600);
    drop(Server::start_with_token_file(
        &home,
        &scratch.dir("root"),
        &file,
    ));

    // Written: mode 0600, and never over an existing file.
    let out_file = scratch.join("made");
    run(
        longhaul(&home).args(["token", "--out"]).arg(&out_file),
        LIMIT,
    )
    .assert_ok();
    let mode = std::fs::metadata(&out_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let first = std::fs::read(&out_file).unwrap();
    let again = run(
        longhaul(&home).args(["token", "--out"]).arg(&out_file),
        LIMIT,
    );
    assert_eq!(again.code(), Some(2), "{}", again.describe());
    assert!(
        again.stderr.contains("never overwritten"),
        "{}",
        again.describe()
    );
    assert_eq!(
        std::fs::read(&out_file).unwrap(),
        first,
        "the token was overwritten"
    );
    drop(Server::start_with_token_file(
        &home,
        &scratch.dir("root2"),
        &out_file,
    ));
}
