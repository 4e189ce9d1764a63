//! The receiver's partial state on disk: `.NAME.longhaul-part` and
//! `.NAME.longhaul-manifest` files, their verified records, and waiting for them to settle.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `DIR/.NAME.longhaul-part`.
pub fn part_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.longhaul-part"))
}

/// `DIR/.NAME.longhaul-manifest`.
pub fn manifest_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.longhaul-manifest"))
}

/// Number of 40-byte records after the 56-byte header (a torn last record not counted);
/// 0 when there is no manifest. Cheap enough to poll.
pub fn manifest_record_count(path: &Path) -> u64 {
    use longhaul_transfer::manifest::{HEADER_LEN, RECORD_LEN};
    fs::metadata(path)
        .map(|m| m.len().saturating_sub(HEADER_LEN as u64) / RECORD_LEN as u64)
        .unwrap_or(0)
}

/// Verified chunk indices (with their BLAKE3 chunk hashes) of a manifest as the receiver
/// will read it (torn last record dropped); empty when there is none or it is shorter
/// than its header (killed between creating and writing it). Panics if the manifest is otherwise corrupt:
/// a kill never damages more than the last append.
pub fn manifest_verified(path: &Path) -> Vec<(u32, [u8; 32])> {
    let Ok(bytes) = fs::read(path) else {
        return Vec::new();
    };
    if bytes.len() < longhaul_transfer::manifest::HEADER_LEN {
        return Vec::new();
    }
    let loaded = longhaul_transfer::ResumeManifest::parse(&bytes)
        .unwrap_or_else(|e| panic!("manifest {} is corrupt: {e}", path.display()));
    loaded.manifest.verified().collect()
}

/// Waits until `path`'s length has not changed for `quiet` (a receiver whose sender died
/// may still be recording the chunks it had); gives up after 20 s.
pub fn wait_until_stable(path: &Path, quiet: Duration) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let len = || fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut last = len();
    let mut since = Instant::now();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = len();
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return;
        }
    }
    panic!("{} kept changing for 20 s", path.display());
}
