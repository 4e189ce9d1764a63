//! The sending end's driver (the client on a push, the server on a pull): threads and
//! sockets around a [`SendSession`], which makes every decision.
//!
//! One thread per data stream asks the session for its next work unit when it is free,
//! reads and hashes each chunk in cache-sized pieces, and sends it as a header with the
//! chunk's BLAKE3 hash followed by the bytes from the page cache (sendfile). The control
//! thread feeds the receiver's messages to the session; a helper thread hashes chunks the
//! receiver already has. Whatever the session queues for the receiver goes out through
//! the shared control writer.
//!
//! Its parts: `stream` (one data stream: each chunk read, hashed and sent, a hole or a
//! chunk the receiver already has sent as a header alone).

use crate::transport::secure::SecureStream;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::net::Shutdown;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use longhaul_proto::transfer::{EntryId, FileEntry};
use longhaul_proto::ChunkKey;
use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, ServedRoot};
use longhaul_transfer::session::{SendEvent, SendInput, SendOutcome, SendSession, SessionError};
use longhaul_transfer::{ChunkGrid, StreamId};

use super::chunk_io::hash_chunks;
use super::{CpError, Progress, Stop};
use crate::cp::hash_cache::HashCache;
use crate::datarun::pacer::Pacer;
use crate::transport::control::{ControlLink, ControlTx, Incoming};
use longhaul_policy::RateProbe;
use longhaul_transfer::ChunkHash;
use std::sync::OnceLock;

mod source_check;
mod stream;

use stream::stream_loop;

/// Where source files are opened.
#[derive(Clone)]
pub enum SourceRoot {
    /// Paths are the user's own local paths.
    Local,
    /// Paths are relative to a served root (a pull from `longhaul serve --root`).
    Served(Arc<ServedRoot>),
}

