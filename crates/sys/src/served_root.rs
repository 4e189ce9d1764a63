//! Files strictly inside a served root: every open, mkdir, rename and symlink (made, read
//! or re-timed) is resolved relative to a directory descriptor of the root, never through
//! a path string, and may not leave it by `..`, an absolute path or a symlink.
//!
//! Two resolvers:
//! - [`Resolver::Openat2`] (Linux >= 5.6): `openat2(2)` with `RESOLVE_BENEATH |
//!   RESOLVE_NO_MAGICLINKS`; the kernel refuses any step out of the root (`EXDEV`),
//!   while symlinks that stay inside it are followed.
//! - [`Resolver::NoSymlinks`]: the fallback where `openat2` is missing or filtered
//!   (`ENOSYS`, `EPERM` from seccomp): walk component by component with `O_NOFOLLOW`,
//!   refusing every symlink.
//!
//! - [`Resolver::Unconfined`]: plain `openat(2)` from the root, symlinks followed. Only for
//!   `longhaul ssh-server`, which serves `/` with the ssh user's own rights: there is
//!   nothing to escape from, and the user's symlinks should work as in scp. A daemon never
//!   uses it ([`ServedRoot::open`] picks one of the two above).
//!
//! Callers pass relative paths already validated as peer input (`longhaul-transfer`'s
//! `parse_peer_path`); this module checks again (absolute, `..`, empty, NUL) because it is
//! the last line of defence.
//!
//! Files are opened without blocking (`O_NONBLOCK`: a FIFO opened for reading would wait
//! for a writer forever) and must be regular files ([`ServedRoot::open_file`] checks with
//! `fstat` before anything reads or writes them). A file opened for writing (the
//! receiver's part files and manifests), [`Access::ReadOwn`] and
//! [`ServedRoot::open_directory`] never follow a symlink in the last component, whatever
//! the resolver.

use std::ffi::{CStr, CString, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// How paths below the root are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`.
    Openat2,
    /// Component by component with `O_NOFOLLOW`: no symlink is followed at all.
    NoSymlinks,
    /// `openat` with the whole path, symlinks followed anywhere (no confinement).
    Unconfined,
}

/// How a file below the root is opened (always a regular file, see
/// [`ServedRoot::open_file`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only; the file must exist.
    Read,
    /// Read only, never through a symlink in the last component: a file this end wrote
    /// itself (a manifest), which a planted symlink must not stand in for.
    ReadOwn,
    /// Read and write, created with `mode` if missing, never truncated (a partial file
    /// being resumed keeps its bytes).
    ReadWriteCreate {
        /// Permission bits for a new file.
        mode: u32,
    },
    /// Read and write, created with `mode`; fails if it exists.
    CreateNew {
        /// Permission bits for the new file.
        mode: u32,
    },
}

impl Access {
    fn flags(self) -> (libc::c_int, u32) {
        // Writing never goes through a symlink: a part file or manifest planted as one
        // would send the data elsewhere in the root.
        let write = libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW;
        match self {
            Access::Read => (libc::O_RDONLY, 0),
            Access::ReadOwn => (libc::O_RDONLY | libc::O_NOFOLLOW, 0),
            Access::ReadWriteCreate { mode } => (write, mode),
            Access::CreateNew { mode } => (write | libc::O_EXCL, mode),
        }
    }
}

/// A directory that a server serves; nothing outside it can be reached through it.
#[derive(Debug)]
pub struct ServedRoot {
    dir: OwnedFd,
    path: PathBuf,
    resolver: Resolver,
}

/// One entry of a directory below the root, with its attributes as `lstat(2)` sees them
/// (a symlink is reported as a symlink, never followed).
#[derive(Debug)]
pub struct ServedDirEntry {
    /// The entry's name (a single component, never `.` or `..`).
    pub name: OsString,
    /// Its attributes, not following a symlink.
    pub metadata: Metadata,
}

/// `struct open_how` from linux/openat2.h (libc's is `non_exhaustive`).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

impl ServedRoot {
    /// Opens `path` as a root, with `openat2` if the kernel allows it, else the
    /// no-symlinks walk.
    pub fn open(path: &Path) -> io::Result<Self> {
        let mut root = Self::open_with(path, Resolver::Openat2)?;
        if !root.openat2_works() {
            root.resolver = Resolver::NoSymlinks;
        }
        Ok(root)
    }

    /// The whole file system as the calling user sees it: `/` with
    /// [`Resolver::Unconfined`]. Paths are still relative (to `/`) and still refused with
    /// `..`; the caller resolves `..` by name first.
    pub fn open_unconfined() -> io::Result<Self> {
        Self::open_with(Path::new("/"), Resolver::Unconfined)
    }

