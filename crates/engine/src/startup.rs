//! When a command started, when its data connections were dialed and when its first data
//! byte went or came: the figures `data_dialed_rtts` and `first_byte_rtts` of cp's and
//! bench's end records (see docs/startup.md); and the bytes of warm-up runs this end
//! sent or dropped (`warmup_bytes`, cp's end record; see `crate::cp::warmup`).
//!
//! Both instants are process-wide: the binary marks its start first thing
//! ([`mark_command_start`]); the first write to (or read from) any data stream marks the
//! first data byte ([`note_first_data`], an atomic load once set). A process runs one
//! command, so "this end's first data byte" is the first one of the process; in a test
//! that runs both ends in one process the figure is not meaningful and is not asserted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static WARMUP_BYTES: AtomicU64 = AtomicU64::new(0);

/// Counts `n` bytes of warm-up runs (header included) sent or received and dropped.
pub fn note_warmup(n: u64) {
    WARMUP_BYTES.fetch_add(n, Ordering::Relaxed);
}

/// Bytes of warm-up runs this process sent or dropped so far.
pub fn warmup_bytes() -> u64 {
    WARMUP_BYTES.load(Ordering::Relaxed)
}

static COMMAND_START: OnceLock<Instant> = OnceLock::new();
static FIRST_DATA: OnceLock<Instant> = OnceLock::new();
static DATA_DIALED: OnceLock<Instant> = OnceLock::new();

/// Marks the command's start (the first call counts).
pub fn mark_command_start() {
    let _ = COMMAND_START.get_or_init(Instant::now);
}

/// Marks this end's first data byte sent or received (the first call counts).
#[inline]
pub fn note_first_data() {
    if FIRST_DATA.get().is_none() {
        let _ = FIRST_DATA.get_or_init(Instant::now);
    }
}

/// Marks when the data connections the command uses were dialed (the first call counts;
/// connections dialed on a guess and dropped are never marked).
pub fn note_data_dialed(at: Instant) {
    let _ = DATA_DIALED.get_or_init(|| at);
}

/// Time from the command's start to its data connections' dial, in round trips of `rtt`:
/// about 0 when they left with the control connection, 1 when they waited for its
/// connect, 2 or more when they waited for an answer of the server.
pub fn data_dialed_rtts(rtt: Duration) -> Option<f64> {
    let start = COMMAND_START.get()?;
    let t = DATA_DIALED.get()?.saturating_duration_since(*start);
    (!rtt.is_zero()).then(|| t.as_secs_f64() / rtt.as_secs_f64())
}

/// Time from the command's start to its first data byte, when both are marked.
pub fn first_data_after_start() -> Option<Duration> {
    let start = COMMAND_START.get()?;
    Some(FIRST_DATA.get()?.saturating_duration_since(*start))
}

/// [`first_data_after_start`] in round trips of `rtt` (None when unmarked or `rtt` is 0).
pub fn first_data_rtts(rtt: Duration) -> Option<f64> {
    let t = first_data_after_start()?;
    (!rtt.is_zero()).then(|| t.as_secs_f64() / rtt.as_secs_f64())
}
