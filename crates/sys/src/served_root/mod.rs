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
//!
//! A receiving root ([`ServedRoot::receiving_into`]) adds a rule on top of either
//! resolver: below the directory a transfer receives into, no symlink is followed in
//! any component, whatever it points at. The directory itself is what the user (or the
//! client) named and is resolved as above; everything below it came from the sender's
//! tree, and a link the destination holds there (planted, or made by an earlier run of
//! the same copy) must not carry the next run's writes, renames or deletions elsewhere.
//! Where the sender has a directory and the destination a symlink, the receiver
//! replaces the link (the link itself, never its target) by a directory, as rsync does
//! ([`ServedRoot::create_dirs`]), unless told to keep existing entries.
//!
//! The parts: this module holds the root and its types; `files` opens, creates, renames,
//! removes and flushes files and directories; `links` reads, makes and re-times links;
//! `tree` lists directories and removes entries below a base; `resolve` is where
//! every path is resolved beneath the root.

use std::ffi::OsString;
use std::fs::Metadata;
use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use resolve::cstring;

mod files;
mod links;
mod resolve;
pub use resolve::os_error;
mod tree;

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
    /// A receiving root's rule for the paths below one directory (see the module's docs).
    receiving: Option<Receiving>,
}

/// Where a receiving root stops following symlinks, and what it does with a symlink
/// where a directory is to be made.
#[derive(Debug, Clone)]
struct Receiving {
    /// The directory received into, relative to the root (empty: the root itself).
    base: PathBuf,
    /// `openat2` with `RESOLVE_NO_SYMLINKS` works here (else a component walk).
    openat2: bool,
    /// A symlink where a directory is to be made is replaced (else refused).
    replace_links: bool,
}

/// What a receiving root does where the sender has a directory and the destination holds
/// a symlink (below the directory received into).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkWhereDir {
    /// Remove the link (never its target) and make the directory, as rsync does.
    Replace,
    /// Leave the link and fail the directory with a message naming it (`--no-clobber`).
    Refuse,
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

    /// `path` opened as a root with each confining resolver this kernel has: the
    /// no-symlinks walk always, then `openat2`'s when the kernel allows it. What a
    /// confinement test runs its cases through, so both resolvers keep the same rules.
    pub fn open_each(path: &Path) -> io::Result<Vec<Self>> {
        let mut each = vec![Self::open_with(path, Resolver::NoSymlinks)?];
        let auto = Self::open(path)?;
        if auto.resolver() == Resolver::Openat2 {
            each.push(auto);
        }
        Ok(each)
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
            receiving: None,
        })
    }

    /// The same root for receiving into `base` (empty: the root itself): `base` is
    /// resolved as this root resolves any path (it is the destination as named), while
    /// every component below it is resolved without following a symlink, whatever the
    /// resolver, the last component included. Every create, rename, link, mode change,
    /// listing and removal of a transfer's receiving side goes through such a root.
    /// `links` says what [`Self::create_dirs`] does with a symlink where a directory is
    /// to be made below `base`.
    pub fn receiving_into(&self, base: &Path, links: LinkWhereDir) -> io::Result<Self> {
        resolve::components(base)?;
        let mut root = Self {
            dir: self.dir.try_clone()?,
            path: self.path.clone(),
            resolver: self.resolver,
            receiving: None,
        };
        root.receiving = Some(Receiving {
            base: base.to_path_buf(),
            // A root that walks (no `openat2` here) walks below the base too.
            openat2: root.resolver != Resolver::NoSymlinks && root.openat2_works(),
            replace_links: links == LinkWhereDir::Replace,
        });
        Ok(root)
    }

    /// The resolver in use.
    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    /// The root's path (for messages only; never used to open anything).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl AsFd for ServedRoot {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.dir.as_fd()
    }
}
