//! The sending end of a transfer (the client on a push, the server on a pull), sans-I/O.
//!
//! The file list goes out first; the receiver answers once for the whole list with what
//! it already has (resume) or does not want (`--no-clobber`, already complete). Then every
//! data stream asks [`SendSession::next_work`] for its next work unit when it is free, so
//! a slow stream never holds the transfer. The driver reads and hashes each chunk, sends
//! it, and reports the chunk's hash ([`SendInput::ChunkSent`] to [`SendSession::handle`], the
//! one input); the hashes of a file
//! merge into its BLAKE3, which goes to the receiver as soon as the last chunk was read.
//! The receiver's acks drive the scheduler until every file is committed; then the
//! session says `TransferDone` and is finished. A symlink entry has no data: it is not
//! scheduled, and the receiver's `FileCommitted` for it (or a `SkipFile`) is all there is.
//!
//! The state machine ([`SendSession`]: phases, the message handler, the outbox and the
//! driver's events) lives here; its calls are split by stage: `answers` (the receiver's
//! answers to the list and the start of sending), `acks` (acks, refusals and commits
//! while chunks flow), `streams` (the data streams' work and the chunk hashes), `types`
//! (the public configuration, event and outcome types).

mod acks;
mod answers;
mod input;
mod streams;
mod types;

use longhaul_proto::transfer::EntryId;
use longhaul_proto::Wait;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use longhaul_proto::transfer::{pack_file_entries, FileEntry, SkipReason, TransferMessage};

use super::{show, LocalFailure, PeerMisbehaved, ProgressSnapshot, SessionError};
use crate::file_hashes::FileHashes;
use crate::integrity::ChunkHash;
use crate::scheduler::{ChunkScheduler, FileId};

pub use input::SendInput;
pub use types::{SendConfig, SendEvent, SendOutcome, Work, WouldSend};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The list is out; the receiver's answers come in.
    Listing,
    /// Chunks flow.
    Sending,
    /// Every file is committed and `TransferDone` is queued.
    Done,
    /// Stopped with an error.
    Failed,
}

struct SendFile {
    entry: EntryId,
    hashes: FileHashes,
    /// Sync: the receiver's old copy's chunk hashes (`None` once a chunk sent as equal was
    /// refused: it then goes with its bytes).
    old: Vec<Option<ChunkHash>>,
}

/// The sending end's state machine; see the module docs.
pub struct SendSession {
    entries: Vec<FileEntry>,
    cfg: SendConfig,
    phase: Phase,
    outbox: VecDeque<TransferMessage>,
    events: VecDeque<SendEvent>,
    skipped: BTreeMap<EntryId, SkipReason>,
    have: HashMap<EntryId, Vec<(u32, u32)>>,
    /// Sync: the receiver's old copies' chunk hashes, by entry.
    old: HashMap<EntryId, Vec<Option<ChunkHash>>>,
    sched: Option<ChunkScheduler>,
    /// Scheduler file id -> the entry and its hashes.
    files: Vec<SendFile>,
    by_entry: HashMap<EntryId, FileId>,
    /// Symlink entries the receiver makes without data, waiting for their commit.
    links: HashSet<EntryId>,
    /// Symlink entries to be committed in all.
    links_total: u64,
    live_streams: u16,
    /// `sync -n` ([`SendSession::set_dry_run`]): files still being hashed, and the bytes
    /// of each that differ so far (by scheduler file id).
    dry_run: Option<(usize, HashMap<FileId, u64>)>,
    committed: u64,
    /// The receiver answered the list ahead ([`SendInput::AnsweredAhead`]): whether
    /// its `FileListEnd` has come since.
    ahead: Option<bool>,
    /// [`SendSession::check_sources`]: the digests of files read whole, by entry, each
    /// waiting for the driver's check of its source ([`SendEvent::CheckSource`]).
    source_checks: Option<HashMap<EntryId, [u8; 32]>>,
    outcome: SendOutcome,
    progress: ProgressSnapshot,
}

impl SendSession {
    /// A session for these entries (directories before their contents); the file list
    /// is queued for [`SendSession::poll_transmit`] at once.
    pub fn new(entries: Vec<FileEntry>, cfg: SendConfig) -> Result<Self, SessionError> {
        let total: u64 = entries.iter().map(|e| e.size).sum();
        let mut outbox: VecDeque<TransferMessage> = pack_file_entries(&entries, EntryId(0))
            .map_err(|e| LocalFailure::PackingList(e.to_string()))?
            .into();
        outbox.push_back(TransferMessage::FileListEnd {
            files: entries.len() as u32,
            bytes: total,
            deleted: 0,
        });
        Ok(Self {
            entries,
            cfg,
            phase: Phase::Listing,
            outbox,
            events: VecDeque::new(),
            skipped: BTreeMap::new(),
            have: HashMap::new(),
            old: HashMap::new(),
            sched: None,
            files: Vec::new(),
            by_entry: HashMap::new(),
            links: HashSet::new(),
            links_total: 0,
            live_streams: cfg.streams,
            dry_run: None,
            committed: 0,
            ahead: None,
            source_checks: None,
            outcome: SendOutcome::default(),
            progress: ProgressSnapshot {
                total_bytes: total,
                ..ProgressSnapshot::default()
            },
        })
    }

    /// Each file's source is checked once all of it was read: its digest waits for the
    /// driver's answer to [`SendEvent::CheckSource`] ([`SendInput::SourceChecked`]),
    /// and a source that changed meanwhile goes to the receiver as `SourceChanged`, which
    /// commits nothing of it. Only towards a receiver that announced
    /// `features::SOURCE_CHANGED`; not in `--checksum-only` (nothing is copied).
    pub fn check_sources(&mut self) {
        if !self.cfg.checksum_only {
            self.source_checks = Some(HashMap::new());
        }
    }

