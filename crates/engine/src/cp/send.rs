//! The sending end of a transfer (the client on a push, the server on a pull).
//!
//! The file list goes out first, pipelined; the receiver answers with what it already
//! has (resume) or does not want (`--no-clobber`), once for the whole list. Then every
//! data stream pulls its next work unit from the shared [`ChunkScheduler`] when it is
//! free, so a slow stream never holds the transfer. Each chunk is read and hashed in
//! cache-sized pieces, then goes as a header with its BLAKE3 chunk hash followed by the
//! bytes from the page cache (sendfile); the chunk hashes of each file merge into its
//! BLAKE3 ([`FileHashes`]), sent once the file has been read. The control thread applies
//! the receiver's acks to the scheduler until every file is committed.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::transfer::{
    pack_file_entries, ChunkHeader, EntryKind, FileEntry, SkipReason, TransferMessage,
    CHUNK_FLAG_HOLE,
};
use longhaul_sys::aligned::AlignedBuf;
use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, ServedRoot};
use longhaul_transfer::manifest::chunk_count;
use longhaul_transfer::scheduler::{ChunkId, ChunkScheduler, Retry, SchedulerConfig};
use longhaul_transfer::sparse;

use super::control::{ControlLink, ControlTx, Incoming};
use super::digest::{FileHashes, PIECE};
use super::{CpError, Progress, Stop};
use crate::bench::pacer::Pacer;
use longhaul_policy::RateProbe;

/// Most data segments looked up per sparse file (the rest is sent as data).
const MAX_SEGMENTS: usize = 1 << 16;

/// Where source files are opened.
#[derive(Clone)]
pub enum SourceRoot {
    /// Paths are the user's own local paths.
    Local,
    /// Paths are relative to a served root (a pull from `longhaul serve --root`).
    Served(Arc<ServedRoot>),
}

impl SourceRoot {
    fn open(&self, origin: &std::path::Path) -> io::Result<File> {
        let f = match self {
            SourceRoot::Local => File::open(origin)?,
            SourceRoot::Served(root) => root.open_file(origin, Access::Read)?,
        };
        if !f.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file (it changed since the list was made)",
            ));
        }
        Ok(f)
    }
}

/// One entry to send and where its bytes come from.
#[derive(Debug, Clone)]
pub struct SendItem {
    /// The entry as the receiver sees it.
    pub entry: FileEntry,
    /// Path to open (local, or relative to the served root).
    pub origin: PathBuf,
}

/// What the sender did.
#[derive(Debug, Clone, Default)]
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
}

struct FileSend {
    entry: u32,
    digest: FileHashes,
    sparse: Mutex<Option<Vec<std::ops::Range<u64>>>>,
}

struct Shared {
    sched: Mutex<ChunkScheduler>,
    wake: Condvar,
    stop: Stop,
    files: Vec<FileSend>,
    items: Vec<SendItem>,
    root: SourceRoot,
    sent: AtomicU64,
    progress: Arc<Progress>,
    control: ControlTx,
    live_streams: AtomicU64,
    done: AtomicBool,
}

impl Shared {
    fn fail(&self, why: String) {
        self.stop.fail(why);
        self.wake.notify_all();
    }
}

/// The file list as frames: `FileEntries`... then `FileListEnd`.
pub fn file_list_frames(items: &[SendItem]) -> Result<Vec<TransferMessage>, CpError> {
    let total: u64 = items.iter().map(|i| i.entry.size).sum();
    let entries: Vec<FileEntry> = items.iter().map(|i| i.entry.clone()).collect();
    let mut frames =
        pack_file_entries(&entries, 0).map_err(|e| CpError::Protocol(e.to_string()))?;
    frames.push(TransferMessage::FileListEnd {
        files: entries.len() as u32,
        bytes: total,
    });
    Ok(frames)
}

