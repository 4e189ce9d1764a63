//! The receiving end of a transfer (the server on a push, the client on a pull), sans-I/O.
//!
//! **The list.** Every path from the peer is checked ([`parse_peer_path`]) and placed by
//! cp's rules ([`place_entry`]). For each file the session asks the driver what is at the
//! destination ([`RecvEvent::Look`]) and decides: already complete (rsync's quick check:
//! same size and mtime), `--no-clobber`, `--checksum-only` against the existing copy,
//! resume from a stored manifest, or start over. Then it asks the driver to open the data
//! file ([`RecvEvent::Open`]; a one-chunk file is created only when its chunk arrives),
//! and answers the sender once for the whole list.
//!
//! **The chunks.** A data stream's driver checks each header
//! ([`RecvSession::chunk_header`]), reads and hashes the payload, and asks
//! [`RecvSession::chunk_arrived`] whether to write it (a hash mismatch is refused and sent
//! again; a duplicate is acked). After the write the session returns the manifest record
//! to append ([`RecvSession::chunk_written`]); once it is appended the chunk is acked
//! ([`RecvSession::chunk_recorded`]). A record is always on disk before its ack.
//!
//! **The commit.** When the file's own digest (merged from its chunk hashes) and the
//! sender's digest are both known and equal, the session asks the driver to put the file
//! in place ([`RecvEvent::Commit`]) and acks it with `FileCommitted`. The last commit of
//! the transfer waits until the directories' modes and times are set
//! ([`RecvEvent::FixDirs`]), so the sender never reports success before the tree is final.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;

use longhaul_proto::transfer::{
    pack_have_chunks, ChunkHeader, EntryKind, FileEntry, RejectReason, SkipReason, TransferMessage,
    CHUNK_FLAG_HOLE, MAX_FILE_ID, MAX_REASON_BYTES,
};

use super::{show, ProgressSnapshot, SessionError};
use crate::file_hashes::FileHashes;
use crate::integrity::{ChunkHash, ChunkHasher};
use crate::manifest::{chunk_count, HEADER_LEN, RECORD_LEN};
use crate::path::{parse_peer_path, SafeRelPath};
use crate::place::{manifest_name, part_name, place_entry};
use crate::receiver::{ChunkCheck, FileReceiver, PartStart};
use crate::{Error as TransferError, SourceIdentity};

/// How the receiving end runs.
#[derive(Debug, Clone)]
pub struct RecvConfig {
    /// Chunk size both ends agreed on.
    pub chunk_size: u64,
    /// The destination below the root (`None`: the root itself).
    pub target: Option<SafeRelPath>,
    /// Whether the destination is an existing directory (the driver looked).
    pub target_is_dir: bool,
    /// Never replace an existing file.
    pub no_clobber: bool,
    /// Only compare digests.
    pub checksum_only: bool,
    /// Flush each file before its rename.
    pub sync: bool,
}

/// A destination entry's metadata, as the driver found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// A regular file.
    pub is_file: bool,
    /// A directory.
    pub is_dir: bool,
    /// Size in bytes.
    pub len: u64,
    /// Modification time, seconds.
    pub mtime_secs: i64,
    /// Modification time, nanoseconds.
    pub mtime_nanos: i64,
}

/// What the driver found for a [`RecvEvent::Look`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookResult {
    /// The destination file (`None`: nothing there).
    pub existing: Option<Meta>,
    /// The part file, if asked for and there.
    pub part: Option<Meta>,
    /// The stored manifest's bytes (at most the event's `manifest_limit` + 1), if asked
    /// for and there.
    pub manifest: Option<Vec<u8>>,
}

/// How the driver opens a file's data for [`RecvEvent::Open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenPlan {
    /// A one-chunk file: create it (unnamed where the file system allows, else as the
    /// part file) when its chunk arrives; nothing now.
    Lazy,
    /// `--checksum-only`: open the existing destination for reading.
    Existing,
    /// Start over: replace any part file with a new one of the file's size, and write
    /// this manifest header to a new manifest (files of several chunks).
    Fresh {
        /// The header, for files of several chunks.
        manifest_header: Option<[u8; HEADER_LEN]>,
    },
    /// Resume: open the part file and the manifest (truncated to `manifest_len`,
    /// appending after it), and check that every recorded chunk still has its hash in the
    /// part file. Answer [`RecvSession::opened`] with whether they all do.
    Resume {
        /// Valid bytes of the stored manifest.
        manifest_len: usize,
        /// The recorded chunks and their hashes.
        verify: Vec<(u32, ChunkHash)>,
    },
}

