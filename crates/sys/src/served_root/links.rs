//! Links below the root: reading and creating symlinks (never followed), hard links to
//! regular files, and setting a link's own modification time.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use super::ServedRoot;

impl ServedRoot {
    /// The target of the symlink `rel`, as stored (`readlinkat(2)` in its parent's
    /// directory: the link itself is never followed, only its text read). An error of
    /// kind `InvalidInput` when `rel` is not a symlink.
    pub fn read_link(&self, rel: &Path) -> io::Result<Vec<u8>> {
        let (dir, name) = self.parent_and_name(rel)?;
        // A target is at most PATH_MAX - 1 bytes; one byte more shows a truncation.
        let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
        // SAFETY: dir is an open directory fd, name a valid C string, and buf is writable
        // for the length passed.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast::<libc::c_char>(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(self.describe(io::Error::last_os_error(), "read the link", rel));
        }
        let n = n as usize;
        if n >= buf.len() {
            return Err(io::Error::other(format!(
                "the target of {} is longer than {} bytes",
                self.place(rel),
                libc::PATH_MAX - 1
            )));
        }
        buf.truncate(n);
        Ok(buf)
    }

    /// Creates a symlink `rel` holding `target` (`symlinkat(2)` in `rel`'s parent,
    /// resolved beneath the root). The target is stored as given and never followed,
    /// wherever it points. Never replaces: an existing `rel` (even a dangling symlink) is
    /// an error of kind `AlreadyExists`; rename the new link over it to replace it.
    pub fn create_symlink(&self, target: &[u8], rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent_and_name(rel)?;
        let target = CString::new(target).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the target of symlink {} contains a NUL byte",
                    rel.display()
                ),
            )
        })?;
        // SAFETY: dir is an open directory fd; target and name are valid C strings.
        let rc = unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) };
        if rc != 0 {
            return Err(self.describe(io::Error::last_os_error(), "create symlink", rel));
        }
        Ok(())
    }

    /// Makes `rel` another name of the regular file `target` (`linkat(2)`, both resolved
    /// beneath the root like [`Self::open_file`]; neither last component is followed).
    /// A `target` that is not a regular file (a symlink, a directory, ...) is refused with
    /// an error of kind `InvalidInput`, as is one swapped for another file while linking
    /// (the new name is removed again). Never replaces: an existing `rel` is an error of
    /// kind `AlreadyExists`.
    pub fn hard_link(&self, target: &Path, rel: &Path) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let not_a_file = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot link to {}: not a regular file", self.place(target)),
            )
        };
        // Who the target is, its last component not followed.
        let pinned = File::from(self.open_beneath(
            target,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )?)
        .metadata()?;
        if !pinned.is_file() {
            return Err(not_a_file());
        }
        let (from_dir, from_name) = self.parent_and_name(target)?;
        let (to_dir, to_name) = self.parent_and_name(rel)?;
        // SAFETY: both dir fds are open and both names valid C strings; flags 0: the
        // target's last component is not followed.
        let rc = unsafe {
            libc::linkat(
                from_dir.as_raw_fd(),
                from_name.as_ptr(),
                to_dir.as_raw_fd(),
                to_name.as_ptr(),
                0,
            )
        };
        if rc != 0 {
            return Err(self.describe(io::Error::last_os_error(), "link", rel));
        }
        // The name linked may have been swapped since it was pinned: the new name must be
        // the regular file that was checked.
        let made = self.metadata(rel)?;
        if made.dev() != pinned.dev() || made.ino() != pinned.ino() {
            let _ = self.remove_file(rel);
            return Err(not_a_file());
        }
        Ok(())
    }

    /// Sets the modification time of `rel` itself (`utimensat(2)` with
    /// `AT_SYMLINK_NOFOLLOW`: a symlink's own time, never its target's); the access time
    /// is left as it is.
    pub fn set_link_mtime(&self, rel: &Path, secs: i64, nanos: u32) -> io::Result<()> {
        let (dir, name) = self.parent_and_name(rel)?;
        let times = [
            libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
            libc::timespec {
                tv_sec: secs as libc::time_t,
                tv_nsec: nanos.min(999_999_999) as libc::c_long,
            },
        ];
        // SAFETY: dir is an open directory fd, name a valid C string and times an array
        // of two timespecs.
        let rc = unsafe {
            libc::utimensat(
                dir.as_raw_fd(),
                name.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            return Err(self.describe(io::Error::last_os_error(), "set the time of", rel));
        }
        Ok(())
    }
}
