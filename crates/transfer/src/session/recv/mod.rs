//! The receiving end of a transfer (the server on a push, the client on a pull), sans-I/O.
//!
//! **The list.** Every path from the peer is checked ([`parse_peer_path`]) and placed by
//! cp's rules ([`place_entry`]). For each file the session asks the driver what is at the
//! destination ([`RecvEvent::Look`]) and decides: already complete (rsync's quick check:
//! same size and mtime), `--no-clobber`, `--checksum-only` against the existing copy,
//! resume from a stored manifest, or start over. Then it asks the driver to open the data
//! file ([`RecvEvent::Open`]; a one-chunk file is created only when its chunk arrives),
//! and answers the sender once for the whole list. No file is opened before the whole list
//! is decided and found to fit: a daemon's caps on one transfer and the room on the
//! destination's file system (`room`) refuse it before any part file or data.
//!
//! **The chunks.** A data stream's driver checks each header
//! ([`RecvSession::chunk_header`]), reads and hashes the payload, and asks
//! [`RecvSession::chunk_arrived`] whether to write it (a hash mismatch is refused and sent
//! again; a duplicate is acked). After the write the session returns the manifest record
//! to append ([`RecvSession::chunk_written`]); once it is appended the chunk is acked
//! ([`RecvInput::ChunkRecorded`]). A record is always on disk before its ack.
//!
//! **The commit.** When the file's own digest (merged from its chunk hashes) and the
//! sender's digest are both known and equal, the session asks the driver to put the file
//! in place ([`RecvEvent::Commit`]) and acks it with `FileCommitted`. The last commit of
//! the transfer waits until the directories' modes and times are set
//! ([`RecvEvent::FixDirs`]), so the sender never reports success before the tree is final.
//! Only directories this transfer created get a mode (the driver reports them:
//! [`RecvInput::DirsCreated`]); one that existed keeps its mode (its time is set). Every mode
//! set is [`received_mode`] without the receiver's umask ([`RecvConfig::umask`]).
//!
//! **Symlinks** (`links`) are placed and looked at like files but carry no data: the
//! driver makes each one ([`RecvEvent::MakeSymlink`], answered by
//! [`RecvInput::SymlinkMade`]) once the list is answered, and it commits like a file.
//! **Hard links** (`hardlinks`, `sync -H`): an entry naming an earlier file of the list
//! is placed like a file and made by the driver ([`RecvEvent::MakeHardLink`], answered by
//! [`RecvInput::HardLinkMade`]) once every file of the list is finished.
//! **`--delete`** ([`RecvSession::with_delete`]): once the list is settled and fits, the
//! directories it sends are listed at the destination ([`RecvEvent::ListDest`]) and what
//! the source lacks is removed ([`RecvEvent::Remove`]) before the list's end is answered.
//!
//! A destination that is a FIFO, socket or device ([`Meta::special`]) is refused: longhaul
//! neither writes into nor replaces one.
//!
//! Every message and every answer of the driver arrives through one input
//! ([`RecvSession::handle`] with a [`RecvInput`], `input`).
//! The state machine ([`RecvSession`]: phases, the message handler, the outbox and the
//! driver's events) lives here; its calls are split by stage: `list` (admission of the
//! file list), `room` (caps and free space), `chunks` (chunks, the commit gate, directories),
//! `links` (symlink entries), `types` (the public
//! configuration, event and outcome types).
//!
//! [`parse_peer_path`]: crate::path::parse_peer_path
//! [`place_entry`]: crate::place::place_entry
//! [`received_mode`]: crate::mode::received_mode

mod chunks;
mod deletion;
mod hardlinks;
mod input;
mod links;
mod list;
mod room;
mod share;
mod types;

use longhaul_proto::transfer::EntryId;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use longhaul_proto::transfer::{EntryKind, FileEntry, TransferMessage};

use super::{PeerMisbehaved, ProgressSnapshot, SessionError};
use crate::file_hashes::FileHashes;
use crate::receiver::FileReceiver;

