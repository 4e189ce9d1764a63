//! Interrupted `longhaul cp` over ssh (real OpenSSH server in a network namespace; root,
//! skipped with a message otherwise): kill -9 of the local longhaul, kill -9 of the far
//! process, and the ssh client killed under a running transfer. Each time the far process
//! must go by itself (its ssh channel is its lifeline) leaving no port open, the far end's
//! partial file and manifest stay put, and the same command run again completes,
//! re-sending only what was not verified before.

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::sshd::SshLab;
use support::*;

const SIZE: usize = 48 * MIB as usize;
/// Slow enough (about 2 s for the file) to interrupt in the middle on any machine.
const RATE: &str = "200M";
const GONE: Duration = Duration::from_secs(10);

/// The command, the same for the interrupted run and the rerun.
fn command(
    lab: &SshLab,
    home: &Path,
    src: impl AsRef<std::ffi::OsStr>,
    dst: impl AsRef<std::ffi::OsStr>,
) -> Command {
    let mut c = lab.cp(home);
    c.args(["--chunk", "1MiB", "-P", "2", "--rate", RATE, "--json"])
        .arg(src)
        .arg(dst);
    c
}

/// Waits until the receiver's manifest lists at least `records` chunks.
fn wait_for_records(manifest: &Path, records: u64, run: &mut Running, ctx: &str) {
    let t0 = Instant::now();
    while manifest_record_count(manifest) < records {
        assert!(
            !run.has_exited(),
            "{ctx}: the transfer ended before its kill point"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{ctx}: no {records} verified chunks within 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Pids of processes whose parent is `parent` and whose name is `comm`.
fn children_named(parent: u32, comm: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some((name, rest)) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(") "))
        else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if name == comm && ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

fn kill9(pid: u32) {
    let st = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill -9 {pid}");
}

/// The rerun completes, bit-identical, and resumes what the manifest had verified.
fn rerun_completes(lab: &SshLab, cmd: &mut Command, src: &Path, dst: &Path, ctx: &str) {
    let again = run(cmd, CP_LIMIT);
    again.assert_ok();
    assert_same_bytes(src, dst);
    assert!(
        again.end_u64("resumed_bytes") > 0,
        "{ctx}: the rerun resumed nothing\n{}",
        again.describe()
    );
    assert!(
        again.end_u64("sent_bytes") < SIZE as u64,
        "{ctx}: the rerun sent the whole file again\n{}",
        again.describe()
    );
    lab.assert_far_gone(GONE, &format!("{ctx}, after the rerun"));
}

struct Case {
    _s: Scratch,
    home: PathBuf,
    src: PathBuf,
    /// The receiving directory.
    dst_dir: PathBuf,
}

fn case(tag: &str, far_has_source: bool) -> Case {
    let mut rng = Rng::from_env(tag);
    let s = Scratch::new(tag);
    let home = s.dir("home");
    let (near, far) = (s.dir("near"), s.dir("far"));
    let (src_dir, dst_dir) = if far_has_source {
        (far, near)
    } else {
        (near, far)
    };
    let src = src_dir.join("big");
    write_random(&src, &mut rng, SIZE);
    Case {
        _s: s,
        home,
        src,
        dst_dir,
    }
}

#[test]
fn kill9_of_the_local_longhaul_mid_push_then_rerun() {
    let Some(lab) = SshLab::start("kill9_of_the_local_longhaul_mid_push_then_rerun") else {
        return;
    };
    let c = case("ssh-kill-local", false);
    let mut cmd = command(&lab, &c.home, &c.src, lab.remote(&c.dst_dir));
    let mut first = spawn_piped(&mut cmd);
    wait_for_records(
        &manifest_path(&c.dst_dir, "big"),
        4,
        &mut first,
        "local kill",
    );
    first.kill9();
    let _ = first.wait(Duration::from_secs(10));
    // ssh's stdin closed with its parent: the far process goes, its work files stay.
    lab.assert_far_gone(GONE, "after kill -9 of the local longhaul");
    assert!(part_path(&c.dst_dir, "big").exists() && manifest_path(&c.dst_dir, "big").exists());
    rerun_completes(&lab, &mut cmd, &c.src, &c.dst_dir.join("big"), "local kill");
}

#[test]
fn kill9_of_the_far_process_mid_pull_then_rerun() {
    let Some(lab) = SshLab::start("kill9_of_the_far_process_mid_pull_then_rerun") else {
        return;
    };
    let c = case("ssh-kill-far", true);
    let dst = c.dst_dir.join("big");
    let mut cmd = command(&lab, &c.home, lab.remote(&c.src), &dst);
    let mut first = spawn_piped(&mut cmd);
    wait_for_records(&manifest_path(&c.dst_dir, "big"), 4, &mut first, "far kill");
    let far = lab.far_processes();
    assert_eq!(far.len(), 1, "one far process, found {far:?}");
    kill9(far[0]);
    let first = first.wait(Duration::from_secs(60));
    assert!(
        matches!(first.code(), Some(c) if c != 0),
        "the client reported success without its far end\n{}",
        first.describe()
    );
    lab.assert_far_gone(GONE, "after kill -9 of the far process");
    rerun_completes(&lab, &mut cmd, &c.src, &dst, "far kill");
}

#[test]
fn ssh_dying_ends_the_far_process_and_closes_its_port() {
    let Some(lab) = SshLab::start("ssh_dying_ends_the_far_process_and_closes_its_port") else {
        return;
    };
    let c = case("ssh-kill-ssh", false);
    let mut cmd = command(&lab, &c.home, &c.src, lab.remote(&c.dst_dir));
    let mut first = spawn_piped(&mut cmd);
    wait_for_records(&manifest_path(&c.dst_dir, "big"), 4, &mut first, "ssh kill");
    let ssh = children_named(first.pid(), "ssh");
    assert_eq!(ssh.len(), 1, "one ssh child of longhaul cp, found {ssh:?}");
    kill9(ssh[0]);
    lab.assert_far_gone(GONE, "after the ssh client was killed");
    let first = first.wait(Duration::from_secs(60));
    assert!(
        matches!(first.code(), Some(c) if c != 0),
        "the client reported success although its far end went\n{}",
        first.describe()
    );
    rerun_completes(&lab, &mut cmd, &c.src, &c.dst_dir.join("big"), "ssh kill");
}
