//! The shell completions and manual pages a package ships (issue 31, item 4), generated from
//! the CLI's own definition: each shell's script is valid for that shell and offers the
//! commands and flags; the pages exist per visible command, render with groff, and carry
//! the flags; a shell that does not exist is a clear error.

mod support;

use std::time::Duration;

use support::*;

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn bash_completion_is_valid_bash_and_offers_the_commands_and_flags() {
    let scratch = Scratch::new("completions");
    let home = scratch.dir("home");
    let out = run(longhaul(&home).args(["completions", "bash"]), LIMIT);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    for word in [
        "cp",
        "sync",
        "bench",
        "serve",
        "--streams",
        "--no-jump-start",
    ] {
        assert!(
            out.stdout.contains(word),
            "{word} missing from the bash script"
        );
    }
    // The hidden far end of ssh runs is not offered.
    assert!(
        !out.stdout.contains("ssh-server"),
        "the hidden command is offered"
    );
    let script = scratch.join("longhaul.bash");
    write_file(&script, out.stdout.as_bytes(), 0o644);
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    // Sourced, it registers the completion function for longhaul.
    let registered = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(". {} && complete -p longhaul", script.display()))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&registered.stdout).contains("longhaul"),
        "{}",
        String::from_utf8_lossy(&registered.stderr)
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = run(longhaul(&home).args(["completions", shell]), LIMIT);
        assert_eq!(out.code(), Some(0), "{shell}: {}", out.stderr);
        assert!(out.stdout.contains("--streams"), "{shell}: no --streams");
    }
}

#[test]
fn an_unknown_shell_is_refused_with_the_shells_there_are() {
    let scratch = Scratch::new("completions-bad");
    let home = scratch.dir("home");
    let out = run(longhaul(&home).args(["completions", "tcsh"]), LIMIT);
    assert_eq!(out.code(), Some(2), "{}", out.stdout);
    assert!(out.stderr.contains("tcsh"), "{}", out.stderr);
    assert!(out.stderr.contains("bash"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

#[test]
fn manual_pages_exist_per_command_render_and_carry_the_flags() {
    let scratch = Scratch::new("man");
    let home = scratch.dir("home");
    let dir = scratch.join("man1");
    let out = run(
        longhaul(&home).args(["man", "--out", dir.to_str().unwrap()]),
        LIMIT,
    );
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    for page in [
        "longhaul.1",
        "longhaul-cp.1",
        "longhaul-serve.1",
        "longhaul-bench.1",
    ] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap_or_default();
        assert!(text.contains(".TH"), "{page}: no .TH header: {text:.200}");
    }
    assert!(
        !dir.join("longhaul-ssh-server.1").exists(),
        "a page for the hidden command"
    );
    let cp = std::fs::read_to_string(dir.join("longhaul-cp.1")).unwrap();
    assert!(cp.contains("streams"), "longhaul-cp.1 has no --streams");
    // groff renders it without a warning, and the text names the flag.
    let rendered = std::process::Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(dir.join("longhaul-cp.1"))
        .output();
    if let Ok(r) = rendered {
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        assert!(
            r.stderr.is_empty(),
            "groff warned: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    // Without --out the top page goes to stdout.
    let out = run(longhaul(&home).arg("man"), LIMIT);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stdout.starts_with(".ie") || out.stdout.contains(".TH longhaul 1"));
}
