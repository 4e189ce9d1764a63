//! The receiver's file side: what the receiving session (`RecvSession`) asks of the
//! destination, done through the [`ServedRoot`] (every path opened beneath it).
//!
//! A file is written into `.NAME.longhaul-part` with positional writes of the non-zero
//! blocks of each chunk (holes stay holes); a one-chunk file is created unnamed
//! (`O_TMPFILE`) when its chunk arrives and linked into place after its check, so nothing
//! is left behind when a transfer stops. Records of verified chunks go to
//! `.NAME.longhaul-manifest` before their ack. This module holds no protocol decision: it
//! answers the session's events ([`Store::perform`]) and does the data path's writes.
//!
//! Two sessions may aim at one destination (a rerun while the first still runs). A part
//! file is locked (`flock`, exclusive) by the session writing it for as long as it holds
//! it, and its manifest goes with it; a session finding the lock taken fails with
//! `part::part_locked`'s message and never removes or rewrites that part file. Before a
//! rename into place the part name must still be the very file that was verified (same
//! device and inode). Work files and directory modes never go through a symlink, and
//! a part file with another hard link is never written through (a new inode is made).
//!
//! A received symlink is made at its own work name and renamed into place (`links`).
//!
//! Durability: a file goes in place only once its data is on disk. Write-back of every
//! chunk starts as soon as it is written (`sync_file_range`), the commit flushes the file
//! (`fsync`) before its rename or link, and the directories that received new names are
//! flushed before the last commit is answered (with `--sync`, after each rename), so a
//! transfer reported complete survives a power cut, and a file found in place with the
//! source's size and mtime after one holds its data (the rerun's quick check trusts it).
//!
//! The store's parts: `data_file` (one file's data, opened as planned and written chunk by
//! chunk), `look` (what the destination holds for a file), `part` (part files' claims and
//! locks), `commit` (putting verified files in place), `sync` (`longhaul sync`'s commits),
//! `links` and `hardlinks` (received links), `dirs` (directories' metadata and flushes),
//! `delete` (`--delete`) and `stripe` (a striped copy's shared part files and manifests).

use longhaul_proto::transfer::EntryId;
use std::collections::{BTreeSet, HashMap};
use std::fs::Permissions;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use longhaul_sys::served_root::{Access, ServedRoot};
pub use longhaul_transfer::session::Placed;
use longhaul_transfer::session::{RecvEvent, RecvInput};

use crate::cp::hash_ahead::HashedAhead;
use crate::cp::hash_cache::HashCache;

mod commit;
mod data_file;
mod delete;
mod dirs;
mod hardlinks;
mod links;
mod look;
mod part;
mod stripe;
mod sync;

pub use data_file::DataFile;
pub use delete::{list_dest, plan_deletions, remove_extra};
use dirs::fix_dirs;
use look::meta_of;

/// Why the store could not do what the receiving session asked: this end's failure,
/// which stops the transfer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file or directory under the root could not be created, looked at or opened.
    #[error("{what} {}: {cause}", path.display())]
    File {
        /// What was being done.
        what: &'static str,
        /// The path below the root.
        path: PathBuf,
        /// The OS error.
        #[source]
        cause: io::Error,
    },
    /// Flushing written chunks and their records to disk failed (`--sync`).
    #[error("syncing a part file: {0}")]
    Sync(#[source] io::Error),
    /// Flushing a directory that received files failed: their names may not survive a
    /// power cut.
    #[error("syncing directory {}: {cause}", path.display())]
    SyncDir {
        /// The directory below the root.
        path: PathBuf,
        /// The OS error.
        #[source]
        cause: io::Error,
    },
    /// A thread panicked holding the table of open files.
    #[error("the receiver's table of open files was poisoned by a panic")]
    Poisoned,
}

