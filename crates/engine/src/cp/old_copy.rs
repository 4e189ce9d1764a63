//! The receiver's side of `longhaul sync`: the copy already at the destination.
//!
//! Before a changed file is answered, its old copy is hashed on the transfer's chunk grid
//! ([`hash_old`], every core reading its own chunks); the sender then sends only the
//! chunks whose hash differs. The others are taken from the old copy when the file is
//! committed ([`copy_reused`]), or, when every chunk was equal and the size too, the old
//! file simply stays ([`Reuse::keep_old`]). Either way the old copy must still be who it
//! was when it was hashed (device, inode, size, mtime, ctime: [`open_unchanged`]),
//! otherwise its bytes no longer match the hashes the digest was merged from, and the file
//! fails with a message to run the command again.

use std::fs::File;
use std::io;
use std::path::Path;

use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, ServedRoot};
use longhaul_transfer::session::recv::{OldCopy, Reuse};
use longhaul_transfer::{ChunkGrid, FileIdentity};

use super::chunk_io::hash_all_chunks;
use crate::cp::hash_ahead::HashedAhead;
use crate::cp::hash_cache::HashCache;

/// Threads that hash one file: every core, at most 8.
pub fn hash_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8)
}

/// Who an open file is now.
pub fn identity(f: &File) -> io::Result<FileIdentity> {
    Ok(crate::cp::hash_cache::file_identity(&f.metadata()?))
}

/// Hashes the regular file at `rel` (never through a symlink in its last component) on
/// the grid of `chunk_size`, on every core; hashes made `ahead` for the file as it is
/// now, or held by `cache` for it, are taken instead (new ones stored in the cache).
pub fn hash_old(
    root: &ServedRoot,
    rel: &Path,
    chunk_size: u64,
    cache: Option<&HashCache>,
    ahead: Option<&HashedAhead>,
) -> io::Result<OldCopy> {
    let f = root.open_file(rel, Access::ReadOwn)?;
    let before = identity(&f)?;
    if let Some(hashes) = ahead.and_then(|a| a.take(&before, chunk_size)) {
        return Ok(OldCopy {
            identity: before,
            hashes,
        });
    }
    let threads = hash_threads();
    let hashes = match cache {
        Some(c) => c.chunk_hashes(&f, before.size, chunk_size, threads)?.0,
        None => hash_all_chunks(&f, &ChunkGrid::new(before.size, chunk_size), threads)?,
    };
    // Written to while being read: its hashes describe no version of it.
    if identity(&f)? != before {
        return Err(changed(rel));
    }
    Ok(OldCopy {
        identity: before,
        hashes,
    })
}

/// Opens the old copy of a synced file, refusing it if it changed since it was hashed.
pub fn open_unchanged(root: &ServedRoot, reuse: &Reuse) -> io::Result<File> {
    let f = root.open_file(&reuse.from, Access::ReadOwn)?;
    if identity(&f)? != reuse.identity {
        return Err(changed(&reuse.from));
    }
    Ok(f)
}

/// Copies the chunks taken from the old copy into the part file, at the same offsets
/// (`copy_file_range`: a reflink or an in-kernel copy where the file system allows). Only
/// the old copy's data is copied: its holes stay holes in the part file (made sparse at
/// its full size).
pub fn copy_reused(root: &ServedRoot, reuse: &Reuse, part: &File) -> io::Result<()> {
    let old = open_unchanged(root, reuse)?;
    for &(off, len) in &reuse.runs {
        for seg in file_io::data_segments(&old, off..off + len, MAX_SEGMENTS)? {
            file_io::copy_range(&old, part, seg.start, seg.end - seg.start)?;
        }
    }
    Ok(())
}

/// Most data segments looked up per run of reused chunks (the rest is copied as data).
const MAX_SEGMENTS: usize = 1 << 12;

fn changed(rel: &Path) -> io::Error {
    io::Error::other(format!(
        "{} changed at the destination while it was being compared with the source; \
         run the same command again",
        rel.display()
    ))
}
