//! The modes `longhaul cp` gives what it receives, with a real `longhaul serve` and real
//! files (issue 17 item 8): modes are kept as the sender names them, without the
//! set-user-ID and set-group-ID bits, and minus the receiving process's umask (as `cp -p`
//! run by the receiving user would); a directory that existed before the transfer keeps
//! its own mode. Both directions: on a push the server decides, on a pull the client.

#[macro_use]
mod support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use support::*;

/// Runs `longhaul` with umask 027 (anything but the usual 022, to see it applied).
const UMASK_027: [&str; 3] = ["sh", "-c", "umask 027 && exec \"$0\" \"$@\""];

fn mode_of(p: &Path) -> u32 {
    fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .mode()
        & 0o7777
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

/// `tree/` 0777 holding `f` 0666 and `sub/` 0777 holding `g` 0777.
fn source_tree(base: &Path) -> std::path::PathBuf {
    let tree = base.join("tree");
    write_file(&tree.join("f"), b"file", 0o666);
    write_file(&tree.join("sub/g"), b"program", 0o777);
    chmod(&tree.join("sub"), 0o777);
    chmod(&tree, 0o777);
    tree
}

/// What arrived in `dst` (which held `tree/` 0700 before): the old directory keeps
/// 0700, what the transfer created gets the source's mode minus the umask 027.
fn assert_modes(dst: &Path) {
    assert_eq!(fs::read(dst.join("tree/f")).unwrap(), b"file");
    assert_eq!(
        mode_of(&dst.join("tree")),
        0o700,
        "an existing directory was re-moded"
    );
    assert_eq!(mode_of(&dst.join("tree/f")), 0o640, "file: 0666 & !027");
    assert_eq!(
        mode_of(&dst.join("tree/sub")),
        0o750,
        "new directory: 0777 & !027"
    );
    assert_eq!(mode_of(&dst.join("tree/sub/g")), 0o750, "file: 0777 & !027");
}

#[test]
fn a_push_keeps_existing_directories_and_applies_the_servers_umask() {
    let s = Scratch::new("modes-push");
    let home = s.dir("home");
    let root = s.dir("root");
    let tree = source_tree(&s.dir("src"));
    chmod(&s.dir("root/tree"), 0o700);
    let args = ["--listen", "127.0.0.1", "--port", "0", "--root"];
    let mut args: Vec<&str> = args.to_vec();
    args.push(root.to_str().unwrap());
    let server = Server::start_args(&UMASK_027, &home, &args);
    cp!(&home; "-r", &tree, server.remote("")).assert_ok();
    assert_modes(&root);
}

#[test]
fn a_pull_keeps_existing_directories_and_applies_the_clients_umask() {
    let s = Scratch::new("modes-pull");
    let home = s.dir("home");
    let root = s.dir("root");
    let local = s.dir("local");
    source_tree(&root);
    chmod(&s.dir("local/tree"), 0o700);
    let server = Server::start(&home, &root);
    let mut c = longhaul_via(&UMASK_027, &home);
    c.arg("cp").arg("-r").arg(server.remote("tree")).arg(&local);
    run(&mut c, CP_LIMIT).assert_ok();
    assert_modes(&local);
}
