//! The Debian package (issue 31, item 4): `packaging/build-deb.sh` packages this build with
//! dpkg-deb; the package names what it depends on (a C library this host has), holds the
//! stripped binary, manual pages and shell completions generated from the CLI, the systemd
//! unit and the example config; `dpkg -i` installs it into a fresh root (its own dpkg
//! database), where the installed binary serves from the installed example config and
//! takes a copy from the installed client; `dpkg -r` removes it again.
//! Root only (the package's files are owned by root); skipped with a message otherwise.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::{is_root, Proc, Scratch, BIN};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/build-deb.sh");

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tools_present() -> bool {
    ["dpkg-deb", "dpkg", "objdump", "strip"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// A root with an empty dpkg database of its own.
fn fresh_root(at: &Path) {
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
    ] {
        std::fs::create_dir_all(at.join(d)).unwrap();
    }
    std::fs::write(at.join("var/lib/dpkg/status"), b"").unwrap();
}

#[test]
fn the_package_installs_into_a_fresh_root_and_copies() {
    if !is_root() || !tools_present() {
        eprintln!("SKIP: the package test needs root, dpkg-deb, objdump and strip");
        return;
    }
    let s = Scratch::new("deb");
    let printed = run(Command::new("bash").arg(SCRIPT).arg(BIN).arg(s.join("out")));
    let deb = PathBuf::from(printed.lines().last().unwrap().trim());
    assert!(deb.exists(), "{printed}");

    // What it says of itself.
    let field = |name: &str| {
        run(Command::new("dpkg-deb")
            .args(["--field"])
            .arg(&deb)
            .arg(name))
    };
    assert_eq!(field("Package").trim(), "longhaul");
    let depends = field("Depends");
    let glibc = depends
        .trim()
        .strip_prefix("libc6 (>= ")
        .and_then(|v| v.strip_suffix(')'))
        .unwrap_or_else(|| panic!("Depends: {depends}"));
    let host = run(Command::new("dpkg-query").args(["-W", "-f=${Version}", "libc6"]));
    let ok = Command::new("dpkg")
        .args(["--compare-versions", &host, "ge", glibc])
        .status()
        .unwrap();
    assert!(ok.success(), "needs libc6 {glibc}, this host has {host}");
    let contents = run(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    for path in [
        "./usr/bin/longhaul",
        "./usr/share/man/man1/longhaul.1.gz",
        "./usr/share/man/man1/longhaul-cp.1.gz",
        "./usr/share/man/man1/longhaul-serve.1.gz",
        "./usr/share/bash-completion/completions/longhaul",
        "./usr/share/zsh/vendor-completions/_longhaul",
        "./usr/share/fish/vendor_completions.d/longhaul.fish",
        "./lib/systemd/system/longhaul-serve.service",
        "./usr/share/doc/longhaul/examples/serve.toml",
        "./usr/share/doc/longhaul/copyright",
    ] {
        assert!(
            contents.lines().any(|l| l.ends_with(path)),
            "{path} missing:\n{contents}"
        );
    }

    // Installed into a fresh root (libc6 is this host's, not in that root's database).
    let root = s.dir("fresh-root");
    fresh_root(&root);
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["--force-depends", "-i"])
        .arg(&deb));
    let installed = root.join("usr/bin/longhaul");
    let sections = run(Command::new("objdump").arg("-h").arg(&installed));
    assert!(!sections.contains(".debug_info"), "not stripped");

    // The installed server, from the installed example config (its site paths pointed
    // here), and the installed client.
    let home = s.dir("home");
    let served = s.dir("served");
    let token = s.join("token");
    run(Command::new(&installed)
        .env("HOME", &home)
        .args(["token", "--out"])
        .arg(&token));
    let mut server = Command::new(&installed);
    server
        .env("HOME", &home)
        .env_remove("LONGHAUL_TOKEN")
        .arg("serve")
        .arg("--config")
        .arg(root.join("usr/share/doc/longhaul/examples/serve.toml"))
        .args([
            "--listen",
            "127.0.0.1",
            "--port",
            "0",
            "--metrics",
            "127.0.0.1:0",
        ])
        .arg("--root")
        .arg(&served)
        .arg("--identity-dir")
        .arg(s.dir("identity"))
        .arg("--token-file")
        .arg(&token)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = server.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let _server = Proc(child);
    let mut said = String::new();
    let addr = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            said.push_str(&l);
            said.push('\n');
            l.rsplit_once("listening on ")
                .map(|(_, a)| a.trim().to_string())
        })
        .unwrap_or_else(|| panic!("the installed server did not listen:\n{said}"));
    let src = s.join("file.bin");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    run(Command::new(&installed)
        .env("HOME", &home)
        .env_remove("LONGHAUL_TOKEN")
        .args(["cp", "--no-progress", "--token-file"])
        .arg(&token)
        .arg(&src)
        .arg(format!("longhaul://{addr}/file.bin")));
    assert_eq!(std::fs::read(served.join("file.bin")).unwrap(), data);
    drop(_server);

    // And removed again.
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["-r", "longhaul"]));
    assert!(!installed.exists());
}
