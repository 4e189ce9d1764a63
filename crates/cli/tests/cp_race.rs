//! Two `longhaul cp` sessions writing one destination at the same time (a rerun while the
//! first still runs), with a real `longhaul serve` process (issue 17 item 6). The second
//! session used to delete the first one's part file and write its own under the same name;
//! whichever finished first then renamed the other's half-written bytes into place as
//! verified. Now the part file is locked for its whole life in a session: the second
//! session fails that file at once and says why, and the first one's verified copy is
//! what ends up in place.

#[macro_use]
mod support;

use std::fs;
use std::time::{Duration, Instant};

use support::*;

const SIZE: usize = 24 << 20;

#[test]
fn a_second_session_on_a_file_being_written_is_refused_and_the_first_lands_intact() {
    let mut rng = Rng::from_env("race");
    let s = Scratch::new("race");
    let home = s.dir("home");
    let root = s.dir("root");
    let a = s.join("a/big");
    let b = s.join("b/big");
    write_random(&a, &mut rng, SIZE);
    write_random(&b, &mut rng, SIZE);
    let server = Server::start(&home, &root);
    let dst = root.join("big");
    let manifest = manifest_path(&root, "big");

    // The first paced to outlast the second's 5 s wait for the lock: 24 MiB at
    // 24 Mbit/s is about 8.4 s.
    let slow = |src: &std::path::Path| {
        let mut c = cp_command(&home);
        c.args(["--chunk", "1MiB", "-P", "2", "--rate", "24M"])
            .arg(src)
            .arg(server.remote("big"));
        spawn_piped(&mut c)
    };
    let first = slow(&a);
    // The first session's part file exists and holds verified chunks.
    let deadline = Instant::now() + Duration::from_secs(60);
    while manifest_record_count(&manifest) < 2 {
        assert!(
            Instant::now() < deadline,
            "the first session never started writing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let second = slow(&b).wait(CP_LIMIT);
    let first = first.wait(CP_LIMIT);

    let ok = |r: &CpRun| r.code() == Some(0);
    let conflict = |r: &CpRun| r.stderr.contains("another longhaul transfer is writing");
    assert!(
        ok(&first) && !ok(&second) && conflict(&second),
        "the first session should succeed and the second report the conflict\nfirst:\n{}\n\
         second:\n{}",
        first.describe(),
        second.describe()
    );
    assert!(
        fs::read(&dst).unwrap() == fs::read(&a).unwrap(),
        "the destination is not the first session's source (the other's bytes, or a mix)"
    );
    assert!(!manifest.exists() && !part_path(&root, "big").exists());

    // Nothing is locked once the first session is done: a rerun of the second succeeds.
    cp!(&home; "--chunk", "1MiB", &b, server.remote("big")).assert_ok();
    assert!(fs::read(&dst).unwrap() == fs::read(&b).unwrap());
}
