//! The sending end of a transfer (the client on a push, the server on a pull), sans-I/O.
//!
//! The file list goes out first; the receiver answers once for the whole list with what
//! it already has (resume) or does not want (`--no-clobber`, already complete). Then every
//! data stream asks [`SendSession::next_work`] for its next work unit when it is free, so
//! a slow stream never holds the transfer. The driver reads and hashes each chunk, sends
//! it, and reports the chunk's hash ([`SendSession::chunk_sent`]); the hashes of a file
//! merge into its BLAKE3, which goes to the receiver as soon as the last chunk was read.
//! The receiver's acks drive the scheduler until every file is committed; then the
//! session says `TransferDone` and is finished. A symlink entry has no data: it is not
//! scheduled, and the receiver's `FileCommitted` for it (or a `SkipFile`) is all there is.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
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
    /// Sync: bytes of chunks the receiver's old copy already held (sent as a header only).
    pub reused_bytes: u64,
    /// Sync: files the receiver had an old copy of (`OldChunks`).
    pub files_compared: u64,
    /// Files the receiver found complete by the quick check (same size and mtime;
    /// counted in `files_ok` too).
    pub files_unchanged: u64,
    /// Bytes of those files (counted in `resumed_bytes` too).
    pub unchanged_bytes: u64,
    /// `sync -n`: what a real run would send, file by file.
    pub would_send: Vec<WouldSend>,
    /// Entries the receiver removed for `--delete` (its `FileListEnd` says).
    pub deleted: u64,
}

