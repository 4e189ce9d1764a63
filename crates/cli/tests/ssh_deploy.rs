//! Nothing to install on the far host: `longhaul cp` over ssh to a real OpenSSH server in a
//! network namespace (root; skipped with a message otherwise) whose sessions have no
//! longhaul on their PATH. The first copy uploads this binary into the far user's cache
//! and runs it; the second reuses it; `--no-upload` refuses with the clear error; a far
//! cache on a `noexec` file system gets the message that names the fix.

#[macro_use]
mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use support::sshd::SshLab;
use support::*;

/// How long the far end may take to go once the client is done.
const GONE: Duration = Duration::from_secs(10);
/// A copy that uploads 60+ MB over ssh on loopback first.
const DEPLOY_LIMIT: Duration = Duration::from_secs(120);

/// The cached binaries on the far host.
fn cached(lab: &SshLab) -> Vec<std::path::PathBuf> {
    match fs::read_dir(lab.far_cache().join("longhaul")) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_far_host_without_longhaul_gets_this_one_once_and_reuses_it() {
    let Some(lab) = SshLab::start_bare("a_far_host_without_longhaul_gets_this_one") else {
        return;
    };
    let mut rng = Rng::from_env("ssh deploy");
    let s = Scratch::new("ssh-deploy");
    let (home, far) = (s.dir("home"), s.dir("far"));
    let data = write_random(&far.join("f.bin"), &mut rng, 3 * MIB as usize + 5);

    // First copy: no longhaul there, so this one is uploaded, then run.
    let got = s.join("got1");
    let r = run(
        lab.cp_plain(&home)
            .arg(lab.remote(&far.join("f.bin")))
            .arg(&got),
        DEPLOY_LIMIT,
    );
    r.assert_ok();
    assert!(
        r.stderr.contains("no longhaul there") && r.stderr.contains("uploading this longhaul"),
        "{}",
        r.describe()
    );
    assert_eq!(fs::read(&got).unwrap(), data);
    let placed = cached(&lab);
    assert_eq!(placed.len(), 1, "{placed:?}\n{}", r.describe());
    let name = placed[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with(&format!("longhaul-{}-", env!("CARGO_PKG_VERSION"))),
        "{name}"
    );
    assert!(r.stderr.contains(&name), "{}", r.describe());
    // The far copy is this binary (what of it runs: no debug information), private to
    // the user.
    let image = longhaul_engine::ssh::deploy::loadable_image(&fs::read(BIN).unwrap()).unwrap();
    assert!(
        fs::read(&placed[0]).unwrap() == image,
        "the far copy is not {BIN}'s loadable image"
    );
    assert_eq!(
        fs::metadata(&placed[0]).unwrap().permissions().mode() & 0o777,
        0o700
    );
    lab.assert_far_gone(GONE, "after the first copy");
    let mtime = fs::metadata(&placed[0]).unwrap().modified().unwrap();

    // The far start's time is reported apart from the transfer's, with the upload's.
    assert!(
        r.stdout.contains("Far end: started over ssh in")
            && r.stdout.contains("uploading this longhaul"),
        "{}",
        r.describe()
    );

    // Second copy: the cached one runs, nothing is uploaded; `far_start` in JSON.
    let got2 = s.join("got2");
    let r = run(
        lab.cp_plain(&home)
            .arg("--json")
            .arg(lab.remote(&far.join("f.bin")))
            .arg(&got2),
        CP_LIMIT,
    );
    r.assert_ok();
    assert!(!r.stderr.contains("uploading"), "{}", r.describe());
    let lines = r.json();
    let started = lines
        .iter()
        .find(|l| l["type"] == "far_start")
        .unwrap_or_else(|| panic!("no far_start line\n{}", r.describe()));
    assert!(
        started["seconds"].as_f64().is_some_and(|s| s > 0.0),
        "{started}"
    );
    assert!(started["uploaded_bytes"].is_null(), "{started}");
    assert_eq!(lines.last().unwrap()["type"], "end");
    assert_eq!(fs::read(&got2).unwrap(), data);
    assert_eq!(cached(&lab), placed);
    assert_eq!(fs::metadata(&placed[0]).unwrap().modified().unwrap(), mtime);
    lab.assert_far_gone(GONE, "after the second copy");

    // --no-upload where the far host has none: the clear error, nothing uploaded.
    fs::remove_dir_all(lab.far_cache()).unwrap();
    let r = run(
        lab.cp_plain(&home)
            .arg("--no-upload")
            .arg(lab.remote(&far.join("f.bin")))
            .arg(s.join("got3")),
        CP_LIMIT,
    );
    r.assert_code(2);
    assert!(
        r.stderr.contains("longhaul is not installed on root@")
            && r.stderr.contains("no longhaul on its PATH")
            && !r.stderr.contains("uploading"),
        "{}",
        r.describe()
    );
    assert!(cached(&lab).is_empty());

    // A far cache where nothing may run (a home mounted noexec, in the far host's own
    // mount namespace): the upload arrives, the check run fails, nothing is left, and
    // the message names the fix.
    let cache = lab.far_cache();
    fs::create_dir_all(&cache).unwrap();
    let mounted = lab.in_far_mounts(
        "mount",
        &[
            "-t".as_ref(),
            "tmpfs".as_ref(),
            "-o".as_ref(),
            "noexec,size=256m".as_ref(),
            "tmpfs".as_ref(),
            cache.as_os_str(),
        ],
    );
    assert!(
        mounted.status.success(),
        "mount a noexec tmpfs: {mounted:?}"
    );
    let r = run(
        lab.cp_plain(&home)
            .arg(lab.remote(&far.join("f.bin")))
            .arg(s.join("got4")),
        DEPLOY_LIMIT,
    );
    r.assert_code(2);
    assert!(
        r.stderr.contains("cannot run this longhaul")
            && r.stderr.contains("Permission denied")
            && r.stderr.contains("XDG_CACHE_HOME"),
        "{}",
        r.describe()
    );
    let left = lab.in_far_mounts("ls", &["-A".as_ref(), cache.join("longhaul").as_os_str()]);
    assert!(
        left.status.success() && left.stdout.is_empty(),
        "left in the far cache: {left:?}"
    );
    lab.assert_far_gone(GONE, "after the refused upload");
}
