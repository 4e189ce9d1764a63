//! The receiving end's driver (the server on a push, the client on a pull): threads and
//! sockets around a [`RecvSession`], which makes every decision, and a [`Store`], which
//! does the destination's file work.
//!
//! The control thread feeds the sender's messages to the session and does the list's
//! file work (looks, part files, directories) before the data streams start. One thread
//! per data stream (`recv/stream.rs`) reads a chunk header, asks the session about it, reads and hashes the
//! payload in cache-sized pieces, writes it after the session's check, appends the
//! manifest record, and only then lets the session ack it. Whoever completes a file does
//! its commit, which flushes the file before its rename (see [`Store`]). With `--sync`
//! ([`RecvTarget::sync`]) data and records are also flushed every few seconds, and each
//! directory after a rename.

use crate::transport::secure::SecureStream;
use std::io;
use std::net::Shutdown;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::Duration;

use longhaul_proto::transfer::{EntryId, TransferMessage};
use longhaul_proto::{ChunkKey, Message};
use longhaul_sys::served_root::{LinkWhereDir, Resolver, ServedRoot};
use longhaul_transfer::answering::KEEPALIVE;
use longhaul_transfer::session::recv::{CommitJob, SyncRules};
use longhaul_transfer::session::{
    ListCaps, RecvConfig, RecvEvent, RecvInput, RecvOutcome, RecvSession, Room,
};
use longhaul_transfer::{ChunkGrid, SafeRelPath};
use std::path::{Path, PathBuf};

use super::store::{Answer, Store};
use super::{CpError, Progress, Stop};
use crate::transport::control::{ControlLink, ControlTx, Incoming};

mod stream;
use stream::stream_loop;

/// Where received files go.
pub struct RecvTarget {
    /// The directory everything is written beneath.
    pub root: Arc<ServedRoot>,
    /// The destination below the root (`None`: the root itself).
    pub target: Option<SafeRelPath>,
    /// Never replace an existing file.
    pub no_clobber: bool,
    /// Only compare digests.
    pub checksum_only: bool,
    /// `--sync`: flush written chunks and the resume records as they go, and each
    /// directory after a rename (files are flushed before their rename either way).
    pub sync: bool,
    /// On a pull, what the list may hold (the server may name nothing else).
    pub expect: Option<longhaul_transfer::session::ExpectedList>,
    /// Keep set-user-ID, set-group-ID and sticky bits the sender names (see
    /// `longhaul_transfer::mode`); dropped otherwise.
    pub keep_setuid: bool,
    /// Caps on what one list may ask to write (a daemon's `--max-bytes`, `--max-files`).
    pub caps: ListCaps,
    /// `longhaul sync`: changed files compared chunk by chunk (the equal chunks taken from
    /// the old copy), entries placed by rsync's rule.
    pub delta: Option<SyncRules>,
    /// `--delete`: remove what the source lacks from the directories the transfer sends,
    /// keeping what these rules exclude (`None`: no deletion).
    pub delete: Option<Arc<longhaul_transfer::Filter>>,
    /// A pull that answered the list ahead (`cp::ahead`): every file is received whole.
    pub answered_ahead: bool,
    /// A relayed pull of one share of a striped copy (`longhaul_proto::stripe`).
    pub share: Option<longhaul_proto::stripe::Share>,
    /// Whether `target` is a directory as the client found it (`None`: looked at here):
    /// a striped copy's pairs place alike while one of them creates it.
    pub is_dir: Option<bool>,
    /// Sync `--checksum`: the old copies hashed while the far end started.
    pub hashed_ahead: Option<Arc<crate::cp::hash_ahead::HashedAhead>>,
    /// The sender bounds its wait for this end's answer to the list
    /// ([`longhaul_proto::features::ANSWER_KEEPALIVE`]): a keepalive goes whenever the
    /// answer has taken [`KEEPALIVE`] more, until its end.
    pub answer_keepalive: bool,
}

/// Chunks of a file to hash from disk: (file id, chunk indices).
type HashJob = (EntryId, Vec<u32>);

/// How often written chunks and their manifest records are synced with `--sync`.
const SYNC_EVERY: Duration = Duration::from_secs(2);

struct Shared {
    session: Mutex<RecvSession>,
    store: Store,
    control: ControlTx,
    stop: Stop,
    progress: Arc<Progress>,
    hash_jobs: Mutex<Option<mpsc::Sender<HashJob>>>,
    /// Verified files to put in place, for the commit threads.
    commits: Mutex<Option<mpsc::Sender<CommitJob>>>,
    chunk_size: u64,
    /// Checks every chunk header (and through its hash, the chunk).
    chunk_key: ChunkKey,
}

