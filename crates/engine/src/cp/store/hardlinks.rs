//! Received hard links on disk ([`RecvEvent::MakeHardLink`], `sync -H`): once every file
//! of the list is finished, a link entry's name is made another name of its target's
//! final path. When the name already is that inode nothing is done; otherwise a link is
//! made at the work name (`.NAME.longhaul-link`) with `linkat` beneath the root, never
//! following a symlink (the target must be a regular file), then renamed over `NAME`,
//! replacing a file or link there; a directory there fails that entry alone.
//!
//! [`RecvEvent::MakeHardLink`]: longhaul_transfer::session::RecvEvent::MakeHardLink

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use longhaul_transfer::session::HardLinkJob;

use super::part::{kept_changing, CLAIM_ATTEMPTS};
use super::Store;

impl Store {
    /// Makes a received hard link (see the module docs); the answer for
    /// [`RecvInput::HardLinkMade`](longhaul_transfer::session::RecvInput::HardLinkMade):
    /// an error is that entry's failure, the transfer goes on.
    pub fn make_hard_link(&self, job: &HardLinkJob) -> Result<(), String> {
        match self.link_in_place(job) {
            Ok(()) => Ok(()),
            // renameat over a directory (empty or not).
            Err(e) if matches!(e.raw_os_error(), Some(libc::EISDIR | libc::ENOTEMPTY)) => {
                Err(format!(
                    "the destination {} is a directory; a hard link cannot replace it",
                    job.final_rel.display()
                ))
            }
            Err(e) => Err(format!(
                "making it a hard link of {}: {e}",
                job.target_rel.display()
            )),
        }
    }

    fn link_in_place(&self, job: &HardLinkJob) -> io::Result<()> {
        let root = self.root();
        let target = root.metadata(&job.target_rel)?;
        let inode = (target.dev(), target.ino());
        let is_target = |rel: &Path| {
            root.metadata(rel)
                .is_ok_and(|m| m.is_file() && (m.dev(), m.ino()) == inode)
        };
        if is_target(&job.final_rel) {
            // Already another name of the target (a rename would do nothing).
            return Ok(());
        }
        let mut made = false;
        for _ in 0..CLAIM_ATTEMPTS {
            match root.hard_link(&job.target_rel, &job.temp_rel) {
                Ok(()) => {
                    made = true;
                    break;
                }
                // A link left by a run that stopped between its link and its rename.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    match root.remove_file(&job.temp_rel) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if !made {
            return Err(kept_changing(&job.temp_rel));
        }
        if let Err(e) = root.rename(&job.temp_rel, &job.final_rel, true) {
            let _ = root.remove_file(&job.temp_rel);
            return Err(e);
        }
        // rename(2) of two names of one inode does nothing: the final name became the
        // target meanwhile, and the work name is still there.
        if is_target(&job.temp_rel) {
            let _ = root.remove_file(&job.temp_rel);
        }
        let dir = job.final_rel.parent().unwrap_or(Path::new(""));
        if job.sync {
            root.sync_dir(dir)?;
        }
        self.note_new_name(dir);
        Ok(())
    }
}
