//! Scratch directories ([`Scratch`]): fresh per test, removed on drop unless
//! `LONGHAUL_KEEP_SCRATCH` is set.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

static SCRATCH_SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh directory, removed (recursively) on drop unless `LONGHAUL_KEEP_SCRATCH` is set
/// (to look at what a failed test left).
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// Creates `longhaul-test-NAME-PID-SEQ` in the system temp dir.
    pub fn new(name: &str) -> Self {
        Self::under(&std::env::temp_dir(), name)
    }

    /// Creates `longhaul-test-NAME-PID-SEQ` in cargo's per-target temp dir
    /// (`CARGO_TARGET_TMPDIR`, inside `target/`), for files another program (a browser)
    /// must read that a private `/tmp` would hide.
    pub fn in_target_dir(name: &str) -> Self {
        Self::under(Path::new(env!("CARGO_TARGET_TMPDIR")), name)
    }

    /// Creates `longhaul-test-NAME-PID-SEQ` in `/dev/shm` (tmpfs) when it exists, else
    /// in the system temp dir: for trees of many small files made and read fast.
    pub fn in_memory(name: &str) -> Self {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            Self::under(shm, name)
        } else {
            Self::new(name)
        }
    }

    fn under(base: &Path, name: &str) -> Self {
        let seq = SCRATCH_SEQ.fetch_add(1, Ordering::Relaxed);
        let p = base.join(format!("longhaul-test-{name}-{}-{seq}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Self(p)
    }

    /// A path inside the scratch directory.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.0.join(rel)
    }

    /// Creates (with parents) and returns a directory inside the scratch directory.
    pub fn dir(&self, rel: impl AsRef<Path>) -> PathBuf {
        let p = self.0.join(rel);
        fs::create_dir_all(&p).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("LONGHAUL_KEEP_SCRATCH").is_some() {
            eprintln!("kept {}", self.0.display());
            return;
        }
        let _ = fs::remove_dir_all(&self.0);
    }
}
