//! Received symlinks on disk ([`RecvEvent::MakeSymlink`]): a link is made at its work name
//! (`.NAME.longhaul-link`) with `symlinkat` in the parent directory resolved beneath the
//! root, given its own mtime (`utimensat(AT_SYMLINK_NOFOLLOW)`), then renamed over `NAME`.
//! The rename replaces a symlink or a file there (the name, never what it points at) and
//! fails on a directory, which that entry reports as its failure. The target is stored
//! as the sender read it: a link may point anywhere, out of the root included, because
//! nothing here follows it, and nothing is ever written through one (part files,
//! manifests and directory modes never follow a symlink in their last component, and
//! ServedRoot refuses any path whose parents leave the root).
//!
//! [`RecvEvent::MakeSymlink`]: longhaul_transfer::session::RecvEvent::MakeSymlink

use std::io;
use std::path::Path;

use longhaul_transfer::session::LinkJob;

use super::part::{clear_stale_part, kept_changing, CLAIM_ATTEMPTS};
use super::Store;

impl Store {
    /// Makes a received symlink (see the module docs); the answer for
    /// [`RecvInput::SymlinkMade`](longhaul_transfer::session::RecvInput::SymlinkMade):
    /// an error is that entry's failure, the transfer goes on.
    pub fn make_symlink(&self, job: &LinkJob) -> Result<(), String> {
        match self.make_link(job) {
            Ok(None) => Ok(()),
            Ok(Some(e)) => Err(format!("in place, but its mtime could not be set: {e}")),
            // renameat over a directory (empty or not).
            Err(e) if matches!(e.raw_os_error(), Some(libc::EISDIR | libc::ENOTEMPTY)) => {
                Err(format!(
                    "the destination {} is a directory; a symlink cannot replace it",
                    job.final_rel.display()
                ))
            }
            Err(e) => Err(format!("making the symlink: {e}")),
        }
    }

    /// The link in place, with the error of setting its mtime if that failed.
    fn make_link(&self, job: &LinkJob) -> io::Result<Option<io::Error>> {
        let root = self.root();
        let mut made = false;
        for _ in 0..CLAIM_ATTEMPTS {
            match root.create_symlink(&job.target, &job.temp_rel) {
                Ok(()) => {
                    made = true;
                    break;
                }
                // A link left by a run that stopped between its symlink and its rename
                // (or anything else at the work name, unless another session holds it).
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    clear_stale_part(root, &job.temp_rel, &job.final_rel)?;
                }
                Err(e) => return Err(e),
            }
        }
        if !made {
            return Err(kept_changing(&job.temp_rel));
        }
        // Before the rename, so the link never appears with another time.
        let (secs, nanos) = job.mtime;
        let unset = root.set_link_mtime(&job.temp_rel, secs, nanos).err();
        if let Err(e) = root.rename(&job.temp_rel, &job.final_rel, true) {
            let _ = root.remove_file(&job.temp_rel);
            return Err(e);
        }
        let dir = job.final_rel.parent().unwrap_or(Path::new(""));
        if job.sync {
            root.sync_dir(dir)?;
        }
        self.note_new_name(dir);
        Ok(unset)
    }
}