/// Runs the sending end to completion over an established control link and data
/// streams; `list_sent`: the file list already went out (see [`file_list_frames`]).
#[allow(clippy::too_many_arguments)]
pub fn run_sender(
    items: Vec<SendItem>,
    list_sent: bool,
    root: SourceRoot,
    chunk_size: u64,
    checksum_only: bool,
    control: ControlLink,
    streams: Vec<TcpStream>,
    progress: Arc<Progress>,
    probe: Option<RateProbe>,
) -> Result<SendOutcome, CpError> {
    let total: u64 = items.iter().map(|i| i.entry.size).sum();
    let entries: Vec<FileEntry> = items.iter().map(|i| i.entry.clone()).collect();
    if !list_sent {
        control
            .tx
            .send_all(&file_list_frames(&items)?)
            .map_err(|e| CpError::io("sending the file list", e))?;
    }

    // The receiver's answers, once for the whole list.
    let mut skipped: HashMap<u32, SkipReason> = HashMap::new();
    let mut have: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
    loop {
        match control.next("waiting for the receiver to check the file list")? {
            TransferMessage::SkipFile { file, reason } => {
                check_file(&entries, file)?;
                skipped.insert(file, reason);
            }
            TransferMessage::HaveChunks { file, ranges } => {
                check_file(&entries, file)?;
                have.entry(file).or_default().extend(ranges);
            }
            TransferMessage::FileListEnd { .. } => break,
            other => return Err(unexpected(&other, "answers to the file list")),
        }
    }

    // Files to send, in list order; the scheduler numbers them 0..
    let to_send: Vec<u32> = (0..entries.len() as u32)
        .filter(|i| entries[*i as usize].kind == EntryKind::File && !skipped.contains_key(i))
        .collect();
    let sizes: Vec<u64> = to_send.iter().map(|&i| entries[i as usize].size).collect();
    // Endgame duplicates are off: on a fast path they re-send chunks whose ack is merely
    // a moment away; dynamic pulling already bounds the tail to one chunk per stream.
    let mut config = SchedulerConfig::for_chunk_size(chunk_size);
    config.endgame = false;
    let mut sched =
        ChunkScheduler::new(&sizes, config).map_err(|e| CpError::Protocol(e.to_string()))?;
    let mut files = Vec::with_capacity(to_send.len());
    let mut resumed_bytes = 0;
    for (s, &e) in to_send.iter().enumerate() {
        let size = entries[e as usize].size;
        let digest = FileHashes::new(size, chunk_size);
        let chunks = chunk_count(size, chunk_size) as u32;
        if checksum_only {
            digest.mark_ready(0..chunks);
        }
        for &(first, count) in have.get(&e).map(Vec::as_slice).unwrap_or(&[]) {
            let end = first
                .checked_add(count)
                .filter(|&end| end <= chunks)
                .ok_or_else(|| {
                    CpError::Protocol(format!(
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
                    .map_err(|e| CpError::Protocol(e.to_string()))?;
                if !checksum_only {
                    sched
                        .mark_already_verified(id)
                        .map_err(|e| CpError::Protocol(e.to_string()))?;
                }
                resumed_bytes += chunk.len;
            }
            digest.mark_ready(first..end);
        }
        files.push(FileSend {
            entry: e,
            digest,
            sparse: Mutex::new(None),
        });
    }
    progress.add_total(total);
    progress.add_done(resumed_bytes);
    progress.add_done(
        skipped
            .iter()
            .filter(|(_, r)| **r == SkipReason::AlreadyComplete)
            .map(|(&f, _)| entries[f as usize].size)
            .sum(),
    );
    progress.set_files(to_send.len() as u64);
    progress.mark_listed();

    let shared = Arc::new(Shared {
        sched: Mutex::new(sched),
        wake: Condvar::new(),
        stop: Stop::default(),
        files,
        items,
        root,
        sent: AtomicU64::new(0),
        progress,
        control: control.tx.clone(),
        live_streams: AtomicU64::new(streams.len() as u64),
        done: AtomicBool::new(false),
    });

    // Files whose digest can start from chunks already there (resumed, or all of them in
    // --checksum-only) are hashed by a helper thread, off the streams.
    let catch_up = {
        let sh = shared.clone();
        std::thread::spawn(move || {
            for s in 0..sh.files.len() {
                if sh.stop.raised() {
                    return;
                }
                if let Err(e) = advance_digest(&sh, s) {
                    sh.fail(e);
                }
            }
        })
    };
    // Clones to unblock the stream threads if the transfer stops early.
    let handles: Vec<TcpStream> = streams.iter().filter_map(|s| s.try_clone().ok()).collect();
    let workers: Vec<_> = if checksum_only {
        for s in streams {
            let _ = s.shutdown(Shutdown::Both);
        }
        Vec::new()
    } else {
        streams
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let sh = shared.clone();
                std::thread::spawn(move || stream_loop(&sh, i as u32, s))
            })
            .collect()
    };

    // Without a given rate, find the bottleneck and hold pacing to it (as bench does).
    // Dropping `pacer_stop` wakes the pacer at once (its round is an RTT long).
    let (pacer_stop, pacer_wait) = std::sync::mpsc::channel::<()>();
    let pacer = probe.filter(|_| !checksum_only).map(|probe| {
        let socks: Vec<Arc<TcpStream>> = handles
            .iter()
            .filter_map(|h| h.try_clone().ok().map(Arc::new))
            .collect();
        let every = probe.round();
        let sh = shared.clone();
        std::thread::spawn(move || {
            let mut pacer = Pacer::new(socks, probe, Instant::now());
            while !sh.stop.raised() && !sh.done.load(Ordering::SeqCst) {
                if pacer_wait.recv_timeout(every) != Err(RecvTimeoutError::Timeout) {
                    return;
                }
                pacer.step();
            }
        })
    });
    let result = control_loop(&shared, &control, &to_send, &entries, checksum_only);
    shared.done.store(true, Ordering::SeqCst);
    drop(pacer_stop);
    if let Some(p) = pacer {
        let _ = p.join();
    }
    if result.is_err() {
        shared.fail("stopped".into());
        for h in &handles {
            let _ = h.shutdown(Shutdown::Both);
        }
    }
    shared.stop.raise();
    shared.wake.notify_all();
    for w in workers {
        let _ = w.join();
    }
    let _ = catch_up.join();
    let mut outcome = result?;
    for (&file, reason) in &skipped {
        if !matches!(reason, SkipReason::Exists | SkipReason::AlreadyComplete) {
            outcome.failed.push(format!(
                "{}: {}",
                show(&entries[file as usize].path),
                match reason {
                    SkipReason::Missing => "missing at the destination",
                    SkipReason::PathRefused => "the receiver refused the path",
                    _ => "skipped by the receiver",
                }
            ));
        }
    }
    outcome.failed.sort();
    outcome.sent_bytes = shared.sent.load(Ordering::Relaxed);
    outcome.resumed_bytes = resumed_bytes;
    for (&file, reason) in &skipped {
        if *reason == SkipReason::AlreadyComplete {
            outcome.files_ok += 1;
            outcome.resumed_bytes += entries[file as usize].size;
        }
    }
    outcome.files_skipped = skipped
        .values()
        .filter(|r| **r == SkipReason::Exists)
        .count() as u64;
    Ok(outcome)
}

fn check_file(entries: &[FileEntry], file: u32) -> Result<(), CpError> {
    match entries.get(file as usize) {
        Some(e) if e.kind == EntryKind::File => Ok(()),
        _ => Err(CpError::Protocol(format!(
            "the receiver named file {file}, which is not a file of this transfer"
        ))),
    }
}

fn unexpected(m: &TransferMessage, while_: &str) -> CpError {
    CpError::Protocol(format!("unexpected {} while {while_}", m.kind()))
}

/// Applies acks until every file is committed, then ends the transfer.
fn control_loop(
    sh: &Arc<Shared>,
    control: &ControlLink,
    to_send: &[u32],
    entries: &[FileEntry],
    checksum_only: bool,
) -> Result<SendOutcome, CpError> {
    let by_entry: HashMap<u32, u32> = to_send
        .iter()
        .enumerate()
        .map(|(s, &e)| (e, s as u32))
        .collect();
    let mut outcome = SendOutcome::default();
    let mut committed = 0usize;
    loop {
        if sh.stop.raised() {
            // Streams failing is often the receiver stopping (disk full...): its reason
            // is on the way over the control connection and says more than ours.
            let deadline = Instant::now() + Duration::from_secs(1);
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                match control.recv_timeout(left) {
                    Some(Incoming::PeerError(e)) => return Err(CpError::Peer(e)),
                    Some(Incoming::Lost(_)) | None => break,
                    Some(Incoming::Msg(_)) => {}
                }
            }
            let why = sh.stop.reason().unwrap_or_else(|| "stopped".into());
            control.tx.send_error(&why);
            return Err(CpError::Local(why));
        }
        if committed == to_send.len() {
            control
                .tx
                .send(&TransferMessage::TransferDone {
                    files: outcome.files_ok as u32,
                    bytes: sh.sent.load(Ordering::Relaxed),
                })
                .map_err(|e| CpError::io("ending the transfer", e))?;
            // Every file is committed: the receiver's own TransferDone (and its close)
            // would only cost another round trip.
            control.mark_finished();
            return Ok(outcome);
        }
        let Some(item) = control.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let msg = match item {
            Incoming::Msg(m) => m,
            Incoming::PeerError(e) => {
                sh.fail(format!("the receiver failed: {e}"));
                return Err(CpError::Peer(e));
            }
            Incoming::Lost(e) => {
                sh.fail(e.clone());
                return Err(CpError::Lost(e));
            }
        };
        let sched_id = |file: u32| {
            by_entry.get(&file).copied().ok_or_else(|| {
                CpError::Protocol(format!(
                    "the receiver acked file {file}, which was not sent"
                ))
            })
        };
        match msg {
            TransferMessage::ChunkVerified { file, index } => {
                let id = ChunkId {
                    file: sched_id(file)?,
                    index,
                };
                let mut s = sh.sched.lock().map_err(|_| poisoned())?;
                if let Some(stream) = s.holder(id) {
                    s.chunk_verified(stream, id)
                        .map_err(|e| CpError::Protocol(e.to_string()))?;
                    // Progress counts what the receiver verified, not what sits in
                    // socket buffers (a long path's window holds hundreds of MB).
                    if let Ok(c) = s.chunk(id) {
                        sh.progress.add_done(c.len);
                    }
                }
                while s.poll_cancelled().is_some() {}
                drop(s);
                sh.wake.notify_all();
            }
            TransferMessage::ChunkRejected {
                file,
                index,
                reason,
            } => {
                outcome.rejected_chunks += 1;
                let id = ChunkId {
                    file: sched_id(file)?,
                    index,
                };
                let mut s = sh.sched.lock().map_err(|_| poisoned())?;
                if let Some(stream) = s.holder(id) {
                    let retry = s
                        .chunk_failed(stream, id)
                        .map_err(|e| CpError::Protocol(e.to_string()))?;
                    if let Retry::GaveUp { attempts } = retry {
                        let why = format!(
                            "chunk {index} of {} was refused {attempts} times ({reason:?}); giving up",
                            show(&entries[file as usize].path)
                        );
                        drop(s);
                        sh.fail(why.clone());
                        return Err(CpError::Local(why));
                    }
                }
                drop(s);
                sh.wake.notify_all();
            }
            TransferMessage::FileCommitted { file, ok, reason } => {
                sched_id(file)?;
                committed += 1;
                sh.progress.file_done();
                if ok {
                    outcome.files_ok += 1;
                } else {
                    let why = match (reason.is_empty(), checksum_only) {
                        (false, _) => reason,
                        (true, true) => "differs from the source (or is missing)".into(),
                        (true, false) => "the receiver could not put it in place".into(),
                    };
                    outcome
                        .failed
                        .push(format!("{}: {why}", show(&entries[file as usize].path)));
                }
            }
            other => return Err(unexpected(&other, "transferring")),
        }
    }
}