impl Shared {
    /// Stops the transfer; the first reason goes to the sender at once (before any data
    /// stream closes, so the sender reports this rather than a broken pipe).
    fn fail(&self, why: String) {
        if self.stop.record(why.clone()) {
            self.control.send_error(&why);
        }
        if let Ok(mut s) = self.session.lock() {
            s.fail();
        }
        self.stop.raise();
    }

    fn lock(&self) -> Result<MutexGuard<'_, RecvSession>, CpError> {
        self.session.lock().map_err(|_| CpError::Poisoned {
            what: "the receiver's session",
        })
    }

    /// Sends what the session queued and takes its events (done after the lock is
    /// released, by [`Shared::work`]).
    fn pump(&self, s: &mut RecvSession) -> Result<Vec<RecvEvent>, CpError> {
        self.control
            .send_drained(|| s.poll_transmit())
            .map_err(|e| CpError::io("control connection", e))?;
        self.progress.update(s.progress());
        let mut events = Vec::new();
        while let Some(ev) = s.poll_event() {
            events.push(ev);
        }
        Ok(events)
    }

    /// Does the session's file work and gives it the answers, until it asks for no more.
    fn work(&self, mut events: Vec<RecvEvent>) -> Result<(), CpError> {
        while !events.is_empty() {
            let mut answers = Vec::with_capacity(events.len());
            for ev in events.drain(..) {
                let ev = match ev {
                    RecvEvent::Commit(job) => match self.queue_commit(job) {
                        None => continue,
                        Some(job) => RecvEvent::Commit(job),
                    },
                    ev => ev,
                };
                match self.store.perform(ev)? {
                    Answer::Hash(id, chunks) => {
                        if let Ok(Some(tx)) = self.hash_jobs.lock().as_deref() {
                            let _ = tx.send((id, chunks));
                        }
                    }
                    Answer::Give(input) => answers.push(input),
                    Answer::None => {}
                }
            }
            if answers.is_empty() {
                break;
            }
            let mut s = self.lock()?;
            for input in answers {
                s.handle(input)?;
            }
            events = self.pump(&mut s)?;
        }
        Ok(())
    }

    /// Hands a commit to the commit threads; gives it back when they are gone (it is then
    /// done here).
    fn queue_commit(&self, job: CommitJob) -> Option<CommitJob> {
        match self.commits.lock().as_deref() {
            Ok(Some(tx)) => tx.send(job).err().map(|e| e.0),
            _ => Some(job),
        }
    }

    /// Runs `f` on the session, then sends and does what it queued.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut RecvSession) -> Result<T, CpError>,
    ) -> Result<T, CpError> {
        let (out, events) = {
            let mut s = self.lock()?;
            let out = f(&mut s);
            let events = self.pump(&mut s)?;
            (out?, events)
        };
        self.work(events)?;
        Ok(out)
    }
}

