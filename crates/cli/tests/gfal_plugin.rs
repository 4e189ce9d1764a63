//! The gfal2 plugin (crates/gfal, `libgfal_plugin_longhaul.so`) loaded by Debian's
//! unmodified gfal2 and driven through python3-gfal2 as FTS3's copy agent drives it, against
//! two real `longhaul serve` processes: uploads, downloads and a third-party copy with
//! ADLER32 checks on both ends (the `file://` side through gfal2's own file plugin),
//! overwrite rules, stat, listing, mkdir, unlink, rmdir and checksums with their errnos
//! (tests/gfal/plugin_ops.py). This test then compares the copies byte for byte.
//!
//! As root it runs again with the daemons in the two namespaces of a `longhaul emulate`
//! path and gfal2 beside the source, so the copies cross an emulated long path.
//!
//! It needs python3-gfal2 and gfal2-plugin-file (CI installs them, .ci/run); the plugin
//! itself is built by cargo before this test (a dev-dependency of this crate). If gfal2
//! does not load the plugin, the script fails on its first check.

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::*;

/// Debian's interpreter, which python3-gfal2 installs its module for (another `python3` on
/// PATH may be another build without it).
const PYTHON: &str = "/usr/bin/python3";
/// Where Debian's gfal2-plugin-file puts gfal2's plugin for `file://` URLs.
const FILE_PLUGIN_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/gfal2-plugins",
    "/usr/lib/aarch64-linux-gnu/gfal2-plugins",
    "/usr/lib64/gfal2-plugins",
    "/usr/lib/gfal2-plugins",
];
/// The plugin's file name, as gfal2 looks for it.
const PLUGIN: &str = "libgfal_plugin_longhaul.so";

#[test]
fn python_gfal2_copies_lists_and_checksums_through_the_plugin_as_fts3_does() {
    let s = Scratch::new("gfal-plugin");
    let home = s.dir("home");
    let a = Server::start(&home, &s.dir("a"));
    let b = Server::start(&home, &s.dir("b"));
    drive(&s, &home, (&a, &b), &[]);
}

