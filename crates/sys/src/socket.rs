//! Socket options that size and shape a TCP connection: buffers (with the CAP_NET_ADMIN
//! overrides), congestion control, pacing, window clamp, unsent-data watermark.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T for the duration of the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for writes of the sizes given.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut i32).cast(), &mut len) };
    if rc == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn clamp_int(bytes: u64) -> libc::c_int {
    bytes.min(i32::MAX as u64 / 2) as libc::c_int
}

/// Asks for a send buffer of `bytes` (the kernel doubles the value for bookkeeping).
/// With `force`, uses SO_SNDBUFFORCE, which ignores net.core.wmem_max (needs CAP_NET_ADMIN).
/// Setting it turns off send-buffer autotuning for this socket.
pub fn set_send_buffer(sock: &impl AsRawFd, bytes: u64, force: bool) -> io::Result<()> {
    let name = if force {
        libc::SO_SNDBUFFORCE
    } else {
        libc::SO_SNDBUF
    };
    setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, name, &clamp_int(bytes))
}

/// Asks for a receive buffer of `bytes`; see [`set_send_buffer`]. Also sets the window
/// scale of connections accepted later when applied to a listening socket.
pub fn set_receive_buffer(sock: &impl AsRawFd, bytes: u64, force: bool) -> io::Result<()> {
    let name = if force {
        libc::SO_RCVBUFFORCE
    } else {
        libc::SO_RCVBUF
    };
    setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, name, &clamp_int(bytes))
}

/// The send buffer the kernel granted, in bytes (twice the payload it can hold, roughly).
pub fn send_buffer(sock: &impl AsRawFd) -> io::Result<u64> {
    Ok(getsockopt_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF)? as u64)
}

/// The receive buffer the kernel granted, in bytes.
pub fn receive_buffer(sock: &impl AsRawFd) -> io::Result<u64> {
    Ok(getsockopt_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF)? as u64)
}

/// Chooses the congestion-control algorithm of a TCP socket (`reno`, `cubic`, `bbr`, ...).
pub fn set_congestion(sock: &impl AsRawFd, name: &str) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    // SAFETY: the pointer and length describe `name`'s bytes, alive for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The congestion-control algorithm in use on a TCP socket.
pub fn congestion(sock: &impl AsRawFd) -> io::Result<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf and len are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let raw = &buf[..(len as usize).min(buf.len())];
    let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
    Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
}

/// Caps the socket's pacing rate (SO_MAX_PACING_RATE) in **bytes** per second. TCP paces
/// internally when this is set, with or without the fq qdisc. `u64::MAX` removes the cap.
pub fn set_max_pacing_rate(sock: &impl AsRawFd, bytes_per_second: u64) -> io::Result<()> {
    setsockopt(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_MAX_PACING_RATE,
        &bytes_per_second,
    )
}

/// Bounds the receive window this end advertises (TCP_WINDOW_CLAMP), in bytes.
pub fn set_window_clamp(sock: &impl AsRawFd, bytes: u64) -> io::Result<()> {
    setsockopt(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_WINDOW_CLAMP,
        &clamp_int(bytes),
    )
}

/// Keeps at most `bytes` of not-yet-sent data in the socket (TCP_NOTSENT_LOWAT).
pub fn set_notsent_lowat(sock: &impl AsRawFd, bytes: u32) -> io::Result<()> {
    setsockopt(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        &bytes,
    )
}

/// Wakes a blocked read only once `bytes` are queued (SO_RCVLOWAT; a FIN, an error or a
/// timeout still wake it sooner). A read asking for less returns with what it asked for.
pub fn set_rcvlowat(sock: &impl AsRawFd, bytes: u32) -> io::Result<()> {
    let v = bytes.clamp(1, i32::MAX as u32) as libc::c_int;
    setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVLOWAT, &v)
}

/// Gives up on a connection whose sent data stays unacknowledged for `ms` milliseconds
/// (TCP_USER_TIMEOUT), so a vanished peer ends a run instead of hanging it.
pub fn set_user_timeout(sock: &impl AsRawFd, ms: u32) -> io::Result<()> {
    setsockopt(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_USER_TIMEOUT,
        &ms,
    )
}

/// Whether this process may exceed net.core.{r,w}mem_max (CAP_NET_ADMIN), found by trying
/// SO_SNDBUFFORCE on a scratch socket.
pub fn can_force_buffers() -> bool {
    match std::net::UdpSocket::bind("127.0.0.1:0") {
        Ok(s) => set_send_buffer(&s, 1 << 20, true).is_ok(),
        Err(_) => false,
    }
}

/// Waits until `sock` is readable (for a listening socket: a connection is waiting), at
/// most `timeout`; `false` when the time ran out. An interrupted wait counts as not ready.
pub fn wait_readable(sock: &impl AsRawFd, timeout: std::time::Duration) -> io::Result<bool> {
    wait_for(sock, libc::POLLIN, timeout)
}

/// Waits until `sock` is writable (for a connecting socket: its handshake ended, well or
/// not), at most `timeout`; `false` when the time ran out or the wait was interrupted.
pub fn wait_writable(sock: &impl AsRawFd, timeout: std::time::Duration) -> io::Result<bool> {
    wait_for(sock, libc::POLLOUT, timeout)
}

fn wait_for(
    sock: &impl AsRawFd,
    events: libc::c_short,
    timeout: std::time::Duration,
) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `pfd` is a valid pollfd for the duration of the call and nfds is 1.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

/// Whether the peer has sent bytes not yet read on `sock`, without reading them and
/// without waiting (`MSG_PEEK | MSG_DONTWAIT`: the socket's own blocking mode, shared with
/// its clones, is left alone, so another thread may be blocked reading it meanwhile).
pub fn has_unread_bytes(sock: &impl AsRawFd) -> bool {
    let mut b = [0u8; 1];
    // SAFETY: `b` is a valid one-byte buffer for the duration of the call.
    let r = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    r == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn buffers_and_congestion_round_trip() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        set_receive_buffer(&l, 256 * 1024, false).unwrap();
        let got = receive_buffer(&l).unwrap();
        assert!(got >= 256 * 1024, "kernel granted {got}");
        set_congestion(&l, "reno").unwrap();
        assert_eq!(congestion(&l).unwrap(), "reno");
        assert!(set_congestion(&l, "no-such-cc").is_err());
        set_max_pacing_rate(&l, 125_000_000).unwrap();
        set_notsent_lowat(&l, 1 << 20).unwrap();
    }

    #[test]
    fn unread_bytes_are_seen_without_being_read_or_waited_for() {
        use std::io::{Read, Write};
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut served, _) = l.accept().unwrap();
        assert!(!has_unread_bytes(&served), "nothing was sent yet");
        client.write_all(b"x").unwrap();
        assert!(wait_readable(&served, std::time::Duration::from_secs(5)).unwrap());
        assert!(has_unread_bytes(&served));
        assert!(
            has_unread_bytes(&served),
            "the first look did not consume it"
        );
        let mut b = [0u8; 1];
        served.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
        assert!(!has_unread_bytes(&served));
    }
}
