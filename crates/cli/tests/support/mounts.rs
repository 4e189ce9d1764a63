//! Mounts for the disk tests (root only): a tmpfs of a given size ([`Tmpfs`]), and an
//! ext4 file system in an image file attached to a loop device ([`LoopMount`]). Each is
//! undone on drop (unmounted, the loop device detached), also when the test panics.

use std::path::{Path, PathBuf};
use std::process::Command;

fn succeeds(cmd: &mut Command) -> bool {
    cmd.status().is_ok_and(|s| s.success())
}

/// A tmpfs mounted on a directory, unmounted on drop (lazily if still busy).
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`32M`) on `dir`.
    pub fn mount(dir: &Path, size: &str) -> Self {
        let ok = succeeds(
            Command::new("mount")
                .args([
                    "-t",
                    "tmpfs",
                    "-o",
                    &format!("size={size},mode=0755"),
                    "tmpfs",
                ])
                .arg(dir),
        );
        assert!(ok, "cannot mount a {size} tmpfs on {}", dir.display());
        Self(dir.to_path_buf())
    }

    /// Grows (or shrinks) it to `size`.
    pub fn resize(&self, size: &str) {
        let ok = succeeds(
            Command::new("mount")
                .args(["-o", &format!("remount,size={size}")])
                .arg(&self.0),
        );
        assert!(
            ok,
            "cannot resize the tmpfs on {} to {size}",
            self.0.display()
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        unmount(&self.0);
    }
}

fn unmount(dir: &Path) {
    if !succeeds(Command::new("umount").arg(dir)) {
        let _ = Command::new("umount").arg("-l").arg(dir).status();
    }
}

/// `mkfs.ext4 -q` on a new sparse image file of `size` (`256M`).
pub fn make_ext4_image(image: &Path, size: &str) {
    assert!(
        succeeds(Command::new("truncate").args(["-s", size]).arg(image)),
        "truncate {}",
        image.display()
    );
    assert!(
        succeeds(Command::new("mkfs.ext4").arg("-q").arg(image)),
        "mkfs.ext4 {} (is e2fsprogs installed?)",
        image.display()
    );
}

/// An image file's file system on a loop device (`losetup -f --show`), mounted on a
/// directory; unmounted and detached on drop.
pub struct LoopMount {
    dir: PathBuf,
    /// `None` once detached (never detach twice: the number may be reused by then).
    device: Option<String>,
    mounted: bool,
}

impl LoopMount {
    /// Attaches `image` and mounts it on `dir` with `options` (`-o`, e.g. `commit=1`).
    pub fn mount(image: &Path, dir: &Path, options: &str) -> Self {
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(image)
            .output()
            .expect("running losetup");
        assert!(
            out.status.success(),
            "losetup -f --show {}: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mut m = Self {
            dir: dir.to_path_buf(),
            device: Some(device.clone()),
            mounted: false,
        };
        let ok = succeeds(
            Command::new("mount")
                .args(["-o", options, &device])
                .arg(dir),
        );
        assert!(ok, "cannot mount {device} on {}", dir.display());
        m.mounted = true;
        m
    }

    /// Unmounts and detaches now (what drop does).
    pub fn unmount(mut self) {
        self.undo();
    }

    fn undo(&mut self) {
        if self.mounted {
            unmount(&self.dir);
            self.mounted = false;
        }
        if let Some(device) = self.device.take() {
            let _ = Command::new("losetup").args(["-d", &device]).status();
        }
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        self.undo();
    }
}