/// The same, with the daemons at the two ends of an emulated long path (network
/// namespaces, 200 Mbit/s x 40 ms) and gfal2 beside the source: the upload, the download
/// and the third-party copy cross the path (root only).
#[test]
fn over_an_emulated_path_between_namespaces() {
    if !is_root() {
        eprintln!("SKIP over_an_emulated_path_between_namespaces: needs root (namespaces)");
        return;
    }
    let path = EmulatedPath::up("gfalpath", &["--rate", "200M", "--rtt", "40ms"]);
    let (ns_a, ns_b) = (path.ns('a'), path.ns('b'));
    let addr = |end: &str| {
        let out = Command::new(BIN)
            .args(["emulate", "addr", "gfalpath", end])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let (addr_a, addr_b) = (addr("a"), addr("b"));
    let s = Scratch::new("gfal-emulated");
    let home = s.dir("home");
    let serve = |ns: &str, listen: &str, root: &Path| {
        let root = root.to_str().unwrap().to_string();
        Server::start_args(
            &["ip", "netns", "exec", ns],
            &home,
            &["--listen", listen, "--port", "0", "--root", &root],
        )
    };
    let a = serve(&ns_a, &addr_a, &s.dir("a"));
    let b = serve(&ns_b, &addr_b, &s.dir("b"));
    drive(&s, &home, (&a, &b), &["ip", "netns", "exec", &ns_a]);
}

/// Runs tests/gfal/plugin_ops.py (through `prefix`, e.g. into a namespace) against the
/// daemons `a` and `b` serving `s/a` and `s/b`, then checks the bytes on disk and the pins.
fn drive(s: &Scratch, home: &Path, (a, b): (&Server, &Server), prefix: &[&str]) {
    let local = s.dir("local");
    let mut rng = Rng::from_env("gfal_plugin");
    let data = write_random(&local.join("up.bin"), &mut rng, (3 << 20) + 12_345);

    let plugins = s.dir("plugins");
    link(&built_plugin(), &plugins.join(PLUGIN));
    link(&file_plugin(), &plugins.join("libgfal_plugin_file.so"));
    // gfal2's configuration: only the plugin's group, so that the known-servers file it
    // names (not the default one under HOME) must be the one the daemons get pinned in.
    let config = s.dir("gfal2.d");
    let known = s.join("known_servers");
    write_file(
        &config.join("longhaul.conf"),
        format!("[LONGHAUL]\nKNOWN_SERVERS={}\n", known.display()).as_bytes(),
        0o644,
    );

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gfal/plugin_ops.py");
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(PYTHON);
            c
        }
        None => Command::new(PYTHON),
    };
    cmd.arg(&script)
        .arg(a.remote("").trim_end_matches('/'))
        .arg(b.remote("").trim_end_matches('/'))
        .arg(&local)
        .env("HOME", home)
        .env("GFAL_PLUGIN_DIR", &plugins)
        .env("GFAL_CONFIG_DIR", &config)
        .env_remove("LONGHAUL_TOKEN")
        .env_remove("XDG_CONFIG_HOME");
    for var in [
        "LONGHAUL_TOKEN_FILE",
        "LONGHAUL_TOKEN_DIR",
        "LONGHAUL_KNOWN_SERVERS",
        "LONGHAUL_CA_FILE",
        "LONGHAUL_ENCRYPTION",
    ] {
        cmd.env_remove(var);
    }
    let run = run(&mut cmd, Duration::from_secs(300));
    assert!(
        run.status.success(),
        "{}\n(it needs python3-gfal2 and gfal2-plugin-file: apt-get install python3-gfal2 \
         gfal2-plugin-file)\nserver A said:\n{}\nserver B said:\n{}",
        run.describe(),
        a.log(),
        b.log()
    );
    let summary: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the script's last line is not JSON ({e}): {}",
            run.describe()
        )
    });
    assert_eq!(summary["size"], data.len(), "{summary}");
    assert!(summary["monitor_reports"].as_u64() > Some(0), "{summary}");

    assert_same_bytes(&local.join("up.bin"), &s.join("a/in/up.bin"));
    assert_same_bytes(&local.join("up.bin"), &local.join("down/up.bin"));
    assert_same_bytes(&local.join("up.bin"), &s.join("b/tp/copy.bin"));
    assert_eq!(std::fs::read(s.join("b/tp/copy.bin")).unwrap(), data);
    assert!(!s.join("a/made").exists(), "removed through the plugin");
    // Both daemons were pinned where gfal2's configuration said.
    let pins = std::fs::read_to_string(&known).unwrap_or_default();
    for server in [a, b] {
        assert!(pins.contains(&server.addr), "{} not in {pins}", server.addr);
    }
}

/// `libgfal_plugin_longhaul.so` as cargo built it for this test run: beside this test's
/// executable (`target/PROFILE/deps/`, where a dependency's cdylib goes), else in
/// `target/PROFILE/` (`cargo build -p longhaul-gfal`).
fn built_plugin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let candidates = [deps.join(PLUGIN), deps.parent().unwrap().join(PLUGIN)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "{PLUGIN} not built (looked at {candidates:?}); longhaul-gfal is a \
                 dev-dependency of this crate, so cargo should have built it"
            )
        })
}

/// Debian's `libgfal_plugin_file.so` (package gfal2-plugin-file).
fn file_plugin() -> PathBuf {
    FILE_PLUGIN_DIRS
        .iter()
        .map(|d| Path::new(d).join("libgfal_plugin_file.so"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "gfal2's file plugin is not installed (looked in {FILE_PLUGIN_DIRS:?}): \
                 apt-get install gfal2-plugin-file python3-gfal2"
            )
        })
}

fn link(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|e| panic!("symlink {} -> {}: {e}", link.display(), target.display()));
}