/// Why a verified file could not be put in place (reported as that file's failure;
/// the transfer goes on).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The file has no data in the store.
    #[error("the file was never opened")]
    NeverOpened,
    /// The file's data was never created.
    #[error("the part file was never created")]
    NeverCreated,
    /// Flushing the data before the rename failed.
    #[error("syncing: {0}")]
    Sync(#[source] io::Error),
    /// The link or rename failed; `kept` names the part file the verified copy stays in.
    #[error("putting the file in place: {cause}{}", kept_note(kept.as_deref()))]
    Place {
        /// The OS error.
        #[source]
        cause: io::Error,
        /// Where the verified copy is kept, if anywhere.
        kept: Option<PathBuf>,
    },
    /// Flushing the directory after the rename failed.
    #[error("syncing the directory: {0}")]
    SyncDir(#[source] io::Error),
    /// Sync: the chunks kept from the destination's old copy could not be taken from it.
    #[error("taking the unchanged chunks from the old copy: {0}")]
    OldCopy(#[source] io::Error),
    /// The file is in place but some of its metadata could not be set.
    #[error("in place, but {}", .0.join("; "))]
    MetadataUnset(Vec<String>),
}

fn kept_note(kept: Option<&Path>) -> String {
    kept.map(|p| format!(" (the verified copy is kept as {})", p.display()))
        .unwrap_or_default()
}

/// The destination of one transfer: the root and every file's data.
pub struct Store {
    root: Arc<ServedRoot>,
    files: Mutex<HashMap<EntryId, Arc<DataFile>>>,
    chunk_size: u64,
    /// Directories (and their ancestors) that received a name since they were last
    /// flushed: flushed together before the last commit is answered.
    unsynced_dirs: Mutex<BTreeSet<PathBuf>>,
    /// Sync: chunk hashes of destination files kept across runs ([`Store::with_hash_cache`]).
    hash_cache: Option<HashCache>,
    /// Sync: old copies hashed while the far end started ([`Store::with_hashed_ahead`]).
    hashed_ahead: Option<Arc<HashedAhead>>,
}

/// What performing an event leaves to do.
#[derive(Debug)]
pub enum Answer {
    /// Nothing.
    None,
    /// Give the session this input
    /// ([`RecvSession::handle`](longhaul_transfer::session::RecvSession::handle)).
    Give(RecvInput),
    /// Hash these chunks of a file (on the hashing thread) and give the session
    /// [`RecvInput::Hashed`] for each.
    Hash(EntryId, Vec<u32>),
}

impl Store {
    /// A store writing beneath `root` in chunks of `chunk_size` (whether a commit syncs
    /// is each [`CommitJob`]'s `sync`, from the session).
    ///
    /// [`CommitJob`]: longhaul_transfer::session::recv::CommitJob
    pub fn new(root: Arc<ServedRoot>, chunk_size: u64) -> Self {
        Self {
            root,
            files: Mutex::new(HashMap::new()),
            chunk_size,
            unsynced_dirs: Mutex::new(BTreeSet::new()),
            hash_cache: None,
            hashed_ahead: None,
        }
    }

    /// Sync: old copies' chunk hashes are looked up in (and stored to) `cache`, so an
    /// unchanged huge file is not read again by the next sync.
    pub fn with_hash_cache(mut self, cache: Option<HashCache>) -> Self {
        self.hash_cache = cache;
        self
    }

    /// Sync `--checksum`: old copies' chunk hashes made ahead (`cp::hash_ahead`) are taken
    /// while the file is still who it was when hashed.
    pub fn with_hashed_ahead(mut self, ahead: Option<Arc<HashedAhead>>) -> Self {
        self.hashed_ahead = ahead;
        self
    }

    /// The root.
    pub fn root(&self) -> &ServedRoot {
        &self.root
    }

    /// File `id`'s data.
    pub fn data(&self, id: EntryId) -> Option<Arc<DataFile>> {
        self.files.lock().ok()?.get(&id).cloned()
    }

    /// Does what an event asks; an error is this end's failure (the transfer stops).
    pub fn perform(&self, ev: RecvEvent) -> Result<Answer, StoreError> {
        let failed = |what, path: &Path| {
            let path = path.to_path_buf();
            move |cause| StoreError::File { what, path, cause }
        };
        match ev {
            RecvEvent::CreateDir { rel, mode } => {
                let made = self
                    .root
                    .create_dirs(&rel, mode)
                    .map_err(failed("creating directory", &rel))?;
                Ok(Answer::Give(RecvInput::DirsCreated(made)))
            }
            RecvEvent::Look {
                id,
                final_rel,
                part_rel,
                manifest_rel,
                manifest_limit,
            } => {
                let look = self
                    .look(
                        &final_rel,
                        &part_rel,
                        manifest_rel.as_deref(),
                        manifest_limit,
                    )
                    .map_err(failed("looking at", &final_rel))?;
                Ok(Answer::Give(RecvInput::Looked {
                    file: id,
                    found: look,
                }))
            }
            RecvEvent::Open {
                id,
                final_rel,
                part_rel,
                manifest_rel,
                size,
                plan,
                shared,
            } => {
                let names = (&*final_rel, &*part_rel, manifest_rel.as_deref());
                let intact = self
                    .open(id, names, size, plan, shared)
                    .map_err(failed("preparing", &part_rel))?;
                Ok(Answer::Give(RecvInput::Opened { file: id, intact }))
            }
            RecvEvent::GatherShares {
                id,
                manifests,
                limit,
            } => Ok(Answer::Give(RecvInput::SharesGathered {
                file: id,
                manifests: stripe::read_manifests(&self.root, &manifests, limit),
            })),
            RecvEvent::HashFromFile { id, chunks } => Ok(Answer::Hash(id, chunks)),
            RecvEvent::HashOld {
                id,
                final_rel,
                trust_cache,
                ..
            } => {
                let cache = self.hash_cache.as_ref().filter(|_| trust_cache);
                let ahead = self.hashed_ahead.as_deref();
                let old = super::old_copy::hash_old(
                    &self.root,
                    &final_rel,
                    self.chunk_size,
                    cache,
                    ahead,
                )
                .map_err(|e| e.to_string());
                Ok(Answer::Give(RecvInput::OldHashed { file: id, old }))
            }
            RecvEvent::SetMode { rel, mode } => {
                // Best effort, as rsync: the data is right; a mode that cannot be set
                // stays as it was and is set again by the next run.
                if let Ok(f) = self.root.open_file(&rel, Access::ReadOwn) {
                    let _ = f.set_permissions(Permissions::from_mode(mode));
                }
                Ok(Answer::None)
            }
            RecvEvent::Commit(job) => Ok(Answer::Give(RecvInput::Placed {
                file: job.id,
                result: self.commit_placed(&job),
            })),
            RecvEvent::MakeSymlink(job) => Ok(Answer::Give(RecvInput::SymlinkMade {
                file: job.id,
                result: self.make_symlink(&job),
            })),
            RecvEvent::MakeHardLink(job) => Ok(Answer::Give(RecvInput::HardLinkMade {
                file: job.id,
                result: self.make_hard_link(&job),
            })),
            RecvEvent::Discard {
                id,
                part_rel,
                manifest_rel,
                other_manifests,
            } => {
                let manifests: Vec<&Path> = manifest_rel
                    .iter()
                    .chain(&other_manifests)
                    .map(PathBuf::as_path)
                    .collect();
                self.remove_own_work_files(id, &part_rel, &manifests);
                Ok(Answer::None)
            }
            RecvEvent::DropOrphanManifest {
                part_rel,
                manifest_rel,
            } => {
                // Best effort: a leftover costs nothing but a name (`longhaul clean`).
                if matches!(meta_of(&self.root, &part_rel), Ok(None)) {
                    let _ = self.root.remove_file(&manifest_rel);
                }
                Ok(Answer::None)
            }
            RecvEvent::ListDest(listing) => {
                let found = list_dest(&self.root, &listing);
                Ok(Answer::Give(RecvInput::DestListed { listing, found }))
            }
            RecvEvent::Remove(removals) => {
                let results = removals
                    .into_iter()
                    .map(|r| {
                        let done = remove_extra(&self.root, &r);
                        (r, done)
                    })
                    .collect();
                Ok(Answer::Give(RecvInput::Removed(results)))
            }
            RecvEvent::FixDirs(mut dirs) => {
                fix_dirs(&self.root, &mut dirs);
                // The commits' names are durable before the sender hears of the last.
                self.sync_dirs()?;
                Ok(Answer::Give(RecvInput::DirsFixed))
            }
        }
    }

    /// File `id` is done with: its data is closed.
    fn forget(&self, id: EntryId) {
        if let Ok(mut files) = self.files.lock() {
            files.remove(&id);
        }
    }
}

fn poisoned() -> io::Error {
    io::Error::other("receiver state poisoned by a panicked thread")
}
