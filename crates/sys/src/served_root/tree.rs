//! Directory trees below the root: listing a directory (whole, bounded, or below a base
//! that is never reached through a symlink) and removing an entry below such a base.

use std::ffi::{CStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use super::resolve::{components, cstring, empty_path};
use super::{ServedDirEntry, ServedRoot};

impl ServedRoot {
    /// The entries of the directory `rel` (empty path: the root), in the order the file
    /// system returns them, each with [`Self::metadata`]'s attributes. `rel` itself must
    /// be a directory, not a symlink to one. Entries that vanish while being listed are
    /// left out.
    pub fn read_dir(&self, rel: &Path) -> io::Result<Vec<ServedDirEntry>> {
        self.read_dir_at_most(rel, usize::MAX)
    }

    /// [`Self::read_dir`] that fails once the directory holds more than `max_entries`
    /// entries (a bound on memory for trees of untrusted size).
    pub fn read_dir_at_most(
        &self,
        rel: &Path,
        max_entries: usize,
    ) -> io::Result<Vec<ServedDirEntry>> {
        let dir = if components(rel)?.is_empty() {
            self.open_beneath_dir(Path::new(""), libc::O_RDONLY)?
        } else {
            self.open_beneath(
                rel,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0,
            )?
        };
        self.list_open_dir(dir, rel, max_entries)
    }

    /// The entries of the directory `below` inside the directory `base` (empty: `base`
    /// itself), as [`Self::read_dir_at_most`] gives them. The directories leading to
    /// `base` are resolved like every other path of the root; `base` itself and
    /// everything below it are never reached through a symlink (an error, `ELOOP` or
    /// `ENOTDIR`), so what a listing finds is inside `base`.
    pub fn read_dir_below(
        &self,
        base: &Path,
        below: &Path,
        max_entries: usize,
    ) -> io::Result<Vec<ServedDirEntry>> {
        let shown = base.join(below);
        let names = components(below)?;
        let start = self.open_base_nofollow(base, libc::O_RDONLY)?;
        let dir = match names.split_last() {
            None => start,
            Some((last, parents)) => {
                let parent = self.walk_nofollow(start, parents, &shown)?;
                let c = cstring(last.as_bytes(), &shown)?;
                let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
                self.at(parent.as_raw_fd(), &c, flags, 0, &shown)?
            }
        };
        self.list_open_dir(dir, &shown, max_entries)
    }

    /// Removes `below` (never empty) inside the directory `base`: a directory with
    /// `rmdir` (it must be empty), anything else (a symlink itself, never its target)
    /// with `unlink`. The directories leading to `base` are resolved like every other path
    /// of the root; `base` and the directories from there to `below`'s parent are never
    /// reached through a symlink.
    pub fn remove_below(&self, base: &Path, below: &Path, dir: bool) -> io::Result<()> {
        let shown = base.join(below);
        let names = components(below)?;
        let (last, parents) = names.split_last().ok_or_else(|| empty_path(&shown))?;
        let start = self.open_base_nofollow(base, libc::O_PATH)?;
        let parent = self.walk_nofollow(start, parents, &shown)?;
        let c = cstring(last.as_bytes(), &shown)?;
        let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: parent is an open directory fd and c a valid C string.
        let rc = unsafe { libc::unlinkat(parent.as_raw_fd(), c.as_ptr(), flags) };
        if rc != 0 {
            return Err(self.describe(io::Error::last_os_error(), "remove", &shown));
        }
        Ok(())
    }

    /// The directory `base` (empty: the root), resolved like every path of the root but
    /// never through a symlink as its last component.
    fn open_base_nofollow(&self, base: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
        if components(base)?.is_empty() {
            return self.open_beneath_dir(Path::new(""), flags);
        }
        self.open_beneath(
            base,
            flags | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
    }

    /// Walks `names` (directories) down from `dir` with `O_NOFOLLOW`: a symlink on the way
    /// is an error, never followed.
    fn walk_nofollow(
        &self,
        mut dir: OwnedFd,
        names: &[&std::ffi::OsStr],
        shown: &Path,
    ) -> io::Result<OwnedFd> {
        for name in names {
            let c = cstring(name.as_bytes(), shown)?;
            let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            dir = self.at(dir.as_raw_fd(), &c, flags, 0, shown)?;
        }
        Ok(dir)
    }

    /// The entries of the open directory `dir` (`rel` names it in messages).
    fn list_open_dir(
        &self,
        dir: OwnedFd,
        rel: &Path,
        max_entries: usize,
    ) -> io::Result<Vec<ServedDirEntry>> {
        let mut stream = DirStream::new(dir).map_err(|e| self.describe(e, "list", rel))?;
        let mut out = Vec::new();
        while let Some(name) = stream
            .next_name()
            .map_err(|e| self.describe(e, "list", rel))?
        {
            if name == b"." || name == b".." {
                continue;
            }
            if out.len() == max_entries {
                return Err(io::Error::other(format!(
                    "directory {} below {} holds more than {max_entries} entries",
                    rel.display(),
                    self.path.display()
                )));
            }
            // A single name from the kernel (no '/', not `..`) opened relative to the
            // directory itself: it cannot leave it.
            let c = cstring(&name, rel)?;
            let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            match self.at(stream.fd(), &c, flags, 0, rel) {
                Ok(fd) => out.push(ServedDirEntry {
                    metadata: File::from(fd).metadata()?,
                    name: OsString::from_vec(name),
                }),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// An open directory stream (`fdopendir`/`readdir`), closed on drop.
struct DirStream(std::ptr::NonNull<libc::DIR>);

impl DirStream {
    fn new(dir: OwnedFd) -> io::Result<Self> {
        let raw = dir.into_raw_fd();
        // SAFETY: raw is an open directory fd; on success the stream owns it.
        let p = unsafe { libc::fdopendir(raw) };
        match std::ptr::NonNull::new(p) {
            Some(p) => Ok(Self(p)),
            None => {
                let e = io::Error::last_os_error();
                // SAFETY: fdopendir failed, so raw is still ours to close.
                drop(unsafe { OwnedFd::from_raw_fd(raw) });
                Err(e)
            }
        }
    }

    /// The stream's descriptor (valid while the stream lives).
    fn fd(&self) -> RawFd {
        // SAFETY: self.0 is an open stream.
        unsafe { libc::dirfd(self.0.as_ptr()) }
    }

    /// The next name (copied out of the stream's buffer), `None` at the end.
    fn next_name(&mut self) -> io::Result<Option<Vec<u8>>> {
        // SAFETY: errno is thread-local; readdir signals errors only through it.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: self.0 is an open stream.
        let ent = unsafe { libc::readdir(self.0.as_ptr()) };
        if ent.is_null() {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(0) | None => Ok(None),
                Some(_) => Err(e),
            };
        }
        // SAFETY: ent points at a dirent with a NUL-terminated d_name, valid until the
        // next readdir on this stream; the name is copied before returning.
        let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
        Ok(Some(name.to_bytes().to_vec()))
    }
}

impl Drop for DirStream {
    fn drop(&mut self) {
        // SAFETY: self.0 is an open stream, closed exactly once here.
        unsafe { libc::closedir(self.0.as_ptr()) };
    }
}
