//! What the destination holds for one file, for the session to decide what to send
//! ([`LookResult`]): the final name's metadata (and a symlink's target, read, never
//! followed), the part file's, and the manifest's bytes, read up to a bound.

use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, ServedRoot};
use longhaul_transfer::session::recv::{LookResult, Meta};

use super::Store;

impl Store {
    pub(super) fn look(
        &self,
        final_rel: &Path,
        part_rel: &Path,
        manifest_rel: Option<&Path>,
        manifest_limit: u64,
    ) -> io::Result<LookResult> {
        let (existing, inode) = match meta_and_inode(&self.root, final_rel)? {
            Some((m, inode)) => (Some(m), Some(inode)),
            None => (None, None),
        };
        // A symlink's target, for the quick check of a symlink entry (read, not followed).
        let link_target = match existing {
            Some(m) if !m.is_file && !m.is_dir && m.special.is_none() => {
                match self.root.read_link(final_rel) {
                    Ok(t) => Some(t),
                    // Replaced since the look by something else: as good as not a link.
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
                        ) =>
                    {
                        None
                    }
                    Err(e) => return Err(e),
                }
            }
            _ => None,
        };
        let (part, manifest) = match manifest_rel {
            Some(m) => (
                meta_of(&self.root, part_rel)?,
                read_bounded(&self.root, m, manifest_limit)?,
            ),
            None => (None, None),
        };
        Ok(LookResult {
            existing,
            part,
            manifest,
            link_target,
            inode,
        })
    }
}

pub(super) fn meta_of(root: &ServedRoot, rel: &Path) -> io::Result<Option<Meta>> {
    Ok(meta_and_inode(root, rel)?.map(|(m, _)| m))
}

/// [`meta_of`] and the entry's (device, inode).
fn meta_and_inode(root: &ServedRoot, rel: &Path) -> io::Result<Option<(Meta, (u64, u64))>> {
    match root.metadata(rel) {
        Ok(m) => {
            let ft = m.file_type();
            let ordinary = ft.is_file() || ft.is_dir() || ft.is_symlink();
            let inode = (m.dev(), m.ino());
            Ok(Some((
                Meta {
                    is_file: m.is_file(),
                    is_dir: m.is_dir(),
                    len: m.len(),
                    mtime_secs: m.mtime(),
                    mtime_nanos: m.mtime_nsec(),
                    mode: m.mode() & 0o7777,
                    special: (!ordinary).then(|| file_io::kind_name(ft)),
                },
                inode,
            )))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A work file's bytes, at most `limit` + 1 (the caller treats more as foreign); `None`
/// when it is missing or not a regular file (a symlink is not followed: it is foreign).
fn read_bounded(root: &ServedRoot, rel: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    match root.metadata(rel) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let f = match root.open_file(rel, Access::ReadOwn) {
        Ok(f) => f,
        // Gone or replaced since the look: as good as missing.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    f.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        // Too long to be ours: start over.
        return Ok(None);
    }
    Ok(Some(bytes))
}
