//! The sender's file list: walking the sources of a copy into [`FileEntry`]s.
//!
//! Two walks with one output: [`walk_local`] for the sources of a push (paths on this
//! machine) and [`walk_served`] for the source of a pull (below a [`ServedRoot`], listed
//! and stat'ed only through the root's descriptor, never by a path string).
//!
//! Entry paths start with each source's base name (`a/b/` -> `b`, `b/x`, ...). With
//! `recursive`, a directory is listed as its own entry, then its contents depth first,
//! directories before their contents, names sorted bytewise (the same tree always gives
//! the same list). Regular files, directories and symlinks are copied: a symlink inside a
//! tree is a [`EntryKind::Symlink`] entry carrying its target as `readlink` gives it
//! (never followed: size 0, the link's own mtime, mode 0o777). Fifos, sockets and devices
//! are skipped with a warning, as are the receiver's unfinished work files
//! (`.NAME.longhaul-part`/`-manifest`/`-link`). A symlink named on the command line of a
//! push is followed (like `cp` and `scp`); below a served root nothing is followed
//! (`lstat`, `readlinkat` through the root's descriptor), the source of a pull included.
//!
//! With `hard_links` (`sync -H`), a regular file with more than one link whose device and
//! inode were already listed in this walk is a [`EntryKind::HardLink`] entry naming the
//! first name's entry path (size 0: its data is the first name's). Without it every name
//! is its own file.
//!
//! The `_filtered` walks leave out what `--exclude` / `--include` rules exclude
//! ([`Filter`], matched on the path below the source's base name): an excluded directory
//! is not listed at all, so nothing below it is sent.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use longhaul_proto::transfer::{EntryKind, FileEntry, MAX_FILE_ID, MAX_PATH_BYTES};
use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::place::is_work_name;
use longhaul_transfer::{parse_peer_path, Filter, SafeRelPath};

/// Most entries (files and directories) in one transfer: the wire's file-id space.
pub const MAX_ENTRIES: usize = MAX_FILE_ID as usize + 1;

/// One entry of the file list and where to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// What the receiver is told (path from the source's base name, kind, size, mtime,
    /// mode, fingerprint).
    pub entry: FileEntry,
    /// Where to open it: a local path for [`walk_local`]; a path relative to the served
    /// root for [`walk_served`] (open with `ServedRoot::open_file(origin, Access::Read)`).
    pub origin: PathBuf,
}

