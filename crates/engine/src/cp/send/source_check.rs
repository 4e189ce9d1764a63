//! Whether a source file is still what the file list says once all of it was read
//! ([`longhaul_transfer::session::SendEvent::CheckSource`]): the same size, mtime, device,
//! inode and ctime. A file written while it was read (a growing log, an editor's save in
//! place) passes every chunk's hash, since each chunk is hashed as it was read, yet what
//! crossed may mix two versions; tar's "file changed as we read it", here per file, and
//! the receiver commits nothing of it.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use longhaul_proto::transfer::FileEntry;

use crate::cp::hash_cache::file_identity;

/// How `now` (the source's metadata after it was read) differs from its list entry, in
/// words (`None`: it does not).
pub(super) fn changed(listed: &FileEntry, now: &Metadata) -> Option<String> {
    if now.len() != listed.size {
        return Some(format!(
            "its size went from {} to {} bytes",
            listed.size,
            now.len()
        ));
    }
    if (now.mtime(), now.mtime_nsec()) != (listed.mtime_secs, i64::from(listed.mtime_nanos)) {
        return Some("it was modified (its mtime changed)".into());
    }
    if file_identity(now).fingerprint() != listed.fingerprint {
        return Some("it was written, replaced or had its status changed (ctime)".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn listed(md: &Metadata) -> FileEntry {
        FileEntry {
            path: b"f".to_vec(),
            kind: longhaul_proto::transfer::EntryKind::File,
            size: md.len(),
            mtime_secs: md.mtime(),
            mtime_nanos: md.mtime_nsec() as u32,
            mode: 0o644,
            fingerprint: file_identity(md).fingerprint(),
            link_target: Vec::new(),
        }
    }

    #[test]
    fn a_file_left_alone_passes_and_every_kind_of_change_is_named() {
        let dir = std::env::temp_dir().join(format!("lh-source-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"first version").unwrap();
        let entry = listed(&std::fs::metadata(&path).unwrap());
        assert_eq!(changed(&entry, &std::fs::metadata(&path).unwrap()), None);

        // Written in place, same size, mtime put back: the ctime still tells.
        let before = std::fs::metadata(&path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all(b"FIRST").unwrap();
        f.set_times(std::fs::FileTimes::new().set_modified(before.modified().unwrap()))
            .unwrap();
        drop(f);
        let why = changed(&entry, &std::fs::metadata(&path).unwrap()).unwrap();
        assert!(why.contains("ctime"), "{why}");

        // Modified: the mtime tells.
        std::fs::write(&path, b"other version").unwrap();
        let why = changed(&entry, &std::fs::metadata(&path).unwrap()).unwrap();
        assert!(why.contains("mtime"), "{why}");

        // Grown.
        std::fs::write(&path, b"first version, and more").unwrap();
        let why = changed(&entry, &std::fs::metadata(&path).unwrap()).unwrap();
        assert!(why.contains("13 to 23 bytes"), "{why}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
