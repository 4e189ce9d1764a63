//! Part files and the claim on them: a session takes a part name only with the part
//! file's lock (`flock`, exclusive), clears a stale one once it holds its lock, never
//! touches one another session holds ([`part_locked`]), and checks that a name is still
//! the file it locked (same device and inode) before trusting it; with the errors for
//! names that changed under it.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, ServedRoot};

/// Rounds of claiming a part name before giving up (each lost only to another session
/// or process changing the name at that very moment).
pub(super) const CLAIM_ATTEMPTS: usize = 8;

/// A new, empty part file at `rel`, locked by this session. Whatever held the name is
/// removed first: a stale part file only once its lock is ours (another session's is
/// never touched: [`part_locked`]), a symlink or special file at once (never followed).
pub(super) fn claim_part(root: &ServedRoot, rel: &Path, shown: &Path) -> io::Result<File> {
    for _ in 0..CLAIM_ATTEMPTS {
        match root.open_file(rel, Access::CreateNew { mode: 0o600 }) {
            Ok(f) => {
                lock_part(&f, shown)?;
                // Else another session took and renamed it between the create and the
                // lock: try again.
                if same_file(root, rel, &f)? {
                    return Ok(f);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                clear_stale_part(root, rel, shown)?
            }
            Err(e) => return Err(e),
        }
    }
    Err(kept_changing(rel))
}

/// Removes what holds the part name `rel` unless it is a part file another session has
/// locked (then the error is [`part_locked`]'s). Nothing there is not an error.
pub(super) fn clear_stale_part(root: &ServedRoot, rel: &Path, shown: &Path) -> io::Result<()> {
    let m = match root.metadata(rel) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    // Held only until the removal: nobody else claims the name meanwhile.
    let _locked = if m.is_file() {
        let f = match root.open_file(rel, Access::ReadOwn) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        lock_part(&f, shown)?;
        if !same_file(root, rel, &f)? {
            // Renamed away by the session that held it: the caller looks again.
            return Ok(());
        }
        Some(f)
    } else {
        None
    };
    remove_if_there(root, rel)
}

/// The existing part file `rel`, locked by this session, to resume into; `None` when it
/// cannot be resumed in place: gone, or with another hard link (writing would change
/// that other name's bytes too).
pub(super) fn resume_part(root: &ServedRoot, rel: &Path, shown: &Path) -> io::Result<Option<File>> {
    let f = match root.open_file(rel, Access::ReadWriteCreate { mode: 0o600 }) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    lock_part(&f, shown)?;
    if !same_file(root, rel, &f)? || f.metadata()?.nlink() != 1 {
        return Ok(None);
    }
    Ok(Some(f))
}

/// How long a session waits for another one's lock on a part file. A rerun right after
/// the first run was stopped (Ctrl-C, a kill) often arrives before the server's session
/// for that run has noticed its client is gone and let go: moments, not seconds.
const PART_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Takes the part file's lock for this session, waiting up to [`PART_LOCK_WAIT`] for a
/// session that is ending, or fails with [`part_locked`] (`shown`: the file being
/// written, for the message).
pub(super) fn lock_part(f: &File, shown: &Path) -> io::Result<()> {
    wait_for_lock(f, shown, file_io::try_lock_exclusive)
}

/// [`lock_part`] shared: a striped copy's shares write one part file together, and keep
/// out any session that would claim it alone.
pub(super) fn lock_part_shared(f: &File, shown: &Path) -> io::Result<()> {
    wait_for_lock(f, shown, file_io::try_lock_shared)
}

fn wait_for_lock(f: &File, shown: &Path, lock: fn(&File) -> io::Result<bool>) -> io::Result<()> {
    let began = std::time::Instant::now();
    loop {
        if lock(f)? {
            return Ok(());
        }
        if began.elapsed() >= PART_LOCK_WAIT {
            return Err(part_locked(shown));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Another session holds the part file of `name`.
fn part_locked(name: &Path) -> io::Error {
    io::Error::other(format!(
        "another longhaul transfer is writing {} right now (its part file stayed locked \
             for {} s); wait for it to finish or stop it",
        name.display(),
        PART_LOCK_WAIT.as_secs()
    ))
}

/// Whether `rel` (not followed if a symlink) is the file `f` is open on: same device and
/// inode. Missing is `false`.
pub(super) fn same_file(root: &ServedRoot, rel: &Path, f: &File) -> io::Result<bool> {
    let at = match root.metadata(rel) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let ours = f.metadata()?;
    Ok(at.dev() == ours.dev() && at.ino() == ours.ino())
}

pub(super) fn replaced(rel: &Path) -> io::Error {
    io::Error::other(format!(
        "{} is no longer the file that was written and verified (another process replaced \
         it); nothing was put in place: run the copy again",
        rel.display()
    ))
}

pub(super) fn kept_changing(rel: &Path) -> io::Error {
    io::Error::other(format!(
        "{} kept changing while this transfer tried to claim it ({CLAIM_ATTEMPTS} times); \
         is another program writing there?",
        rel.display()
    ))
}

pub(super) fn remove_if_there(root: &ServedRoot, rel: &Path) -> io::Result<()> {
    match root.remove_file(rel) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