impl SourceRoot {
    /// Opens a source file to send: never blocking, and only a regular file (it may
    /// have been replaced by a FIFO or anything else since the list was made).
    fn open(&self, origin: &std::path::Path) -> io::Result<File> {
        match self {
            SourceRoot::Local => file_io::open_regular(origin),
            SourceRoot::Served(root) => root.open_file(origin, Access::Read),
        }
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

/// The sending end of one transfer, ready to run.
pub struct Sender {
    /// The session (its file list may already have been sent, see [`Sender::session`]).
    pub session: SendSession,
    /// Where each entry's bytes come from, by entry index.
    pub origins: Vec<PathBuf>,
    /// How to open them.
    pub root: SourceRoot,
    /// Hold pacing to the bottleneck once found (as bench does).
    pub probe: Option<RateProbe>,
    /// Sync: where source files' chunk hashes are kept across runs, and whether they may
    /// be trusted (not with `--checksum`).
    pub hash_cache: Option<(HashCache, bool)>,
    /// Tell the receiver what the streams delivered this often (a pull's server, when the
    /// client takes interval reports).
    pub report_every: Option<Duration>,
    /// Jump-start: the validator of a jump whose routes are set; every stream starts
    /// paced at its share of the jump's rate (with `probe`).
    pub jump: Option<longhaul_policy::JumpValidator>,
    /// Tell the receiver the jump's verdict once the validator decides (a pull's server,
    /// when the client takes it).
    pub tell_jump_verdict: bool,
    /// With the interval reports, tell the receiver the rate the pacer holds (a pull's
    /// server, when the client takes it).
    pub report_held: bool,
    /// The receiver takes a chunk's hash after its bytes
    /// ([`longhaul_proto::features::HASH_AFTER`]): on an encrypted stream each record is
    /// hashed as it is sealed, and the file read once.
    pub hash_after: bool,
    /// The receiver keeps the connection alive while it answers the list
    /// ([`longhaul_proto::features::ANSWER_KEEPALIVE`]): a silence as long as
    /// [`longhaul_proto::Wait::ListAnswer`]'s limit before its answer's end ends the run.
    pub answer_keepalive: bool,
}

/// What the rate controller of a sender ended with.
#[derive(Debug, Clone, Copy, Default)]
pub struct Paced {
    /// The rate held at the end (all streams, bit/s).
    pub held_bps: Option<u64>,
    /// The rate held for most of the run after the start-up (bit/s; see
    /// [`longhaul_policy::RateProbe::steady_bps`]): the path's record.
    pub steady_bps: Option<u64>,
    /// The smallest RTT any stream saw.
    pub min_rtt: Option<Duration>,
    /// The jump's verdict, when the run jumped.
    pub jump: Option<longhaul_policy::JumpAction>,
}

impl Sender {
    /// Checks each source once all of it was read, and tells the receiver when it changed
    /// meanwhile (see [`SendSession::check_sources`]): only towards a receiver that
    /// announced `features::SOURCE_CHANGED`.
    pub fn check_sources(&mut self) {
        self.session.check_sources();
    }

    /// The sending end for `items` in chunks of `chunk_size`.
    pub fn new(
        items: Vec<SendItem>,
        root: SourceRoot,
        chunk_size: u64,
        checksum_only: bool,
        streams: u16,
        probe: Option<RateProbe>,
    ) -> Result<Self, CpError> {
        let (entries, origins) = items.into_iter().map(|i| (i.entry, i.origin)).unzip();
        let session = SendSession::new(
            entries,
            longhaul_transfer::session::SendConfig {
                chunk_size,
                checksum_only,
                streams,
            },
        )?;
        Ok(Self {
            session,
            origins,
            root,
            probe,
            hash_cache: None,
            report_every: None,
            tell_jump_verdict: false,
            report_held: false,
            hash_after: false,
            answer_keepalive: false,
            jump: None,
        })
    }
}

struct Shared {
    session: Mutex<SendSession>,
    wake: Condvar,
    stop: Stop,
    origins: Vec<PathBuf>,
    root: SourceRoot,
    progress: Arc<Progress>,
    control: ControlTx,
    hash_jobs: Mutex<Option<mpsc::Sender<SendEvent>>>,
    /// Data segments of sparse files, looked up once per file.
    sparse: Mutex<HashMap<EntryId, Vec<std::ops::Range<u64>>>>,
    done: AtomicBool,
    /// Authenticates every chunk header (and through its hash, the chunk).
    chunk_key: ChunkKey,
    /// See [`Sender::hash_after`].
    hash_after: bool,
    /// Sync: see [`Sender::hash_cache`].
    hash_cache: Option<(HashCache, bool)>,
    /// Sync: each compared file's chunk hashes, computed once (by entry).
    source_hashes: Mutex<HashMap<EntryId, Arc<SourceHashes>>>,
}

/// A compared file's chunk hashes, computed by the first stream that needs them.
type SourceHashes = OnceLock<Option<Arc<Vec<ChunkHash>>>>;

impl Shared {
    fn fail(&self, why: String) {
        self.stop.fail(why);
        if let Ok(mut s) = self.session.lock() {
            s.fail();
        }
        self.wake.notify_all();
    }

    fn lock(&self) -> Result<MutexGuard<'_, SendSession>, CpError> {
        self.session.lock().map_err(|_| CpError::Poisoned {
            what: "the sender's session",
        })
    }

    /// Sends what the session queued, forwards its work, and updates the progress.
    fn pump(&self, s: &mut SendSession) -> Result<(), CpError> {
        self.control
            .send_drained(|| s.poll_transmit())
            .map_err(|e| CpError::io("control connection", e))?;
        while let Some(ev) = s.poll_event() {
            if let Ok(Some(tx)) = self.hash_jobs.lock().as_deref() {
                let _ = tx.send(ev);
            }
        }
        self.progress.update(s.progress());
        Ok(())
    }
}

/// Runs the sending end to completion over an established control link and the data
/// streams `streams` gives. Whatever of the file list the session still holds is sent
/// first, before the streams are asked for: a pull's server lists while its data
/// connections attach, so the receiver's answer and the attachments arrive together.
pub fn run_sender(
    sender: Sender,
    control: ControlLink,
    streams: impl FnOnce() -> Result<Vec<SecureStream>, CpError>,
    chunk_key: ChunkKey,
    progress: Arc<Progress>,
) -> Result<(SendOutcome, Paced), CpError> {
    let Sender {
        session,
        origins,
        root,
        probe,
        hash_cache,
        report_every,
        jump,
        tell_jump_verdict,
        report_held,
        hash_after,
        answer_keepalive,
    } = sender;
    let checksum_only = session.checksum_only();
    let (hash_tx, hash_rx) = mpsc::channel();
    let shared = Arc::new(Shared {
        session: Mutex::new(session),
        wake: Condvar::new(),
        stop: Stop::default(),
        origins,
        root,
        progress,
        control: control.tx.clone(),
        hash_jobs: Mutex::new(Some(hash_tx)),
        sparse: Mutex::new(HashMap::new()),
        done: AtomicBool::new(false),
        chunk_key,
        hash_after,
        hash_cache,
        source_hashes: Mutex::new(HashMap::new()),
    });
    {
        let mut s = shared.lock()?;
        shared.pump(&mut s)?;
    }
    let streams = match streams() {
        Ok(s) => s,
        Err(e) => {
            control.tx.send_error(&e.to_string());
            return Err(e);
        }
    };
    // Chunks the receiver already has (resumed, or all of them in --checksum-only) are
    // hashed from the file by a helper thread, off the streams.
    let hasher = {
        let sh = shared.clone();
        std::thread::spawn(move || hash_loop(&sh, &hash_rx))
    };
    // Clones to unblock the stream threads if the transfer stops early.
    let handles: Vec<SecureStream> = streams.iter().filter_map(|s| s.try_clone().ok()).collect();
    let count = streams.len();
    let jump = jump.filter(|_| probe.is_some() && !checksum_only);
    let jump_pace = jump
        .as_ref()
        .map(|v| (v.plan().start_bps / count.max(1) as u64 / 8).max(1));
    // A pull's server tells the client what the streams delivered, until dropped.
    let reporter = report_every.map(|every| {
        super::peer_intervals::Reporter::start(
            &streams,
            &shared.progress,
            control.tx.clone(),
            every,
            report_held,
        )
    });
    let workers: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let sh = shared.clone();
            // Each stream takes its next chunk only when the one before has nearly left,
            // so at the end no stream holds seconds of chunks while the others idle.
            let _ = crate::transport::sockopts::limit_unsent(&s, count);
            // A jump paces every stream at its share of the jump's rate from the first
            // byte (the pacer's validator takes it from there).
            // Else the kernel paces each round of the start-up (no first-flight burst).
            let _ = match jump_pace {
                Some(bytes_per_s) => longhaul_sys::socket::set_max_pacing_rate(&s, bytes_per_s),
                None => crate::transport::sockopts::pace_by_kernel(&s),
            };
            std::thread::spawn(move || stream_loop(&sh, StreamId(i as u32), s))
        })
        .collect();

    // Without a given rate, find the bottleneck and hold pacing to it (as bench does).
    // Dropping `pacer_stop` wakes the pacer at once (its round is an RTT long).
    let (pacer_stop, pacer_wait) = mpsc::channel::<()>();
    let pacer = probe.filter(|_| !checksum_only).map(|probe| {
        let socks: Vec<Arc<SecureStream>> = handles
            .iter()
            .filter_map(|h| h.try_clone().ok().map(Arc::new))
            .collect();
        let sh = shared.clone();
        let tell = tell_jump_verdict.then(|| control.tx.clone());
        std::thread::spawn(move || {
            let mut pacer = Pacer::new(socks, probe, Instant::now());
            let mut tell = jump.as_ref().and(tell);
            if let Some(v) = jump {
                pacer = pacer.with_jump_start(v);
            }
            let every = pacer.every();
            while !sh.stop.raised() && !sh.done.load(Ordering::SeqCst) {
                if pacer_wait.recv_timeout(every) != Err(RecvTimeoutError::Timeout) {
                    break;
                }
                pacer.step();
                sh.progress.set_held_bps(pacer.held_bps());
                // The receiving client's report says the verdict (told once).
                if let Some(v) = pacer.jump_verdict() {
                    if let Some(tx) = tell.take() {
                        let outcome = crate::jump::outcome_of(v);
                        let _ = tx.send_bench(&longhaul_proto::Message::JumpVerdict { outcome });
                    }
                }
            }
            Paced {
                held_bps: pacer.held_bps(),
                steady_bps: pacer.probe().steady_bps(),
                min_rtt: pacer.probe().base_rtt(),
                jump: pacer.jump_verdict(),
            }
        })
    });
    let result = control_loop(&shared, &control, answer_keepalive);
    drop(reporter);
    shared.done.store(true, Ordering::SeqCst);
    drop(pacer_stop);
    let paced = pacer.and_then(|p| p.join().ok()).unwrap_or_default();
    if result.is_err() {
        shared.fail("stopped".into());
        for h in &handles {
            let _ = h.shutdown(Shutdown::Both);
        }
    }
    shared.stop.raise();
    shared.wake.notify_all();
    if let Ok(mut jobs) = shared.hash_jobs.lock() {
        jobs.take();
    }
    for w in workers {
        let _ = w.join();
    }
    let _ = hasher.join();
    result?;
    let outcome = shared.lock()?.outcome();
    Ok((outcome, paced))
}