/// `sync -n`: what a real run would send for one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WouldSend {
    /// The entry's path (as listed, from the source's base name).
    pub path: Vec<u8>,
    /// The file's size.
    pub size: u64,
    /// Payload bytes that would cross.
    pub bytes: u64,
    /// The destination has a copy, compared chunk by chunk (else the file is new there).
    pub compared: bool,
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
    skipped: BTreeMap<u32, SkipReason>,
    have: HashMap<u32, Vec<(u32, u32)>>,
    /// Sync: the receiver's old copies' chunk hashes, by entry.
    old: HashMap<u32, Vec<Option<ChunkHash>>>,
    sched: Option<ChunkScheduler>,
    /// Scheduler file id -> the entry and its hashes.
    files: Vec<SendFile>,
    by_entry: HashMap<u32, u32>,
    /// Symlink entries the receiver makes without data, waiting for their commit.
    links: HashSet<u32>,
    /// Symlink entries to be committed in all.
    links_total: u64,
    live_streams: u16,
    /// `sync -n` ([`SendSession::with_dry_run`]): files still being hashed, and the bytes
    /// of each that differ so far (by scheduler file id).
    dry_run: Option<(usize, HashMap<u32, u64>)>,
    committed: u64,
    /// The receiver answered the list ahead ([`SendSession::answered_ahead`]): whether
    /// its `FileListEnd` has come since.
    ahead: Option<bool>,
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
            outcome: SendOutcome::default(),
            progress: ProgressSnapshot {
                total_bytes: total,
                ..ProgressSnapshot::default()
            },
        })
    }

    /// `sync -n`: no chunk is sent. Once the list is answered, every file the receiver
    /// has a copy of is hashed ([`SendEvent::HashFromFile`]) and compared with the copy's
    /// chunk hashes; the receiver is told what each file would send (`WouldSend`), and the
    /// session ends.
    pub fn set_dry_run(&mut self) {
        self.dry_run = Some((0, HashMap::new()));
    }

    /// The receiver answered the list before it was sent: its destination holds nothing
    /// of it, so it takes every file whole (`transfer_flags::ANSWERED_AHEAD`). Chunks
    /// flow at once, a round trip sooner than after its answers; it may still skip a
    /// file or a link while they flow (`SkipFile`: the file's chunks stop), and its
    /// `FileListEnd` comes when it has placed the list. Only before any answer.
    pub fn answered_ahead(&mut self) -> Result<(), SessionError> {
        if !self.unanswered() || self.cfg.checksum_only || self.dry_run.is_some() {
            return Err(SessionError::Protocol(
                "an answer ahead of the list, after answers or in a check".into(),
            ));
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
            return Err(SessionError::Protocol(format!(
                "the receiver chose chunks of {chunk_size} bytes instead of {}",
                self.cfg.chunk_size
            )));
        }
        self.cfg.chunk_size = chunk_size;
        Ok(())
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
                    o.resumed_bytes += self.entries[file as usize].size;
                    o.unchanged_bytes += self.entries[file as usize].size;
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
                self.check_entry(file)?;
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
            TransferMessage::OldChunks {
                file,
                first,
                hashes,
            } => {
                let chunks = self.check_file(file)?;
                let old = self.old.entry(file).or_default();
                // In order, and never more than the file's chunks (bounded by the list).
                let fits = first as usize == old.len()
                    && (first as u64 + hashes.len() as u64) <= u64::from(chunks);
                if !fits {
                    return Err(SessionError::Protocol(format!(
                        "the receiver sent old chunk hashes {first}+{} of file {file} (with \
                         {chunks} chunks) out of order or past its end",
                        hashes.len()
                    )));
                }
                old.extend(hashes.into_iter().map(Some));
                Ok(())
            }
            TransferMessage::FileListEnd { deleted, .. } => {
                self.outcome.deleted = u64::from(deleted);
                self.start_sending()
            }
            other => Err(unexpected(&other, "waiting for answers to the file list")),
        }
    }

    /// The entry is a file, a symlink or a hard link of this transfer (what a `SkipFile`
    /// may name).
    fn check_entry(&self, file: u32) -> Result<(), SessionError> {
        match self.entries.get(file as usize) {
            Some(e) if matches!(e.kind, EntryKind::Symlink | EntryKind::HardLink) => Ok(()),
            _ => self.check_file(file).map(|_| ()),
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
            let old = self.old.remove(&e).unwrap_or_default();
            if !old.is_empty() {
                self.outcome.files_compared += 1;
            }
            self.files.push(SendFile {
                entry: e,
                hashes,
                old,
            });
        }
        self.outcome.resumed_bytes = resumed;
        self.links = (0..self.entries.len() as u32)
            .filter(|i| {
                matches!(
                    self.entries[*i as usize].kind,
                    EntryKind::Symlink | EntryKind::HardLink
                ) && !self.skipped.contains_key(i)
            })
            .collect();
        self.links_total = self.links.len() as u64;
        let complete: u64 = self
            .skipped
            .iter()
            .filter(|(_, r)| **r == SkipReason::AlreadyComplete)
            .map(|(&f, _)| self.entries[f as usize].size)
            .sum();
        self.progress.done_bytes = resumed + complete;
        self.progress.files_total = to_send.len() as u64 + self.links_total;
        self.progress.listed = true;
        self.sched = Some(sched);
        self.phase = Phase::Sending;
        if self.dry_run.is_some() {
            self.plan_dry_run();
        }
        self.maybe_done();
        Ok(())
    }

    /// `sync -n`: new files would send everything; the others are hashed first.
    fn plan_dry_run(&mut self) {
        // Hash events for resumed chunks are not wanted: every file starts afresh here.
        self.events.clear();
        let mut pending = 0;
        for s in 0..self.files.len() {
            let (entry, compared, chunks) = {
                let f = &self.files[s];
                (f.entry, !f.old.is_empty(), f.hashes.chunks())
            };
            if compared {
                pending += 1;
                self.events.push_back(SendEvent::HashFromFile {
                    entry,
                    chunks: (0..chunks).collect(),
                });
            } else {
                let size = self.entries[entry as usize].size;
                self.note_would_send(entry, size, false);
            }
        }
        if let Some((p, _)) = self.dry_run.as_mut() {
            *p = pending;
        }
    }

    fn note_would_send(&mut self, entry: u32, bytes: u64, compared: bool) {
        let e = &self.entries[entry as usize];
        self.outcome.would_send.push(WouldSend {
            path: e.path.clone(),
            size: e.size,
            bytes,
            compared,
        });
        self.outbox
            .push_back(TransferMessage::WouldSend { file: entry, bytes });
    }

    fn handle_ack(&mut self, msg: TransferMessage) -> Result<(), SessionError> {
        match msg {
            TransferMessage::SkipFile { file, reason } if self.ahead.is_some() => {
                self.skip_while_sending(file, reason)
            }
            TransferMessage::FileListEnd { deleted, .. } if self.ahead == Some(false) => {
                self.ahead = Some(true);
                self.outcome.deleted = u64::from(deleted);
                Ok(())
            }
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
                // Sent as equal to the receiver's copy and refused: send its bytes next.
                if let Some(old) = self
                    .files
                    .get_mut(id.file as usize)
                    .and_then(|f| f.old.get_mut(index as usize))
                {
                    *old = None;
                }
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
                if self.skipped.contains_key(&file) {
                    return Err(SessionError::Protocol(format!(
                        "the receiver committed file {file}, which it skipped"
                    )));
                }
                // A symlink is committed once; any other commit names a file sent.
                if !self.links.remove(&file) {
                    self.chunk_id(file, 0)?;
                }
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

    /// A file or link the receiver answered ahead for, and now does not take: its chunks
    /// stop (those in flight are not sent again) and it counts as skipped.
    fn skip_while_sending(&mut self, file: u32, reason: SkipReason) -> Result<(), SessionError> {
        self.check_entry(file)?;
        if self.ahead == Some(true) || self.skipped.contains_key(&file) {
            return Err(SessionError::Protocol(format!(
                "the receiver skipped file {file} after its answers ended, or twice"
            )));
        }
        if !self.links.remove(&file) {
            let s = self.chunk_id(file, 0)?.file;
            self.sched_mut()?
                .drop_file(s)
                .map_err(|e| SessionError::Protocol(e.to_string()))?;
        }
        self.skipped.insert(file, reason);
        self.committed += 1;
        self.progress.files_done += 1;
        self.maybe_done();
        Ok(())
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
        if self.cfg.checksum_only
            || self.dry_run.is_some()
            || matches!(self.phase, Phase::Done | Phase::Failed)
        {
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

    /// Sync: the hash the receiver's old copy has for this chunk, if any (a chunk of the
    /// source with that hash goes as a header only, `CHUNK_FLAG_SAME`).
    pub fn old_hash(&self, chunk: &Chunk) -> Option<ChunkHash> {
        self.files[chunk.id.file as usize]
            .old
            .get(chunk.id.index as usize)
            .copied()
            .flatten()
    }

    /// A chunk went out on a stream with this hash; `payload` bytes crossed (0 for a hole).
    pub fn chunk_sent(&mut self, chunk: &Chunk, hash: ChunkHash, payload: u64) {
        self.outcome.sent_bytes += payload;
        self.offer(chunk.id.file, chunk.id.index, hash);
    }

    /// Sync: a chunk went out as equal to the receiver's old copy (no bytes).
    pub fn chunk_reused(&mut self, chunk: &Chunk, hash: ChunkHash) {
        self.outcome.reused_bytes += chunk.len;
        self.offer(chunk.id.file, chunk.id.index, hash);
    }

    /// The answer to [`SendEvent::HashFromFile`] for one chunk.
    pub fn hashed(&mut self, entry: u32, index: u32, hash: ChunkHash) {
        let Some(&s) = self.by_entry.get(&entry) else {
            return;
        };
        if self.dry_run.is_none() {
            self.offer(s, index, hash);
            return;
        }
        let f = &mut self.files[s as usize];
        let (_, len) = f.hashes.chunk_range(index);
        let differs = f.old.get(index as usize).copied().flatten() != Some(hash);
        let complete = f.hashes.offer(index, hash).is_some();
        let Some((pending, differing)) = self.dry_run.as_mut() else {
            return;
        };
        let bytes = differing.entry(s).or_default();
        if differs {
            *bytes += len;
        }
        if complete {
            let bytes = *bytes;
            *pending = pending.saturating_sub(1);
            self.note_would_send(entry, bytes, true);
            self.maybe_done();
        }
    }

    fn offer(&mut self, s: u32, index: u32, hash: ChunkHash) {
        let f = &mut self.files[s as usize];
        if let Some(blake3) = f
            .hashes
            .offer(index, hash)
            .filter(|_| !self.skipped.contains_key(&f.entry))
        {
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