/// A directory whose mode and mtime are set once its contents are in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirFix {
    /// Path below the root.
    pub rel: PathBuf,
    /// Depth (deepest first).
    pub depth: usize,
    /// Permission bits.
    pub mode: u32,
    /// Modification time, seconds and nanoseconds.
    pub mtime: (i64, u32),
}

/// A verified file to put in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitJob {
    /// The file's id in the list.
    pub id: u32,
    /// Its final path below the root.
    pub final_rel: PathBuf,
    /// Its part file.
    pub part_rel: PathBuf,
    /// Its manifest (files of several chunks), removed after the commit.
    pub manifest_rel: Option<PathBuf>,
    /// Permission bits to set.
    pub mode: u32,
    /// Modification time to set (seconds, nanoseconds).
    pub mtime: (i64, u32),
    /// Replace an existing file (not `--no-clobber`).
    pub replace: bool,
    /// Flush data and the directory (`--sync`).
    pub sync: bool,
}

/// Work the driver does for the session, answered by a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecvEvent {
    /// Create this directory and its parents (no error if it exists).
    CreateDir {
        /// Path below the root.
        rel: PathBuf,
        /// Mode to create it with.
        mode: u32,
    },
    /// Look at the destination of file `id`; answer [`RecvSession::looked`].
    Look {
        /// The file's id.
        id: u32,
        /// Its final path.
        final_rel: PathBuf,
        /// Its part file, to look at when `manifest_rel` is set.
        part_rel: PathBuf,
        /// Its manifest, to read (bounded by `manifest_limit`) if set.
        manifest_rel: Option<PathBuf>,
        /// Most manifest bytes a manifest of this file can hold.
        manifest_limit: u64,
    },
    /// Open the data of file `id` as planned; answer [`RecvSession::opened`].
    Open {
        /// The file's id.
        id: u32,
        /// Its final path (read in `--checksum-only`).
        final_rel: PathBuf,
        /// Its part file.
        part_rel: PathBuf,
        /// Its manifest.
        manifest_rel: Option<PathBuf>,
        /// Size of the file.
        size: u64,
        /// How.
        plan: OpenPlan,
    },
    /// Hash these chunks of file `id`'s data as they are on disk; answer each with
    /// [`RecvSession::hashed`].
    HashFromFile {
        /// The file's id.
        id: u32,
        /// The chunks.
        chunks: Vec<u32>,
    },
    /// Put a verified file in place; answer [`RecvSession::placed`].
    Commit(CommitJob),
    /// The file's chunks disagree with the source as a whole: remove its part file and
    /// manifest so the next run starts it over.
    Discard {
        /// The part file.
        part_rel: PathBuf,
        /// The manifest.
        manifest_rel: Option<PathBuf>,
    },
    /// Set these directories' modes and times, deepest first; answer
    /// [`RecvSession::dirs_fixed`].
    FixDirs(Vec<DirFix>),
}

/// What the receiver did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecvOutcome {
    /// Files put in place (or equal, in `--checksum-only`), or found complete.
    pub files_ok: u64,
    /// Files not written because they exist (`--no-clobber`).
    pub files_skipped: u64,
    /// Files that failed, with why.
    pub failed: Vec<String>,
    /// Chunk payload bytes received in this run.
    pub received_bytes: u64,
    /// Bytes found verified from an earlier run.
    pub resumed_bytes: u64,
    /// Bytes of the files in this transfer.
    pub total_bytes: u64,
}

/// What the driver does with a chunk it has read and hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// Write it, then [`RecvSession::chunk_written`].
    Write,
    /// Already verified: nothing to write (the ack is queued).
    Duplicate,
    /// The hash did not match: dropped (`ChunkRejected` is queued).
    Rejected,
}

