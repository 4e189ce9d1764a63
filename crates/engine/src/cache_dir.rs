//! The user's per-user cache directory (`$XDG_CACHE_HOME/longhaul`, else
//! `~/.cache/longhaul`) and how its files are kept private and replaced whole: shared by
//! the chunk-hash cache ([`crate::cp::hash_cache`]) and the path cache
//! ([`crate::path_cache`]).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Makes `dir` (0700, with its parents) for a per-user cache named `what` in errors: a
/// symlink or a non-directory there is refused, a directory open to others is narrowed to
/// 0700 (refused if that is not ours to change).
pub(crate) fn private_dir(dir: &Path, what: &str) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} {} is not a directory (a symlink?)", dir.display()),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Writes `bytes` to a new private (0600) file at `temp` and renames it over `dest`, so a
/// reader sees the old content or the new, whole; the temporary file is removed on error.
/// O_CREAT|O_EXCL (create_new) never follows a symlink, and the rename replaces a symlink
/// at `dest` instead of writing through it.
pub(crate) fn replace_private(temp: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(temp)
        .and_then(|mut out| out.write_all(bytes))
        .and_then(|()| fs::rename(temp, dest));
    if written.is_err() {
        let _ = fs::remove_file(temp);
    }
    written
}

/// The user's longhaul cache directory: `$XDG_CACHE_HOME/longhaul` (an absolute
/// `XDG_CACHE_HOME`), else `$HOME/.cache/longhaul`.
pub(crate) fn cache_base() -> io::Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from) {
        Some(p) if p.is_absolute() => p,
        _ => match std::env::var_os("HOME").map(PathBuf::from) {
            Some(home) if home.is_absolute() => home.join(".cache"),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no cache directory: set HOME or XDG_CACHE_HOME",
                ))
            }
        },
    };
    Ok(base.join("longhaul"))
}
