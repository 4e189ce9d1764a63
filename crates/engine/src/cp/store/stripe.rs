//! A striped copy's work files (the receiving session's `share` module says what they
//! are for): the part file every share of the copy writes, opened or created at full
//! size under a *shared* lock and never replaced (a plain session's exclusive claim waits
//! for the shares and fails with `part::part_locked`'s message); each share's own
//! manifest under an exclusive lock of its own (two sessions of one share never write
//! it at once); the other shares' manifests read for the merge; and a commit that finds
//! the file already put in place by another share.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, ServedRoot};
use longhaul_transfer::session::recv::{CommitJob, OpenPlan};

use super::data_file::DataFile;
use super::part::{kept_changing, lock_part, lock_part_shared, same_file, CLAIM_ATTEMPTS};

/// The part file of a striped copy's file, opened (created if missing) at `size` bytes
/// under a shared lock; the name is checked to still be the file locked.
fn open_shared_part(
    root: &ServedRoot,
    part_rel: &Path,
    shown: &Path,
    size: u64,
) -> io::Result<File> {
    for _ in 0..CLAIM_ATTEMPTS {
        let f = root.open_file(part_rel, Access::ReadWriteCreate { mode: 0o600 })?;
        lock_part_shared(&f, shown)?;
        if !same_file(root, part_rel, &f)? {
            continue; // put in place (or removed) between the open and the lock
        }
        if f.metadata()?.nlink() != 1 {
            return Err(io::Error::other(format!(
                "{} has another hard link: a striped copy does not write through it; \
                 remove it and run the copy again",
                part_rel.display()
            )));
        }
        if f.metadata()?.len() != size {
            // Every share sets the same size: data another share wrote stays.
            f.set_len(size)?;
        }
        return Ok(f);
    }
    Err(kept_changing(part_rel))
}

/// This share's manifest, locked for this session: a new one holding `header`, or the
/// stored one cut to `keep` bytes and appended after.
fn open_own_manifest(
    root: &ServedRoot,
    mrel: &Path,
    shown: &Path,
    start: Result<&[u8], u64>,
) -> io::Result<File> {
    let mut m = root.open_file(mrel, Access::ReadWriteCreate { mode: 0o600 })?;
    lock_part(&m, shown)?;
    match start {
        Ok(header) => {
            m.set_len(0)?;
            m.write_all(header)?;
            file_io::sync_data(&m)?;
        }
        Err(keep) => {
            m.set_len(keep)?;
            m.seek(SeekFrom::End(0))?;
        }
    }
    Ok(m)
}

/// Opens a striped copy's file as `plan` says (see [`open_shared_part`] and
/// [`open_own_manifest`]); `intact` as for any resume: whether every chunk this share
/// recorded still has its hash in the part file.
pub(super) fn open_shared(
    root: &ServedRoot,
    (final_rel, part_rel, manifest_rel): (&Path, &Path, Option<&Path>),
    size: u64,
    plan: OpenPlan,
    intact: impl FnOnce(&File, Vec<(u32, longhaul_transfer::ChunkHash)>) -> io::Result<bool>,
) -> io::Result<Option<DataFile>> {
    let mrel = manifest_rel.ok_or_else(|| io::Error::other("a shared file without a manifest"))?;
    let part = open_shared_part(root, part_rel, final_rel, size)?;
    let manifest = match plan {
        OpenPlan::Fresh {
            manifest_header: Some(header),
        } => open_own_manifest(root, mrel, final_rel, Ok(&header))?,
        OpenPlan::Resume {
            manifest_len,
            verify,
        } => {
            if !intact(&part, verify)? {
                return Ok(None);
            }
            open_own_manifest(root, mrel, final_rel, Err(manifest_len as u64))?
        }
        other => {
            return Err(io::Error::other(format!(
                "a striped copy's file opened as {other:?}"
            )))
        }
    };
    Ok(Some(DataFile::with(Some(part), Some(manifest))))
}

/// The other shares' manifests, each read up to `limit` bytes (`None`: not there or
/// unreadable: its chunks count as not yet verified).
pub(super) fn read_manifests(
    root: &ServedRoot,
    manifests: &[PathBuf],
    limit: u64,
) -> Vec<Option<Vec<u8>>> {
    manifests
        .iter()
        .map(|m| {
            let f = root.open_file(m, Access::Read).ok()?;
            let mut bytes = Vec::new();
            f.take(limit.saturating_add(1))
                .read_to_end(&mut bytes)
                .ok()?;
            Some(bytes)
        })
        .collect()
}

/// A striped copy's commit whose part name is no longer its file: whether another
/// share put the very file (same device and inode) in place already.
pub(super) fn placed_by_another_share(root: &ServedRoot, job: &CommitJob, data: &File) -> bool {
    !job.other_manifests.is_empty() && same_file(root, &job.final_rel, data).unwrap_or(false)
}