/// A chunk header the session accepted: how to read and where it goes.
pub struct ChunkPlan {
    /// The file's id.
    pub id: u32,
    /// The file's part file (for messages).
    pub name: PathBuf,
    /// Payload bytes to read (0 for a hole).
    pub payload: u64,
    /// The chunk is all zeros (no payload follows).
    pub hole: bool,
    /// The hasher to feed the payload (or `update_zeros` for a hole).
    pub hasher: ChunkHasher,
    /// The data file does not exist yet: create it (a one-chunk file) as the part file
    /// below, of `size` bytes.
    pub lazy: Option<(PathBuf, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Listing,
    Receiving,
    Done,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileState {
    /// Waiting for the driver's look.
    Looking,
    /// Waiting for the driver to open it.
    Opening,
    /// Receiving chunks.
    Open,
    /// Commit asked for.
    Committing,
    /// Committed (or failed).
    Finished,
}

#[derive(Debug)]
struct RecvFile {
    entry: FileEntry,
    final_rel: PathBuf,
    part_rel: PathBuf,
    manifest_rel: Option<PathBuf>,
    state: FileState,
    lazy: bool,
    created: bool,
    receiver: Option<FileReceiver>,
    hashes: FileHashes,
    theirs: Option<[u8; 32]>,
    /// The resume plan being checked by the driver.
    resume_have: Vec<(u32, u32)>,
}

/// The receiving end's state machine; see the module docs.
pub struct RecvSession {
    cfg: RecvConfig,
    phase: Phase,
    outbox: VecDeque<TransferMessage>,
    events: VecDeque<RecvEvent>,
    files: Vec<Option<RecvFile>>,
    /// Answers to the list, in list order: (file id, messages), sent once decided.
    answers: VecDeque<(u32, Option<Vec<TransferMessage>>)>,
    list_ended: bool,
    first_source: Option<Vec<u8>>,
    multiple: bool,
    dirs_known: HashSet<PathBuf>,
    dirs: Vec<DirFix>,
    uncommitted: u64,
    held_commit: Option<TransferMessage>,
    outcome: RecvOutcome,
    already: u64,
    missing: Vec<String>,
    progress: ProgressSnapshot,
}

impl RecvSession {
    /// A session receiving into `cfg.target`.
    pub fn new(cfg: RecvConfig) -> Self {
        Self {
            cfg,
            phase: Phase::Listing,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            files: Vec::new(),
            answers: VecDeque::new(),
            list_ended: false,
            first_source: None,
            multiple: false,
            dirs_known: HashSet::new(),
            dirs: Vec::new(),
            uncommitted: 0,
            held_commit: None,
            outcome: RecvOutcome::default(),
            already: 0,
            missing: Vec::new(),
            progress: ProgressSnapshot::default(),
        }
    }

    /// The next control message to send.
    pub fn poll_transmit(&mut self) -> Option<TransferMessage> {
        self.outbox.pop_front()
    }

    /// The next piece of work for the driver.
    pub fn poll_event(&mut self) -> Option<RecvEvent> {
        self.events.pop_front()
    }

    /// The list is answered: data streams may be read.
    pub fn is_listed(&self) -> bool {
        matches!(self.phase, Phase::Receiving | Phase::Done)
    }

    /// The sender said `TransferDone` and this end answered.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Progress counters.
    pub fn progress(&self) -> ProgressSnapshot {
        self.progress
    }

    /// Stops the session; later calls change nothing.
    pub fn fail(&mut self) {
        if self.phase != Phase::Done {
            self.phase = Phase::Failed;
        }
    }

    /// What happened so far.
    pub fn outcome(&self) -> RecvOutcome {
        let mut o = self.outcome.clone();
        o.files_ok += self.already;
        o.failed.extend(self.missing.iter().cloned());
        o.failed.sort();
        o
    }

    /// One message from the sender.
    pub fn handle(&mut self, msg: TransferMessage) -> Result<(), SessionError> {
        let r = match (self.phase, msg) {
            (Phase::Done | Phase::Failed, _) => Ok(()),
            (Phase::Listing, TransferMessage::FileEntries { first_id, entries }) => {
                self.accept_entries(first_id, entries)
            }
            (Phase::Listing, TransferMessage::FileListEnd { .. }) if !self.list_ended => {
                self.list_ended = true;
                self.flush_answers();
                Ok(())
            }
            (Phase::Receiving, TransferMessage::FileDigest { file, blake3 }) => {
                match self.file_mut(file) {
                    Some(f) if f.theirs.is_none() => {
                        f.theirs = Some(blake3);
                        self.try_commit(file);
                        Ok(())
                    }
                    _ => Err(SessionError::Protocol(format!(
                        "a digest for file {file}, which is not being received (or twice)"
                    ))),
                }
            }
            (Phase::Receiving, TransferMessage::TransferDone { .. }) => {
                self.outbox.push_back(TransferMessage::TransferDone {
                    files: (self.outcome.files_ok + self.already) as u32,
                    bytes: self.outcome.received_bytes,
                });
                self.phase = Phase::Done;
                Ok(())
            }
            (Phase::Listing, other) => Err(SessionError::Protocol(format!(
                "unexpected {} before the file list ended",
                other.kind()
            ))),
            (_, other) => Err(SessionError::Protocol(format!(
                "unexpected {} during the transfer",
                other.kind()
            ))),
        };
        if r.is_err() {
            self.phase = Phase::Failed;
        }
        r
    }

    fn file_mut(&mut self, id: u32) -> Option<&mut RecvFile> {
        self.files.get_mut(id as usize).and_then(Option::as_mut)
    }

    fn accept_entries(
        &mut self,
        first_id: u32,
        entries: Vec<FileEntry>,
    ) -> Result<(), SessionError> {
        if first_id as usize != self.files.len()
            || self.files.len() + entries.len() > MAX_FILE_ID as usize + 1
        {
            return Err(SessionError::Refused(format!(
                "file entries out of order or too many (first id {first_id}, expected {})",
                self.files.len()
            )));
        }
        for entry in entries {
            let id = self.files.len() as u32;
            let file = self.accept(id, entry)?;
            self.files.push(file);
        }
        Ok(())
    }

    /// Places one entry: a directory is created at once; a file is looked at.
    fn accept(&mut self, id: u32, entry: FileEntry) -> Result<Option<RecvFile>, SessionError> {
        let path = parse_peer_path(&entry.path).map_err(|e| {
            SessionError::Refused(format!("refused path {}: {e}", show(&entry.path)))
        })?;
        let top = path.components().next().unwrap_or_default().to_vec();
        match &self.first_source {
            None => self.first_source = Some(top),
            Some(first) if *first != top => self.multiple = true,
            Some(_) => {}
        }
        let placed = place_entry(
            self.cfg.target.as_ref(),
            self.cfg.target_is_dir,
            self.multiple,
            &path,
        )
        .map_err(|e| SessionError::Refused(e.to_string()))?;
        let final_rel = placed.to_path_buf();
        let mtime = (entry.mtime_secs, entry.mtime_nanos);
        if entry.kind == EntryKind::Dir {
            if !self.cfg.checksum_only {
                self.events.push_back(RecvEvent::CreateDir {
                    rel: final_rel.clone(),
                    mode: 0o700 | (entry.mode & 0o777),
                });
                self.dirs_known.insert(final_rel.clone());
                self.dirs.push(DirFix {
                    rel: final_rel,
                    depth: placed.depth(),
                    mode: entry.mode & 0o7777,
                    mtime,
                });
            }
            return Ok(None);
        }
        if let Some(parent) = placed.parent() {
            let parent = parent.to_path_buf();
            if !self.cfg.checksum_only && !self.dirs_known.contains(&parent) {
                self.events.push_back(RecvEvent::CreateDir {
                    rel: parent.clone(),
                    mode: 0o755,
                });
                self.dirs_known.insert(parent);
            }
        }
        self.outcome.total_bytes += entry.size;
        let chunks = chunk_count(entry.size, self.cfg.chunk_size);
        let part_rel = part_name(&placed)
            .map_err(|e| SessionError::Refused(e.to_string()))?
            .to_path_buf();
        let manifest_rel = if chunks > 1 {
            Some(
                manifest_name(&placed)
                    .map_err(|e| SessionError::Refused(e.to_string()))?
                    .to_path_buf(),
            )
        } else {
            None
        };
        let lazy = chunks == 1 && !self.cfg.checksum_only;
        let want_manifest = !lazy && !self.cfg.checksum_only;
        self.events.push_back(RecvEvent::Look {
            id,
            final_rel: final_rel.clone(),
            part_rel: part_rel.clone(),
            manifest_rel: manifest_rel.clone().filter(|_| want_manifest),
            manifest_limit: HEADER_LEN as u64 + RECORD_LEN as u64 * (chunks * 2 + 16),
        });
        self.answers.push_back((id, None));
        Ok(Some(RecvFile {
            hashes: FileHashes::new(entry.size, self.cfg.chunk_size),
            entry,
            final_rel,
            part_rel,
            manifest_rel,
            state: FileState::Looking,
            lazy,
            created: false,
            receiver: None,
            theirs: None,
            resume_have: Vec::new(),
        }))
    }

    /// The driver's answer to [`RecvEvent::Look`]: decides what to do with the file.
    pub fn looked(&mut self, id: u32, found: LookResult) -> Result<(), SessionError> {
        let cfg = self.cfg.clone();
        let Some(f) = self.file_mut(id).filter(|f| f.state == FileState::Looking) else {
            return Err(SessionError::GaveUp(format!(
                "a look at file {id}, which is not waiting for one"
            )));
        };
        let e = &f.entry;
        // A one-chunk file whose name a directory holds fails alone, at its commit; a
        // larger one is refused before its part file is made next to the directory.
        if found.existing.is_some_and(|m| m.is_dir) && !f.lazy {
            return Err(SessionError::Refused(format!(
                "the destination {} is a directory; a file cannot replace it",
                f.final_rel.display()
            )));
        }
        let existing = found.existing;
        let source = SourceIdentity {
            size: e.size,
            mtime_secs: e.mtime_secs,
            mtime_nanos: e.mtime_nanos,
            fingerprint: e.fingerprint,
        };
        let size = e.size;
        let skip = |reason| Some(vec![TransferMessage::SkipFile { file: id, reason }]);
        // Already in place from an earlier run (same size and mtime, which a commit
        // copies from the source): nothing to send (rsync's quick check).
        if !cfg.checksum_only
            && existing.is_some_and(|m| {
                m.is_file
                    && m.len == size
                    && m.mtime_secs == e.mtime_secs
                    && m.mtime_nanos == i64::from(e.mtime_nanos)
            })
        {
            self.already += 1;
            self.outcome.resumed_bytes += size;
            return self.decided(id, skip(SkipReason::AlreadyComplete), true);
        }
        if cfg.checksum_only {
            let why = match existing {
                None => Some("missing at the destination"),
                Some(m) if m.len != size || !m.is_file => Some("differs in size from the source"),
                Some(_) => None,
            };
            if let Some(why) = why {
                let line = format!("{}: {why}", f.final_rel.display());
                self.missing.push(line);
                return self.decided(id, skip(SkipReason::Missing), true);
            }
            let opened = FileReceiver::open(source, cfg.chunk_size, None)
                .map_err(|e| SessionError::Refused(e.to_string()))?;
            f.receiver = Some(opened.receiver);
            return self.open(id, OpenPlan::Existing);
        }
        if existing.is_some() && cfg.no_clobber {
            self.outcome.files_skipped += 1;
            return self.decided(id, skip(SkipReason::Exists), true);
        }
        if f.lazy {
            let opened = FileReceiver::open(source, cfg.chunk_size, None)
                .map_err(|e| SessionError::Refused(e.to_string()))?;
            f.receiver = Some(opened.receiver);
            return self.open(id, OpenPlan::Lazy);
        }
        // A stored manifest counts only if the part file is there, regular, of full size.
        let part_ok = found.part.is_some_and(|m| m.is_file && m.len == size);
        let stored = found.manifest.as_deref().filter(|_| part_ok);
        let opened = FileReceiver::open(source, cfg.chunk_size, stored)
            .map_err(|e| SessionError::Refused(format!("{}: {e}", f.final_rel.display())))?;
        let plan = match opened.start {
            PartStart::Resume { manifest_len } => {
                f.resume_have = opened.have;
                OpenPlan::Resume {
                    manifest_len,
                    verify: opened.receiver.manifest().verified().collect(),
                }
            }
            PartStart::Fresh {
                manifest_header, ..
            } => OpenPlan::Fresh {
                manifest_header: f.manifest_rel.is_some().then_some(manifest_header),
            },
        };
        f.receiver = Some(opened.receiver);
        self.open(id, plan)
    }

    fn open(&mut self, id: u32, plan: OpenPlan) -> Result<(), SessionError> {
        let Some(f) = self.file_mut(id) else {
            return Ok(());
        };
        f.state = FileState::Opening;
        let ev = RecvEvent::Open {
            id,
            final_rel: f.final_rel.clone(),
            part_rel: f.part_rel.clone(),
            manifest_rel: f.manifest_rel.clone(),
            size: f.entry.size,
            plan,
        };
        self.events.push_back(ev);
        Ok(())
    }

    /// The driver's answer to [`RecvEvent::Open`]: `intact` is whether every recorded
    /// chunk of a resumed part file still has its hash (always true otherwise). A resume
    /// whose records do not hold starts the file over.
    pub fn opened(&mut self, id: u32, intact: bool) -> Result<(), SessionError> {
        let cfg = self.cfg.clone();
        let Some(f) = self.file_mut(id).filter(|f| f.state == FileState::Opening) else {
            return Err(SessionError::GaveUp(format!(
                "file {id} opened, which was not being opened"
            )));
        };
        if cfg.checksum_only {
            let chunks = f.hashes.chunks();
            f.hashes.mark_ready(0..chunks);
            f.state = FileState::Open;
            self.events.push_back(RecvEvent::HashFromFile {
                id,
                chunks: (0..chunks).collect(),
            });
            return self.decided(id, Some(Vec::new()), false);
        }
        if !intact {
            // A power cut can keep a record whose data never reached the disk: start over.
            let e = &f.entry;
            let source = SourceIdentity {
                size: e.size,
                mtime_secs: e.mtime_secs,
                mtime_nanos: e.mtime_nanos,
                fingerprint: e.fingerprint,
            };
            let opened = FileReceiver::open(source, cfg.chunk_size, None)
                .map_err(|e| SessionError::Refused(e.to_string()))?;
            let PartStart::Fresh {
                manifest_header, ..
            } = opened.start
            else {
                return Err(SessionError::GaveUp(
                    "a fresh start resumed (no manifest was given)".into(),
                ));
            };
            f.receiver = Some(opened.receiver);
            f.resume_have.clear();
            let plan = OpenPlan::Fresh {
                manifest_header: f.manifest_rel.is_some().then_some(manifest_header),
            };
            return self.open(id, plan);
        }
        f.state = FileState::Open;
        let have = std::mem::take(&mut f.resume_have);
        let mut resumed = 0;
        if let Some(rx) = &f.receiver {
            let m = rx.manifest();
            for &(first, count) in &have {
                for i in first..first.saturating_add(count) {
                    resumed += m.chunk_len(i);
                    // Re-hashed against the part file when it was opened.
                    if let Some(hash) = m.verified_hash(i) {
                        f.hashes.offer(i, hash);
                    }
                }
            }
        }
        self.outcome.resumed_bytes += resumed;
        let answer = pack_have_chunks(id, &have);
        self.decided(id, Some(answer), false)
    }

    /// A file's answer is decided; `finished`: nothing will be received for it.
    fn decided(
        &mut self,
        id: u32,
        answer: Option<Vec<TransferMessage>>,
        finished: bool,
    ) -> Result<(), SessionError> {
        if let Some(slot) = self.answers.iter_mut().find(|(i, _)| *i == id) {
            slot.1 = Some(answer.unwrap_or_default());
        }
        if finished {
            if let Some(f) = self.file_mut(id) {
                f.state = FileState::Finished;
            }
        } else {
            self.uncommitted += 1;
        }
        self.flush_answers();
        Ok(())
    }

    /// Sends the answers decided so far, in list order; after the last, `FileListEnd`.
    fn flush_answers(&mut self) {
        while let Some((_, Some(_))) = self.answers.front() {
            if let Some((_, Some(msgs))) = self.answers.pop_front() {
                self.outbox.extend(msgs);
            }
        }
        if self.list_ended && self.answers.is_empty() && self.phase == Phase::Listing {
            self.outbox.push_back(TransferMessage::FileListEnd {
                files: self.files.len() as u32,
                bytes: self.outcome.total_bytes,
            });
            self.phase = Phase::Receiving;
            self.progress = ProgressSnapshot {
                done_bytes: self.outcome.resumed_bytes,
                total_bytes: self.outcome.total_bytes,
                files_done: 0,
                files_total: self.uncommitted,
                listed: true,
            };
            if self.uncommitted == 0 && !self.cfg.checksum_only {
                // Nothing will be committed (only directories, or all skipped): the tree
                // is final now, before the sender hears it is done.
                self.events
                    .push_back(RecvEvent::FixDirs(std::mem::take(&mut self.dirs)));
            }
        }
    }

    /// A chunk header from a data stream: checks it names a chunk being received.
    pub fn chunk_header(&mut self, h: &ChunkHeader) -> Result<ChunkPlan, SessionError> {
        let cfg_chunk = self.cfg.chunk_size;
        if self.cfg.checksum_only {
            return Err(SessionError::Protocol(
                "a chunk arrived in a --checksum-only transfer".into(),
            ));
        }
        let Some(f) = self
            .file_mut(h.file)
            .filter(|f| matches!(f.state, FileState::Open | FileState::Committing))
        else {
            return Err(SessionError::Protocol(format!(
                "a chunk for file {}, which is not being received",
                h.file
            )));
        };
        let len = u64::from(h.len);
        if len > cfg_chunk || h.flags & !CHUNK_FLAG_HOLE != 0 {
            return Err(SessionError::Protocol(format!(
                "chunk {} of {}: length {len} above the chunk size {cfg_chunk} or unknown flags {:#x}",
                h.index,
                f.final_rel.display(),
                h.flags
            )));
        }
        let hole = h.flags & CHUNK_FLAG_HOLE != 0;
        Ok(ChunkPlan {
            id: h.file,
            name: f.part_rel.clone(),
            payload: if hole { 0 } else { len },
            hole,
            hasher: f.hashes.hasher(h.index),
            lazy: (f.lazy && !f.created).then(|| (f.part_rel.clone(), f.entry.size)),
        })
    }

    /// A chunk's payload was read and hashed: whether to write it.
    pub fn chunk_arrived(
        &mut self,
        h: &ChunkHeader,
        computed: ChunkHash,
    ) -> Result<Arrival, SessionError> {
        let Some(f) = self.file_mut(h.file) else {
            return Err(SessionError::Protocol(format!(
                "a chunk for file {}, which is not being received",
                h.file
            )));
        };
        let len = u64::from(h.len);
        let Some(rx) = f.receiver.as_mut() else {
            return Err(SessionError::Protocol(format!(
                "a chunk for file {} before it was opened",
                h.file
            )));
        };
        let check = rx.check_chunk(h.index, h.offset, len, h.hash, computed);
        let name = f.final_rel.display().to_string();
        if h.flags & CHUNK_FLAG_HOLE == 0 {
            self.outcome.received_bytes += len;
        }
        match check {
            Err(TransferError::ChunkHashMismatch { .. }) => {
                self.outbox.push_back(TransferMessage::ChunkRejected {
                    file: h.file,
                    index: h.index,
                    reason: RejectReason::Checksum,
                });
                Ok(Arrival::Rejected)
            }
            Err(e) => Err(SessionError::Protocol(format!(
                "chunk {} of {name}: {e}",
                h.index
            ))),
            Ok(ChunkCheck::Duplicate) => {
                self.outbox.push_back(TransferMessage::ChunkVerified {
                    file: h.file,
                    index: h.index,
                });
                Ok(Arrival::Duplicate)
            }
            Ok(ChunkCheck::Write) => Ok(Arrival::Write),
        }
    }

    /// The chunk's bytes are written: returns the manifest record to append (files of
    /// several chunks) before [`RecvSession::chunk_recorded`].
    pub fn chunk_written(
        &mut self,
        file: u32,
        index: u32,
        hash: ChunkHash,
    ) -> Result<Option<[u8; RECORD_LEN]>, SessionError> {
        let Some(f) = self.file_mut(file) else {
            return Err(SessionError::GaveUp(format!("file {file} is not known")));
        };
        f.created = true;
        let Some(rx) = f.receiver.as_mut() else {
            return Err(SessionError::GaveUp(format!("file {file} is not open")));
        };
        let record = rx
            .chunk_durable(index, hash)
            .map_err(|e| SessionError::GaveUp(e.to_string()))?;
        Ok(record.filter(|_| f.manifest_rel.is_some()))
    }

    /// Writing a chunk failed (the driver stops the transfer with its own error).
    pub fn chunk_write_failed(&mut self, file: u32, index: u32) {
        if let Some(rx) = self.file_mut(file).and_then(|f| f.receiver.as_mut()) {
            rx.chunk_abandoned(index);
        }
    }

    /// The chunk and its record are written: ack it, and commit the file if this
    /// completed it.
    pub fn chunk_recorded(&mut self, file: u32, index: u32, hash: ChunkHash, len: u64) {
        self.outbox
            .push_back(TransferMessage::ChunkVerified { file, index });
        self.progress.done_bytes += len;
        if let Some(f) = self.file_mut(file) {
            f.hashes.offer(index, hash);
        }
        self.try_commit(file);
    }

    /// The answer to [`RecvEvent::HashFromFile`] for one chunk.
    pub fn hashed(&mut self, id: u32, index: u32, hash: ChunkHash) {
        if let Some(f) = self.file_mut(id) {
            f.hashes.offer(index, hash);
        }
        self.try_commit(id);
    }

    /// Both digests known: compare; put the file in place or report it.
    fn try_commit(&mut self, id: u32) {
        let checksum_only = self.cfg.checksum_only;
        let (replace, sync) = (!self.cfg.no_clobber, self.cfg.sync);
        let Some(f) = self.file_mut(id).filter(|f| f.state == FileState::Open) else {
            return;
        };
        let (Some(ours), Some(theirs)) = (f.hashes.result(), f.theirs) else {
            return;
        };
        f.state = FileState::Committing;
        if checksum_only {
            let verdict = (ours == theirs)
                .then_some(())
                .ok_or_else(|| "differs from the source".to_string());
            self.finish(id, verdict);
            return;
        }
        let verdict = f
            .receiver
            .as_ref()
            .map(|rx| rx.verify_digest(&ours, &theirs));
        if let Some(Err(e)) = verdict {
            // Start the file over next time: its chunks disagree with the source as a
            // whole.
            let ev = RecvEvent::Discard {
                part_rel: f.part_rel.clone(),
                manifest_rel: f.manifest_rel.clone(),
            };
            self.events.push_back(ev);
            self.finish(id, Err(e.to_string()));
            return;
        }
        let job = CommitJob {
            id,
            final_rel: f.final_rel.clone(),
            part_rel: f.part_rel.clone(),
            manifest_rel: f.manifest_rel.clone(),
            mode: f.entry.mode & 0o7777,
            mtime: (f.entry.mtime_secs, f.entry.mtime_nanos),
            replace,
            sync,
        };
        self.events.push_back(RecvEvent::Commit(job));
    }

    /// The driver's answer to [`RecvEvent::Commit`].
    pub fn placed(&mut self, id: u32, result: Result<(), String>) {
        if self
            .file_mut(id)
            .is_some_and(|f| f.state == FileState::Committing)
        {
            self.finish(id, result);
        }
    }

    fn finish(&mut self, id: u32, verdict: Result<(), String>) {
        let Some(f) = self.file_mut(id) else { return };
        f.state = FileState::Finished;
        f.receiver = None;
        let name = f.final_rel.display().to_string();
        let (ok, reason) = match verdict {
            Ok(()) => (true, String::new()),
            Err(why) => {
                self.outcome.failed.push(format!("{name}: {why}"));
                let mut end = why.len().min(MAX_REASON_BYTES);
                while !why.is_char_boundary(end) {
                    end -= 1;
                }
                (false, why[..end].to_string())
            }
        };
        if ok {
            self.outcome.files_ok += 1;
        }
        self.progress.files_done += 1;
        self.uncommitted = self.uncommitted.saturating_sub(1);
        let msg = TransferMessage::FileCommitted {
            file: id,
            ok,
            reason,
        };
        if self.uncommitted == 0 && !self.cfg.checksum_only {
            // The last file: the tree is final (directory times set) before the sender
            // hears of this commit and reports success.
            self.held_commit = Some(msg);
            self.events
                .push_back(RecvEvent::FixDirs(std::mem::take(&mut self.dirs)));
        } else {
            self.outbox.push_back(msg);
        }
    }

    /// The driver's answer to [`RecvEvent::FixDirs`]: the held last commit goes out.
    pub fn dirs_fixed(&mut self) {
        if let Some(m) = self.held_commit.take() {
            self.outbox.push_back(m);
        }
    }

    /// Directories not yet fixed (after a failure: the driver sets them anyway).
    pub fn take_dirs(&mut self) -> Vec<DirFix> {
        std::mem::take(&mut self.dirs)
    }
}