/// Why a source cannot be listed. Each message names the path and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// The source does not exist.
    #[error("source {}: no such file or directory; check the name", .path.display())]
    Missing {
        /// The source as given.
        path: PathBuf,
    },
    /// A source named on the command line is a symlink to nothing.
    #[error("source {} is a symlink whose target is missing; fix the link or name its target", .path.display())]
    BrokenSymlink {
        /// The source as given.
        path: PathBuf,
    },
    /// A directory source without `-r`.
    #[error("{} is a directory; use -r to copy trees", .path.display())]
    IsDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// A source with no name to copy it as (`/`).
    #[error("source {} has no name to copy it as (it is the file system root); name a directory below it", .path.display())]
    NoName {
        /// The source as given.
        path: PathBuf,
    },
    /// Two sources with the same base name would land on the same destination.
    #[error("sources {} and {} are both named {name:?} and would land on the same destination; copy them with separate commands", .first.display(), .second.display())]
    DuplicateName {
        /// The shared base name, lossily decoded.
        name: String,
        /// The first source with that name.
        first: PathBuf,
        /// The second one.
        second: PathBuf,
    },
    /// More entries than one transfer can carry.
    #[error("more than {max} files and directories (reached at {}); split the transfer into several commands, e.g. one per subdirectory", .path.display())]
    TooManyEntries {
        /// The bound.
        max: usize,
        /// Where the walk was when it passed the bound.
        path: PathBuf,
    },
    /// A path beyond the bounds every receiver enforces (name 255 bytes, path 4095
    /// bytes, 256 components).
    #[error("cannot copy {}: {source}; copy a subdirectory nearer the files or shorten the names", .path.display())]
    PathBounds {
        /// The path on this side.
        path: PathBuf,
        /// The bound it broke.
        source: longhaul_transfer::Error,
    },
    /// A directory could not be listed.
    #[error("cannot list directory {}: {source}; check its permissions or leave it out", .path.display())]
    ListDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A file's attributes could not be read.
    #[error("cannot read the attributes of {}: {source}", .path.display())]
    Stat {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A symlink's target could not be read.
    #[error("cannot read the target of symlink {}: {source}; check its permissions or leave it out", .path.display())]
    ReadLink {
        /// The symlink.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

/// Lists the local `sources` of a push (see the module docs for the order and rules).
/// `warn` receives one line per skipped entry.
pub fn walk_local(
    sources: &[PathBuf],
    recursive: bool,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<SourceFile>, WalkError> {
    walk_local_filtered(sources, recursive, &Filter::default(), false, warn)
}

/// [`walk_local`] leaving out what `filter` excludes, listing later names of a file as
/// hard links with `hard_links` (see the module docs).
pub fn walk_local_filtered(
    sources: &[PathBuf],
    recursive: bool,
    filter: &Filter,
    hard_links: bool,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<SourceFile>, WalkError> {
    let mut walk = Walk::new(LocalTree, recursive, filter, warn);
    walk.hard_links = hard_links;
    let mut names: HashMap<Vec<u8>, &PathBuf> = HashMap::new();
    for src in sources {
        let name = local_base_name(src)?;
        if let Some(first) = names.insert(name.clone(), src) {
            return Err(WalkError::DuplicateName {
                name: String::from_utf8_lossy(&name).into_owned(),
                first: first.clone(),
                second: src.clone(),
            });
        }
        let md = fs::metadata(src).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound if fs::symlink_metadata(src).is_ok() => {
                WalkError::BrokenSymlink { path: src.clone() }
            }
            io::ErrorKind::NotFound => WalkError::Missing { path: src.clone() },
            _ => WalkError::Stat {
                path: src.clone(),
                source: e,
            },
        })?;
        walk.visit(src.clone(), name, &md)?;
    }
    Ok(walk.out)
}

/// Lists `source` below a served root for a pull; `origin`s are relative to the root.
/// Nothing is followed: a symlink anywhere, `source` included, is listed as a symlink.
pub fn walk_served(
    root: &ServedRoot,
    source: &SafeRelPath,
    recursive: bool,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<SourceFile>, WalkError> {
    walk_served_filtered(root, source, recursive, &Filter::default(), false, warn)
}

/// [`walk_served`] leaving out what `filter` excludes, listing later names of a file as
/// hard links with `hard_links` (see the module docs).
pub fn walk_served_filtered(
    root: &ServedRoot,
    source: &SafeRelPath,
    recursive: bool,
    filter: &Filter,
    hard_links: bool,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<SourceFile>, WalkError> {
    let origin = source.to_path_buf();
    let md = root.metadata(&origin).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => WalkError::Missing {
            path: origin.clone(),
        },
        _ => WalkError::Stat {
            path: origin.clone(),
            source: e,
        },
    })?;
    let mut walk = Walk::new(ServedTree(root), recursive, filter, warn);
    walk.hard_links = hard_links;
    walk.visit(origin, source.file_name().to_vec(), &md)?;
    Ok(walk.out)
}

/// [`walk_served`] of the whole served root (a pull of `HOST:`): entries start with the
/// root directory's own name, `origin`s are relative to the root. Needs `recursive`.
pub fn walk_served_root(
    root: &ServedRoot,
    recursive: bool,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<SourceFile>, WalkError> {
    walk_served_root_filtered(root, recursive, &Filter::default(), false, warn)
}

/// [`walk_served_root`] leaving out what `filter` excludes, listing later names of a file
/// as hard links with `hard_links` (see the module docs).
pub fn walk_served_root_filtered(
    root: &ServedRoot,
    recursive: bool,
    filter: &Filter,
    hard_links: bool,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<SourceFile>, WalkError> {
    let shown = root.path().to_path_buf();
    let canonical = fs::canonicalize(&shown).unwrap_or_else(|_| shown.clone());
    let name = match canonical.file_name() {
        Some(n) => n.as_bytes().to_vec(),
        None => return Err(WalkError::NoName { path: shown }),
    };
    let md = root.metadata(Path::new("")).map_err(|e| WalkError::Stat {
        path: shown.clone(),
        source: e,
    })?;
    if !recursive {
        return Err(WalkError::IsDirectory { path: shown });
    }
    let mut walk = Walk::new(ServedTree(root), recursive, filter, warn);
    walk.hard_links = hard_links;
    walk.visit(PathBuf::new(), name, &md)?;
    Ok(walk.out)
}

/// The name a local source is copied as: its last component, or for `.`, `..` and the
/// like the name of the directory it resolves to.
fn local_base_name(src: &Path) -> Result<Vec<u8>, WalkError> {
    if let Some(Component::Normal(n)) = src.components().next_back() {
        return Ok(n.as_bytes().to_vec());
    }
    let canonical = fs::canonicalize(src).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => WalkError::Missing {
            path: src.to_path_buf(),
        },
        _ => WalkError::Stat {
            path: src.to_path_buf(),
            source: e,
        },
    })?;
    match canonical.file_name() {
        Some(n) => Ok(n.as_bytes().to_vec()),
        None => Err(WalkError::NoName {
            path: src.to_path_buf(),
        }),
    }
}

/// Where a walk lists directories: the local file system or a served root.
trait Tree {
    /// The entries of directory `dir` (an origin) with `lstat` attributes, at most `max`.
    fn list(&self, dir: &Path, max: usize) -> Result<Vec<(OsString, Metadata)>, WalkError>;
    /// The target of the symlink `link` (an origin), read, never followed.
    fn read_link(&self, link: &Path) -> io::Result<Vec<u8>>;
}

struct LocalTree;

impl Tree for LocalTree {
    fn list(&self, dir: &Path, max: usize) -> Result<Vec<(OsString, Metadata)>, WalkError> {
        let list_err = |source| WalkError::ListDir {
            path: dir.to_path_buf(),
            source,
        };
        let mut out = Vec::new();
        for item in fs::read_dir(dir).map_err(list_err)? {
            let item = item.map_err(list_err)?;
            if out.len() == max {
                return Err(WalkError::TooManyEntries {
                    max: 0, // filled in by the walk
                    path: dir.to_path_buf(),
                });
            }
            // DirEntry::metadata is fstatat(dir, name, AT_SYMLINK_NOFOLLOW).
            match item.metadata() {
                Ok(md) => out.push((item.file_name(), md)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // vanished
                Err(source) => {
                    return Err(WalkError::Stat {
                        path: item.path(),
                        source,
                    })
                }
            }
        }
        Ok(out)
    }

    fn read_link(&self, link: &Path) -> io::Result<Vec<u8>> {
        Ok(fs::read_link(link)?.into_os_string().into_vec())
    }
}

struct ServedTree<'a>(&'a ServedRoot);

impl Tree for ServedTree<'_> {
    fn list(&self, dir: &Path, max: usize) -> Result<Vec<(OsString, Metadata)>, WalkError> {
        match self.0.read_dir_at_most(dir, max) {
            Ok(v) => Ok(v.into_iter().map(|e| (e.name, e.metadata)).collect()),
            // Only the entry bound is `Other`: OS errors map to their own kinds.
            Err(source) if source.kind() == io::ErrorKind::Other => {
                Err(WalkError::TooManyEntries {
                    max: 0, // filled in by the walk
                    path: dir.to_path_buf(),
                })
            }
            Err(source) => Err(WalkError::ListDir {
                path: dir.to_path_buf(),
                source,
            }),
        }
    }

    fn read_link(&self, link: &Path) -> io::Result<Vec<u8>> {
        self.0.read_link(link)
    }
}

/// One walk in progress: the entries so far and the rules.
struct Walk<'w, T> {
    tree: T,
    recursive: bool,
    /// Most entries ([`MAX_ENTRIES`] outside of tests).
    max_entries: usize,
    /// What the rules exclude is left out (an excluded directory is not listed).
    filter: &'w Filter,
    warn: &'w mut dyn FnMut(String),
    out: Vec<SourceFile>,
    /// `sync -H`: later names of a file are listed as hard links of the first.
    hard_links: bool,
    /// With `hard_links`: the entry path of the first name of each (device, inode) with
    /// more than one link.
    first_names: HashMap<(u64, u64), Vec<u8>>,
}

