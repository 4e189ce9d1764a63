//! `serve` as a site service (issue 31, item 4): the systemd unit shipped in
//! `contrib/systemd/` passes `systemd-analyze verify` with no warning (an unknown or
//! misspelt directive is only a warning there, and would silently drop a sandbox setting),
//! and its sandbox keeps `systemd-analyze security` at an exposure of 4.0 or less. The
//! unit's binary path is pointed at this build, nothing else is changed.

mod support;

use std::process::Command;

use support::*;

const UNIT: &str = include_str!("../../../contrib/systemd/longhaul-serve.service");

fn unit_for_this_build(scratch: &Scratch) -> std::path::PathBuf {
    let unit = UNIT.replace("/usr/bin/longhaul", BIN);
    assert_ne!(unit, UNIT, "the unit no longer runs /usr/bin/longhaul");
    let path = scratch.join("longhaul-serve.service");
    write_file(&path, unit.as_bytes(), 0o644);
    path
}

#[test]
fn the_service_unit_verifies_without_a_warning() {
    let scratch = Scratch::new("unit");
    let path = unit_for_this_build(&scratch);
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .expect("systemd-analyze (package systemd) is needed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.trim().is_empty(), "warnings: {stderr}");
    // The check is not blind: a misspelt directive is reported.
    let bad = scratch.join("bad.service");
    let text = std::fs::read_to_string(&path).unwrap();
    write_file(
        &bad,
        text.replace("NoNewPrivileges=", "NoNewPrivilegs=")
            .as_bytes(),
        0o644,
    );
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NoNewPrivilegs"),
        "a misspelt directive went unreported"
    );
}

#[test]
fn the_service_unit_s_sandbox_keeps_its_exposure_low() {
    let scratch = Scratch::new("unit-security");
    let path = unit_for_this_build(&scratch);
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=40"])
        .arg(&path)
        .output()
        .expect("systemd-analyze (package systemd) is needed");
    assert!(
        out.status.success(),
        "exposure over 4.0:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for must in [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "PrivateTmp=yes",
    ] {
        assert!(UNIT.contains(must), "the unit lost {must}");
    }
    assert!(
        UNIT.contains("CapabilityBoundingSet=CAP_NET_ADMIN\n"),
        "the capability bounding set is not CAP_NET_ADMIN alone"
    );
}