pub use input::{Placed, RecvInput};
pub use room::human_bytes;
pub use types::{
    Arrival, CapsSetBy, ChunkPlan, CommitJob, DirFix, ExpectedList, HardLinkJob, LinkJob, ListCaps,
    LookResult, Meta, OldCopy, OpenPlan, RecvConfig, RecvEvent, RecvOutcome, Reuse, Room,
    SyncRules,
};

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
    /// Sync: waiting for the chunk hashes of the destination's copy.
    HashingOld,
    /// Waiting for the driver to open it.
    Opening,
    /// Receiving chunks.
    Open,
    /// Commit asked for.
    Committing,
    /// A symlink entry: [`RecvEvent::MakeSymlink`] asked for (or held until the list is
    /// answered and the room checked).
    Linking,
    /// A hard link entry: waiting for every file of the list to finish, then
    /// [`RecvEvent::MakeHardLink`] asked for.
    HardLinking,
    /// Committed (or failed).
    Finished,
}

/// The sender's last word on a file, once every chunk of it was read.
#[derive(Debug, Clone)]
enum Theirs {
    /// The source's BLAKE3.
    Digest([u8; 32]),
    /// The source changed while it was read (`SourceChanged`): what arrived may mix two
    /// versions, and nothing of it is committed.
    Changed(String),
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
    /// What the sender said of the whole source once it had read it.
    theirs: Option<Theirs>,
    /// The resume plan being checked by the driver.
    resume_have: Vec<(u32, u32)>,
    /// Sync: what the driver found at the destination, kept while the old copy is hashed.
    look: Option<LookResult>,
    /// Sync: the destination's copy, its size and chunk hashes.
    old: Option<(u64, OldCopy)>,
    /// Sync: chunks taken from the old copy.
    reused: Vec<u32>,
    /// Sync `--inplace`: the data file is the destination file itself.
    in_place: bool,
    /// A hard link entry: the id of the file entry it is another name of.
    link_of: Option<EntryId>,
    /// A file left as found by the quick check: its destination's device and inode.
    kept_inode: Option<(u64, u64)>,
    /// Finished with a failure.
    failed: bool,
    /// Its part in a striped copy ([`RecvSession::with_share`]).
    share: share::FileShare,
}

