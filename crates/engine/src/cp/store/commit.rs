//! Putting verified files in place ([`RecvEvent::Commit`]): the old copy's reused chunks
//! taken, mode and mtime set, the data flushed (an `fsync` each, or one `syncfs` for a
//! batch), then a link (an unnamed file) or a rename (a part file) once the name is known
//! to still be the verified file; the manifest goes last. Also the removal of a file's own
//! work files when the session discards it.
//!
//! [`RecvEvent::Commit`]: longhaul_transfer::session::RecvEvent::Commit

use longhaul_proto::transfer::EntryId;
use std::fs::{File, FileTimes, Permissions};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use longhaul_sys::file_io;
use longhaul_transfer::session::recv::CommitJob;

use super::data_file::DataFile;
use super::part::{clear_stale_part, kept_changing, replaced, same_file, CLAIM_ATTEMPTS};
use super::stripe::placed_by_another_share;
use super::sync::{in_place, keeps_old};
use super::{CommitError, Placed, Store};

impl Store {
    /// Puts a verified file in place (see [`RecvEvent::Commit`]): mode and mtime, a flush
    /// of the file (always: a file in place with the source's size and mtime is taken as
    /// complete by a rerun, so its data must be on disk first), then a link (unnamed) or a
    /// rename (part file), the directory flushed now with `--sync` or else with the last
    /// commit ([`Store::sync_dirs`]); the manifest goes last. The answer for
    /// [`RecvInput::Placed`](longhaul_transfer::session::RecvInput::Placed).
    ///
    /// [`RecvEvent::Commit`]: longhaul_transfer::session::RecvEvent::Commit
    pub fn commit_placed(&self, job: &CommitJob) -> Result<Placed, String> {
        self.commit(job).map_err(|e| e.to_string())
    }

    /// Puts several verified files in place with one flush of their file system
    /// (`syncfs`) instead of one `fsync` each: for a tree of small files each fsync is a
    /// journal commit of its own, which cost about half the copy's time. Answers in the
    /// order of `jobs`.
    pub fn commit_batch(&self, jobs: &[CommitJob]) -> Vec<Result<Placed, String>> {
        if jobs.len() == 1 {
            return vec![self.commit_placed(&jobs[0])];
        }
        let prepared: Vec<_> = jobs
            .iter()
            .map(|j| (!keeps_old(j) && !in_place(j)).then(|| self.prepare(j)))
            .collect();
        let flushed = self.root.sync_fs();
        jobs.iter()
            .zip(prepared)
            .map(|(job, prepared)| {
                let Some(prepared) = prepared else {
                    return self.commit(job);
                };
                let (f, unset) = prepared?;
                let data = f.data.get().ok_or(CommitError::NeverCreated)?;
                flushed
                    .as_ref()
                    .map_err(|e| CommitError::Sync(io::Error::new(e.kind(), e.to_string())))?;
                self.place(job, &f, data, unset)
            })
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
    }

    /// Mode and mtime set on the verified file: what could not be set, reported at the end.
    fn prepare(&self, job: &CommitJob) -> Result<(Arc<DataFile>, Vec<String>), CommitError> {
        let f = self.data(job.id).ok_or(CommitError::NeverOpened)?;
        let data = f.data.get().ok_or(CommitError::NeverCreated)?;
        if let Some(reuse) = &job.reuse {
            super::super::old_copy::copy_reused(&self.root, reuse, data)
                .map_err(CommitError::OldCopy)?;
        }
        // A mode or mtime that cannot be set does not stop the file going in place, but
        // it is reported (the file then fails rsync's quick check on a rerun).
        let unset = set_mode_and_mtime(data, job);
        Ok((f, unset))
    }

    /// Flushes the file's data (the rename must not be durable before the data), then
    /// names it; the manifest goes last.
    fn commit(&self, job: &CommitJob) -> Result<Placed, CommitError> {
        if keeps_old(job) {
            return self.keep_old(job).map(|()| Placed::Here);
        }
        if let Some(size) = job.reuse.as_ref().and_then(|r| r.in_place) {
            return self.commit_in_place(job, size).map(|()| Placed::Here);
        }
        let (f, unset) = self.prepare(job)?;
        let data = f.data.get().ok_or(CommitError::NeverCreated)?;
        file_io::sync_all(data).map_err(CommitError::Sync)?;
        self.place(job, &f, data, unset)
    }

