//! What a `longhaul cp` run tells its caller: how the transfer was set up ([`CpStart`],
//! for the `start` line and the telemetry) and what happened ([`CpReport`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::transport::secure::SecureStream;

/// How the transfer was set up (for the `start` line).
#[derive(Debug, Clone)]
pub struct CpStart {
    /// `push` or `pull`.
    pub direction: &'static str,
    /// Data streams.
    pub streams: u16,
    /// Chunk size.
    pub chunk_bytes: u64,
    /// Measured RTT.
    pub rtt: Duration,
    /// Socket buffer per stream on this side.
    pub window_bytes: u64,
    /// Congestion control of the sender ("server's choice" on a pull).
    pub congestion: String,
    /// Warnings about host limits.
    pub warnings: Vec<String>,
    /// Clones of the data sockets (`[i]` is stream `i`), for a TCP_INFO sampler; the
    /// payload bytes per stream are counted in the progress's stream counters.
    pub sockets: Vec<Arc<SecureStream>>,
    /// A pull answered the file list ahead (its destination held nothing of it): the
    /// server's chunks left with the list (see `cp::ahead`).
    pub answered_ahead: bool,
}

/// What happened.
#[derive(Debug, Clone)]
pub struct CpReport {
    /// Set-up.
    pub start: CpStart,
    /// Files committed (or equal with `--checksum-only`).
    pub files_ok: u64,
    /// Files skipped (`--no-clobber`).
    pub files_skipped: u64,
    /// Files that failed, with why.
    pub failed: Vec<String>,
    /// Bytes of all files of the transfer.
    pub bytes: u64,
    /// Payload bytes this end sent (push) or received (pull) in this run.
    pub moved_bytes: u64,
    /// Bytes verified by an earlier run, not sent again.
    pub resumed_bytes: u64,
    /// Chunks refused by the receiver (push only).
    pub rejected_chunks: u64,
    /// Wall time from the first data stream to the end.
    pub seconds: f64,
    /// Files found complete at the destination by the quick check (same size and mtime).
    pub files_unchanged: u64,
    /// Bytes of those files (counted in `resumed_bytes` too: nothing of them was sent).
    pub unchanged_bytes: u64,
    /// Sync: files whose destination copy was compared chunk by chunk.
    pub files_compared: u64,
    /// Sync: bytes taken from the destination's old copies instead of sent.
    pub reused_bytes: u64,
    /// `sync -n`: what a real run would send, file by file.
    pub would_send: Vec<longhaul_transfer::session::WouldSend>,
    /// Entries the receiver removed for `--delete` (would remove, with `sync -n`).
    pub deleted: u64,
    /// `sync -n --delete` on a pull: what would be removed here (a push's server says
    /// only how many).
    pub would_delete: Vec<PathBuf>,
    /// Jump-start: whether it was used, why not, the verdict (see docs/jump-start.md).
    pub jump_start: crate::jump::JumpReport,
    /// This end's CPU time by stage (see [`crate::stage_cpu`]).
    pub stages: crate::stage_cpu::StageSplit,
}

/// What a run's two ends have in common, beside the outcome: its set-up, jump-start
/// report, duration and CPU by stage.
pub(super) struct RunFacts {
    pub start: CpStart,
    pub jump_start: crate::jump::JumpReport,
    pub seconds: f64,
    pub stages: crate::stage_cpu::StageSplit,
}

impl RunFacts {
    /// The facts of a run that began at `t0`, now that it ended.
    pub(super) fn after(
        start: CpStart,
        jump_start: crate::jump::JumpReport,
        t0: std::time::Instant,
        progress: &crate::cp::Progress,
    ) -> Self {
        Self {
            start,
            jump_start,
            seconds: t0.elapsed().as_secs_f64(),
            stages: progress.stages().split(),
        }
    }
}

impl CpReport {
    /// A push's report: the sender's outcome over `bytes` of files.
    pub(super) fn sent(
        run: RunFacts,
        out: longhaul_transfer::session::SendOutcome,
        bytes: u64,
    ) -> Self {
        Self {
            start: run.start,
            files_ok: out.files_ok,
            files_skipped: out.files_skipped,
            failed: out.failed,
            bytes,
            moved_bytes: out.sent_bytes,
            resumed_bytes: out.resumed_bytes,
            rejected_chunks: out.rejected_chunks,
            seconds: run.seconds,
            files_unchanged: out.files_unchanged,
            unchanged_bytes: out.unchanged_bytes,
            files_compared: out.files_compared,
            reused_bytes: out.reused_bytes,
            would_send: out.would_send,
            deleted: out.deleted,
            // A push's server says only how many it would remove.
            would_delete: Vec::new(),
            jump_start: run.jump_start,
            stages: run.stages,
        }
    }

    /// A pull's report: the receiver's outcome.
    pub(super) fn received(run: RunFacts, out: longhaul_transfer::session::RecvOutcome) -> Self {
        Self {
            start: run.start,
            files_ok: out.files_ok,
            files_skipped: out.files_skipped,
            failed: out.failed,
            bytes: out.total_bytes,
            moved_bytes: out.received_bytes,
            resumed_bytes: out.resumed_bytes,
            // The sender counts refusals; a receiver's are in its failed files.
            rejected_chunks: 0,
            seconds: run.seconds,
            files_unchanged: out.files_unchanged,
            unchanged_bytes: out.unchanged_bytes,
            files_compared: out.files_compared,
            reused_bytes: out.reused_bytes,
            would_send: out.would_send,
            deleted: out.deleted,
            would_delete: out.would_delete,
            jump_start: run.jump_start,
            stages: run.stages,
        }
    }
}
