//! Positional file I/O for chunked transfers: reads and writes at an offset (any number
//! of streams write one file at once), space reservation, holes and data segments of
//! sparse files (`SEEK_DATA`/`SEEK_HOLE`), early write-back and durable syncs, opening
//! only regular files without ever blocking on a FIFO ([`open_regular`],
//! [`regular_only`]), and exclusive and shared locks ([`try_lock_exclusive`], [`try_lock_shared`]).

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Opens the local file `path` for reading, refusing anything but a regular file (see
/// [`regular_only`]). The open itself never blocks: `O_NONBLOCK` (a FIFO opened for
/// reading would wait for a writer forever).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    regular_only(file, &path.display().to_string())
}

/// `file` if it is a regular file (checked with `fstat`), with `O_NONBLOCK` cleared (it
/// means nothing for regular files on Linux; cleared so that no read depends on that);
/// else an error of kind `InvalidInput` saying what `shown` is instead.
pub fn regular_only(file: File, shown: &str) -> io::Result<File> {
    let ft = file.metadata()?.file_type();
    if !ft.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{shown} is {}, not a regular file: longhaul copies regular files, \
                 directories and symlinks",
                kind_name(ft)
            ),
        ));
    }
    let fd = file.as_raw_fd();
    // SAFETY: fd is an open descriptor owned by `file`; F_GETFL/F_SETFL take ints.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// Takes an exclusive `flock(2)` on `file` without waiting: `Ok(false)` when another
/// open file description holds a lock on it. Released when every descriptor sharing
/// this description is closed.
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    try_flock(file, libc::LOCK_EX)
}

/// Takes a shared `flock(2)` on `file` without waiting: `Ok(false)` when another open
/// file description holds an exclusive lock on it. Shared holders exclude exclusive ones
/// (and the other way round), not each other.
pub fn try_lock_shared(file: &File) -> io::Result<bool> {
    try_flock(file, libc::LOCK_SH)
}

fn try_flock(file: &File, op: libc::c_int) -> io::Result<bool> {
    loop {
        // SAFETY: the fd is open (owned by `file`); flock takes ints.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(e),
        }
    }
}

/// What a file type is, for messages: "a FIFO", "a directory", ...
pub fn kind_name(ft: std::fs::FileType) -> &'static str {
    if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symlink"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

/// Writes all of `buf` at `offset` (`pwrite(2)`, retried on short writes and `EINTR`).
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    file.write_all_at(buf, offset)
}

/// Fills `buf` from `offset` (`pread(2)`); `UnexpectedEof` if the file is shorter.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    file.read_exact_at(buf, offset)
}

/// Reserves disk space for `len` bytes at `offset` (`fallocate(2)` mode 0), so that a
/// full disk shows up before the transfer, not in the middle. Do not use it on ranges
/// that should stay holes.
pub fn reserve(file: &File, offset: u64, len: u64) -> io::Result<()> {
    fallocate(file, 0, offset, len)
}

/// Turns `len` bytes at `offset` into a hole, keeping the file size
/// (`FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`).
pub fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    fallocate(
        file,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        offset,
        len,
    )
}

fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    let (off, len) = (to_off(offset)?, to_off(len)?);
    // SAFETY: the fd is open for the duration of the call.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, off, len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The ranges of `range` that hold data (everything else reads as zeros and need not be
/// sent), found with `SEEK_DATA`/`SEEK_HOLE`; at most `max_segments` (the rest of the
/// range is then returned as one data segment, which is correct, only less sparse).
/// File systems without hole support report the whole file as data.
pub fn data_segments(
    file: &File,
    range: Range<u64>,
    max_segments: usize,
) -> io::Result<Vec<Range<u64>>> {
    let mut out = Vec::new();
    let mut pos = range.start;
    while pos < range.end {
        let Some(start) = seek(file, pos, libc::SEEK_DATA)? else {
            break; // no data after pos
        };
        if start >= range.end {
            break;
        }
        if out.len() + 1 == max_segments.max(1) {
            out.push(start..range.end);
            break;
        }
        let end = seek(file, start, libc::SEEK_HOLE)?
            .unwrap_or(range.end)
            .min(range.end);
        out.push(start..end);
        pos = end;
    }
    Ok(out)
}

/// `lseek`; `None` for `ENXIO` (no data / hole at or after `pos`).
fn seek(file: &File, pos: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
    // SAFETY: the fd is open; lseek has no memory arguments.
    let r = unsafe { libc::lseek(file.as_raw_fd(), to_off(pos)?, whence) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    Ok(Some(r as u64))
}

/// Bytes the file occupies on disk (`st_blocks * 512`), to check that holes stayed holes.
pub fn allocated_bytes(file: &File) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(file.metadata()?.blocks() * 512)
}

