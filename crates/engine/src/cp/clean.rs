//! Stale work files: the `.NAME.longhaul-part` and `.NAME.longhaul-manifest` files an
//! abandoned transfer leaves behind (a rerun would resume from them; nobody reran). Found
//! below a root ([`ServedRoot`]: never following a symlink, never leaving the root) by
//! the receiver's own naming rule ([`is_work_name`]), kept while younger than the age
//! given, and never removed while another process holds an `flock` on it (a writer that
//! locks its part file is left alone).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, ServedRoot};
use longhaul_transfer::place::is_work_name;

/// Most entries one directory may hold for the walk (a bound on memory).
const MAX_DIR_ENTRIES: usize = 1 << 22;

/// What was found for one work file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Removed (or, in a dry run, would be).
    Removed,
    /// Younger than the age given: kept.
    Recent,
    /// Another process holds a lock on it: kept.
    InUse,
    /// Could not be looked at or removed.
    Failed(String),
}

/// One work file and what was done with it.
#[derive(Debug, Clone)]
pub struct WorkFile {
    /// Its path below the root.
    pub rel: PathBuf,
    /// Its size in bytes (of the data it holds on disk: `st_blocks` x 512).
    pub allocated: u64,
    /// Time since its last change.
    pub age: Duration,
    /// What was done.
    pub found: Found,
}

/// Walks `root` and removes the work files last changed more than `older_than` before
/// `now` (only lists them with `dry_run`); `report` sees every work file found. Errors
/// on single entries are reported as [`Found::Failed`]; the walk's own failure (the root
/// unreadable) is the error.
pub fn clean_stale(
    root: &ServedRoot,
    older_than: Duration,
    dry_run: bool,
    now: SystemTime,
    report: &mut dyn FnMut(&WorkFile),
) -> io::Result<()> {
    let mut dirs = vec![PathBuf::new()];
    while let Some(dir) = dirs.pop() {
        let entries = match root.read_dir_at_most(&dir, MAX_DIR_ENTRIES) {
            Ok(e) => e,
            Err(e) if dir.as_os_str().is_empty() => return Err(e),
            Err(e) => {
                report(&WorkFile {
                    rel: dir,
                    allocated: 0,
                    age: Duration::ZERO,
                    found: Found::Failed(format!("reading the directory: {e}")),
                });
                continue;
            }
        };
        for e in entries {
            let rel = dir.join(&e.name);
            let md = &e.metadata;
            // lstat: a symlink is neither a directory nor a file here.
            if md.is_dir() {
                dirs.push(rel);
                continue;
            }
            use std::os::unix::ffi::OsStrExt;
            if !md.is_file() || !is_work_name(e.name.as_bytes()) {
                continue;
            }
            let changed = md.modified().unwrap_or(now);
            let age = now.duration_since(changed).unwrap_or(Duration::ZERO);
            let found = if age < older_than {
                Found::Recent
            } else {
                remove_unless_locked(root, &rel, md.ino(), dry_run)
            };
            report(&WorkFile {
                rel,
                allocated: md.blocks() * 512,
                age,
                found,
            });
        }
    }
    Ok(())
}

/// Removes `rel` unless another process holds a lock on it (or it is no longer the file
/// `ino` that was looked at).
fn remove_unless_locked(root: &ServedRoot, rel: &Path, ino: u64, dry_run: bool) -> Found {
    let file = match root.open_file(rel, Access::Read) {
        Ok(f) => f,
        Err(e) => return Found::Failed(format!("opening: {e}")),
    };
    match file.metadata() {
        Ok(m) if m.is_file() && m.ino() == ino => {}
        Ok(_) => return Found::Failed("it changed while being looked at".into()),
        Err(e) => return Found::Failed(format!("looking at it: {e}")),
    }
    // Held until the unlink: a writer that locks its part file waits or sees it gone.
    match file_io::try_lock_exclusive(&file) {
        Ok(true) => {}
        Ok(false) => return Found::InUse,
        Err(e) => return Found::Failed(format!("locking: {e}")),
    }
    if dry_run {
        return Found::Removed;
    }
    match root.remove_file(rel) {
        Ok(()) => Found::Removed,
        Err(e) => Found::Failed(format!("removing: {e}")),
    }
}
