//! Applying a window plan and the sender's options to a data socket, at either end.

use std::io;
use std::net::TcpStream;
use std::time::Duration;

use super::window::{choose, BufferCaps, BufferChoice, Side};

/// A vanished peer ends a run after this long without acknowledgements.
pub const USER_TIMEOUT: Duration = Duration::from_secs(30);

/// Sets the buffer of `side` on `sock` as `choice` says. With `fixed`, an Autotune choice
/// becomes an explicit value (the user asked for exactly this window).
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

/// The buffer choice for one end: with a fixed window, always set it (forcing if needed
/// and possible); otherwise let [`choose`] decide.
pub fn plan_buffer(side: Side, needed: u64, fixed: bool, caps: &BufferCaps) -> BufferChoice {
    match choose(side, needed, caps) {
        BufferChoice::Autotune if fixed => choose(
            side,
            needed,
            &BufferCaps {
                tcp_wmem_max: 0,
                tcp_rmem_max: 0,
                ..*caps
            },
        ),
        c => c,
    }
}

/// The value a choice will set (0 for autotuning).
pub fn choice_bytes(c: &BufferChoice) -> u64 {
    match c {
        BufferChoice::Autotune => 0,
        BufferChoice::Set { bytes, .. } | BufferChoice::Capped { bytes, .. } => *bytes,
    }
}

/// Describes a choice for the start line.
pub fn describe(c: &BufferChoice) -> String {
    match c {
        BufferChoice::Autotune => "kernel autotuning (its ceiling covers the path)".into(),
        BufferChoice::Set { bytes, force: true } => {
            format!("{bytes} bytes, forced past the sysctl cap")
        }
        BufferChoice::Set { bytes, .. } => format!("{bytes} bytes"),
        BufferChoice::Capped { bytes, needed, .. } => {
            format!("{bytes} bytes (capped; the path needs {needed})")
        }
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
    let clamp = (per_stream as u128 * rtt.as_micros() / 8 / 1_000_000) as u64;
    let clamp = clamp.max(16 * 1024);
    // Linux recomputes the window clamp from the receive buffer whenever its estimate of
    // payload per buffer byte changes, so TCP_WINDOW_CLAMP alone does not hold. The receive
    // buffer is set to twice the clamp (setsockopt value = clamp): the kernel then offers a
    // window of about the clamp and has the memory to hold it.
    let force = longhaul_sys::socket::can_force_buffers();
    longhaul_sys::socket::set_receive_buffer(sock, clamp, force)?;
    longhaul_sys::socket::set_window_clamp(sock, clamp)?;
    Ok(clamp)
}

/// The congestion control a sender should use when the user named none: BBR when the
/// kernel has it (it finds the bottleneck without filling the queue), else the default.
pub fn default_congestion(available: &[String], default: &str) -> String {
    if available.iter().any(|c| c == "bbr") {
        "bbr".into()
    } else {
        default.into()
    }
}

/// Checks that `cc` can run here; the error lists what can and how to add it.
pub fn check_congestion(cc: &str, available: &[String]) -> Result<(), String> {
    if available.iter().any(|c| c == cc) {
        return Ok(());
    }
    Err(format!(
        "congestion control {cc:?} is not available on this host (available: {}); load it with `modprobe tcp_{cc}` or pick one of those",
        available.join(" ")
    ))
}
