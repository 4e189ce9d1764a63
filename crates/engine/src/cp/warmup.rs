//! A data stream's warm-up run ([`longhaul_proto::features::WARMUP`]): while a sender
//! waits a round trip for the receiver's answer to its file list, each stream fills its
//! initial window with a run of zeros that belongs to no file (`CHUNK_FLAG_WARMUP`). The
//! run's acks double the window in slow start, so the first chunks leave with twice the
//! kernel's 10 segments: the start-up reaches the bottleneck a round trip sooner. A push's
//! client sends it between its data hellos and the server's answer. Never on a jump (the
//! route's window is already the path's).
//!
//! A pull's server does not send one, although its streams idle the same round trip
//! (attached at 2.5 RTT, the client's answer at 3.5): measured at 436 ms, the same build
//! with the server's runs ended 4 of 8 first pulls in the slow mode of a start-up cut
//! short (30-35 s), and 0 of 8 without them (21.3-21.9 s). Why is not understood yet; the
//! receiving side takes runs either way.
//!
//! The run is sized from the socket's own window ([`longhaul_policy::warmup_bytes`]) and
//! its place in the stream's bytes is returned ([`WarmupSpan`]), so the telemetry never
//! counts it as the transfer's.

use std::io::{self, Write};
use std::time::Duration;

use longhaul_proto::transfer::{ChunkHeader, MAX_WARMUP_BYTES};
use longhaul_proto::ChunkKey;
use longhaul_sys::tcp_info::{tcp_info, TcpInfo};

use crate::telemetry::WarmupSpan;
use crate::transport::secure::SecureStream;

/// Sends `sock`'s warm-up run under the session's `key`; `None` when the path is too short
/// for one or the window has no room.
pub fn send(sock: &mut SecureStream, key: &ChunkKey) -> io::Result<Option<WarmupSpan>> {
    let before = tcp_info(sock.tcp())?;
    let rtt = Duration::from_micros(u64::from(before.rtt_us));
    let len = longhaul_policy::warmup_bytes(rtt, before.snd_cwnd, before.snd_mss, before.unacked)
        .min(MAX_WARMUP_BYTES);
    if len == 0 {
        return Ok(None);
    }
    // Spread over the round trip, not one burst whose queue looks like a full path.
    crate::transport::sockopts::pace_by_kernel(sock.tcp())?;
    let header = ChunkHeader::warmup(len);
    sock.write_all(&header.encode(key))?;
    // Zeros in pieces: no allocation of the run's size.
    let zeros = [0u8; 16 << 10];
    let mut left = len as usize;
    while left > 0 {
        let n = left.min(zeros.len());
        sock.write_all(&zeros[..n])?;
        left -= n;
    }
    sock.flush()?;
    crate::startup::note_warmup(u64::from(len) + ChunkHeader::LEN as u64);
    let after = tcp_info(sock.tcp())?;
    let (from, to) = (written(&before), written(&after));
    Ok(Some(WarmupSpan {
        from,
        wire: to.saturating_sub(from),
    }))
}

/// New bytes a socket has taken so far: sent once (retransmissions out), or queued.
fn written(i: &TcpInfo) -> u64 {
    i.bytes_sent.saturating_sub(i.bytes_retrans) + u64::from(i.notsent_bytes)
}