/// Runs the receiving end to completion; `streams` gives the data connections once the
/// list is answered (they may still be attaching while it is read).
pub fn run_receiver(
    target: RecvTarget,
    chunk_size: u64,
    control: ControlLink,
    streams: impl FnOnce() -> Result<Vec<SecureStream>, CpError>,
    chunk_key: ChunkKey,
    progress: Arc<Progress>,
) -> Result<RecvOutcome, CpError> {
    let target_is_dir = match target_is_dir(&target) {
        Ok(d) => d,
        Err(e) => return Err(refuse(&control, e)),
    };
    let session = RecvSession::new(RecvConfig {
        chunk_size,
        target: target.target.clone(),
        target_is_dir,
        no_clobber: target.no_clobber,
        checksum_only: target.checksum_only,
        sync: target.sync,
        expect: target.expect.clone(),
        keep_setuid: target.keep_setuid,
        umask: longhaul_sys::process::umask(),
    })
    .with_caps(target.caps);
    let session = match target.delta {
        Some(rules) => session.with_sync(rules),
        None => session,
    };
    let session = match &target.delete {
        Some(filter) => session.with_delete(filter.clone()),
        None => session,
    };
    let session = if target.answered_ahead {
        session.with_answered_ahead()
    } else {
        session
    };
    let session = match target.share {
        Some(share) => session.with_share(share),
        None => session,
    };
    // Where the room cannot be measured, the transfer goes on unchecked (a disk that
    // fills is then reported when it does).
    let session = match room(&target, target_is_dir) {
        Some(room) => session.with_room(room),
        None => session,
    };
    // Everything below the directory received into is reached without following a
    // symlink: a link the destination holds there (planted, or made by an earlier run)
    // must not carry this run's writes, renames or deletions anywhere else.
    let links = if target.no_clobber {
        LinkWhereDir::Refuse
    } else {
        LinkWhereDir::Replace
    };
    let receiving = target
        .root
        .receiving_into(&received_into(&target, target_is_dir), links)
        .map_err(|cause| CpError::Destination {
            what: "opening the destination for receiving",
            path: target.root.path().to_path_buf(),
            cause,
        })
        .map_err(|e| refuse(&control, e))?;
    let (hash_tx, hash_rx) = mpsc::channel();
    let (commit_tx, commit_rx) = mpsc::channel();
    let shared = Arc::new(Shared {
        session: Mutex::new(session),
        // A cache that cannot be opened (no home, read-only) only costs re-reading.
        store: Store::new(Arc::new(receiving), chunk_size)
            .with_hash_cache(
                target
                    .delta
                    .and_then(|_| crate::cp::hash_cache::HashCache::open_default().ok()),
            )
            .with_hashed_ahead(target.hashed_ahead.clone()),
        control: control.tx.clone(),
        stop: Stop::default(),
        progress,
        hash_jobs: Mutex::new(Some(hash_tx)),
        commits: Mutex::new(Some(commit_tx)),
        chunk_size,
        chunk_key,
    });
    // The file list, answered as a whole (and each answer as soon as it is decided).
    loop {
        if shared.lock()?.is_listed() {
            break;
        }
        let msg = next_message(&control, &shared.progress, "receiving the file list")?;
        if let Err(e) = shared.with(|s| Ok(s.handle(msg)?)) {
            return Err(refuse(&control, e));
        }
    }
    // Every old copy the list names is hashed by now: hashing ahead has no more to do.
    if let Some(ahead) = &target.hashed_ahead {
        ahead.stop();
    }
    // The data streams, which may still have been attaching while the list was read.
    let streams = match streams() {
        Ok(s) => s,
        Err(e) => return Err(refuse(&control, e)),
    };
    let hasher = {
        let sh = shared.clone();
        std::thread::spawn(move || hash_loop(&sh, &hash_rx))
    };
    // Clones to unblock the stream threads if the transfer stops early.
    let handles: Vec<SecureStream> = streams.iter().filter_map(|s| s.try_clone().ok()).collect();
    let workers: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let sh = shared.clone();
            std::thread::spawn(move || {
                // A bug must stop the transfer with a message, not kill one stream after
                // another as the sender reassigns the same chunk to each.
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| stream_loop(&sh, i, s))) {
                    sh.fail(format!(
                        "data stream {i} stopped on an internal error ({}); this is a bug \
                         in longhaul: please report it",
                        panic_text(p.as_ref())
                    ));
                }
            })
        })
        .collect();
    let committers = {
        let jobs = Arc::new(Mutex::new(commit_rx));
        (0..COMMIT_THREADS)
            .map(|_| {
                let (sh, jobs) = (shared.clone(), jobs.clone());
                std::thread::spawn(move || commit_loop(&sh, &jobs))
            })
            .collect::<Vec<_>>()
    };
    let sync_stop = Arc::new(AtomicBool::new(false));
    let syncer = target.sync.then(|| {
        let (sh, stop) = (shared.clone(), sync_stop.clone());
        std::thread::spawn(move || sync_loop(&sh, &stop))
    });
    // While the list is answered (old copies hashed, a slow file system looked at, the
    // control loop perhaps busy with it), the sender hears every few seconds that this
    // end is at it.
    let (answer_done, stopped) = mpsc::channel::<()>();
    let mut answering = target.answer_keepalive.then_some(answer_done);
    let ticker = answering.is_some().then(|| {
        let tx = control.tx.clone();
        std::thread::spawn(move || keep_alive_until(&stopped, &tx))
    });
    let result = control_loop(&shared, &control, &mut answering);
    drop(answering);
    if let Some(t) = ticker {
        let _ = t.join();
    }
    // A failure of this end (disk full...) is the cause; the sender closing the
    // connection in answer to it is only the consequence.
    let result = match (result, shared.stop.reason()) {
        (Err(_), Some(reason)) => Err(CpError::Stopped { reason }),
        (r, _) => r,
    };
    sync_stop.store(true, Ordering::SeqCst);
    if let Some(s) = syncer {
        let _ = s.join();
    }
    if let Err(e) = &result {
        shared.fail(e.to_string());
    }
    // Settled (or failed): the stream threads stop now, not when the sender's end of
    // stream arrives a round trip later (every byte this end needed has arrived).
    for h in &handles {
        let _ = h.shutdown(Shutdown::Both);
    }
    shared.stop.raise();
    control.tx.shutdown();
    if let Ok(mut jobs) = shared.hash_jobs.lock() {
        jobs.take();
    }
    for w in workers {
        let _ = w.join();
    }
    // Commits already queued are verified files: they still go in place.
    if let Ok(mut tx) = shared.commits.lock() {
        tx.take();
    }
    for c in committers {
        let _ = c.join();
    }
    let _ = hasher.join();
    result?;
    let mut s = shared.lock()?;
    if !target.checksum_only {
        // Normally done with the last commit; again here in case a file never committed.
        shared.store.fix_dirs(s.take_dirs());
    }
    Ok(s.outcome())
}

