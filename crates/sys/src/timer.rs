//! Waiting for "a packet can be read or a deadline has come", with nanosecond deadlines:
//! epoll on one fd plus a timerfd armed at an absolute CLOCK_MONOTONIC time.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// CLOCK_MONOTONIC now, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wakeup {
    /// The watched fd became readable.
    pub readable: bool,
    /// The deadline passed.
    pub deadline: bool,
}

/// epoll over one readable fd and a timerfd.
#[derive(Debug)]
pub struct ReadOrDeadline {
    epoll: OwnedFd,
    timer: OwnedFd,
}

const TOKEN_FD: u64 = 1;
const TOKEN_TIMER: u64 = 2;

impl ReadOrDeadline {
    /// Watches `fd` for readability (level-triggered).
    pub fn new(fd: BorrowedFd<'_>) -> io::Result<ReadOrDeadline> {
        // SAFETY: plain syscalls; returned fds are checked and owned.
        let epoll = unsafe { owned(libc::epoll_create1(libc::EPOLL_CLOEXEC))? };
        // SAFETY: as above.
        let timer = unsafe {
            owned(libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            ))?
        };
        let me = ReadOrDeadline { epoll, timer };
        me.add(fd.as_raw_fd(), TOKEN_FD)?;
        me.add(me.timer.as_raw_fd(), TOKEN_TIMER)?;
        Ok(me)
    }

    fn add(&self, fd: i32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: both fds are open; ev is valid.
        let rc =
            unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sleeps until the fd is readable, CLOCK_MONOTONIC reaches `deadline_ns` (if any), or
    /// `max_wait_ms` passes.
    pub fn wait(&self, deadline_ns: Option<u64>, max_wait_ms: i32) -> io::Result<Wakeup> {
        let when = deadline_ns.unwrap_or(0);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (when / 1_000_000_000) as libc::time_t,
                tv_nsec: (when % 1_000_000_000) as libc::c_long,
            },
        };
        if deadline_ns.is_some() && when == 0 {
            return Ok(Wakeup {
                readable: false,
                deadline: true,
            });
        }
        // SAFETY: timer is a timerfd; spec is valid; a zero it_value disarms it.
        let rc = unsafe {
            libc::timerfd_settime(
                self.timer.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 2];
        // SAFETY: events has room for 2 entries.
        let n = unsafe {
            libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), 2, max_wait_ms)
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(Wakeup {
                    readable: false,
                    deadline: false,
                });
            }
            return Err(e);
        }
        let mut wake = Wakeup {
            readable: false,
            deadline: false,
        };
        for ev in &events[..n as usize] {
            match ev.u64 {
                TOKEN_FD => wake.readable = true,
                _ => {
                    let mut expirations = [0u8; 8];
                    // SAFETY: reading 8 bytes from a nonblocking timerfd into an 8-byte buffer.
                    unsafe {
                        libc::read(self.timer.as_raw_fd(), expirations.as_mut_ptr().cast(), 8)
                    };
                    wake.deadline = true;
                }
            }
        }
        Ok(wake)
    }
}

/// # Safety
/// `fd` must be a fresh fd returned by a syscall (or negative on error).
unsafe fn owned(fd: i32) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the caller guarantees fd is fresh and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