fn poisoned() -> CpError {
    CpError::Local("scheduler state poisoned by a panicked thread".into())
}

/// A path from the wire, for messages.
pub fn show(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

fn advance_digest(sh: &Shared, s: usize) -> Result<(), String> {
    let f = &sh.files[s];
    let item = &sh.items[f.entry as usize];
    let file = std::cell::OnceCell::new();
    let read_at = |off: u64, buf: &mut [u8]| -> io::Result<()> {
        let file = match file.get() {
            Some(f) => f,
            None => {
                let opened = sh.root.open(&item.origin)?;
                file.get_or_init(|| opened)
            }
        };
        file_io::read_exact_at(file, buf, off)
    };
    match f.digest.advance(&read_at) {
        Ok(Some(d)) => send_digest(sh, f.entry, d),
        Ok(None) => Ok(()),
        Err(e) => Err(format!("reading {}: {e}", item.origin.display())),
    }
}

fn send_digest(sh: &Shared, entry: u32, blake3: [u8; 32]) -> Result<(), String> {
    sh.control
        .send(&TransferMessage::FileDigest {
            file: entry,
            blake3,
        })
        .map_err(|e| format!("sending a digest: {e}"))
}

/// One data stream: pull work, send it, until nothing is left or the transfer stops.
fn stream_loop(sh: &Arc<Shared>, stream: u32, mut sock: TcpStream) {
    let mut buf = AlignedBuf::new();
    let mut open: Option<(u32, File)> = None;
    loop {
        let work = {
            let Ok(mut s) = sh.sched.lock() else { return };
            loop {
                if sh.stop.raised() {
                    let _ = sock.shutdown(Shutdown::Both);
                    return;
                }
                if let Some(w) = s.next_work(stream, Instant::now()) {
                    break w;
                }
                if s.is_finished() {
                    // Everything verified: the receiver sees EOF on this stream.
                    let _ = sock.shutdown(Shutdown::Write);
                    return;
                }
                s = match sh.wake.wait_timeout(s, Duration::from_millis(100)) {
                    Ok((g, _)) => g,
                    Err(_) => return,
                };
            }
        };
        for chunk in &work.chunks {
            let fs = &sh.files[chunk.id.file as usize];
            let entry = fs.entry;
            let item = &sh.items[entry as usize];
            if open.as_ref().map(|(e, _)| *e) != Some(entry) {
                match sh.root.open(&item.origin) {
                    Ok(f) => open = Some((entry, f)),
                    Err(e) => {
                        sh.fail(format!("opening {}: {e}", item.origin.display()));
                        return;
                    }
                }
            }
            let Some((_, file)) = open.as_ref() else {
                return;
            };
            match send_chunk(sh, fs, file, chunk, &mut sock, &mut buf) {
                Ok(()) => {}
                Err(SendFail::Read(e)) => {
                    sh.fail(format!("reading {}: {e}", item.origin.display()));
                    return;
                }
                Err(SendFail::Net(e)) => {
                    // The stream is gone: its chunks go to the others.
                    if let Ok(mut s) = sh.sched.lock() {
                        s.stream_failed(stream);
                    }
                    let left = sh.live_streams.fetch_sub(1, Ordering::SeqCst) - 1;
                    if left == 0 {
                        sh.fail(format!("every data stream failed; the last: {e}"));
                    }
                    sh.wake.notify_all();
                    return;
                }
            }
        }
    }
}

enum SendFail {
    Read(io::Error),
    Net(io::Error),
}

fn send_chunk(
    sh: &Shared,
    fs: &FileSend,
    file: &File,
    chunk: &longhaul_transfer::scheduler::Chunk,
    sock: &mut TcpStream,
    buf: &mut AlignedBuf,
) -> Result<(), SendFail> {
    let range = chunk.offset..chunk.offset + chunk.len;
    // Holes are looked up only in files of at least a megabyte.
    let hole = chunk.len > 0
        && fs.digest.size() >= 1 << 20
        && in_hole(fs, file, range).map_err(SendFail::Read)?;
    let mut header = ChunkHeader {
        file: fs.entry,
        index: chunk.id.index,
        flags: 0,
        offset: chunk.offset,
        len: chunk.len as u32,
        hash: [0; 32],
    };
    let mut hasher = fs.digest.hasher(chunk.id.index);
    if hole {
        header.flags = CHUNK_FLAG_HOLE;
        hasher.update_zeros(chunk.len);
        header.hash = hasher.finish();
        sock.write_all(&header.encode()).map_err(SendFail::Net)?;
    } else {
        // Read and hash in pieces that stay in cache; the bytes then go to the socket
        // from the page cache (no copy through this buffer). Had the file changed since
        // the read, the receiver's hash check refuses the chunk.
        let mut at = 0;
        while at < chunk.len {
            let n = (PIECE as u64).min(chunk.len - at) as usize;
            buf.resize(n);
            file_io::read_exact_at(file, buf, chunk.offset + at).map_err(SendFail::Read)?;
            hasher.update(buf);
            at += n as u64;
        }
        header.hash = hasher.finish();
        sock.write_all(&header.encode()).map_err(SendFail::Net)?;
        file_io::send_file_range(sock, file, chunk.offset, chunk.len).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                SendFail::Read(io::Error::other("the file shrank while being sent"))
            } else {
                SendFail::Net(e)
            }
        })?;
        sh.sent.fetch_add(chunk.len, Ordering::Relaxed);
    }
    if let Some(d) = fs
        .digest
        .offer(chunk.id.index, header.hash)
        .map_err(SendFail::Read)?
    {
        send_digest(sh, fs.entry, d).map_err(|e| SendFail::Net(io::Error::other(e)))?;
    }
    Ok(())
}

/// Whether `range` of the file lies wholly in a hole (looked up once per file, only for
/// files with fewer blocks allocated than their size).
fn in_hole(fs: &FileSend, file: &File, range: std::ops::Range<u64>) -> io::Result<bool> {
    let mut seg = fs
        .sparse
        .lock()
        .map_err(|_| io::Error::other("sparse map poisoned"))?;
    if seg.is_none() {
        let size = file.metadata()?.len();
        let segments = if file_io::allocated_bytes(file)? < size {
            file_io::data_segments(file, 0..size, MAX_SEGMENTS)?
        } else {
            std::iter::once(0..size).collect()
        };
        *seg = Some(segments);
    }
    Ok(seg
        .as_ref()
        .is_some_and(|s| sparse::chunk_in_hole(s, range)))
}