/// Whether the destination is an existing directory.
fn target_is_dir(t: &RecvTarget) -> Result<bool, CpError> {
    if let Some(given) = t.is_dir {
        return Ok(given);
    }
    match &t.target {
        None => Ok(true),
        // Looked at without opening it for reading (a FIFO would block).
        Some(p) => match t.root.stat(&p.to_path_buf()) {
            Ok(m) => Ok(m.is_dir()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(cause) => Err(CpError::Destination {
                what: "looking at the destination",
                path: p.to_path_buf(),
                cause,
            }),
        },
    }
}

/// The room on the file system of the directory files will land in (the destination,
/// or the directory a new name is made in), named for the message: a local path, or on a
/// daemon the path below its root (its own location is not the client's business).
/// The directory files land in, below the root: the destination when it is a directory,
/// else the directory its new name is made in (empty: the root itself).
fn received_into(t: &RecvTarget, target_is_dir: bool) -> PathBuf {
    let target = t.target.as_ref().map(|p| p.to_path_buf());
    match (target, target_is_dir) {
        (Some(p), true) => p,
        (Some(p), false) => p.parent().map(Path::to_path_buf).unwrap_or_default(),
        (None, _) => PathBuf::new(),
    }
}

fn room(t: &RecvTarget, target_is_dir: bool) -> Option<Room> {
    let dir = received_into(t, target_is_dir);
    let space = t.root.fs_space(&dir).ok()?;
    let confined = t.root.resolver() != Resolver::Unconfined;
    let on = if t.expect.is_none() && confined {
        if dir.as_os_str().is_empty() {
            "the server's root".to_string()
        } else {
            format!("the server's {}", dir.display())
        }
    } else if dir.as_os_str().is_empty() {
        t.root.path().display().to_string()
    } else {
        t.root.path().join(&dir).display().to_string()
    };
    Some(Room {
        free_bytes: space.free_bytes,
        free_inodes: space.free_inodes,
        on,
    })
}

/// The next transfer message, waiting as long as it takes (the sender's interval reports
/// go to `progress` on the way); the peer's error or a lost connection (with `what` this
/// end was doing) is the error.
fn next_message(
    control: &ControlLink,
    progress: &Progress,
    what: &str,
) -> Result<TransferMessage, CpError> {
    loop {
        return match control.rx.recv() {
            Ok(Incoming::Msg(m)) => Ok(m),
            Ok(Incoming::Bench(m)) => match progress.absorb_peer(m) {
                None => continue,
                Some(m) => Err(CpError::Protocol(format!(
                    "the peer sent {} during a file transfer ({what})",
                    m.kind()
                ))),
            },
            Ok(Incoming::PeerError(e)) => Err(CpError::Peer(e)),
            Ok(Incoming::Lost(e)) => Err(CpError::Lost(format!("{e} ({what})"))),
            Err(_) => Err(CpError::Lost(format!("control connection gone ({what})"))),
        };
    }
}

/// Sends a keepalive (an unsolicited `Pong`) every [`KEEPALIVE`] until `stopped`'s
/// sender is dropped, and ends at once then.
fn keep_alive_until(stopped: &mpsc::Receiver<()>, tx: &ControlTx) {
    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(KEEPALIVE) {
        if tx.send_bench(&Message::Pong { seq: 0 }).is_err() {
            return;
        }
    }
}

/// Tells the peer why the transfer is refused and returns the error.
fn refuse(control: &ControlLink, e: CpError) -> CpError {
    control.tx.send_error(&e.to_string());
    e
}

fn control_loop(
    sh: &Arc<Shared>,
    control: &ControlLink,
    answering: &mut Option<mpsc::Sender<()>>,
) -> Result<(), CpError> {
    loop {
        if sh.stop.raised() {
            let reason = sh.stop.reason().unwrap_or_else(|| "stopped".into());
            control.tx.send_error(&reason);
            return Err(CpError::Stopped { reason });
        }
        // Every file committed and the last answer queued: the sender's TransferDone
        // would only cost another round trip.
        if sh.with(|s| Ok(s.is_settled()))? {
            control.mark_finished();
            return Ok(());
        }
        // The list answered: the keepalives stop (dropping the sender wakes their thread).
        if answering.is_some() && !sh.lock()?.answering() {
            *answering = None;
        }
        let Some(item) = control.recv_timeout(Duration::from_millis(25)) else {
            continue;
        };
        match item {
            Incoming::Msg(msg) => {
                let done_sender = matches!(msg, TransferMessage::TransferDone { .. });
                if let Err(e) = sh.with(|s| Ok(s.handle(msg)?)) {
                    return Err(refuse(control, e));
                }
                if done_sender {
                    // Our TransferDone is best effort: the sender need not wait for it.
                    return Ok(());
                }
            }
            Incoming::Bench(m) => {
                if let Some(m) = sh.progress.absorb_peer(m) {
                    return Err(refuse(
                        control,
                        CpError::Protocol(format!(
                            "the peer sent {} during a file transfer",
                            m.kind()
                        )),
                    ));
                }
            }
            Incoming::PeerError(e) => return Err(CpError::Peer(e)),
            Incoming::Lost(e) => return Err(CpError::Lost(e)),
        }
    }
}

/// Hashes chunks already on disk (resumed, or the existing copy in `--checksum-only`).
fn hash_loop(sh: &Shared, jobs: &mpsc::Receiver<HashJob>) {
    while let Ok((id, chunks)) = jobs.recv() {
        if sh.stop.raised() {
            return;
        }
        let size = sh
            .store
            .data(id)
            .and_then(|d| d.file().ok().and_then(|f| f.metadata().ok()))
            .map(|m| m.len());
        let Some(size) = size else {
            sh.fail(format!("file {id} has no data to hash"));
            return;
        };
        let grid = ChunkGrid::new(size, sh.chunk_size);
        match sh.store.hash_chunks(id, &grid, &chunks) {
            Ok(list) => {
                let r = sh.with(|s| {
                    for (index, hash) in list {
                        s.handle(RecvInput::Hashed {
                            file: id,
                            index,
                            hash,
                        })?;
                    }
                    Ok(())
                });
                if let Err(e) = r {
                    sh.fail(e.to_string());
                    return;
                }
            }
            Err(e) => {
                sh.fail(format!("reading file {id} back: {e}"));
                return;
            }
        }
    }
}

/// Threads that put verified files in place, beside the data streams. A commit waits for
/// its file's data to reach the disk: a commit thread takes every commit queued (up to
/// [`COMMIT_BATCH`]) and flushes them with one `syncfs` where a file at a time would
/// each pay a journal commit of its own (a tree of small files took twice as long that
/// way); two threads, so one batch is gathered while the other flushes.
const COMMIT_THREADS: usize = 2;
/// Most files put in place with one flush.
const COMMIT_BATCH: usize = 512;

/// One commit thread: puts batches of files in place and tells the session, until the
/// queue closes.
fn commit_loop(sh: &Shared, jobs: &Mutex<mpsc::Receiver<CommitJob>>) {
    loop {
        let batch = {
            let Ok(rx) = jobs.lock() else { return };
            let Ok(first) = rx.recv() else { return };
            let mut batch = vec![first];
            while batch.len() < COMMIT_BATCH {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            batch
        };
        let placed = sh.store.commit_batch(&batch);
        if let Err(e) = sh.with(|s| {
            for (job, r) in batch.iter().zip(placed) {
                s.handle(RecvInput::Placed {
                    file: job.id,
                    result: r,
                })?;
            }
            Ok(())
        }) {
            sh.fail(e.to_string());
        }
    }
}

/// The message of a caught panic.
fn panic_text(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}

/// Syncs the part files and manifests that changed, every [`SYNC_EVERY`], until the
/// transfer ends (data first, then the manifest).
fn sync_loop(sh: &Shared, stop: &AtomicBool) {
    let mut last = std::time::Instant::now();
    while !stop.load(Ordering::SeqCst) && !sh.stop.raised() {
        std::thread::sleep(Duration::from_millis(100));
        if last.elapsed() < SYNC_EVERY {
            continue;
        }
        last = std::time::Instant::now();
        if let Err(e) = sh.store.sync_dirty() {
            sh.fail(e.to_string());
            return;
        }
    }
}