/// The receiving end's state machine; see the module docs.
pub struct RecvSession {
    cfg: RecvConfig,
    phase: Phase,
    outbox: VecDeque<TransferMessage>,
    events: VecDeque<RecvEvent>,
    files: Vec<Option<RecvFile>>,
    /// Answers to the list, in list order: (file id, messages), sent once decided.
    answers: VecDeque<(EntryId, Option<Vec<TransferMessage>>)>,
    list_ended: bool,
    first_source: Option<Vec<u8>>,
    multiple: bool,
    dirs_known: HashSet<PathBuf>,
    /// Directories this transfer created: the only ones whose mode and times it sets.
    dirs_made: HashSet<PathBuf>,
    dirs: Vec<DirFix>,
    uncommitted: u64,
    held_commit: Option<TransferMessage>,
    /// A [`RecvEvent::FixDirs`] not yet answered: the tree is not final.
    dirs_unfixed: bool,
    /// The sender's `TransferDone` came while the directories were being fixed: it is
    /// answered once they are.
    done_held: bool,
    outcome: RecvOutcome,
    already: u64,
    missing: Vec<String>,
    progress: ProgressSnapshot,
    /// The destination's room, if measured ([`RecvSession::with_room`]).
    room: Option<Room>,
    /// Caps on the list ([`RecvSession::with_caps`]).
    caps: ListCaps,
    /// What the decided files will write.
    needs: room::Needs,
    /// Files whose look is not answered yet.
    looking: u64,
    /// `Open` events held until the list is settled and the room checked.
    pending_opens: Vec<RecvEvent>,
    /// The room was checked: files are opened as they are decided.
    opens_released: bool,
    /// `MakeSymlink` events held until the room is checked and the list answered (a
    /// link's `FileCommitted` must not reach the sender before `FileListEnd`).
    pending_links: Vec<RecvEvent>,
    /// File entries by their entry path (as parsed): what a hard link entry may name.
    file_ids: HashMap<Vec<u8>, EntryId>,
    /// File entries not finished yet: hard links are made once there are none.
    files_unfinished: u64,
    /// Hard link entries waiting for that.
    pending_hardlinks: Vec<EntryId>,
    /// `longhaul sync` ([`RecvSession::with_sync`]).
    sync_rules: Option<SyncRules>,
    /// `--delete` ([`RecvSession::with_delete`]).
    deletion: Option<deletion::Deletion>,
    /// The list was answered ahead ([`RecvSession::with_answered_ahead`]).
    ahead: bool,
    /// A striped copy: the share this end receives ([`RecvSession::with_share`]).
    share: Option<longhaul_proto::stripe::Share>,
    /// The number across the copy of the next entry's first chunk.
    share_next: u64,
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
            dirs_made: HashSet::new(),
            dirs: Vec::new(),
            uncommitted: 0,
            held_commit: None,
            dirs_unfixed: false,
            done_held: false,
            outcome: RecvOutcome::default(),
            already: 0,
            missing: Vec::new(),
            progress: ProgressSnapshot::default(),
            room: None,
            caps: ListCaps::default(),
            needs: room::Needs::default(),
            looking: 0,
            pending_opens: Vec::new(),
            opens_released: false,
            pending_links: Vec::new(),
            file_ids: HashMap::new(),
            files_unfinished: 0,
            pending_hardlinks: Vec::new(),
            sync_rules: None,
            deletion: None,
            ahead: false,
            share: None,
            share_next: 0,
        }
    }

    /// The list is answered ahead (`transfer_flags::ANSWERED_AHEAD`): this end told the
    /// sender it holds nothing of it, and the sender sends every file whole without
    /// waiting for answers. So no file is skipped as already complete nor resumed from a
    /// part file found after all (another process's, made since): each is received
    /// whole and replaces what is there, as a plain cp does. Not with `--no-clobber`,
    /// `--checksum-only` or sync, whose answers the sender needs (ignored there).
    pub fn with_answered_ahead(mut self) -> Self {
        self.ahead = true;
        self
    }

    /// Whether the list was answered ahead, and that holds here (see
    /// [`RecvSession::with_answered_ahead`]).
    fn answered_ahead(&self) -> bool {
        self.ahead
            && !self.cfg.no_clobber
            && !self.cfg.checksum_only
            && self.sync_rules.is_none()
            && self.share.is_none()
    }

    /// `longhaul sync`: a file that exists at the destination but differs from the
    /// source's size or mtime (any file with [`SyncRules::checksum`]) is hashed chunk by
    /// chunk ([`RecvEvent::HashOld`]) and its hashes go to the sender (`OldChunks`), which
    /// sends only the chunks that differ; the others are taken from the old copy when the
    /// file is committed ([`CommitJob::reuse`]). Entries are placed by rsync's rule
    /// ([`SyncRules::contents`]).
    pub fn with_sync(mut self, rules: SyncRules) -> Self {
        self.sync_rules = Some(rules);
        self
    }

    /// The next control message to send.
    pub fn poll_transmit(&mut self) -> Option<TransferMessage> {
        self.outbox.pop_front()
    }

    /// The next piece of work for the driver.
    pub fn poll_event(&mut self) -> Option<RecvEvent> {
        self.events.pop_front()
    }

    /// The list is not answered yet: the driver keeps the connection alive meanwhile
    /// towards a sender that bounds its wait ([`longhaul_proto::features::ANSWER_KEEPALIVE`]).
    pub fn answering(&self) -> bool {
        self.phase == Phase::Listing
    }

    /// The list is answered: data streams may be read.
    pub fn is_listed(&self) -> bool {
        matches!(self.phase, Phase::Receiving | Phase::Done)
    }

    /// The sender said `TransferDone` and this end answered.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Answers the sender's `TransferDone`: this end is done.
    fn answer_done(&mut self) {
        self.outbox.push_back(TransferMessage::TransferDone {
            files: (self.outcome.files_ok + self.already) as u32,
            bytes: self.outcome.received_bytes,
        });
        self.phase = Phase::Done;
    }

    /// Every entry of the list is committed or failed, the tree is final and the last
    /// `FileCommitted` is queued: nothing the sender can still say changes this end's
    /// outcome (its `TransferDone` only confirms it), so the receiver may finish without
    /// waiting a round trip for it. Not in `--checksum-only` or a dry run, whose end the
    /// sender's messages decide.
    pub fn is_settled(&self) -> bool {
        self.phase == Phase::Done || (self.files_settled() && !self.dirs_unfixed)
    }

    /// [`RecvSession::is_settled`] but for the directories' fix.
    fn files_settled(&self) -> bool {
        self.phase == Phase::Done
            || (self.phase == Phase::Receiving
                && !self.cfg.checksum_only
                && !self.dry_run()
                && self.uncommitted == 0
                && self.held_commit.is_none()
                && self.pending_hardlinks.is_empty()
                && self
                    .files
                    .iter()
                    .flatten()
                    .all(|f| f.state == FileState::Finished))
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
        o.files_unchanged = self.already;
        o.failed.extend(self.missing.iter().cloned());
        o.failed.sort();
        o
    }

    /// One message from the sender ([`RecvInput::Message`]).
    fn on_message(&mut self, msg: TransferMessage) -> Result<(), SessionError> {
        let r = match (self.phase, msg) {
            (Phase::Done | Phase::Failed, _) => Ok(()),
            (Phase::Listing, TransferMessage::FileEntries { first_id, entries }) => {
                self.accept_entries(first_id, entries)
            }
            (Phase::Listing, TransferMessage::FileListEnd { .. }) if !self.list_ended => {
                self.list_ended = true;
                self.release_opens()?;
                self.flush_answers();
                Ok(())
            }
            (Phase::Receiving, TransferMessage::FileDigest { file, blake3 }) => {
                self.sender_read(file, Theirs::Digest(blake3))
            }
            (Phase::Receiving, TransferMessage::SourceChanged { file, reason }) => {
                self.sender_read(file, Theirs::Changed(reason))
            }
            (Phase::Receiving, TransferMessage::WouldSend { file, bytes }) if self.dry_run() => {
                match self.file_mut(file) {
                    Some(f) if f.entry.kind == longhaul_proto::transfer::EntryKind::File => {
                        let line = crate::session::WouldSend {
                            path: f.final_rel.as_os_str().as_encoded_bytes().to_vec(),
                            size: f.entry.size,
                            bytes: bytes.min(f.entry.size),
                            compared: f.old.is_some(),
                        };
                        self.outcome.would_send.push(line);
                        Ok(())
                    }
                    _ => Err(PeerMisbehaved::DryRunNotAFile { file }.into()),
                }
            }
            (Phase::Receiving, TransferMessage::TransferDone { .. })
                if !self.cfg.checksum_only && !self.dry_run() && !self.files_settled() =>
            {
                // A sender says so only once every file's commit has reached it: one that
                // ends early would have this end report a partial copy as complete.
                let unfinished = (self.files.iter().flatten())
                    .filter(|f| f.state != FileState::Finished)
                    .count();
                Err(PeerMisbehaved::EndedEarly { unfinished }.into())
            }
            (Phase::Receiving, TransferMessage::TransferDone { .. }) if self.dirs_unfixed => {
                // Every file was skipped and the directories are being fixed: the sender
                // hears this end is done once the tree is final.
                self.done_held = true;
                Ok(())
            }
            (Phase::Receiving, TransferMessage::TransferDone { .. }) => {
                self.answer_done();
                Ok(())
            }
            (Phase::Listing, other) => Err(PeerMisbehaved::Unexpected {
                message: other.kind(),
                when: "before the file list ended",
            }
            .into()),
            (_, other) => Err(PeerMisbehaved::Unexpected {
                message: other.kind(),
                when: "during the transfer",
            }
            .into()),
        };
        if r.is_err() {
            self.phase = Phase::Failed;
        }
        r
    }

    /// The sender's digest of `file`, or its news that the source changed while read.
    fn sender_read(&mut self, file: EntryId, theirs: Theirs) -> Result<(), SessionError> {
        match self.file_mut(file) {
            Some(f) if f.theirs.is_none() && f.entry.kind == EntryKind::File => {
                f.theirs = Some(theirs);
                self.try_commit(file);
                Ok(())
            }
            _ => Err(PeerMisbehaved::DigestOutOfPlace { file }.into()),
        }
    }

    /// `sync -n`: nothing is changed.
    fn dry_run(&self) -> bool {
        self.sync_rules.is_some_and(|r| r.dry_run)
    }

    fn file_mut(&mut self, id: EntryId) -> Option<&mut RecvFile> {
        self.files.get_mut(id.slot()).and_then(Option::as_mut)
    }
}
