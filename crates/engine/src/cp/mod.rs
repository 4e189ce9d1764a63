//! `longhaul cp`: disk-to-disk transfers of files and trees over the bench protocol's
//! control and data connections (see `docs/cp-design.md`).
//!
//! The sans-I/O pieces (scheduler, manifest, receiver checks, paths) live in
//! `longhaul-transfer`; this module drives them: [`send`] and [`recv`] are the two ends,
//! independent of who is client or server; [`client`] and the daemon ([`crate::daemon::transfer`]) set up a session and
//! hand it to the right end.

mod ahead;
pub mod chunk_io;
pub mod clean;
pub mod client;
pub mod hash_ahead;
pub mod hash_cache;
pub mod old_copy;
pub mod peer_intervals;
pub mod recv;
pub mod remote_fs;
pub mod send;
pub mod store;
pub mod telemetry;
pub mod third_party;
pub mod walk;
pub mod warmup;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum CpError {
    /// Reading or writing something local failed.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        cause: std::io::Error,
    },
    /// The peer broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The peer reported an error.
    #[error("the peer reported: {0}")]
    Peer(String),
    /// The server refused the request before anything was sent (a missing source, a
    /// path outside its root, a directory without -r...): running it again will not help.
    #[error("the server refused the request: {0}")]
    Refused(String),
    /// The connection was lost.
    #[error("{0}")]
    Lost(String),
    /// This end stopped the transfer; `reason` is the first reason recorded (see
    /// [`Stop`]), which was also sent to the peer.
    #[error("{reason}")]
    Stopped {
        /// The first reason.
        reason: String,
    },
    /// The local destination could not be looked at or opened.
    #[error("{what} {}: {cause}", path.display())]
    Destination {
        /// What was being done.
        what: &'static str,
        /// The destination.
        path: PathBuf,
        /// The OS error.
        #[source]
        cause: std::io::Error,
    },
    /// The `--exclude` / `--include` rules cannot be used.
    #[error("{0}")]
    Filter(String),
    /// The local destination ends in no file name (`..`, `/`).
    #[error("{} names no file; give a directory or a file name", path.display())]
    DestinationNotAName {
        /// The destination as given.
        path: PathBuf,
    },
    /// A path as given cannot be used (a `dir/` that is not a directory).
    #[error(transparent)]
    Path(longhaul_transfer::Error),
    /// The local destination's file name cannot be received into.
    #[error("destination {}: {cause}", path.display())]
    DestinationName {
        /// The destination as given.
        path: PathBuf,
        /// Why its name is refused.
        #[source]
        cause: longhaul_transfer::Error,
    },
    /// The transport could not be planned from the options given (an unknown
    /// congestion control, a window beyond what is allowed...).
    #[error(transparent)]
    Plan(#[from] longhaul_policy::PolicyError),
    /// The receiver's destination work failed (disk full, permissions...).
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// A thread panicked holding `what`'s lock.
    #[error("{what} was poisoned by a panic")]
    Poisoned {
        /// What the lock guards.
        what: &'static str,
    },
    /// A state that the code rules out was reached (a bug).
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// The server's data streams did not all attach.
    #[error(transparent)]
    Attach(#[from] crate::transport::attach::AttachError),
    /// Connecting, authenticating or opening streams failed.
    #[error(transparent)]
    Setup(#[from] crate::transport::BenchError),
    /// The session stopped (the peer broke the protocol, a path was refused, this end
    /// gave up).
    #[error(transparent)]
    Session(longhaul_transfer::session::SessionError),
}

impl CpError {
    /// Whether running the same command again can help (resume picks up what is
    /// verified): failures mid-transfer, not a request the server refused, a protocol
    /// violation or a failed set-up.
    pub fn rerun_helps(&self) -> bool {
        use longhaul_transfer::session::SessionError as S;
        matches!(
            self,
            CpError::Lost(_)
                | CpError::Peer(_)
                | CpError::Io { .. }
                | CpError::Stopped { .. }
                | CpError::Destination { .. }
                | CpError::Store(_)
                | CpError::Poisoned { .. }
                | CpError::Attach(_)
                | CpError::Session(S::GaveUp(_))
        )
    }

    /// The advice to append to this error's message for the user: how to resume, unless
    /// rerunning cannot help or the message (this end's, or the peer's words) already says
    /// to run the command again.
    pub fn rerun_hint(&self) -> &'static str {
        if !self.rerun_helps() || self.to_string().contains(RERUN_ADVICE_MARK) {
            ""
        } else {
            "; run the same command again to resume (verified chunks are not sent again)"
        }
    }

    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, cause: std::io::Error) -> Self {
        CpError::Io {
            what: what.into(),
            cause,
        }
    }
}

/// Words every message that already advises a rerun contains (the receiver's disk-full
/// message says it; the peer's text arrives as words, not as a type).
pub const RERUN_ADVICE_MARK: &str = "run the same command again";

/// Why a transfer stops: the first reason given wins (later ones are its consequences),
/// and setting it raises the stop flag both ends' threads watch.
#[derive(Debug, Default)]
pub struct Stop {
    flag: std::sync::atomic::AtomicBool,
    first: std::sync::Mutex<Option<String>>,
}

