//! The sending end of a transfer (the client on a push, the server on a pull), sans-I/O.
//!
//! The file list goes out first; the receiver answers once for the whole list with what
//! it already has (resume) or does not want (`--no-clobber`, already complete). Then every
//! data stream asks [`SendSession::next_work`] for its next work unit when it is free, so
//! a slow stream never holds the transfer. The driver reads and hashes each chunk, sends
//! it, and reports the chunk's hash ([`SendSession::chunk_sent`]); the hashes of a file
//! merge into its BLAKE3, which goes to the receiver as soon as the last chunk was read.
//! The receiver's acks drive the scheduler until every file is committed; then the
//! session says `TransferDone` and is finished.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Instant;

use longhaul_proto::transfer::{
    pack_file_entries, EntryKind, FileEntry, RejectReason, SkipReason, TransferMessage,
};

use super::{show, ProgressSnapshot, SessionError};
use crate::file_hashes::FileHashes;
use crate::integrity::{ChunkHash, ChunkHasher};
use crate::manifest::chunk_count;
use crate::scheduler::{Chunk, ChunkId, ChunkScheduler, Retry, SchedulerConfig, WorkUnit};

/// How the sending end runs.
#[derive(Debug, Clone, Copy)]
pub struct SendConfig {
    /// Chunk size both ends agreed on.
    pub chunk_size: u64,
    /// Only compare digests: no chunk is sent.
    pub checksum_only: bool,
    /// Data streams the driver runs.
    pub streams: u16,
}

/// Work the driver does for the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendEvent {
    /// Hash these chunks of the source file of entry `entry` as they are on disk (chunks
    /// the receiver already has, or every chunk in `--checksum-only`) and answer each with
    /// [`SendSession::hashed`].
    HashFromFile {
        /// The entry (index in the file list).
        entry: u32,
        /// The chunk indices.
        chunks: Vec<u32>,
    },
}

/// What a free data stream does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// Send these chunks (a chunk, or several small files).
    Send(WorkUnit),
    /// Nothing to send now (the list is not answered yet, or chunks in flight may still
    /// fail): wait for the session to change.
    Wait,
    /// Every chunk is verified: close the stream.
    Finished,
}

/// What the sender did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendOutcome {
    /// Files committed by the receiver (digest matched), or equal in `--checksum-only`.
    pub files_ok: u64,
    /// Files skipped by the receiver (`--no-clobber`).
    pub files_skipped: u64,
    /// Files that failed, with why.
    pub failed: Vec<String>,
    /// Chunk payload bytes put on the wire in this run.
    pub sent_bytes: u64,
    /// Bytes verified in an earlier run and not sent again.
    pub resumed_bytes: u64,
    /// Chunks the receiver refused (and that were sent again).
    pub rejected_chunks: u64,
    /// Entries the receiver removed for `--delete` (its `FileListEnd` says).
    pub deleted: u64,
}

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
    entry: u32,
    hashes: FileHashes,
}

/// The sending end's state machine; see the module docs.
pub struct SendSession {
    entries: Vec<FileEntry>,
    cfg: SendConfig,
    phase: Phase,
    outbox: VecDeque<TransferMessage>,
    events: VecDeque<SendEvent>,
    skipped: BTreeMap<u32, SkipReason>,
    have: HashMap<u32, Vec<(u32, u32)>>,
    sched: Option<ChunkScheduler>,
    /// Scheduler file id -> the entry and its hashes.
    files: Vec<SendFile>,
    by_entry: HashMap<u32, u32>,
    live_streams: u16,
    committed: u64,
    outcome: SendOutcome,
    progress: ProgressSnapshot,
}

