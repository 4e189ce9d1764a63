//! Files and directories below the root: opening them, creating directories and
//! unnamed files, renaming, removing, flushing, and their attributes.

use std::ffi::CString;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::resolve::{components, cstring};
use super::{Access, ServedRoot};

impl ServedRoot {
    /// Opens a regular file below the root. The open never blocks (`O_NONBLOCK`, cleared
    /// again once the file is known to be regular) and anything but a regular file (a
    /// FIFO, a device, a socket, a directory) is refused with an error of kind
    /// `InvalidInput` naming what it is.
    pub fn open_file(&self, rel: &Path, access: Access) -> io::Result<File> {
        let (flags, mode) = access.flags();
        let fd = self
            .open_beneath(rel, flags | libc::O_NONBLOCK | libc::O_CLOEXEC, mode)
            .map_err(|e| self.describe(e, "open", rel))?;
        crate::file_io::regular_only(File::from(fd), &self.place(rel))
    }

    /// Opens the directory `rel` (empty path: the root) for reading and for setting its
    /// mode and times through the descriptor (`fchmod`, `futimens`): never through a
    /// symlink in the last component, so a planted symlink cannot redirect a chmod.
    pub fn open_directory(&self, rel: &Path) -> io::Result<File> {
        let fd = if components(rel)?.is_empty() {
            self.open_beneath_dir(rel, libc::O_RDONLY)?
        } else {
            self.open_beneath(
                rel,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0,
            )?
        };
        Ok(File::from(fd))
    }

    /// The attributes of `rel` as an open of it sees them: a symlink in the last
    /// component is followed where the resolver follows symlinks (unlike
    /// [`Self::metadata`]). Never blocks, whatever `rel` is (`O_PATH`).
    pub fn stat(&self, rel: &Path) -> io::Result<Metadata> {
        let fd = if components(rel)?.is_empty() {
            self.open_dir(Path::new(""))?
        } else {
            self.open_beneath(rel, libc::O_PATH | libc::O_CLOEXEC, 0)?
        };
        File::from(fd).metadata()
    }

    /// Creates the directory `rel` and its missing parents (like `mkdir -p`) with `mode`.
    /// Returns the directories it created (parents first); those that existed are not
    /// in it. In a receiving root ([`Self::receiving_into`]), a symlink found below the
    /// directory received into where a directory is to be is replaced by one (the link
    /// removed, its target untouched) or refused, as the root was told.
    pub fn create_dirs(&self, rel: &Path, mode: u32) -> io::Result<Vec<PathBuf>> {
        let names = components(rel)?;
        let mut prefix = PathBuf::new();
        let mut created = Vec::new();
        for name in names {
            let parent = self.open_dir(&prefix)?;
            let c = cstring(name.as_bytes(), rel)?;
            prefix.push(name);
            if self.mkdir_at(&parent, &c, mode, &prefix)? {
                created.push(prefix.clone());
            }
        }
        // Check that what exists is a directory we may enter (not a symlink out).
        self.open_dir(&prefix)?;
        Ok(created)
    }

