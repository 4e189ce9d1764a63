//! `longhaul plan` as a user runs it: human units in, one JSON object or text out, exit codes.

use std::process::Command;

const LONGHAUL: &str = env!("CARGO_BIN_EXE_longhaul");

fn plan(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(LONGHAUL)
        .arg("plan")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn json_for_1g_at_180ms() {
    let (code, stdout, _) = plan(&[
        "--rate",
        "1G",
        "--rtt",
        "180ms",
        "--size",
        "1PB",
        "--distance",
        "28983km",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(stdout.lines().count(), 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["type"], "plan");
    assert_eq!(v["bdp_bytes"], 22_500_000);
    assert_eq!(v["socket_buffer_bytes"], 45_000_000);
    assert_eq!(v["mss_bytes"], 1448);
    let recovery = v["reno_recovery_seconds"].as_f64().unwrap();
    assert!((recovery - 2796.96).abs() < 0.1, "{recovery}");
    assert!(v["transfer_seconds"].as_f64().unwrap() > 8e6);
    assert!(v["bit_meters_per_second"].as_f64().unwrap() > 2.7e16);
}

#[test]
fn text_and_target_not_reachable() {
    let (code, stdout, _) = plan(&["--rate", "10G", "--rtt", "100ms", "--loss", "1e-4"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("Target not reachable"), "{stdout}");
    assert!(stdout.contains("bandwidth-delay product"), "{stdout}");
}

#[test]
fn bad_units_exit_2_with_the_accepted_forms() {
    let (code, _, stderr) = plan(&["--rate", "10 furlongs", "--rtt", "180ms"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("\"10 furlongs\"") && stderr.contains("10G"),
        "{stderr}"
    );
    let (code, _, stderr) = plan(&["--rate", "1G", "--rtt", "180"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("missing unit"), "{stderr}");
    let (code, _, stderr) = plan(&["--rate", "1G", "--rtt", "180ms", "--mtu", "100"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("mtu_bytes = 100"), "{stderr}");
}
