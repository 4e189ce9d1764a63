//! `longhaul serve --config FILE` (issue 31, item 4): a real server started from a TOML
//! file serves the root, metrics address and memory the file names, a flag on the command
//! line wins over the file, the example shipped in `contrib/serve.toml` parses, and a file
//! with an unknown key, a bad value or a setting that needs a root it lacks is one clear
//! error naming the file and the key.

mod support;

use support::http::{free_port, get};
use support::{cp_command, longhaul, make_token, refused_config, write_file, Scratch, Server};

const EXAMPLE: &str = include_str!("../../../contrib/serve.toml");

#[test]
fn the_file_sets_the_defaults_and_a_flag_wins() {
    let s = Scratch::new("serve-config");
    let home = s.dir("home");
    let from_file = s.dir("root-from-file");
    let from_flag = s.dir("root-from-flag");
    let metrics = format!("127.0.0.1:{}", free_port());
    let config = s.join("serve.toml");
    write_file(
        &config,
        format!(
            "listen = \"127.0.0.1\"\nport = 0\nroot = \"root-from-file\"\nmemory = \"1GiB\"\n\
             metrics = \"{metrics}\"\n"
        )
        .as_bytes(),
        0o644,
    );
    let cfg = config.to_str().unwrap();
    let server = Server::start_args(&[], &home, &["--config", cfg]);
    assert!(server.log().contains("of 1024 MiB"), "{}", server.log());
    let src = s.join("a.txt");
    std::fs::write(&src, b"from the file's root\n").unwrap();
    let push = cp_command(&home)
        .arg(&src)
        .arg(server.remote("a.txt"))
        .output()
        .unwrap();
    assert!(push.status.success(), "{}", server.log());
    // The relative root is the file's directory's.
    assert_eq!(
        std::fs::read(from_file.join("a.txt")).unwrap(),
        b"from the file's root\n"
    );
    let text = get(&metrics, "GET /metrics HTTP/1.1\r\n\r\n");
    assert!(
        text.contains("longhaul_memory_budget_bytes 1073741824"),
        "{text}"
    );
    drop(server);

    // --root on the command line wins over the file's.
    let flag = from_flag.to_str().unwrap();
    let metrics2 = format!("127.0.0.1:{}", free_port());
    let server = Server::start_args(
        &[],
        &home,
        &["--config", cfg, "--root", flag, "--metrics", &metrics2],
    );
    let push = cp_command(&home)
        .arg(&src)
        .arg(server.remote("b.txt"))
        .output()
        .unwrap();
    assert!(push.status.success(), "{}", server.log());
    assert!(from_flag.join("b.txt").exists());
    assert!(!from_file.join("b.txt").exists());
}

#[test]
fn the_example_in_contrib_parses() {
    let s = Scratch::new("serve-config-example");
    let home = s.dir("home");
    let root = s.dir("root");
    let token = s.join("token");
    make_token(&home, &token);
    let example = s.join("serve.toml");
    write_file(&example, EXAMPLE.as_bytes(), 0o644);
    // Its paths are a site's; the command line points them here.
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = Server::start_args(
        &[],
        &home,
        &[
            "--config",
            example.to_str().unwrap(),
            "--listen",
            "127.0.0.1",
            "--port",
            "0",
            "--root",
            root.to_str().unwrap(),
            "--identity-dir",
            s.dir("identity").to_str().unwrap(),
            "--token-file",
            token.to_str().unwrap(),
            "--metrics",
            &metrics,
        ],
    );
    assert!(server.log().contains("of 8192 MiB"), "{}", server.log());
}

#[test]
fn a_bad_file_is_one_clear_error() {
    let s = Scratch::new("serve-config-bad");
    let home = s.dir("home");
    for (text, expect) in [
        ("prot = 5290\n", "unknown field `prot`"),
        ("memory = \"lots\"\n", "memory = \"lots\""),
        ("port = \"high\"\n", "port"),
        ("max_pending = 0\n", "max_pending = 0: must be 1 to 65536"),
        (
            "keep_setuid = true\n",
            "--keep-setuid needs a root to serve",
        ),
    ] {
        let file = s.join("bad.toml");
        let err = refused_config(&home, &file, text);
        assert!(err.contains(expect), "{text}: {err}");
        if !expect.starts_with("--keep") {
            assert!(err.contains(file.to_str().unwrap()), "{text}: {err}");
        }
    }
    let missing = longhaul(&home)
        .args(["serve", "--config", "/nonexistent/serve.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains("cannot read --config /nonexistent/serve.toml"),
        "{err}"
    );
}