    /// Names a verified file whose data is on disk: a link (unnamed) or a rename (part
    /// file), then the bookkeeping.
    fn place(
        &self,
        job: &CommitJob,
        f: &DataFile,
        data: &File,
        unset: Vec<String>,
    ) -> Result<Placed, CommitError> {
        let mut placed = Placed::Here;
        if f.unnamed.load(Ordering::Acquire) {
            self.link_into_place(job, data)
                .map_err(|cause| CommitError::Place { cause, kept: None })?;
        } else {
            // The name must still be the file that was verified: whatever else is there
            // now (another process's doing) is not put in place as verified.
            let ours = same_file(&self.root, &job.part_rel, data)
                .map_err(|cause| CommitError::Place { cause, kept: None })?;
            let renamed = match ours {
                true => self.root.rename(&job.part_rel, &job.final_rel, job.replace),
                false => Err(replaced(&job.part_rel)),
            };
            // A striped copy's last two shares may both commit: the second finds the
            // file in place under its final name, which is done.
            match renamed {
                Err(_) if placed_by_another_share(&self.root, job, data) => {
                    placed = Placed::ByAnotherShare;
                }
                Err(cause) => {
                    return Err(CommitError::Place {
                        kept: ours.then(|| job.part_rel.clone()),
                        cause,
                    })
                }
                Ok(()) => {}
            }
        }
        // The new name itself must survive a power cut too.
        let dir = job.final_rel.parent().unwrap_or(Path::new(""));
        if job.sync {
            self.root.sync_dir(dir).map_err(CommitError::SyncDir)?;
        }
        self.note_new_name(dir);
        for m in job.manifest_rel.iter().chain(&job.other_manifests) {
            let _ = self.root.remove_file(m);
        }
        // The data stays open for nothing now.
        self.forget(job.id);
        unset_result(unset).map(|()| placed)
    }

    /// Removes file `id`'s part file and manifest, only if the part name is still our
    /// own (locked) data: another session's is never touched.
    pub(super) fn remove_own_work_files(&self, id: EntryId, part_rel: &Path, manifests: &[&Path]) {
        let ours = self.data(id).and_then(|d| {
            let f = d.data.get()?;
            same_file(&self.root, part_rel, f).ok()
        });
        if ours == Some(true) {
            let _ = self.root.remove_file(part_rel);
            for m in manifests {
                let _ = self.root.remove_file(m);
            }
        }
    }

    /// Names a verified unnamed file: one `linkat` where the name is free; replacing an
    /// existing file goes through the part name and a rename, so the old file is replaced
    /// atomically.
    fn link_into_place(&self, job: &CommitJob, data: &File) -> io::Result<()> {
        let root = &self.root;
        match root.link_unnamed(data, &job.final_rel) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && job.replace => {
                let part = &job.part_rel;
                for _ in 0..CLAIM_ATTEMPTS {
                    match root.link_unnamed(data, part) {
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                            clear_stale_part(root, part, &job.final_rel)?;
                            continue;
                        }
                        other => other?,
                    }
                    // `data` is locked: no other longhaul session touches the name now.
                    if !same_file(root, part, data)? {
                        return Err(replaced(part));
                    }
                    return root.rename(part, &job.final_rel, true);
                }
                Err(kept_changing(part))
            }
            other => other,
        }
    }
}

/// Sets the job's mode and mtime on `f`; what could not be set, for the report (a
/// mode or mtime that cannot be set does not stop the file going in place, but the file
/// then fails rsync's quick check on a rerun).
pub(super) fn set_mode_and_mtime(f: &File, job: &CommitJob) -> Vec<String> {
    let mut unset = Vec::new();
    if let Err(e) = f.set_permissions(Permissions::from_mode(job.mode)) {
        unset.push(format!("its mode {:o} could not be set: {e}", job.mode));
    }
    if let Err(e) = f.set_times(FileTimes::new().set_modified(mtime_of(job.mtime))) {
        unset.push(format!("its mtime could not be set: {e}"));
    }
    unset
}

/// A commit whose file is in place: an error naming what could not be set, if anything.
pub(super) fn unset_result(unset: Vec<String>) -> Result<(), CommitError> {
    if unset.is_empty() {
        Ok(())
    } else {
        Err(CommitError::MetadataUnset(unset))
    }
}

/// A time from the wire (times before 1970 are clamped to it).
pub(super) fn mtime_of((secs, nanos): (i64, u32)) -> SystemTime {
    UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos.min(999_999_999))
}
