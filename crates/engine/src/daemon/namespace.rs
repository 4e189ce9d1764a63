//! Namespace operations on a daemon's files (`longhaul_proto::namespace`): the path
//! landed as any request's is (confined to its root or area, a read-only area refusing
//! changes, an area's user taken on), then one stat, listing, mkdir, unlink, rmdir or
//! checksum through the root, and its answer.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use longhaul_proto::namespace::{
    ChecksumKind, FsEntry, FsErrorKind, FsKind, FsOp, FsStat, MAX_FS_ENTRIES_PER_FRAME,
    MAX_FS_LISTING,
};
use longhaul_proto::{Access, Message, ServerSession};
use longhaul_sys::served_root::{Access as FileAccess, ServedRoot};
use longhaul_transfer::adler32::Adler32;

use super::reach::land;
use super::server::{send_all, ServeConfig};
use super::ServeError;
use crate::transport::framed::FramedConn;

/// A failed operation: its kind and words.
type Failure = (FsErrorKind, String);

/// Runs one operation for a client that proved `access` and answers it; returns the
/// log line.
pub(super) fn run_fs(
    session: &mut ServerSession,
    conn: &mut FramedConn,
    cfg: &ServeConfig,
    access: Access,
    ticket: bool,
    (op, path): (FsOp, Vec<u8>),
) -> Result<String, ServeError> {
    let shown = String::from_utf8_lossy(&path).into_owned();
    let answered = match (access, ticket) {
        (Access::Token(token), false) => answer(session, conn, cfg, token, op, &path),
        _ => Err((
            FsErrorKind::Denied,
            "a ticket opens one pull of its path, nothing else".into(),
        )),
    };
    let line = match answered {
        Ok(()) => format!("{op:?} {shown}: done"),
        Err((kind, message)) => {
            let line = format!("{op:?} {shown}: {message}");
            session.send_fs(Message::FsFailed { kind, message });
            line
        }
    };
    send_all(session, conn).map_err(ServeError::io("answering a namespace operation"))?;
    Ok(line)
}

fn answer(
    session: &mut ServerSession,
    conn: &mut FramedConn,
    cfg: &ServeConfig,
    token: usize,
    op: FsOp,
    path: &[u8],
) -> Result<(), Failure> {
    let landed = land(&cfg.files, token, path, op.writes(), cfg.caps)
        .map_err(|why| (FsErrorKind::Denied, why))?;
    let rel = landed.path.map(|p| p.to_path_buf()).unwrap_or_default();
    let root: &Arc<ServedRoot> = landed.root;
    let fail = |e: io::Error| failure(e, root, &rel);
    match op {
        FsOp::Stat => {
            let st = stat_of(&root.metadata(&rel).map_err(fail)?);
            session.send_fs(Message::FsStat(st));
        }
        FsOp::List => {
            let listed = root.read_dir_at_most(&rel, MAX_FS_LISTING).map_err(fail)?;
            for frame in listed.chunks(MAX_FS_ENTRIES_PER_FRAME) {
                let entries = frame
                    .iter()
                    .map(|e| FsEntry {
                        name: std::os::unix::ffi::OsStrExt::as_bytes(e.name.as_os_str()).to_vec(),
                        stat: stat_of(&e.metadata),
                    })
                    .collect();
                session.send_fs(Message::FsEntries(entries));
                // A long listing goes frame by frame, never held whole in the outbox.
                send_all(session, conn).map_err(|e| (FsErrorKind::Other, e.to_string()))?;
            }
            session.send_fs(Message::FsDone);
        }
        FsOp::Mkdir { mode, parents } => {
            mkdir(root, &rel, mode, parents)?;
            session.send_fs(Message::FsDone);
        }
        FsOp::Unlink => {
            if rel.as_os_str().is_empty() {
                return Err((FsErrorKind::IsADirectory, "the root is a directory".into()));
            }
            root.remove_file(&rel).map_err(fail)?;
            session.send_fs(Message::FsDone);
        }
        FsOp::Rmdir => {
            if rel.as_os_str().is_empty() {
                return Err((FsErrorKind::Denied, "the root itself is not removed".into()));
            }
            root.remove_below(Path::new(""), &rel, true).map_err(fail)?;
            session.send_fs(Message::FsDone);
        }
        FsOp::Checksum(kind) => {
            let value = checksum(root, &rel, kind).map_err(fail)?;
            session.send_fs(Message::FsChecksum { kind, value });
        }
    }
    Ok(())
}

