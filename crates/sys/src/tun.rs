//! TUN devices with the kernel's offloads: `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR`, so a read
//! may return a GSO super-packet of up to 64 KiB with a `virtio_net_hdr` in front.

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;

/// Length of the legacy `struct virtio_net_hdr` that precedes every packet on the fd.
pub const VNET_HDR_LEN: usize = 10;

/// Largest packet a read can return: a 64 KiB GSO super-packet plus the virtio header.
pub const MAX_PACKET_LEN: usize = VNET_HDR_LEN + 65_535;

/// The offloads a TUN device was opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offloads {
    /// TCP segmentation offload (TSO4/TSO6): reads may carry TCP super-packets.
    pub tcp: bool,
    /// UDP segmentation offload (USO4/USO6): reads may carry UDP super-packets.
    pub udp: bool,
}

/// An open, nonblocking TUN device with a virtio header on every packet.
/// The interface exists as long as this value lives (it is not persistent).
#[derive(Debug)]
pub struct TunDevice {
    file: File,
    name: String,
    offloads: Offloads,
}

/// `struct ifreq` as far as TUNSETIFF needs it.
#[repr(C)]
struct IfReqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl TunDevice {
    /// Creates TUN interface `name` in the calling thread's network namespace and opens it
    /// nonblocking with offloads enabled (checksum, TSO4/6 and, when the kernel has them,
    /// USO4/6). With `offload == false` no offload is requested (one packet per read).
    pub fn create(name: &str, offload: bool) -> io::Result<TunDevice> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || !name.is_ascii() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interface name {name:?} must be 1-15 ASCII characters"),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|e| io::Error::new(e.kind(), format!("cannot open /dev/net/tun: {e}")))?;
        let mut req = IfReqFlags {
            name: [0; libc::IFNAMSIZ],
            flags: (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short,
            _pad: [0; 22],
        };
        for (dst, src) in req.name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        let fd = file.as_raw_fd();
        // SAFETY: fd is an open /dev/net/tun; req is a properly sized, initialised ifreq.
        check(unsafe { libc::ioctl(fd, libc::TUNSETIFF, &mut req as *mut IfReqFlags) })
            .map_err(|e| io::Error::new(e.kind(), format!("TUNSETIFF {name}: {e}")))?;
        let hdr_len: libc::c_int = VNET_HDR_LEN as libc::c_int;
        // SAFETY: TUNSETVNETHDRSZ reads one c_int through the pointer.
        check(unsafe { libc::ioctl(fd, libc::TUNSETVNETHDRSZ, &hdr_len as *const libc::c_int) })
            .map_err(|e| io::Error::new(e.kind(), format!("TUNSETVNETHDRSZ {name}: {e}")))?;
        let mut offloads = Offloads {
            tcp: false,
            udp: false,
        };
        if offload {
            let tcp = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6;
            let udp = libc::TUN_F_USO4 | libc::TUN_F_USO6;
            if set_offload(fd, tcp | udp).is_ok() {
                offloads = Offloads {
                    tcp: true,
                    udp: true,
                };
            } else {
                set_offload(fd, tcp)
                    .map_err(|e| io::Error::new(e.kind(), format!("TUNSETOFFLOAD {name}: {e}")))?;
                offloads.tcp = true;
            }
        } else {
            set_offload(fd, 0)?;
        }
        // SAFETY: the kernel wrote a NUL-terminated name (at most IFNAMSIZ-1 chars) into req.
        let actual = unsafe { CStr::from_ptr(req.name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(TunDevice {
            file,
            name: actual,
            offloads,
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The offloads in force.
    pub fn offloads(&self) -> Offloads {
        self.offloads
    }

    /// Reads one packet (virtio header included) into `buf`; `WouldBlock` when none waits.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for writes of buf.len() bytes.
        let n = unsafe { libc::read(self.file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Reads one packet into `buf` (cleared first, grown to [`MAX_PACKET_LEN`] capacity),
    /// without zero-filling it; `WouldBlock` when none waits.
    pub fn recv_vec(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        buf.clear();
        buf.reserve(MAX_PACKET_LEN);
        let spare = buf.spare_capacity_mut();
        // SAFETY: spare is valid for writes of spare.len() bytes; read initialises the
        // first n of them, and only those are exposed by set_len.
        let n = unsafe {
            libc::read(
                self.file.as_raw_fd(),
                spare.as_mut_ptr().cast(),
                spare.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: n <= spare.len() bytes were initialised by read.
        unsafe { buf.set_len(n as usize) };
        Ok(n as usize)
    }

    /// Writes one packet (virtio header included) into the interface, i.e. hands it to the
    /// namespace's stack as if it had arrived on the wire.
    pub fn send(&self, packet: &[u8]) -> io::Result<usize> {
        // SAFETY: packet is valid for reads of packet.len() bytes.
        let n = unsafe { libc::write(self.file.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl AsFd for TunDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

fn set_offload(fd: libc::c_int, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes the flags by value.
    check(unsafe { libc::ioctl(fd, libc::TUNSETOFFLOAD, flags as libc::c_ulong) })
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Reads the kernel's transmit-drop counter of `ifname` from a `/proc/net/dev` text, i.e.
/// packets the stack could not queue towards user space because the TUN ring was full.
pub fn tx_dropped_from_proc_net_dev(text: &str, ifname: &str) -> Option<u64> {
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if name.trim() != ifname {
            continue;
        }
        // rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets errs drop ...
        return rest.split_whitespace().nth(11).and_then(|v| v.parse().ok());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tx_dropped() {
        let text = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n   lh0: 1000      10    0    1    0     0          0         0     2000      20    0   7    0     0       0          0\n";
        assert_eq!(tx_dropped_from_proc_net_dev(text, "lh0"), Some(7));
        assert_eq!(tx_dropped_from_proc_net_dev(text, "lo"), Some(0));
        assert_eq!(tx_dropped_from_proc_net_dev(text, "eth9"), None);
    }
}