/// Feeds the receiver's messages to the session until every file is committed; with
/// `answer_keepalive` (see [`Sender::answer_keepalive`]) a receiver silent past the
/// session's wait for its answer ends the run.
fn control_loop(
    sh: &Arc<Shared>,
    control: &ControlLink,
    answer_keepalive: bool,
) -> Result<(), CpError> {
    loop {
        if sh.stop.raised() {
            // Streams failing is often the receiver stopping (disk full...): its reason
            // is on the way over the control connection and says more than ours.
            let deadline = Instant::now() + Duration::from_secs(1);
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                match control.recv_timeout(left) {
                    Some(Incoming::PeerError(e)) => return Err(CpError::Peer(e)),
                    Some(Incoming::Lost(_)) | None => break,
                    Some(Incoming::Msg(_) | Incoming::Bench(_)) => {}
                }
            }
            let reason = sh.stop.reason().unwrap_or_else(|| "stopped".into());
            control.tx.send_error(&reason);
            return Err(CpError::Stopped { reason });
        }
        {
            let mut s = sh.lock()?;
            if s.is_done() {
                sh.pump(&mut s)?;
                // Every file is committed: the receiver's own TransferDone (and its
                // close) would only cost another round trip.
                control.mark_finished();
                return Ok(());
            }
            if let Some(wait) = s.waiting().filter(|_| answer_keepalive) {
                if control.silent_for() >= wait.limit() {
                    let why = format!(
                        "the receiver sent nothing for {} s while this end was {}",
                        wait.limit().as_secs(),
                        wait.what()
                    );
                    drop(s);
                    sh.fail(why.clone());
                    control.tx.send_error(&why);
                    return Err(CpError::Lost(why));
                }
            }
        }
        let Some(item) = control.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let msg = match item {
            Incoming::Msg(m) => m,
            Incoming::Bench(m) => {
                let why = format!("the peer sent {} during a file transfer", m.kind());
                sh.fail(why.clone());
                return Err(CpError::Protocol(why));
            }
            Incoming::PeerError(e) => {
                sh.fail(format!("the receiver failed: {e}"));
                return Err(CpError::Peer(e));
            }
            Incoming::Lost(e) => {
                sh.fail(e.clone());
                return Err(CpError::Lost(e));
            }
        };
        let handled = {
            let mut s = sh.lock()?;
            let r = s.handle(msg);
            sh.pump(&mut s).and(r.map_err(CpError::from))
        };
        sh.wake.notify_all();
        if let Err(e) = handled {
            sh.fail(e.to_string());
            control.tx.send_error(&e.to_string());
            return Err(e);
        }
    }
}

