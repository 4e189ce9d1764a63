//! A rerun never writes or deletes through a symlinked directory (issue 28, item 1), end to
//! end with a real `longhaul serve --root` and `longhaul cp` / `longhaul sync` processes on
//! loopback.
//!
//! The case: the source tree holds `proj/l -> ..` (or a link out of the tree altogether); a
//! first copy makes `dst/proj/l` as that link. The source then turns `l` into a real
//! directory holding `victim`, and the destination's own `sub/keep` sits beside `proj`. A
//! second copy, with and without `--delete`, must put `victim` in `dst/proj/l/` (the link
//! replaced by a directory, as rsync does), write nothing beside `proj` and delete
//! nothing outside it, on a pull, on a push into a served root and through `longhaul sync`
//! both ways. With `--no-clobber` the link is kept, the directory fails with a message
//! naming it, and still nothing lands outside.

#[macro_use]
mod support;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use support::*;

const VICTIM: &[u8] = b"written by the second run";

/// Where the links point in each case.
#[derive(Debug, Clone, Copy)]
enum Link {
    /// `proj/l -> ..`: outside the copied tree, inside the destination.
    Up,
    /// `proj/l -> ABSOLUTE` a directory outside the destination altogether.
    Out,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Way {
    Pull,
    Push,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tool {
    Cp,
    Sync,
}

/// One case's directories: `src` holds `proj` (the source tree), `dst` receives it,
/// `outside` is where [`Link::Out`] points.
struct Case {
    _scratch: Scratch,
    home: PathBuf,
    src: PathBuf,
    dst: PathBuf,
    outside: PathBuf,
    server: Server,
    way: Way,
    tool: Tool,
}

impl Case {
    fn new(name: &str, way: Way, tool: Tool) -> Self {
        let s = Scratch::new(name);
        let home = s.dir("home");
        let src = s.dir("src");
        let dst = s.dir("dst");
        let outside = s.dir("outside");
        // The daemon serves whichever side is remote.
        let served = if way == Way::Pull { &src } else { &dst };
        let server = Server::start(&home, served);
        Case {
            _scratch: s,
            home,
            src,
            dst,
            outside,
            server,
            way,
            tool,
        }
    }

    /// Copies `src/proj` into `dst` (`dst/proj`) the case's way, with `extra` flags.
    fn copy(&self, extra: &[&str]) -> CpRun {
        let mut c = longhaul(&self.home);
        match self.tool {
            Tool::Cp => c.args(["cp", "-r", "--json", "--chunk", "1MiB"]),
            Tool::Sync => c.args(["sync", "--json", "--chunk", "1MiB"]),
        };
        c.args(extra);
        match self.way {
            Way::Pull => c.arg(self.server.remote("proj")).arg(&self.dst),
            Way::Push => c.arg(self.src.join("proj")).arg(self.server.remote("")),
        };
        run(&mut c, CP_LIMIT)
    }

    /// The source tree of the first run: a file and the link `l`.
    fn first_source(&self, link: Link) {
        let proj = self.src.join("proj");
        write_file(&proj.join("f"), b"a file", 0o644);
        match link {
            Link::Up => symlink("..", proj.join("l")).unwrap(),
            Link::Out => symlink(&self.outside, proj.join("l")).unwrap(),
        }
        // The destination's own files beside the copied tree.
        write_file(&self.dst.join("sub/keep"), b"keep me", 0o644);
    }

    /// The source of the second run: `l` is a real directory holding `victim`.
    fn second_source(&self) {
        let l = self.src.join("proj/l");
        fs::remove_file(&l).unwrap();
        write_file(&l.join("victim"), VICTIM, 0o644);
    }

    /// Nothing written or deleted outside `dst/proj` (nor in `outside`).
    fn assert_nothing_outside(&self, run: &CpRun) {
        for stray in [
            self.dst.join("victim"),
            self.outside.join("victim"),
            self.src.join("victim"),
        ] {
            assert!(
                !stray.exists(),
                "{} was written outside the copied tree\n{}",
                stray.display(),
                run.describe()
            );
        }
        assert_eq!(
            fs::read(self.dst.join("sub/keep")).ok().as_deref(),
            Some(&b"keep me"[..]),
            "dst/sub/keep was removed or changed\n{}",
            run.describe()
        );
        assert_eq!(
            fs::read_dir(&self.outside).unwrap().count(),
            0,
            "something landed in the directory the link pointed at\n{}",
            run.describe()
        );
    }
}

fn rerun_through_a_linked_dir(way: Way, tool: Tool, link: Link, delete: bool) {
    let name = format!("rerun-{way:?}-{tool:?}-{link:?}-{delete}");
    let c = Case::new(&name, way, tool);
    c.first_source(link);
    c.copy(&[]).assert_ok();
    let l = c.dst.join("proj/l");
    assert!(
        fs::symlink_metadata(&l).unwrap().file_type().is_symlink(),
        "the first run makes dst/proj/l as a link"
    );

    c.second_source();
    let flags: &[&str] = if delete { &["--delete"] } else { &[] };
    let second = c.copy(flags);
    c.assert_nothing_outside(&second);
    second.assert_ok();
    assert!(
        fs::symlink_metadata(&l).unwrap().is_dir(),
        "the link is replaced by the sender's directory\n{}",
        second.describe()
    );
    assert_eq!(fs::read(l.join("victim")).unwrap(), VICTIM);
    assert_eq!(fs::read(c.dst.join("proj/f")).unwrap(), b"a file");
}

#[test]
fn a_pull_rerun_never_writes_through_a_link_up() {
    rerun_through_a_linked_dir(Way::Pull, Tool::Cp, Link::Up, false);
}

#[test]
fn a_pull_rerun_with_delete_never_deletes_through_a_link_up() {
    rerun_through_a_linked_dir(Way::Pull, Tool::Cp, Link::Up, true);
}

#[test]
fn a_pull_rerun_replaces_a_link_out_of_the_destination() {
    rerun_through_a_linked_dir(Way::Pull, Tool::Cp, Link::Out, true);
}

#[test]
fn a_push_rerun_never_writes_through_a_link_up() {
    rerun_through_a_linked_dir(Way::Push, Tool::Cp, Link::Up, false);
}

#[test]
fn a_push_rerun_with_delete_never_deletes_through_a_link_up() {
    rerun_through_a_linked_dir(Way::Push, Tool::Cp, Link::Up, true);
}

#[test]
fn a_push_rerun_replaces_a_link_out_of_the_served_root() {
    rerun_through_a_linked_dir(Way::Push, Tool::Cp, Link::Out, false);
}

#[test]
fn a_sync_pull_rerun_never_writes_or_deletes_through_a_link() {
    rerun_through_a_linked_dir(Way::Pull, Tool::Sync, Link::Up, false);
    rerun_through_a_linked_dir(Way::Pull, Tool::Sync, Link::Up, true);
}

#[test]
fn a_sync_push_rerun_never_writes_or_deletes_through_a_link() {
    rerun_through_a_linked_dir(Way::Push, Tool::Sync, Link::Up, false);
    rerun_through_a_linked_dir(Way::Push, Tool::Sync, Link::Up, true);
}

/// `--no-clobber` keeps the link: the directory fails with a message naming the link,
/// and nothing lands outside.
#[test]
fn no_clobber_keeps_the_link_and_writes_nothing_through_it() {
    for way in [Way::Pull, Way::Push] {
        let c = Case::new(&format!("rerun-no-clobber-{way:?}"), way, Tool::Cp);
        c.first_source(Link::Up);
        c.copy(&[]).assert_ok();
        c.second_source();
        let second = c.copy(&["--no-clobber"]);
        c.assert_nothing_outside(&second);
        second.assert_failed();
        let l = c.dst.join("proj/l");
        assert!(fs::symlink_metadata(&l).unwrap().file_type().is_symlink());
        assert!(
            (second.stdout.clone() + &second.stderr)
                .contains("symlink where the sender has a directory"),
            "the message names what was refused\n{}",
            second.describe()
        );
    }
}

/// A planted link in the middle of a destination path (not made by longhaul) is not
/// followed either: `dst/proj/deep -> ../..` with the sender holding `deep/victim`.
#[test]
fn a_planted_link_deeper_in_the_destination_is_not_followed() {
    let c = Case::new("rerun-planted", Way::Pull, Tool::Cp);
    write_file(&c.src.join("proj/deep/victim"), VICTIM, 0o644);
    write_file(&c.dst.join("sub/keep"), b"keep me", 0o644);
    fs::create_dir_all(c.dst.join("proj")).unwrap();
    symlink("../..", c.dst.join("proj/deep")).unwrap();
    let run = c.copy(&[]);
    c.assert_nothing_outside(&run);
    assert!(!Path::new(&c.dst.parent().unwrap().join("victim")).exists());
    run.assert_ok();
    assert_eq!(fs::read(c.dst.join("proj/deep/victim")).unwrap(), VICTIM);
}