impl<'w, T: Tree> Walk<'w, T> {
    fn new(tree: T, recursive: bool, filter: &'w Filter, warn: &'w mut dyn FnMut(String)) -> Self {
        Self {
            tree,
            recursive,
            max_entries: MAX_ENTRIES,
            filter,
            warn,
            out: Vec::new(),
            hard_links: false,
            first_names: HashMap::new(),
        }
    }

    /// Adds `origin` (entry path `path`, attributes `md`) and, for a directory, its
    /// contents. Recursion depth is bounded by the 256-component path bound, checked
    /// before descending.
    fn visit(&mut self, origin: PathBuf, path: Vec<u8>, md: &Metadata) -> Result<(), WalkError> {
        let ft = md.file_type();
        if ft.is_file() && self.hard_links && md.nlink() > 1 {
            match self.first_names.get(&(md.dev(), md.ino())) {
                Some(first) => {
                    let first = first.clone();
                    self.push(&origin, path, EntryKind::HardLink, md)?;
                    if let Some(last) = self.out.last_mut() {
                        last.entry.link_target = first;
                    }
                    return Ok(());
                }
                None => {
                    self.first_names.insert((md.dev(), md.ino()), path.clone());
                }
            }
        }
        let kind = if ft.is_file() {
            EntryKind::File
        } else if ft.is_dir() {
            if !self.recursive {
                return Err(WalkError::IsDirectory { path: origin });
            }
            EntryKind::Dir
        } else if ft.is_symlink() {
            let target = match self.tree.read_link(&origin) {
                Ok(t) => t,
                // Gone since the listing: as if it had never been there.
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(source) => {
                    return Err(WalkError::ReadLink {
                        path: origin,
                        source,
                    })
                }
            };
            return self.push_link(&origin, path, target, md);
        } else {
            let what = if ft.is_fifo() {
                "fifo"
            } else if ft.is_socket() {
                "socket"
            } else if ft.is_block_device() || ft.is_char_device() {
                "device"
            } else {
                "special file"
            };
            (self.warn)(format!(
                "skipped {what} {}: longhaul cp copies regular files, directories and \
                 symlinks",
                origin.display()
            ));
            return Ok(());
        };
        self.push(&origin, path.clone(), kind, md)?;
        if kind == EntryKind::File {
            return Ok(());
        }
        let remaining = self.max_entries - self.out.len();
        let mut children = match self.tree.list(&origin, remaining) {
            Err(WalkError::TooManyEntries { path, .. }) => {
                return Err(WalkError::TooManyEntries {
                    max: self.max_entries,
                    path,
                })
            }
            other => other?,
        };
        children.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, child_md) in children {
            let child_origin = origin.join(&name);
            if is_work_name(name.as_bytes()) && !child_md.is_dir() {
                (self.warn)(format!(
                    "skipped {}: an unfinished longhaul cp work file",
                    child_origin.display()
                ));
                continue;
            }
            let mut child_path = Vec::with_capacity(path.len() + 1 + name.len());
            child_path.extend_from_slice(&path);
            child_path.push(b'/');
            child_path.extend_from_slice(name.as_bytes());
            if self.filter.excludes_entry(&child_path, child_md.is_dir()) {
                continue;
            }
            self.visit(child_origin, child_path, &child_md)?;
        }
        Ok(())
    }

    /// Adds a symlink (its target as read; size 0, the link's own mtime, mode 0o777).
    fn push_link(
        &mut self,
        origin: &Path,
        path: Vec<u8>,
        target: Vec<u8>,
        md: &Metadata,
    ) -> Result<(), WalkError> {
        // Linux never makes such a link, but the wire would refuse the whole list for it.
        if target.is_empty() || target.len() > MAX_PATH_BYTES {
            (self.warn)(format!(
                "skipped symlink {}: its target of {} bytes is outside 1..={MAX_PATH_BYTES}",
                origin.display(),
                target.len()
            ));
            return Ok(());
        }
        self.push(origin, path, EntryKind::Symlink, md)?;
        if let Some(last) = self.out.last_mut() {
            last.entry.mode = 0o777;
            last.entry.link_target = target;
        }
        Ok(())
    }

    fn push(
        &mut self,
        origin: &Path,
        path: Vec<u8>,
        kind: EntryKind,
        md: &Metadata,
    ) -> Result<(), WalkError> {
        if self.out.len() >= self.max_entries {
            return Err(WalkError::TooManyEntries {
                max: self.max_entries,
                path: origin.to_path_buf(),
            });
        }
        parse_peer_path(&path).map_err(|source| WalkError::PathBounds {
            path: origin.to_path_buf(),
            source,
        })?;
        let entry = FileEntry {
            path,
            kind,
            size: if kind == EntryKind::File { md.len() } else { 0 },
            mtime_secs: md.mtime(),
            mtime_nanos: nanos(md.mtime_nsec()),
            mode: md.mode() & 0o7777,
            fingerprint: crate::cp::hash_cache::file_identity(md).fingerprint(),
            link_target: Vec::new(),
        };
        self.out.push(SourceFile {
            entry,
            origin: origin.to_path_buf(),
        });
        Ok(())
    }
}