/// Hashes chunks already at the receiver from the source file, for the file digests, and
/// checks each source once all of it was read ([`SendEvent::CheckSource`]).
fn hash_loop(sh: &Shared, jobs: &mpsc::Receiver<SendEvent>) {
    while let Ok(ev) = jobs.recv() {
        if sh.stop.raised() {
            return;
        }
        let (entry, chunks) = match ev {
            SendEvent::HashFromFile { entry, chunks } => (entry, chunks),
            SendEvent::CheckSource { entry } => {
                check_source(sh, entry);
                continue;
            }
        };
        let origin = &sh.origins[entry.slot()];
        let hashed = (|| -> io::Result<Vec<(u32, longhaul_transfer::ChunkHash)>> {
            let file = sh.root.open(origin)?;
            let (size, cs) = match sh.session.lock() {
                Ok(s) => (s.entries()[entry.slot()].size, s.chunk_size()),
                Err(_) => return Err(io::Error::other("poisoned")),
            };
            hash_chunks(&file, &ChunkGrid::new(size, cs), &chunks, 1)
        })();
        sh.progress.stages().take_thread();
        match hashed {
            Ok(list) => {
                let Ok(mut s) = sh.session.lock() else { return };
                let r = list.into_iter().try_for_each(|(index, hash)| {
                    s.handle(SendInput::Hashed {
                        file: entry,
                        index,
                        hash,
                    })
                });
                if let Err(e) = r.map_err(CpError::from).and_then(|()| sh.pump(&mut s)) {
                    drop(s);
                    sh.fail(e.to_string());
                }
            }
            Err(e) => sh.fail(format!("reading {}: {e}", origin.display())),
        }
    }
}

/// Whether entry `entry`'s source is still as listed, for the session.
fn check_source(sh: &Shared, entry: EntryId) {
    let origin = &sh.origins[entry.slot()];
    let now = sh.root.open(origin).and_then(|f| f.metadata());
    let Ok(mut s) = sh.session.lock() else { return };
    let changed = match now {
        Ok(md) => source_check::changed(&s.entries()[entry.slot()], &md),
        Err(e) => Some(format!("it could not be opened again: {e}")),
    };
    let r = s.handle(SendInput::SourceChecked {
        file: entry,
        changed,
    });
    if let Err(e) = r.map_err(CpError::from).and_then(|()| sh.pump(&mut s)) {
        drop(s);
        sh.fail(e.to_string());
    }
}

impl From<SessionError> for CpError {
    fn from(e: SessionError) -> Self {
        CpError::Session(e)
    }
}
