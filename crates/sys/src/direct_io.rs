//! Writes that bypass the page cache (`O_DIRECT`), for a receiver's part files.
//!
//! A buffered write copies every byte into the page cache, which the kernel allocates
//! and later writes back: on this project's test machine (a 2-core VM) that copy cost
//! 2.6 CPU seconds per GB (`dd` of 2 GiB: 5.5 s of system time buffered, 0.9 s with
//! `oflag=direct`), more than TLS, hashing and the network together, on a host where
//! the receiver shares its cores with the sender and the emulator. A direct write hands
//! the device the user buffer instead. It needs the file offset, the length and the
//! buffer's address aligned to the device's block ([`DIRECT_ALIGN`], 4096, covers 512-
//! and 4096-byte blocks): the aligned middle of a range goes direct, its unaligned ends
//! buffered (on different pages, so the two never overlap). The data is not left in the
//! page cache, which a copy of terabytes would only evict the host's working set for.
//!
//! The direct descriptor is a second open of the same file ([`reopen_direct`], through
//! `/proc/self/fd`: the same inode, no path looked up again), only on a local block file
//! system known to suit (`DIRECT_FILE_SYSTEMS`: ext4, xfs). An unaligned request there
//! fails with `EINVAL`: the bytes are then written buffered and the caller is told, to
//! stop trying.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

/// Alignment of every direct write: offset, length and buffer address.
pub const DIRECT_ALIGN: u64 = 4096;

/// File systems whose direct writes are known to be what this module wants: block
/// file systems that take a large aligned write straight to the device. Not network
/// file systems (NFS sends each direct write as its own synchronous request) nor FUSE,
/// btrfs (checksummed direct writes), tmpfs (none): those keep the page cache.
const DIRECT_FILE_SYSTEMS: [(i64, &str); 2] = [(0xEF53, "ext2/3/4"), (0x5846_5342, "xfs")];

/// Which of `DIRECT_FILE_SYSTEMS` `file` is on, if any (`fstatfs(2)`).
pub fn direct_file_system(file: &File) -> Option<&'static str> {
    // SAFETY: `statfs` is plain data, filled by the kernel; the fd is open.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and a valid out pointer.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    let magic = st.f_type as i64;
    DIRECT_FILE_SYSTEMS
        .iter()
        .find(|(m, _)| *m == magic)
        .map(|(_, name)| *name)
}

/// `file` opened again for direct writes (`O_WRONLY | O_DIRECT`), on a file system of
/// `DIRECT_FILE_SYSTEMS`; `Unsupported` elsewhere.
pub fn reopen_direct(file: &File) -> io::Result<File> {
    if direct_file_system(file).is_none() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "not a file system whose direct writes this build uses",
        ));
    }
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// What [`write_all_at_direct`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Bytes that went direct.
    pub direct: u64,
    /// The file system refused a direct write (`EINVAL`): those bytes went buffered, and
    /// later writes should not try again.
    pub refused: bool,
}

/// Writes all of `bytes` at `at`: the block-aligned middle through `direct` (opened by
/// [`reopen_direct`]), the rest through `buffered` (the same file).
pub fn write_all_at_direct(
    buffered: &File,
    direct: &File,
    bytes: &[u8],
    at: u64,
) -> io::Result<Written> {
    let align = DIRECT_ALIGN as usize;
    let head = ((DIRECT_ALIGN - at % DIRECT_ALIGN) % DIRECT_ALIGN) as usize;
    let head = head.min(bytes.len());
    let body = (bytes.len() - head) / align * align;
    let mut out = Written::default();
    if body == 0 || (bytes.as_ptr() as usize + head) % align != 0 {
        buffered.write_all_at(bytes, at)?;
        return Ok(out);
    }
    buffered.write_all_at(&bytes[..head], at)?;
    let mut done = 0;
    while done < body {
        let piece = &bytes[head + done..head + body];
        match direct.write_at(piece, at + (head + done) as u64) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            // A short direct write ends on a block boundary; anything else is finished
            // buffered below.
            Ok(n) if n % align == 0 => done += n,
            Ok(n) => {
                done += n;
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                out.refused = true;
                break;
            }
            Err(e) => return Err(e),
        }
    }
    out.direct = done as u64;
    buffered.write_all_at(&bytes[head + done..], at + (head + done) as u64)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aligned::AlignedBuf;

    /// A scratch file in the temporary directory (a disk file system here; on tmpfs the
    /// test says it is skipped).
    fn scratch(tag: &str) -> (std::path::PathBuf, File) {
        let p = std::env::temp_dir().join(format!("lh-direct-{tag}-{}", std::process::id()));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        (p, f)
    }

    #[test]
    fn only_known_block_file_systems_write_direct() {
        // tmpfs keeps the page cache (and takes no O_DIRECT at all).
        let shm = std::path::Path::new("/dev/shm");
        if shm.is_dir() {
            let p = shm.join(format!("lh-direct-fs-{}", std::process::id()));
            let f = File::create(&p).unwrap();
            assert_eq!(direct_file_system(&f), None);
            let e = reopen_direct(&f).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::Unsupported);
            std::fs::remove_file(&p).unwrap();
        }
        let (p, f) = scratch("fs");
        eprintln!("{}: {:?}", p.display(), direct_file_system(&f));
        assert_eq!(direct_file_system(&f).is_some(), reopen_direct(&f).is_ok());
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn every_byte_lands_whatever_the_alignment() {
        let (path, f) = scratch("align");
        let size = 3 << 20;
        f.set_len(size).unwrap();
        let Ok(d) = reopen_direct(&f) else {
            eprintln!("no O_DIRECT on {}: skipped", path.display());
            return;
        };
        let mut want = vec![0u8; size as usize];
        let mut buf = AlignedBuf::zeroed(1 << 20);
        let mut direct = 0;
        let mut refused = false;
        // Aligned, odd offsets, odd lengths, a misaligned buffer start, a tiny write.
        for (i, (at, from, len)) in [
            (0u64, 0usize, 1usize << 20),
            (1 << 20, 0, (1 << 20) - 100),
            (2 << 20 | 13, 13, 70_000),
            ((2 << 20) + 200_000, 5, 4096),
            ((3 << 20) - 10, 0, 10),
        ]
        .into_iter()
        .enumerate()
        {
            for (k, b) in buf.iter_mut().enumerate() {
                *b = (k * 7 + i * 31 + 1) as u8;
            }
            let bytes = &buf[from..from + len];
            let w = write_all_at_direct(&f, &d, bytes, at).unwrap();
            direct += w.direct;
            refused |= w.refused;
            want[at as usize..at as usize + len].copy_from_slice(bytes);
        }
        eprintln!("{direct} bytes direct, refused {refused}");
        let got = std::fs::read(&path).unwrap();
        assert!(got == want, "the file differs from what was written");
        if !refused {
            // The two aligned writes went direct (all but the unaligned tail).
            assert!(direct >= (2 << 20) - 4096, "{direct} bytes direct");
        }
        std::fs::remove_file(&path).unwrap();
    }
}