/// A `st_*time_nsec` as the wire's `u32` below 10^9 (the kernel never reports more).
fn nanos(ns: i64) -> u32 {
    ns.clamp(0, 999_999_999) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk_with_bound(dir: &Path, max_entries: usize) -> Result<usize, WalkError> {
        let mut nop = |_| {};
        let none = Filter::default();
        let mut walk = Walk::new(LocalTree, true, &none, &mut nop);
        walk.max_entries = max_entries;
        let md = fs::metadata(dir).unwrap();
        walk.visit(dir.to_path_buf(), b"top".to_vec(), &md)?;
        Ok(walk.out.len())
    }

    /// An excluded directory is not listed: its entries neither arrive nor count.
    #[test]
    fn an_excluded_directory_is_pruned() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("d/e")).unwrap();
        for f in ["a.o", "b", "d/c", "d/e/f"] {
            fs::write(tmp.path().join(f), b"").unwrap();
        }
        let filter = Filter::new([(false, b"/d/".as_slice()), (false, b"*.o")]).unwrap();
        let mut nop = |_| {};
        let mut walk = Walk::new(LocalTree, true, &filter, &mut nop);
        walk.max_entries = 4;
        let md = fs::metadata(tmp.path()).unwrap();
        walk.visit(tmp.path().to_path_buf(), b"top".to_vec(), &md)
            .unwrap();
        let paths: Vec<_> = walk.out.iter().map(|s| s.entry.path.clone()).collect();
        assert_eq!(paths, [b"top".to_vec(), b"top/b".to_vec()]);
    }

    #[test]
    fn entry_bound_is_exact() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("d")).unwrap();
        for f in ["a", "b", "d/c"] {
            fs::write(tmp.path().join(f), b"").unwrap();
        }
        // top, a, b, d, d/c = 5 entries.
        assert_eq!(walk_with_bound(tmp.path(), 5).unwrap(), 5);
        for max in [1, 2, 4] {
            let e = walk_with_bound(tmp.path(), max).unwrap_err();
            assert!(
                matches!(e, WalkError::TooManyEntries { max: m, .. } if m == max),
                "{e:?}"
            );
            assert!(e.to_string().contains("split the transfer"), "{e}");
        }
    }
}