/// Flushes the file's data and the metadata needed to read it (`fdatasync(2)`): call it
/// before recording a chunk as verified in the resume manifest.
pub fn sync_data(file: &File) -> io::Result<()> {
    file.sync_data()
}

/// Flushes data and all metadata (`fsync(2)`).
pub fn sync_all(file: &File) -> io::Result<()> {
    file.sync_all()
}

/// Starts writing `len` bytes at `offset` back to disk without waiting
/// (`sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE`), so that a later [`sync_data`] or
/// [`sync_all`] finds little left to do. Not a durability guarantee by itself: it flushes
/// no metadata and does not wait.
pub fn start_write_back(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let (off, len) = (to_off(offset)?, to_off(len)?);
    // SAFETY: the fd is open for the duration of the call; no memory arguments.
    let rc =
        unsafe { libc::sync_file_range(file.as_raw_fd(), off, len, libc::SYNC_FILE_RANGE_WRITE) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Room left on a file system, as an unprivileged user may use it (`fstatvfs(2)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsSpace {
    /// Free bytes (`f_bavail * f_frsize`).
    pub free_bytes: u64,
    /// Free inodes (`f_favail`); `None` where the file system has no fixed number
    /// (`f_files == 0`, e.g. btrfs).
    pub free_inodes: Option<u64>,
}

/// The room left on the file system holding `file` (any open file or directory).
pub fn fs_space(file: &impl AsRawFd) -> io::Result<FsSpace> {
    // SAFETY: statvfs is plain old data; all-zero is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the fd is open and `st` a valid, writable statvfs for the call.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::useless_conversion)] // the field widths differ between targets
    let (bavail, frsize, files, favail) = (
        u64::from(st.f_bavail),
        u64::from(st.f_frsize),
        u64::from(st.f_files),
        u64::from(st.f_favail),
    );
    Ok(FsSpace {
        free_bytes: bavail.saturating_mul(frsize),
        free_inodes: (files > 0).then_some(favail),
    })
}

fn to_off(v: u64) -> io::Result<libc::off_t> {
    libc::off_t::try_from(v).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("offset {v} exceeds the largest file offset"),
        )
    })
}

/// Sends `len` bytes of `file` from `offset` to `sock` with `sendfile(2)` (the page cache
/// goes to the socket without a copy through user space); loops until all are sent.
/// A file that shrank underneath is an `UnexpectedEof` error.
pub fn send_file_range(
    sock: &impl std::os::fd::AsRawFd,
    file: &File,
    offset: u64,
    len: u64,
) -> io::Result<()> {
    let mut off = to_off(offset)?;
    let end = offset
        .checked_add(len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "range overflows"))?;
    while (off as u64) < end {
        let want = (end - off as u64).min(1 << 30) as usize;
        // SAFETY: both fds are open for the call; `off` is a valid in/out offset.
        let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, want) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(())
}

/// Copies `len` bytes of `from` at `offset` to the same offset of `to` with
/// `copy_file_range(2)` (a reflink or an in-kernel copy where the file system can; no
/// bytes through user space), falling back to `pread`/`pwrite` where the kernel cannot
/// (another file system, an old kernel). `UnexpectedEof` if `from` is shorter.
pub fn copy_range(from: &File, to: &File, offset: u64, len: u64) -> io::Result<()> {
    let end = offset
        .checked_add(len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "range overflows"))?;
    let mut done = offset;
    while done < end {
        let mut off_in = to_off(done)?;
        let mut off_out = off_in;
        let want = (end - done).min(1 << 30) as usize;
        // SAFETY: both fds are open for the call; the offsets are valid in/out pointers.
        let n = unsafe {
            libc::copy_file_range(
                from.as_raw_fd(),
                &mut off_in,
                to.as_raw_fd(),
                &mut off_out,
                want,
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EXDEV | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP) => {
                    return copy_by_reads(from, to, done, end - done);
                }
                _ => return Err(e),
            }
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        done += n as u64;
    }
    Ok(())
}

/// [`copy_range`] through a buffer.
fn copy_by_reads(from: &File, to: &File, offset: u64, len: u64) -> io::Result<()> {
    let mut buf = vec![0u8; (1 << 20).min(len as usize)];
    let mut at = 0;
    while at < len {
        let n = (buf.len() as u64).min(len - at) as usize;
        from.read_exact_at(&mut buf[..n], offset + at)?;
        to.write_all_at(&buf[..n], offset + at)?;
        at += n as u64;
    }
    Ok(())
}