impl Stop {
    /// Records `why` (if no reason was recorded yet) and raises the flag; true if `why`
    /// is the first reason.
    pub fn fail(&self, why: String) -> bool {
        let first = self.record(why);
        self.raise();
        first
    }
    /// Records `why` if no reason was recorded yet, without raising the flag (to tell
    /// the peer before this end's threads start closing); true if it is the first.
    pub fn record(&self, why: String) -> bool {
        match self.first.lock() {
            Ok(mut e) if e.is_none() => {
                *e = Some(why);
                true
            }
            _ => false,
        }
    }
    /// Raises the flag without a reason (the transfer is over).
    pub fn raise(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }
    /// Whether the transfer is stopping.
    pub fn raised(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
    /// The first reason, if any.
    pub fn reason(&self) -> Option<String> {
        self.first.lock().ok().and_then(|e| e.clone())
    }
}

/// A session's counters as the last session call left them ([`Progress::update`]), and
/// the per-stream byte counters the stream threads add to; a progress display reads them.
#[derive(Debug, Default)]
pub struct Progress {
    total_bytes: AtomicU64,
    done_bytes: AtomicU64,
    files_total: AtomicU64,
    files_done: AtomicU64,
    listed: std::sync::atomic::AtomicBool,
    /// Payload bytes per data stream, where someone samples them (the client, and a
    /// server that reports its intervals).
    streams: std::sync::OnceLock<std::sync::Arc<crate::telemetry::StreamCounters>>,
    /// The sending peer's interval reports not yet taken (a pull's client).
    peer: std::sync::Arc<peer_intervals::PeerReports>,
    /// CPU time by stage, which the data streams add to after every chunk.
    stages: crate::stage_cpu::StageTimes,
    /// The rate the transfer's sender holds, as this end's pacer last set it (a push) or
    /// the sending server last told it (a pull): the intervals say it, as bench's do.
    held: HeldCell,
}

/// The rate a transfer's sender holds (all streams, bit/s), shared between the one that
/// sets it and those that read it; `None` until it is known.
#[derive(Debug, Clone, Default)]
pub struct HeldCell(std::sync::Arc<AtomicU64>);

impl HeldCell {
    /// Sets it (`None`: not known).
    pub fn set(&self, bps: Option<u64>) {
        // 0 stands for not known: no pacer holds a rate of nothing.
        self.0.store(bps.unwrap_or(0), Ordering::Relaxed);
    }
    /// The rate last set, if known.
    pub fn get(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&bps| bps > 0)
    }
}

impl Progress {
    /// Whether the totals are final.
    pub fn is_listed(&self) -> bool {
        self.listed.load(Ordering::SeqCst)
    }
    /// Copies a session's counters.
    pub fn update(&self, p: longhaul_transfer::session::ProgressSnapshot) {
        self.done_bytes.store(p.done_bytes, Ordering::Relaxed);
        self.total_bytes.store(p.total_bytes, Ordering::Relaxed);
        self.files_done.store(p.files_done, Ordering::Relaxed);
        self.files_total.store(p.files_total, Ordering::Relaxed);
        if p.listed {
            self.listed.store(true, Ordering::SeqCst);
        }
    }
    /// Counts payload bytes per data stream into `counters` from now on (set once; the
    /// client does, for its telemetry). False if counters were already set.
    pub fn count_streams(
        &self,
        counters: std::sync::Arc<crate::telemetry::StreamCounters>,
    ) -> bool {
        self.streams.set(counters).is_ok()
    }
    /// The per-stream counters, if set.
    pub fn stream_counters(&self) -> Option<&std::sync::Arc<crate::telemetry::StreamCounters>> {
        self.streams.get()
    }
    /// `n` payload bytes written to (or read from) data stream `stream`; nothing unless
    /// [`Progress::count_streams`] was called.
    pub fn stream_bytes(&self, stream: usize, n: u64) {
        if let Some(c) = self.streams.get() {
            c.add(stream, n);
        }
    }
    /// The session's CPU time by stage so far.
    pub fn stages(&self) -> &crate::stage_cpu::StageTimes {
        &self.stages
    }
    /// The sender's pacer held `bps` (all streams) at its last step; `None`: not yet.
    pub fn set_held_bps(&self, bps: Option<u64>) {
        self.held.set(bps);
    }
    /// Keeps what a sending server tells on the control connection during a transfer: its
    /// held rate here, its interval reports and jump-start verdict in
    /// [`Progress::peer_reports`]. Any other message is handed back.
    pub fn absorb_peer(&self, msg: longhaul_proto::Message) -> Option<longhaul_proto::Message> {
        match msg {
            longhaul_proto::Message::HeldRate { bps } => {
                self.set_held_bps(Some(bps));
                None
            }
            other => self.peer.absorb(other),
        }
    }
    /// Where the held rate is kept ([`Progress::set_held_bps`]), for a reader that
    /// outlives a borrow of the progress.
    pub fn held_cell(&self) -> HeldCell {
        self.held.clone()
    }
    /// The sending peer's interval reports (a pull's client keeps them here).
    pub fn peer_reports(&self) -> &std::sync::Arc<peer_intervals::PeerReports> {
        &self.peer
    }
    /// `(done bytes, total bytes, done files, total files)`.
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        (
            self.done_bytes.load(Ordering::Relaxed),
            self.total_bytes.load(Ordering::Relaxed),
            self.files_done.load(Ordering::Relaxed),
            self.files_total.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Progress;
    use longhaul_proto::Message;

    /// A sending server's held rate is kept where this end's pacer keeps its own (the
    /// last one told counts); its other messages go on to the reports or back.
    #[test]
    fn the_held_rate_told_is_kept_and_other_messages_are_handed_back() {
        let p = Progress::default();
        let held = p.held_cell();
        let now = || held.get().unwrap_or(0);
        assert_eq!(now(), 0, "nothing told yet");
        assert!(p
            .absorb_peer(Message::HeldRate { bps: 940_000_000 })
            .is_none());
        assert_eq!(now(), 940_000_000);
        assert!(p
            .absorb_peer(Message::HeldRate { bps: 870_000_000 })
            .is_none());
        assert_eq!(now(), 870_000_000, "the last one counts");
        assert!(p.absorb_peer(Message::Start).is_some());
    }
}
