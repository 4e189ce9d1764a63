//! Ways to hand bytes to a TCP socket without copying them: `sendfile(2)` from an
//! in-memory file (memfd), and `send(2)` with `MSG_ZEROCOPY` plus its completion queue.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};

/// `SO_EE_ORIGIN_ZEROCOPY` from linux/errqueue.h.
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `SO_EE_CODE_ZEROCOPY_COPIED` from linux/errqueue.h.
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// An anonymous in-memory file (memfd) holding a bench payload, the source of `sendfile`.
pub struct MemFile {
    file: File,
    len: u64,
}

impl MemFile {
    /// Creates a memfd holding `data`.
    pub fn with_contents(name: &str, data: &[u8]) -> io::Result<Self> {
        let cname = std::ffi::CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name contains NUL"))?;
        // SAFETY: cname is a valid C string; the returned fd is owned by File below.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh, owned file descriptor.
        let mut file = unsafe { File::from_raw_fd(fd) };
        file.write_all(data)?;
        Ok(Self {
            file,
            len: data.len() as u64,
        })
    }

    /// Length of the payload in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sends up to `count` bytes of the file starting at `offset` to `sock` with
    /// `sendfile(2)`; returns the bytes sent.
    pub fn send_to(&self, sock: &impl AsRawFd, offset: u64, count: usize) -> io::Result<usize> {
        let mut off = offset as libc::off_t;
        // SAFETY: both fds are open for the call; off is valid for reads and writes.
        let n = unsafe { libc::sendfile(sock.as_raw_fd(), self.file.as_raw_fd(), &mut off, count) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

/// Turns on SO_ZEROCOPY so that `send_zerocopy` may be used.
pub fn enable_zerocopy(sock: &impl AsRawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` is valid for reads of its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ZEROCOPY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `buf` with MSG_ZEROCOPY. The caller must keep `buf` unchanged until the kernel
/// reports completion (see [`drain_zerocopy_completions`]); a bench payload never changes.
/// Returns ENOBUFS when too many sends await completion: drain, then retry.
pub fn send_zerocopy(sock: &impl AsRawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for reads of its length for the call; the kernel pins the pages.
    let n = unsafe {
        libc::send(
            sock.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_ZEROCOPY,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Whether a `send_zerocopy` failed only because too many sends await completion.
pub fn is_out_of_buffers(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Reads every pending MSG_ZEROCOPY completion from the socket's error queue without
/// blocking; returns how many sends completed and whether the kernel fell back to copying.
pub fn drain_zerocopy_completions(sock: &impl AsRawFd) -> io::Result<(u64, bool)> {
    let mut completed = 0u64;
    let mut copied = false;
    loop {
        let mut control = [0u64; 16];
        // SAFETY: an all-zero msghdr is valid; we point it at `control` below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: msg points to valid buffers for the call.
        let rc = unsafe {
            libc::recvmsg(
                sock.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::WouldBlock {
                return Ok((completed, copied));
            }
            return Err(err);
        }
        // SAFETY: msg was filled by recvmsg; CMSG_* walk the control buffer it describes.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                let c = &*cmsg;
                if (c.cmsg_level == libc::SOL_IP && c.cmsg_type == libc::IP_RECVERR)
                    || (c.cmsg_level == libc::SOL_IPV6 && c.cmsg_type == libc::IPV6_RECVERR)
                {
                    let err = &*(libc::CMSG_DATA(cmsg) as *const libc::sock_extended_err);
                    if err.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                        completed += (err.ee_data.wrapping_sub(err.ee_info) as u64) + 1;
                        if err.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                            copied = true;
                        }
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn sendfile_moves_the_memfd_contents() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
        let mem = MemFile::with_contents("longhaul-test", &data).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            got
        });
        let mut off = 0u64;
        while off < mem.len() {
            off += mem.send_to(&c, off, (mem.len() - off) as usize).unwrap() as u64;
        }
        drop(c);
        assert_eq!(reader.join().unwrap(), data);
    }

    #[test]
    fn zerocopy_sends_complete() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        enable_zerocopy(&c).unwrap();
        let buf = vec![5u8; 64 * 1024];
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            got.len()
        });
        let mut sent = 0;
        let mut sends = 0u64;
        while sent < 16 * buf.len() {
            sent += send_zerocopy(&c, &buf).unwrap();
            sends += 1;
        }
        drop(c.shutdown(std::net::Shutdown::Write));
        assert_eq!(reader.join().unwrap(), sent);
        let mut done = 0;
        for _ in 0..200 {
            done += drain_zerocopy_completions(&c).unwrap().0;
            if done >= sends {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(done, sends);
    }
}