    /// Opens `path` as a root with a given resolver (tests exercise both).
    pub fn open_with(path: &Path, resolver: Resolver) -> io::Result<Self> {
        let c = cstring(path.as_os_str().as_bytes(), path)?;
        // SAFETY: c is a valid C string; the fd returned is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("cannot open served root {}: {e}", path.display()),
            ));
        }
        Ok(Self {
            // SAFETY: fd is a fresh descriptor nobody else owns.
            dir: unsafe { OwnedFd::from_raw_fd(fd) },
            path: path.to_path_buf(),
            resolver,
        })
    }

    /// The resolver in use.
    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    /// The root's path (for messages only; never used to open anything).
    pub fn path(&self) -> &Path {
        &self.path
    }

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
    /// in it.
    pub fn create_dirs(&self, rel: &Path, mode: u32) -> io::Result<Vec<PathBuf>> {
        let names = components(rel)?;
        let mut prefix = PathBuf::new();
        let mut created = Vec::new();
        for name in names {
            let parent = self.open_dir(&prefix)?;
            let c = cstring(name.as_bytes(), rel)?;
            prefix.push(name);
            // SAFETY: parent is an open directory fd and c a valid C string.
            let rc = unsafe { libc::mkdirat(parent.as_raw_fd(), c.as_ptr(), mode) };
            if rc == 0 {
                created.push(prefix.clone());
            } else {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(self.describe(e, "mkdir", rel));
                }
            }
        }
        // Check that what exists is a directory we may enter (not a symlink out).
        self.open_dir(&prefix)?;
        Ok(created)
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

    /// Opens a directory below the root (empty path: the root itself) as `O_PATH`.
    fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        self.open_beneath_dir(rel, libc::O_PATH)
    }

    fn open_beneath_dir(&self, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
        if rel.as_os_str().is_empty() {
            let c = CString::from(c".");
            return self.at(self.dir.as_raw_fd(), &c, flags | libc::O_DIRECTORY, 0, rel);
        }
        self.open_beneath(rel, flags | libc::O_DIRECTORY | libc::O_CLOEXEC, 0)
    }

    fn parent_and_name(&self, rel: &Path) -> io::Result<(OwnedFd, CString)> {
        let names = components(rel)?;
        let (last, parents) = names.split_last().ok_or_else(|| empty_path(rel))?;
        let parent: PathBuf = parents.iter().collect();
        Ok((self.open_dir(&parent)?, cstring(last.as_bytes(), rel)?))
    }

    fn open_beneath(&self, rel: &Path, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
        let names = components(rel)?;
        match self.resolver {
            Resolver::Openat2 => {
                let c = cstring(rel.as_os_str().as_bytes(), rel)?;
                self.openat2(&c, flags, mode)
                    .map_err(|e| self.describe(e, "open", rel))
            }
            Resolver::NoSymlinks => {
                let (last, parents) = names.split_last().ok_or_else(|| empty_path(rel))?;
                let mut dir: Option<OwnedFd> = None;
                for name in parents {
                    let c = cstring(name.as_bytes(), rel)?;
                    let at = dir.as_ref().map_or(self.dir.as_raw_fd(), |d| d.as_raw_fd());
                    let next = self.at(
                        at,
                        &c,
                        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                        0,
                        rel,
                    )?;
                    dir = Some(next);
                }
                let c = cstring(last.as_bytes(), rel)?;
                let at = dir.as_ref().map_or(self.dir.as_raw_fd(), |d| d.as_raw_fd());
                self.at(at, &c, flags | libc::O_NOFOLLOW, mode, rel)
            }
            Resolver::Unconfined => {
                let c = cstring(rel.as_os_str().as_bytes(), rel)?;
                self.at(self.dir.as_raw_fd(), &c, flags, mode, rel)
            }
        }
    }

    fn at(
        &self,
        dir: RawFd,
        name: &CString,
        flags: libc::c_int,
        mode: u32,
        rel: &Path,
    ) -> io::Result<OwnedFd> {
        // SAFETY: dir is an open directory fd, name a valid C string.
        let fd = unsafe { libc::openat(dir, name.as_ptr(), flags, mode as libc::c_uint) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            // O_NOFOLLOW on a symlink: ELOOP; O_DIRECTORY|O_NOFOLLOW on one: ENOTDIR.
            return Err(self.describe(e, "open", rel));
        }
        // SAFETY: fd is fresh and owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn openat2(&self, path: &CString, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
        let how = OpenHow {
            flags: flags as u64,
            mode: u64::from(mode),
            resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
        };
        // SAFETY: how is a valid open_how of the size passed; path is a valid C string.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is fresh and owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }

    fn openat2_works(&self) -> bool {
        let c = CString::from(c".");
        match self.openat2(&c, libc::O_PATH | libc::O_CLOEXEC, 0) {
            Ok(_) => true,
            Err(e) => !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)),
        }
    }

    fn describe(&self, e: io::Error, what: &str, rel: &Path) -> io::Error {
        let why = match e.raw_os_error() {
            Some(libc::EXDEV) => " (the path leaves the served root)".to_string(),
            Some(libc::ELOOP) | Some(libc::ENOTDIR) if self.resolver == Resolver::NoSymlinks => {
                " (symlinks are refused below the served root)".to_string()
            }
            Some(libc::ELOOP) => {
                " (a symlink where none is followed, a symlink loop or a magic link)".to_string()
            }
            _ => String::new(),
        };
        let place = self.place(rel);
        io::Error::new(e.kind(), format!("cannot {what} {place}: {e}{why}"))
    }

    /// `rel` as a message names it.
    fn place(&self, rel: &Path) -> String {
        if self.resolver == Resolver::Unconfined {
            // No root to speak of: the path as the user knows it.
            format!("{}", self.path.join(rel).display())
        } else {
            format!("{} below {}", rel.display(), self.path.display())
        }
    }
}

impl AsFd for ServedRoot {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.dir.as_fd()
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

/// The plain names of a relative path; refuses absolute paths, `..`, `.`-only and NUL.
fn components(rel: &Path) -> io::Result<Vec<&std::ffi::OsStr>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "path {} is absolute or contains `..`; only paths below the served root are allowed",
                        rel.display()
                    ),
                ))
            }
        }
    }
    Ok(out)
}

fn cstring(bytes: &[u8], rel: &Path) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path {} contains a NUL byte", rel.display()),
        )
    })
}

fn empty_path(rel: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("path {:?} names no file below the served root", rel),
    )
}
