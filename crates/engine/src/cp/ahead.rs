//! A pull's answer to the file list, given ahead (`transfer_flags::ANSWERED_AHEAD`).
//!
//! A pull's server sends its file list and, in a normal run, waits for the client's
//! answers (what is already there, what a part file holds) before the first chunk: the
//! fourth round trip of a pull (docs/startup.md). A client whose destination holds
//! nothing the list can name already knows its answer: every file, whole. It says so in
//! its request, and the server's chunks leave with its list, a round trip sooner (436 ms
//! on SUNET 2004's path).
//!
//! "Nothing" is checked here, before the request: the destination's name (the name the
//! pulled source takes there) is absent, and so are its part file and resume manifest
//! (an interrupted pull of one file leaves them beside its name, and the rerun must
//! resume from them, not start over). A directory source's part files lie inside its
//! directory, which is then absent too. When the served root itself is pulled into a
//! directory, only the server knows the name: no answer ahead.

use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use longhaul_transfer::{manifest_name, parse_peer_path, part_name, SafeRelPath};

use super::recv::RecvTarget;

/// Whether a pull into `dest` of a source whose base name is `top` (`None`: the served
/// root, its name unknown here) finds nothing there to answer for.
pub(super) fn holds_nothing_of(dest: &Path, top: Option<&[u8]>) -> bool {
    let (dir, name): (PathBuf, &[u8]) = if dest.is_dir() {
        match top {
            Some(top) => (dest.to_path_buf(), top),
            None => return false,
        }
    } else {
        let (Some(parent), Some(name)) = (dest.parent(), dest.file_name()) else {
            return false;
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        (parent.to_path_buf(), name.as_bytes())
    };
    nothing_named(name, |n| {
        matches!(std::fs::symlink_metadata(dir.join(n.to_path_buf())),
            Err(e) if e.kind() == ErrorKind::NotFound)
    })
}

/// Whether `name`, its part file and its resume manifest are all `missing`.
fn nothing_named(name: &[u8], missing: impl Fn(&SafeRelPath) -> bool) -> bool {
    let Ok(rel) = parse_peer_path(name) else {
        return false;
    };
    let names = [Ok(rel.clone()), part_name(&rel), manifest_name(&rel)];
    names.into_iter().all(|n| n.is_ok_and(|n| missing(&n)))
}

/// [`holds_nothing_of`] for a relayed pull's target beneath a served root: looked at
/// through the root, as the receiver will write there.
pub(super) fn served_holds_nothing_of(target: &RecvTarget, top: Option<&[u8]>) -> bool {
    let (dir, name): (Option<SafeRelPath>, Vec<u8>) = match &target.target {
        None => match top {
            Some(top) => (None, top.to_vec()),
            None => return false,
        },
        Some(t) => match target.root.metadata(&t.to_path_buf()) {
            Ok(m) if m.is_dir() => match top {
                Some(top) => (Some(t.clone()), top.to_vec()),
                None => return false,
            },
            _ => (t.parent(), t.file_name().to_vec()),
        },
    };
    nothing_named(&name, |n| {
        let path = match &dir {
            Some(d) => d.to_path_buf().join(n.to_path_buf()),
            None => n.to_path_buf(),
        };
        matches!(target.root.metadata(&path), Err(e) if e.kind() == ErrorKind::NotFound)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("longhaul-ahead-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_missing_name_with_no_work_files_holds_nothing() {
        let d = scratch("missing");
        // `cp host:data d/copy`: d/copy is the name.
        assert!(holds_nothing_of(&d.join("copy"), Some(b"data")));
        // `cp host:data d`: d is a directory, d/data the name.
        assert!(holds_nothing_of(&d, Some(b"data")));
        // The served root pulled into a directory: its name is the server's.
        assert!(!holds_nothing_of(&d, None));
        // A missing directory on the way: nothing there either (the receiver says why
        // it cannot place the file).
        assert!(holds_nothing_of(&d.join("no/such"), Some(b"data")));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_name_or_its_part_file_or_manifest_is_something() {
        let d = scratch("present");
        std::fs::write(d.join("data"), b"x").unwrap();
        assert!(!holds_nothing_of(&d, Some(b"data")));
        assert!(!holds_nothing_of(&d.join("data"), Some(b"other")));
        std::fs::remove_file(d.join("data")).unwrap();
        for work in [".data.longhaul-part", ".data.longhaul-manifest"] {
            std::fs::write(d.join(work), b"x").unwrap();
            assert!(!holds_nothing_of(&d, Some(b"data")), "{work}");
            assert!(!holds_nothing_of(&d.join("data"), Some(b"other")), "{work}");
            std::fs::remove_file(d.join(work)).unwrap();
        }
        // A dangling symlink is something too.
        std::os::unix::fs::symlink("nowhere", d.join("data")).unwrap();
        assert!(!holds_nothing_of(&d, Some(b"data")));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
