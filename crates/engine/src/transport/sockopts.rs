//! Applying a window plan and the sender's options to a data socket, at either end.

use std::io;
use std::net::TcpStream;
use std::time::Duration;

use longhaul_policy::{BufferChoice, Side};

/// Unsent bytes a sender's data sockets hold at most together (TCP_NOTSENT_LOWAT, shared
/// by the streams, at least 256 KiB each): 33 ms at 1 Gbit/s, enough to keep the path busy
/// between writes. With a send buffer sized for a
/// long path, hundreds of megabytes would otherwise queue behind the window: a timed bench
/// would take seconds past its end to drain them, and a cp stream would take chunks it
/// cannot send for seconds while the other streams run dry at the end.
pub const NOTSENT_LOWAT: u32 = 4 << 20;

/// Keeps at most its share of [`NOTSENT_LOWAT`] of unsent data in one of `streams`
/// sender sockets.
pub fn limit_unsent(sock: &impl std::os::fd::AsRawFd, streams: usize) -> io::Result<()> {
    let share = (NOTSENT_LOWAT / streams.max(1) as u32).max(256 << 10);
    longhaul_sys::socket::set_notsent_lowat(sock, share)
}

/// A pacing cap no path reaches (bytes/s, 8.8 Tbit/s): setting it turns on the kernel's
/// own pacing of the socket (no fq qdisc needed), which spreads each round of slow start
/// over the round trip at twice the window's rate instead of sending it in one burst.
pub const KERNEL_PACING_CAP: u64 = 1 << 40;

/// Turns on the kernel's pacing of a sender socket before its first flight (see
/// [`KERNEL_PACING_CAP`]). A flight released at once (a warm-up run, or the first chunks
/// when the file list's answer arrives) queues at the bottleneck for its whole length:
/// 64 streams x 17 segments at 436 ms are 5 MB, 40 ms at 1 Gbit/s. Measured: that burst's
/// queue ended the rate probe's start-up at 146 Mbit/s in 3 of 6 pulls (the RTT of the
/// latest acks rose past the exit's threshold, min RTT / 64). A socket that already has
/// a cap (`--rate`, a jump's pace) keeps it.
pub fn pace_by_kernel(sock: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    let info = longhaul_sys::tcp_info::tcp_info(sock)?;
    if info.max_pacing_rate != u64::MAX && info.max_pacing_rate != 0 {
        return Ok(());
    }
    longhaul_sys::socket::set_max_pacing_rate(sock, KERNEL_PACING_CAP)
}

/// A vanished peer ends a run after this long without acknowledgements.
pub const USER_TIMEOUT: Duration = Duration::from_secs(30);

/// Sets the buffer of `side` on `sock` as `choice` says (see `longhaul_policy::plan_buffer`,
/// which turns a fixed window into an explicit value).
pub fn apply_buffer(
    sock: &impl std::os::fd::AsRawFd,
    side: Side,
    choice: &BufferChoice,
) -> io::Result<()> {
    let (bytes, force) = match choice {
        BufferChoice::Autotune => return Ok(()),
        BufferChoice::Set { bytes, force } => (*bytes, *force),
        BufferChoice::Capped { bytes, .. } => (*bytes, false),
    };
    match side {
        Side::Send => longhaul_sys::socket::set_send_buffer(sock, bytes, force),
        Side::Receive => longhaul_sys::socket::set_receive_buffer(sock, bytes, force),
    }
}

/// Options every data socket gets once connected: no Nagle, a user timeout, and on the
/// sender the congestion control asked for.
pub fn tune_connected(sock: &TcpStream, congestion: Option<&str>) -> io::Result<()> {
    sock.set_nodelay(true)?;
    longhaul_sys::socket::set_user_timeout(sock, USER_TIMEOUT.as_millis() as u32)?;
    if let Some(cc) = congestion.filter(|c| !c.is_empty()) {
        longhaul_sys::socket::set_congestion(sock, cc)?;
    }
    Ok(())
}

/// Receiver-side pacing: clamps the advertised window so the sender can have at most
/// `rx_rate_bps / streams` x RTT in flight on this stream. Call after any other buffer
/// setting on the socket.
pub fn clamp_for_rx_rate(
    sock: &TcpStream,
    rx_rate_bps: u64,
    streams: u16,
    rtt: Duration,
) -> io::Result<u64> {
    let per_stream = rx_rate_bps / streams.max(1) as u64;
    let clamp = longhaul_model::buffers::bdp_bytes(per_stream, rtt).max(16 * 1024);
    // Linux recomputes the window clamp from the receive buffer whenever its estimate of
    // payload per buffer byte changes, so TCP_WINDOW_CLAMP alone does not hold. The receive
    // buffer is set to twice the clamp (setsockopt value = clamp): the kernel then offers a
    // window of about the clamp and has the memory to hold it.
    let force = longhaul_sys::socket::can_force_buffers();
    longhaul_sys::socket::set_receive_buffer(sock, clamp, force)?;
    longhaul_sys::socket::set_window_clamp(sock, clamp)?;
    Ok(clamp)
}

/// What a plan sets on a connected data socket: [`tune_connected`] with the sender's
/// congestion control, and the sender's per-stream pacing cap.
pub fn apply_connected(sock: &TcpStream, plan: &longhaul_policy::TransportPlan) -> io::Result<()> {
    tune_connected(sock, plan.congestion.as_deref())?;
    if let Some(bps) = plan.pacing_bps {
        longhaul_sys::socket::set_max_pacing_rate(sock, bps / 8)?;
    }
    Ok(())
}