    /// `mkdirat(2)` of `name` in `parent` (`rel` names it); `false` when a directory (or
    /// anything else, which the next open finds) is already there. A receiving root's
    /// symlink below its base is replaced or refused here.
    fn mkdir_at(
        &self,
        parent: &OwnedFd,
        name: &CString,
        mode: u32,
        rel: &Path,
    ) -> io::Result<bool> {
        // SAFETY: parent is an open directory fd and name a valid C string.
        if unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), mode) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(self.describe(e, "mkdir", rel));
        }
        let Some(replace) = self.receiving_link_rule(rel) else {
            return Ok(false);
        };
        if !is_symlink_at(parent, name) {
            return Ok(false);
        }
        if !replace {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} is a symlink where the sender has a directory; it is not followed, \
                     and is kept since existing entries are not replaced (--no-clobber): \
                     remove the link to receive the directory",
                    self.place(rel)
                ),
            ));
        }
        // SAFETY: parent is an open directory fd and name a valid C string; flags 0
        // removes the link itself, never what it points at.
        if unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), 0) } != 0 {
            return Err(self.describe(io::Error::last_os_error(), "replace the symlink", rel));
        }
        // SAFETY: as above.
        if unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), mode) } != 0 {
            return Err(self.describe(io::Error::last_os_error(), "mkdir", rel));
        }
        Ok(true)
    }

    /// Renames `from` to `to`, both below the root. With `replace == false` an existing
    /// `to` is an error (`renameat2(RENAME_NOREPLACE)`), for `--no-clobber`.
    pub fn rename(&self, from: &Path, to: &Path, replace: bool) -> io::Result<()> {
        let (from_dir, from_name) = self.parent_and_name(from)?;
        let (to_dir, to_name) = self.parent_and_name(to)?;
        let flags = if replace { 0 } else { libc::RENAME_NOREPLACE };
        // SAFETY: both dir fds are open and both names valid C strings.
        let rc = unsafe {
            libc::renameat2(
                from_dir.as_raw_fd(),
                from_name.as_ptr(),
                to_dir.as_raw_fd(),
                to_name.as_ptr(),
                flags,
            )
        };
        if rc != 0 {
            return Err(self.describe(io::Error::last_os_error(), "rename", to));
        }
        Ok(())
    }

    /// Creates a file without a name in the directory `dir_rel` (empty: the root) with
    /// `O_TMPFILE`: it appears only when [`ServedRoot::link_unnamed`] names it, and
    /// vanishes if dropped before. One directory entry per file instead of a temporary
    /// name plus a rename. Errors of kind `Unsupported`, `IsADirectory` or `InvalidInput`
    /// mean the file system has no `O_TMPFILE`: use a named temporary file instead.
    pub fn create_unnamed(&self, dir_rel: &Path, mode: u32) -> io::Result<File> {
        // Naming the file later goes through /proc/self/fd (linkat AT_EMPTY_PATH needs a
        // capability); without /proc there is no way to name it.
        static PROC_FD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if !*PROC_FD.get_or_init(|| Path::new("/proc/self/fd").is_dir()) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "no /proc/self/fd to name an O_TMPFILE file",
            ));
        }
        let flags = libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC;
        let fd = if dir_rel.as_os_str().is_empty() {
            self.at(
                self.dir.as_raw_fd(),
                &CString::from(c"."),
                flags,
                mode,
                dir_rel,
            )?
        } else {
            self.open_beneath(dir_rel, flags, mode)?
        };
        Ok(File::from(fd))
    }

    /// Names `file` (from [`ServedRoot::create_unnamed`]) `rel`. Never replaces: an
    /// existing `rel` is an error of kind `AlreadyExists`.
    pub fn link_unnamed(&self, file: &File, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent_and_name(rel)?;
        let proc_path = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .expect("no NUL in a number");
        // SAFETY: dir is an open directory fd and both paths are valid C strings.
        let rc = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                proc_path.as_ptr(),
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if rc != 0 {
            return Err(self.describe(io::Error::last_os_error(), "link", rel));
        }
        Ok(())
    }

    /// Removes the file `rel` (not a directory).
    pub fn remove_file(&self, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent_and_name(rel)?;
        // SAFETY: dir is open and name a valid C string.
        let rc = unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
        if rc != 0 {
            return Err(self.describe(io::Error::last_os_error(), "remove", rel));
        }
        Ok(())
    }

    /// Flushes the directory `rel` (empty path: the root) so that creations and renames
    /// in it survive a crash.
    pub fn sync_dir(&self, rel: &Path) -> io::Result<()> {
        let fd = self.open_beneath_dir(rel, libc::O_RDONLY)?;
        File::from(fd).sync_all()
    }

    /// Flushes the whole file system holding the root (`syncfs(2)`): every file's data and
    /// metadata, in one journal commit where a file at a time would take one each.
    pub fn sync_fs(&self) -> io::Result<()> {
        // SAFETY: the root's descriptor is open for the duration of the call.
        if unsafe { libc::syncfs(self.dir.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The room left on the file system holding the directory `rel` (empty path: the
    /// root), see [`crate::file_io::fs_space`].
    pub fn fs_space(&self, rel: &Path) -> io::Result<crate::file_io::FsSpace> {
        let fd = self.open_beneath_dir(rel, libc::O_RDONLY)?;
        crate::file_io::fs_space(&fd)
    }

    /// The attributes of `rel` (empty path: the root) with `lstat(2)` semantics: the
    /// directories leading to it are resolved beneath the root like [`Self::open_file`],
    /// the last component is not followed (a symlink is reported as a symlink).
    pub fn metadata(&self, rel: &Path) -> io::Result<Metadata> {
        let fd = if components(rel)?.is_empty() {
            self.open_dir(Path::new(""))?
        } else {
            self.open_beneath(rel, libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0)?
        };
        File::from(fd).metadata()
    }
}

/// Whether `name` in the directory `dir` is a symlink (`fstatat` without following).
fn is_symlink_at(dir: &OwnedFd, name: &CString) -> bool {
    // SAFETY: an all-zero stat is a valid value for the kernel to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: dir is an open directory fd, name a valid C string, st writable.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFLNK
}
