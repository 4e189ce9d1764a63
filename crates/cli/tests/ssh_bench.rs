//! `longhaul bench` over ssh against a real OpenSSH server in a network namespace (root;
//! skipped with a message otherwise): a short run started with `USER@HOST` and `-e`, its
//! JSON end line, and the far end gone afterwards.

mod support;

use std::time::Duration;

use support::sshd::SshLab;
use support::*;

#[test]
fn bench_over_ssh_runs_and_leaves_nothing() {
    let Some(lab) = SshLab::start("bench_over_ssh_runs_and_leaves_nothing") else {
        return;
    };
    let s = Scratch::new("ssh-bench");
    let home = s.dir("home");
    for reverse in [false, true] {
        let mut c = lab.bench(&home);
        c.arg(format!("root@{}", lab.addr))
            .args(["-t", "1s", "-i", "0.5s", "--json"]);
        if reverse {
            c.arg("-R");
        }
        let r = run(&mut c, Duration::from_secs(60));
        r.assert_ok();
        let end = r.json_of("end");
        assert!(
            end["summary"]["bytes"].as_u64().unwrap_or(0) > 0,
            "reverse={reverse}: {}",
            r.describe()
        );
        lab.assert_far_gone(Duration::from_secs(10), "after bench");
    }
}