impl SendSession {
    /// A session for these entries (directories before their contents); the file list
    /// is queued for [`SendSession::poll_transmit`] at once.
    pub fn new(entries: Vec<FileEntry>, cfg: SendConfig) -> Result<Self, SessionError> {
        let total: u64 = entries.iter().map(|e| e.size).sum();
        let mut outbox: VecDeque<TransferMessage> = pack_file_entries(&entries, 0)
            .map_err(|e| SessionError::GaveUp(format!("packing the file list: {e}")))?
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
            sched: None,
            files: Vec::new(),
            by_entry: HashMap::new(),
            live_streams: cfg.streams,
            committed: 0,
            outcome: SendOutcome::default(),
            progress: ProgressSnapshot {
                total_bytes: total,
                ..ProgressSnapshot::default()
            },
        })
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

    /// The chunk size.
    pub fn chunk_size(&self) -> u64 {
        self.cfg.chunk_size
    }

    /// Takes the smaller chunk size the receiver chose (a server lowers a push's chunks to
    /// fit its memory budget); only before any answer to the list, since answers name
    /// chunks by index. Refused when larger, not a valid chunk size, or too late.
    pub fn adopt_chunk_size(&mut self, chunk_size: u64) -> Result<(), SessionError> {
        let fresh = self.phase == Phase::Listing && self.skipped.is_empty() && self.have.is_empty();
        if !fresh
            || chunk_size > self.cfg.chunk_size
            || !longhaul_proto::transfer::valid_chunk_size(chunk_size)
        {
            return Err(SessionError::Protocol(format!(
                "the receiver chose chunks of {chunk_size} bytes instead of {}",
                self.cfg.chunk_size
            )));
        }
        self.cfg.chunk_size = chunk_size;
        Ok(())
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
                    o.resumed_bytes += self.entries[file as usize].size;
                }
                SkipReason::Exists => o.files_skipped += 1,
                SkipReason::Missing | SkipReason::PathRefused => o.failed.push(format!(
                    "{}: {}",
                    show(&self.entries[file as usize].path),
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

    /// One message from the receiver.
    pub fn handle(&mut self, msg: TransferMessage) -> Result<(), SessionError> {
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

    fn handle_answer(&mut self, msg: TransferMessage) -> Result<(), SessionError> {
        match msg {
            TransferMessage::SkipFile { file, reason } => {
                self.check_file(file)?;
                self.skipped.insert(file, reason);
                Ok(())
            }
            TransferMessage::HaveChunks { file, ranges } => {
                let chunks = self.check_file(file)?;
                let have = self.have.entry(file).or_default();
                // Runs come in order, disjoint, within the file (as a manifest's
                // `verified_runs` gives them): a file then holds at most `chunks` runs and
                // marking them costs one step per chunk, however the runs are framed.
                let mut next_free = have.last().map_or(0, |&(first, count)| first + count);
                for &(first, count) in &ranges {
                    let end = first.checked_add(count).filter(|&end| end <= chunks);
                    match end {
                        Some(end) if first >= next_free => next_free = end,
                        _ => {
                            return Err(SessionError::Protocol(format!(
                                "the receiver claims chunks {first}+{count} of file {file} \
                                 (with {chunks} chunks) out of order, overlapping or past its end"
                            )))
                        }
                    }
                }
                have.extend(ranges);
                Ok(())
            }
            TransferMessage::FileListEnd { deleted, .. } => {
                self.outcome.deleted = u64::from(deleted);
                self.start_sending()
            }
            other => Err(unexpected(&other, "waiting for answers to the file list")),
        }
    }

    /// The entry is a file of this transfer; returns its chunk count.
    fn check_file(&self, file: u32) -> Result<u32, SessionError> {
        match self.entries.get(file as usize) {
            Some(e) if e.kind == EntryKind::File => {
                Ok(chunk_count(e.size, self.cfg.chunk_size) as u32)
            }
            _ => Err(SessionError::Protocol(format!(
                "the receiver named file {file}, which is not a file of this transfer"
            ))),
        }
    }

    fn start_sending(&mut self) -> Result<(), SessionError> {
        let to_send: Vec<u32> = (0..self.entries.len() as u32)
            .filter(|i| {
                self.entries[*i as usize].kind == EntryKind::File && !self.skipped.contains_key(i)
            })
            .collect();
        let sizes: Vec<u64> = to_send
            .iter()
            .map(|&i| self.entries[i as usize].size)
            .collect();
        let config = SchedulerConfig::for_chunk_size(self.cfg.chunk_size);
        let mut sched = ChunkScheduler::new(&sizes, config)
            .map_err(|e| SessionError::GaveUp(format!("planning the chunks: {e}")))?;
        let mut resumed = 0;
        for (s, &e) in to_send.iter().enumerate() {
            let size = self.entries[e as usize].size;
            let mut hashes = FileHashes::new(size, self.cfg.chunk_size);
            let chunks = hashes.chunks();
            if self.cfg.checksum_only {
                hashes.mark_ready(0..chunks);
            }
            for (first, count) in self.have.remove(&e).unwrap_or_default() {
                let end = first
                    .checked_add(count)
                    .filter(|&end| end <= chunks)
                    .ok_or_else(|| {
                        SessionError::Protocol(format!(
                            "the receiver claims chunks {first}+{count} of a file with {chunks}"
                        ))
                    })?;
                for index in first..end {
                    let id = ChunkId {
                        file: s as u32,
                        index,
                    };
                    let chunk = sched
                        .chunk(id)
                        .map_err(|e| SessionError::Protocol(e.to_string()))?;
                    if !self.cfg.checksum_only {
                        sched
                            .mark_already_verified(id)
                            .map_err(|e| SessionError::Protocol(e.to_string()))?;
                    }
                    resumed += chunk.len;
                }
                hashes.mark_ready(first..end);
            }
            let ready = hashes.take_ready();
            if !ready.is_empty() {
                self.events.push_back(SendEvent::HashFromFile {
                    entry: e,
                    chunks: ready,
                });
            }
            self.by_entry.insert(e, s as u32);
            self.files.push(SendFile { entry: e, hashes });
        }
        self.outcome.resumed_bytes = resumed;
        let complete: u64 = self
            .skipped
            .iter()
            .filter(|(_, r)| **r == SkipReason::AlreadyComplete)
            .map(|(&f, _)| self.entries[f as usize].size)
            .sum();
        self.progress.done_bytes = resumed + complete;
        self.progress.files_total = to_send.len() as u64;
        self.progress.listed = true;
        self.sched = Some(sched);
        self.phase = Phase::Sending;
        self.maybe_done();
        Ok(())
    }

    fn handle_ack(&mut self, msg: TransferMessage) -> Result<(), SessionError> {
        match msg {
            TransferMessage::ChunkVerified { file, index } => {
                let id = self.chunk_id(file, index)?;
                let sched = self.sched_mut()?;
                if let Some(stream) = sched.holder(id) {
                    sched
                        .chunk_verified(stream, id)
                        .map_err(|e| SessionError::Protocol(e.to_string()))?;
                    // Progress counts what the receiver verified, not what sits in
                    // socket buffers (a long path's window holds hundreds of MB).
                    let len = sched.chunk(id).map(|c| c.len).unwrap_or(0);
                    self.progress.done_bytes += len;
                }
                Ok(())
            }
            TransferMessage::ChunkRejected {
                file,
                index,
                reason,
            } => {
                self.outcome.rejected_chunks += 1;
                let id = self.chunk_id(file, index)?;
                let path = show(&self.entries[file as usize].path);
                let sched = self.sched_mut()?;
                if let Some(stream) = sched.holder(id) {
                    let retry = sched
                        .chunk_failed(stream, id)
                        .map_err(|e| SessionError::Protocol(e.to_string()))?;
                    if let Retry::GaveUp { attempts } = retry {
                        return Err(SessionError::GaveUp(format!(
                            "chunk {index} of {path} was refused {attempts} times ({}); giving up",
                            reject_text(reason)
                        )));
                    }
                }
                Ok(())
            }
            TransferMessage::FileCommitted { file, ok, reason } => {
                self.chunk_id(file, 0)?;
                self.committed += 1;
                self.progress.files_done += 1;
                if ok {
                    self.outcome.files_ok += 1;
                } else {
                    let why = match (reason.is_empty(), self.cfg.checksum_only) {
                        (false, _) => reason,
                        (true, true) => "differs from the source (or is missing)".into(),
                        (true, false) => "the receiver could not put it in place".into(),
                    };
                    self.outcome.failed.push(format!(
                        "{}: {why}",
                        show(&self.entries[file as usize].path)
                    ));
                }
                self.maybe_done();
                Ok(())
            }
            other => Err(unexpected(&other, "transferring")),
        }
    }

    fn maybe_done(&mut self) {
        if self.phase == Phase::Sending && self.committed == self.files.len() as u64 {
            self.outbox.push_back(TransferMessage::TransferDone {
                files: self.outcome.files_ok as u32,
                bytes: self.outcome.sent_bytes,
            });
            self.phase = Phase::Done;
        }
    }

    fn sched_mut(&mut self) -> Result<&mut ChunkScheduler, SessionError> {
        self.sched
            .as_mut()
            .ok_or_else(|| SessionError::Protocol("an ack before the list was answered".into()))
    }

    /// The scheduler's id of chunk `index` of entry `file`.
    fn chunk_id(&self, file: u32, index: u32) -> Result<ChunkId, SessionError> {
        let s = self.by_entry.get(&file).copied().ok_or_else(|| {
            SessionError::Protocol(format!(
                "the receiver acked file {file}, which was not sent"
            ))
        })?;
        Ok(ChunkId { file: s, index })
    }

    /// What data stream `stream` does next.
    pub fn next_work(&mut self, stream: u32, now: Instant) -> Work {
        if self.cfg.checksum_only || matches!(self.phase, Phase::Done | Phase::Failed) {
            return Work::Finished;
        }
        let Some(sched) = self.sched.as_mut() else {
            return Work::Wait;
        };
        if let Some(w) = sched.next_work(stream, now) {
            return Work::Send(w);
        }
        if sched.is_finished() {
            Work::Finished
        } else {
            Work::Wait
        }
    }

    /// The entry a chunk of the scheduler belongs to (for its header).
    pub fn entry_of(&self, chunk: &Chunk) -> u32 {
        self.files[chunk.id.file as usize].entry
    }

    /// The size of the file a chunk belongs to.
    pub fn file_size(&self, chunk: &Chunk) -> u64 {
        self.files[chunk.id.file as usize].hashes.size()
    }

    /// A hasher for a chunk handed out by [`SendSession::next_work`].
    pub fn hasher(&self, chunk: &Chunk) -> ChunkHasher {
        self.files[chunk.id.file as usize]
            .hashes
            .hasher(chunk.id.index)
    }

    /// A chunk went out on a stream with this hash; `payload` bytes crossed (0 for a hole).
    pub fn chunk_sent(&mut self, chunk: &Chunk, hash: ChunkHash, payload: u64) {
        self.outcome.sent_bytes += payload;
        self.offer(chunk.id.file, chunk.id.index, hash);
    }

    /// The answer to [`SendEvent::HashFromFile`] for one chunk.
    pub fn hashed(&mut self, entry: u32, index: u32, hash: ChunkHash) {
        if let Some(&s) = self.by_entry.get(&entry) {
            self.offer(s, index, hash);
        }
    }

    fn offer(&mut self, s: u32, index: u32, hash: ChunkHash) {
        let f = &mut self.files[s as usize];
        if let Some(blake3) = f.hashes.offer(index, hash) {
            self.outbox.push_back(TransferMessage::FileDigest {
                file: f.entry,
                blake3,
            });
        }
    }

    /// A data stream failed: its chunks go to the others. An error when it was the last.
    pub fn stream_failed(&mut self, stream: u32, why: &str) -> Result<(), SessionError> {
        if let Some(s) = self.sched.as_mut() {
            s.stream_failed(stream);
        }
        self.live_streams = self.live_streams.saturating_sub(1);
        if self.live_streams == 0 && !matches!(self.phase, Phase::Done) {
            self.phase = Phase::Failed;
            return Err(SessionError::GaveUp(format!(
                "every data stream failed; the last: {why}"
            )));
        }
        Ok(())
    }
}

fn unexpected(m: &TransferMessage, while_: &str) -> SessionError {
    SessionError::Protocol(format!("unexpected {} while {while_}", m.kind()))
}

fn reject_text(r: RejectReason) -> &'static str {
    match r {
        RejectReason::Checksum => "its hash did not match",
        RejectReason::WriteFailed => "the receiver could not write it",
        RejectReason::Unknown => "the receiver did not know it",
    }
}