/// `mkdir` or `mkdir -p` beneath the root.
fn mkdir(root: &ServedRoot, rel: &Path, mode: u32, parents: bool) -> Result<(), Failure> {
    let exists = |p: &Path| root.metadata(p).map(|m| m.is_dir());
    if !parents {
        if rel.as_os_str().is_empty() || exists(rel).is_ok() {
            return Err((
                FsErrorKind::Exists,
                format!("{} exists already", rel.display()),
            ));
        }
        let parent = rel.parent().map(PathBuf::from).unwrap_or_default();
        match exists(&parent) {
            Ok(true) => {}
            Ok(false) => {
                return Err((
                    FsErrorKind::NotADirectory,
                    format!("{} is not a directory", parent.display()),
                ))
            }
            Err(e) => return Err(failure(e, root, &parent)),
        }
    }
    root.create_dirs(rel, mode)
        .map_err(|e| failure(e, root, rel))?;
    match exists(rel) {
        Ok(true) => Ok(()),
        _ => Err((
            FsErrorKind::Exists,
            format!("{} exists and is not a directory", rel.display()),
        )),
    }
}

/// The checksum of the file `rel`, read through the root.
fn checksum(root: &ServedRoot, rel: &Path, kind: ChecksumKind) -> io::Result<Vec<u8>> {
    if root.metadata(rel)?.is_dir() {
        return Err(io::Error::from_raw_os_error(libc::EISDIR));
    }
    let mut file = root.open_file(rel, FileAccess::Read)?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut blake, mut adler) = (blake3::Hasher::new(), Adler32::default());
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        match kind {
            ChecksumKind::Blake3 => {
                blake.update(&buf[..n]);
            }
            ChecksumKind::Adler32 => adler.update(&buf[..n]),
        }
    }
    Ok(match kind {
        ChecksumKind::Blake3 => blake.finalize().as_bytes().to_vec(),
        ChecksumKind::Adler32 => adler.value().to_be_bytes().to_vec(),
    })
}

fn stat_of(m: &std::fs::Metadata) -> FsStat {
    use std::os::unix::fs::MetadataExt;
    let t = m.file_type();
    FsStat {
        kind: if t.is_file() {
            FsKind::File
        } else if t.is_dir() {
            FsKind::Dir
        } else if t.is_symlink() {
            FsKind::Symlink
        } else {
            FsKind::Other
        },
        size: m.len(),
        mode: m.mode() & 0o7777,
        mtime_secs: m.mtime(),
        mtime_nanos: u32::try_from(m.mtime_nsec()).unwrap_or(0).min(999_999_999),
    }
}

/// An I/O error as POSIX's kind and words naming `rel` (below the root: the root's own
/// place on the server is not the client's business).
fn failure(e: io::Error, root: &ServedRoot, rel: &Path) -> Failure {
    let errno = longhaul_sys::served_root::os_error(&e);
    let kind = match errno {
        Some(libc::ENOENT) => FsErrorKind::NotFound,
        Some(libc::EEXIST) => FsErrorKind::Exists,
        Some(libc::ENOTEMPTY) => FsErrorKind::NotEmpty,
        Some(libc::ENOTDIR) => FsErrorKind::NotADirectory,
        Some(libc::EISDIR) => FsErrorKind::IsADirectory,
        // Out of the root (EXDEV), a symlink on the way (ELOOP), or not allowed.
        Some(libc::EPERM | libc::EACCES | libc::EXDEV | libc::ELOOP) => FsErrorKind::Denied,
        _ => match e.kind() {
            io::ErrorKind::NotFound => FsErrorKind::NotFound,
            io::ErrorKind::PermissionDenied => FsErrorKind::Denied,
            _ => FsErrorKind::Other,
        },
    };
    let shown = if rel.as_os_str().is_empty() {
        ".".into()
    } else {
        rel.display().to_string()
    };
    let words = match errno {
        Some(libc::EXDEV) => "the path leaves the served root".to_string(),
        Some(libc::ELOOP) => "a symlink on the way, which is not followed here".to_string(),
        Some(n) => io::Error::from_raw_os_error(n).to_string(),
        // Not an OS error: the root's own words (a kind of file it does not serve), its
        // place left out.
        None => e
            .to_string()
            .replace(&root.path().display().to_string(), "the root"),
    };
    (kind, format!("{shown}: {words}"))
}
