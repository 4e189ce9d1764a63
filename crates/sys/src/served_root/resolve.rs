//! Resolving a path beneath the root, the one place every operation goes through:
//! `openat2(2)`, the component-by-component walk or plain `openat(2)` as the
//! [`Resolver`] says, the checks of a relative path, and the error messages that name it.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::{Resolver, ServedRoot};

/// `struct open_how` from linux/openat2.h (libc's is `non_exhaustive`).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

impl ServedRoot {
    /// Opens a directory below the root (empty path: the root itself) as `O_PATH`.
    pub(super) fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        self.open_beneath_dir(rel, libc::O_PATH)
    }

    pub(super) fn open_beneath_dir(&self, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
        if rel.as_os_str().is_empty() {
            let c = CString::from(c".");
            return self.at(self.dir.as_raw_fd(), &c, flags | libc::O_DIRECTORY, 0, rel);
        }
        self.open_beneath(rel, flags | libc::O_DIRECTORY | libc::O_CLOEXEC, 0)
    }

    pub(super) fn parent_and_name(&self, rel: &Path) -> io::Result<(OwnedFd, CString)> {
        let names = components(rel)?;
        let (last, parents) = names.split_last().ok_or_else(|| empty_path(rel))?;
        let parent: PathBuf = parents.iter().collect();
        Ok((self.open_dir(&parent)?, cstring(last.as_bytes(), rel)?))
    }

    pub(super) fn open_beneath(
        &self,
        rel: &Path,
        flags: libc::c_int,
        mode: u32,
    ) -> io::Result<OwnedFd> {
        // Absolute paths, `..`, NUL: refused whatever the resolver (the last line of
        // defence, see the module docs).
        components(rel)?;
        if let Some(r) = &self.receiving {
            if let Ok(below) = rel.strip_prefix(&r.base) {
                if !below.as_os_str().is_empty() {
                    return self.open_below_base(&r.base, below, r.openat2, flags, mode, rel);
                }
            }
        }
        self.open_as_named(rel, flags, mode)
    }

    /// A receiving root's path `base/below`: `base` as named, then `below` from there
    /// without following any symlink (`openat2` with `RESOLVE_NO_SYMLINKS`, or the walk).
    fn open_below_base(
        &self,
        base: &Path,
        below: &Path,
        openat2: bool,
        flags: libc::c_int,
        mode: u32,
        rel: &Path,
    ) -> io::Result<OwnedFd> {
        let start = if base.as_os_str().is_empty() {
            None
        } else {
            Some(self.open_as_named(base, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC, 0)?)
        };
        let at = start
            .as_ref()
            .map_or(self.dir.as_raw_fd(), |d| d.as_raw_fd());
        if openat2 {
            let c = cstring(below.as_os_str().as_bytes(), rel)?;
            let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
            return self
                .openat2(at, &c, flags, mode, resolve)
                .map_err(|e| self.describe(e, "open", rel));
        }
        self.walk_no_symlinks(at, &components(below)?, flags, mode, rel)
    }

    /// `rel` resolved as the root's resolver says (for a receiving root: a path at or
    /// above the directory received into).
    fn open_as_named(&self, rel: &Path, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
        match self.resolver {
            Resolver::Openat2 => {
                let c = cstring(rel.as_os_str().as_bytes(), rel)?;
                let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
                self.openat2(self.dir.as_raw_fd(), &c, flags, mode, resolve)
                    .map_err(|e| self.describe(e, "open", rel))
            }
            Resolver::NoSymlinks => {
                self.walk_no_symlinks(self.dir.as_raw_fd(), &components(rel)?, flags, mode, rel)
            }
            Resolver::Unconfined => {
                let c = cstring(rel.as_os_str().as_bytes(), rel)?;
                self.at(self.dir.as_raw_fd(), &c, flags, mode, rel)
            }
        }
    }

    /// Walks `names` down from the directory `start` component by component with
    /// `O_NOFOLLOW` (the last one opened with `flags`): a symlink anywhere is an error.
    fn walk_no_symlinks(
        &self,
        start: RawFd,
        names: &[&std::ffi::OsStr],
        flags: libc::c_int,
        mode: u32,
        rel: &Path,
    ) -> io::Result<OwnedFd> {
        let (last, parents) = names.split_last().ok_or_else(|| empty_path(rel))?;
        let mut dir: Option<OwnedFd> = None;
        for name in parents {
            let c = cstring(name.as_bytes(), rel)?;
            let at = dir.as_ref().map_or(start, |d| d.as_raw_fd());
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
        let at = dir.as_ref().map_or(start, |d| d.as_raw_fd());
        self.at(at, &c, flags | libc::O_NOFOLLOW, mode, rel)
    }

    pub(super) fn at(
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

    /// `openat2(2)` of `path` from the directory `dir` with the `resolve` flags.
    fn openat2(
        &self,
        dir: RawFd,
        path: &CString,
        flags: libc::c_int,
        mode: u32,
        resolve: u64,
    ) -> io::Result<OwnedFd> {
        let how = OpenHow {
            flags: flags as u64,
            mode: u64::from(mode),
            resolve,
        };
        // SAFETY: how is a valid open_how of the size passed; path is a valid C string.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir,
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

    pub(super) fn openat2_works(&self) -> bool {
        let c = CString::from(c".");
        let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
        match self.openat2(
            self.dir.as_raw_fd(),
            &c,
            libc::O_PATH | libc::O_CLOEXEC,
            0,
            resolve,
        ) {
            Ok(_) => true,
            Err(e) => !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)),
        }
    }

    pub(super) fn describe(&self, e: io::Error, what: &str, rel: &Path) -> io::Error {
        if e.get_ref().is_some_and(|r| r.is::<Described>()) {
            // Described already, deeper down.
            return e;
        }
        let why = match e.raw_os_error() {
            Some(libc::EXDEV) => " (the path leaves the served root)".to_string(),
            Some(libc::ELOOP) | Some(libc::ENOTDIR) if self.below_received_base(rel) => {
                " (a symlink or a file where the sender has a directory: nothing below \
                 the destination is reached through a symlink)"
                    .to_string()
            }
            Some(libc::ELOOP) | Some(libc::ENOTDIR) if self.resolver == Resolver::NoSymlinks => {
                " (symlinks are refused below the served root)".to_string()
            }
            Some(libc::ELOOP) => {
                " (a symlink where none is followed, a symlink loop or a magic link)".to_string()
            }
            _ => String::new(),
        };
        let place = self.place(rel);
        io::Error::new(
            e.kind(),
            Described {
                errno: e.raw_os_error(),
                text: format!("cannot {what} {place}: {e}{why}"),
            },
        )
    }

    /// Whether `rel` lies strictly below a receiving root's base (where no symlink is
    /// followed).
    pub(super) fn below_received_base(&self, rel: &Path) -> bool {
        self.receiving.as_ref().is_some_and(|r| {
            rel.strip_prefix(&r.base)
                .is_ok_and(|below| !below.as_os_str().is_empty())
        })
    }

    /// A receiving root's rule for a symlink at `rel` where a directory is to be made
    /// (`Some(true)`: replace it), `None` where `rel` is not below its base.
    pub(super) fn receiving_link_rule(&self, rel: &Path) -> Option<bool> {
        let r = self.receiving.as_ref()?;
        self.below_received_base(rel).then_some(r.replace_links)
    }

    /// `rel` as a message names it.
    pub(super) fn place(&self, rel: &Path) -> String {
        if self.resolver == Resolver::Unconfined {
            // No root to speak of: the path as the user knows it.
            format!("{}", self.path.join(rel).display())
        } else {
            format!("{} below {}", rel.display(), self.path.display())
        }
    }
}

/// The plain names of a relative path; refuses absolute paths, `..`, `.`-only and NUL.
pub(super) fn components(rel: &Path) -> io::Result<Vec<&std::ffi::OsStr>> {
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

pub(super) fn cstring(bytes: &[u8], rel: &Path) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path {} contains a NUL byte", rel.display()),
        )
    })
}

pub(super) fn empty_path(rel: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("path {:?} names no file below the served root", rel),
    )
}

/// An OS error described with the path it concerns: its errno stays readable through
/// [`os_error`] (a storage client maps it to its own).
#[derive(Debug)]
struct Described {
    errno: Option<i32>,
    text: String,
}

impl std::fmt::Display for Described {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Described {}

/// The errno behind `e`, also when a served root described it with its path.
pub fn os_error(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        e.get_ref()?
            .downcast_ref::<Described>()
            .and_then(|d| d.errno)
    })
}