    /// `sync -n`: no chunk is sent. Once the list is answered, every file the receiver
    /// has a copy of is hashed ([`SendEvent::HashFromFile`]) and compared with the copy's
    /// chunk hashes; the receiver is told what each file would send (`WouldSend`), and the
    /// session ends.
    pub fn set_dry_run(&mut self) {
        self.dry_run = Some((0, HashMap::new()));
    }

    /// [`SendInput::AnsweredAhead`].
    fn answered_ahead(&mut self) -> Result<(), SessionError> {
        if !self.unanswered() || self.cfg.checksum_only || self.dry_run.is_some() {
            return Err(PeerMisbehaved::LateAnswerAhead.into());
        }
        self.ahead = Some(false);
        self.start_sending()
    }

    /// The next control message to send.
    pub fn poll_transmit(&mut self) -> Option<TransferMessage> {
        self.outbox.pop_front()
    }

    /// The next piece of work for the driver.
    pub fn poll_event(&mut self) -> Option<SendEvent> {
        self.events.pop_front()
    }

    /// Every file is committed (`TransferDone` is queued): the transfer succeeded as far
    /// as this end is concerned.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The entries being sent.
    pub fn entries(&self) -> &[FileEntry] {
        &self.entries
    }

    /// Every entry's id, in list order.
    fn entry_ids(&self) -> impl Iterator<Item = EntryId> {
        (0..self.entries.len() as u32).map(EntryId)
    }

    /// The chunk size.
    pub fn chunk_size(&self) -> u64 {
        self.cfg.chunk_size
    }

    /// Takes the smaller chunk size the receiver chose (a server lowers a push's chunks to
    /// fit its memory budget); only before any answer to the list, since answers name
    /// chunks by index. Refused when larger, not a valid chunk size, or too late.
    pub fn adopt_chunk_size(&mut self, chunk_size: u64) -> Result<(), SessionError> {
        if !self.unanswered()
            || chunk_size > self.cfg.chunk_size
            || !longhaul_proto::transfer::valid_chunk_size(chunk_size)
        {
            return Err(PeerMisbehaved::ChunkSize {
                theirs: chunk_size,
                ours: self.cfg.chunk_size,
            }
            .into());
        }
        self.cfg.chunk_size = chunk_size;
        Ok(())
    }

    /// What the session waits for from the receiver before chunks may flow: the answer to
    /// its list (see [`Wait::ListAnswer`]: a driver bounds the wait only towards a receiver
    /// that keeps the connection alive meanwhile).
    pub fn waiting(&self) -> Option<Wait> {
        (self.phase == Phase::Listing).then_some(Wait::ListAnswer)
    }

    /// The list is out and nothing of it answered yet.
    fn unanswered(&self) -> bool {
        self.phase == Phase::Listing
            && self.skipped.is_empty()
            && self.have.is_empty()
            && self.old.is_empty()
    }

    /// `--checksum-only`: no chunk crosses.
    pub fn checksum_only(&self) -> bool {
        self.cfg.checksum_only
    }

    /// Progress counters.
    pub fn progress(&self) -> ProgressSnapshot {
        self.progress
    }

    /// What happened so far (final once [`SendSession::is_done`]).
    pub fn outcome(&self) -> SendOutcome {
        let mut o = self.outcome.clone();
        for (&file, reason) in &self.skipped {
            match reason {
                SkipReason::AlreadyComplete => {
                    o.files_ok += 1;
                    o.files_unchanged += 1;
                    o.resumed_bytes += self.entries[file.slot()].size;
                    o.unchanged_bytes += self.entries[file.slot()].size;
                }
                SkipReason::Exists => o.files_skipped += 1,
                SkipReason::OtherShare => o.files_to_other_shares += 1,
                SkipReason::Missing | SkipReason::PathRefused => o.failed.push(format!(
                    "{}: {}",
                    show(&self.entries[file.slot()].path),
                    if *reason == SkipReason::Missing {
                        "missing at the destination"
                    } else {
                        "the receiver refused the path"
                    }
                )),
            }
        }
        o.failed.sort();
        o
    }

    /// Stops the session (this end failed); later calls change nothing.
    pub fn fail(&mut self) {
        if self.phase != Phase::Done {
            self.phase = Phase::Failed;
        }
    }

    /// One message from the receiver ([`SendInput::Message`]).
    fn on_message(&mut self, msg: TransferMessage) -> Result<(), SessionError> {
        let r = match self.phase {
            Phase::Listing => self.handle_answer(msg),
            Phase::Sending => self.handle_ack(msg),
            Phase::Done | Phase::Failed => Ok(()),
        };
        if r.is_err() {
            self.phase = Phase::Failed;
        }
        r
    }

    fn maybe_done(&mut self) {
        let finished = match &self.dry_run {
            Some((pending, _)) => *pending == 0,
            None => self.committed == self.files.len() as u64 + self.links_total,
        };
        if self.phase == Phase::Sending && finished {
            self.outbox.push_back(TransferMessage::TransferDone {
                files: self.outcome.files_ok as u32,
                bytes: self.outcome.sent_bytes,
            });
            self.phase = Phase::Done;
        }
    }
}

fn unexpected(m: &TransferMessage, when: &'static str) -> SessionError {
    PeerMisbehaved::Unexpected {
        message: m.kind(),
        when,
    }
    .into()
}
