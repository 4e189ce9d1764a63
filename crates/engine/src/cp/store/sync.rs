//! `longhaul sync`'s commits on disk: a file equal chunk for chunk to the old copy keeps
//! the old file ([`Reuse::keep_old`]), and a file updated `--inplace` is finished where it
//! is ([`Reuse::in_place`]). A rebuilt file takes the old copy's equal chunks in
//! [`Store`]'s ordinary commit (its `prepare`).
//!
//! [`Reuse::keep_old`]: longhaul_transfer::session::recv::Reuse::keep_old
//! [`Reuse::in_place`]: longhaul_transfer::session::recv::Reuse::in_place

use longhaul_sys::file_io;
use longhaul_transfer::session::recv::CommitJob;

use super::commit::{set_mode_and_mtime, unset_result};
use super::{CommitError, Store};

impl Store {
    /// Sync, every chunk equal to the old copy and the same size: the old file stays (it
    /// is the source's bytes); its mode and mtime are set, and the part file and manifest
    /// made for it, if any, are removed.
    pub(super) fn keep_old(&self, job: &CommitJob) -> Result<(), CommitError> {
        let reuse = job.reuse.as_ref().ok_or(CommitError::NeverCreated)?;
        let old = super::super::old_copy::open_unchanged(&self.root, reuse)
            .map_err(CommitError::OldCopy)?;
        let unset = set_mode_and_mtime(&old, job);
        let manifests: Vec<&std::path::Path> =
            job.manifest_rel.iter().map(|m| m.as_path()).collect();
        self.remove_own_work_files(job.id, &job.part_rel, &manifests);
        self.forget(job.id);
        unset_result(unset)
    }

    /// Sync `--inplace`: the changed chunks are in the destination file itself; cut it
    /// to the source's size, set its mode and mtime, flush it (the mtime says the file
    /// is current, so it must not be on disk before the data).
    pub(super) fn commit_in_place(&self, job: &CommitJob, size: u64) -> Result<(), CommitError> {
        let f = self.data(job.id).ok_or(CommitError::NeverOpened)?;
        let data = f.data.get().ok_or(CommitError::NeverCreated)?;
        data.set_len(size).map_err(CommitError::Sync)?;
        file_io::sync_data(data).map_err(CommitError::Sync)?;
        let unset = set_mode_and_mtime(data, job);
        file_io::sync_all(data).map_err(CommitError::Sync)?;
        self.forget(job.id);
        unset_result(unset)
    }
}

/// Sync: the file is the old copy as it is ([`longhaul_transfer::session::recv::Reuse::keep_old`]).
pub(super) fn keeps_old(job: &CommitJob) -> bool {
    job.reuse.as_ref().is_some_and(|r| r.keep_old)
}

/// Sync `--inplace`: the file was updated where it is.
pub(super) fn in_place(job: &CommitJob) -> bool {
    job.reuse.as_ref().is_some_and(|r| r.in_place.is_some())
}
