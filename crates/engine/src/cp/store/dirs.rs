//! Received directories: their modes and mtimes (set deepest first, once the files in
//! them are written), and the flush of every directory that received a new name, so the
//! files committed there survive a power cut.

use std::fs::{FileTimes, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::session::recv::DirFix;

use super::commit::mtime_of;
use super::{Store, StoreError};

impl Store {
    /// Notes that directory `dir` received a new name, to flush it (and its ancestors: a
    /// directory made by this transfer is a new name in its parent; flushing one already
    /// flushed costs a system call, no disk write) before the last commit is answered.
    pub(super) fn note_new_name(&self, dir: &Path) {
        if let Ok(mut dirs) = self.unsynced_dirs.lock() {
            dirs.extend(dir.ancestors().map(Path::to_path_buf));
        }
    }

    /// Sets directories' modes and times after a failure (normally the last commit does),
    /// and flushes the directories that received files (best effort: the transfer failed
    /// already).
    pub fn fix_dirs(&self, mut dirs: Vec<DirFix>) {
        fix_dirs(&self.root, &mut dirs);
        let _ = self.sync_dirs();
    }

    /// Flushes every directory that received a name since the last call (deepest first),
    /// so that the files committed in them survive a power cut.
    pub fn sync_dirs(&self) -> Result<(), StoreError> {
        let dirs = std::mem::take(
            &mut *self
                .unsynced_dirs
                .lock()
                .map_err(|_| StoreError::Poisoned)?,
        );
        for dir in dirs.into_iter().rev() {
            self.root
                .sync_dir(&dir)
                .map_err(|cause| StoreError::SyncDir { path: dir, cause })?;
        }
        Ok(())
    }
}

/// Sets directories' modes and mtimes, deepest first (writing into a directory changes
/// its mtime).
pub(super) fn fix_dirs(root: &ServedRoot, dirs: &mut [DirFix]) {
    dirs.sort_by_key(|d| std::cmp::Reverse(d.depth));
    for d in dirs.iter() {
        // Through a descriptor of the directory itself, never through a symlink.
        if let Ok(f) = root.open_directory(&d.rel) {
            let _ = f.set_times(FileTimes::new().set_modified(mtime_of(d.mtime)));
            if let Some(mode) = d.mode {
                let _ = f.set_permissions(Permissions::from_mode(mode));
            }
        }
    }
}
