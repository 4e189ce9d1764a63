//! Bounds on everything a peer can name: frame sizes, string lengths, counts.
//! A value past a bound is a protocol error, never an allocation.

/// Largest frame body (type byte plus fields) accepted, in bytes.
pub const MAX_FRAME_BODY: usize = 64 * 1024;
/// Largest number of parallel data streams in one session.
pub const MAX_STREAMS: u16 = 256;
/// Longest congestion-control name (Linux's TCP_CA_NAME_MAX is 16).
pub const MAX_CONGESTION_NAME: usize = 16;

/// Whether `name` could name a congestion control: at most [`MAX_CONGESTION_NAME`]
/// bytes of ASCII letters, digits, `_` and `-` (empty passes: "the default" where a
/// message allows it).
pub fn is_congestion_name(name: &str) -> bool {
    name.len() <= MAX_CONGESTION_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
/// Longest human-readable error or note string.
pub const MAX_TEXT: usize = 1024;
/// Longest bench duration a client may ask for (one day).
pub const MAX_DURATION_MS: u64 = 24 * 3600 * 1000;
/// Shortest reporting interval (10 ms).
pub const MIN_INTERVAL_MS: u32 = 10;
/// Largest socket buffer a client may ask the server for (2 GiB).
pub const MAX_WINDOW_BYTES: u64 = 2 << 30;
/// Largest byte count for a `--bytes` run (1 PB).
pub const MAX_BENCH_BYTES: u64 = 1_000_000_000_000_000;
/// Longest host report a server sends for `longhaul tune --peer` (48 KiB, inside one frame).
pub const MAX_HOST_REPORT: usize = 48 * 1024;
/// Largest rate a client may ask a host report for (100 Tbit/s).
pub const MAX_REPORT_RATE_BPS: u64 = 100_000_000_000_000;
/// Longest RTT a client may ask a host report for (60 s), in microseconds.
pub const MAX_REPORT_RTT_US: u32 = 60_000_000;
/// Largest rate a jump-start ask may name (100 Tbit/s): far above any path, so a real
/// client's ask always passes; what a server carries out is bounded by its own view.
pub const MAX_JUMP_RATE_BPS: u64 = 100_000_000_000_000;
/// Largest initial window per stream a jump-start ask may name, segments (2^20, the
/// most a jump ever asks for).
pub const MAX_JUMP_WINDOW_SEGMENTS: u32 = 1 << 20;
