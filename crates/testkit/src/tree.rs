//! Files and trees on disk for tests: written with given or random bytes, modes and
//! mtimes, and compared byte for byte (reading only data segments, so sparse files of
//! gigabytes compare in the time their data takes) with modes and mtimes as asked.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use crate::Rng;

/// Writes `data` to `path` (creating parents), then sets `mode`.
pub fn write_file(path: &Path, data: &[u8], mode: u32) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    let mut f = File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    f.write_all(data).unwrap();
    drop(f);
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Writes `size` random bytes to `path` with mode 0644.
pub fn write_random(path: &Path, rng: &mut Rng, size: usize) -> Vec<u8> {
    let data = rng.bytes(size);
    write_file(path, &data, 0o644);
    data
}

/// Sets the modification time of a file or directory (seconds + nanoseconds).
pub fn set_mtime(path: &Path, secs: u64, nanos: u32) {
    let t = UNIX_EPOCH + Duration::new(secs, nanos);
    let f = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    f.set_modified(t)
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", path.display()));
}

/// (seconds, nanoseconds) of a path's mtime, not following symlinks.
pub fn mtime_of(md: &fs::Metadata) -> (i64, i64) {
    (md.mtime(), md.mtime_nsec())
}

/// Bytes allocated on disk for `path` (st_blocks x 512).
pub fn allocated_bytes(path: &Path) -> u64 {
    fs::metadata(path).unwrap().blocks() * 512
}

/// Panics with the first differing offset unless `a` and `b` hold the same bytes.
/// Reads only the union of both files' data segments (SEEK_DATA/SEEK_HOLE): outside it
/// both are holes, hence zeros. Streams in 8 MiB blocks, so multi-GB sparse files are
/// compared in the time their data takes.
pub fn assert_same_bytes(a: &Path, b: &Path) {
    let ma = fs::metadata(a).unwrap_or_else(|e| panic!("{}: {e}", a.display()));
    let mb = fs::metadata(b).unwrap_or_else(|e| panic!("{}: {e}", b.display()));
    assert_eq!(
        ma.len(),
        mb.len(),
        "sizes differ: {} vs {}",
        a.display(),
        b.display()
    );
    let len = ma.len();
    let fa = File::open(a).unwrap();
    let fb = File::open(b).unwrap();
    let segments = |f: &File| {
        longhaul_sys::file_io::data_segments(f, 0..len, 4096)
            .unwrap_or_else(|_| std::iter::once(0..len).collect())
    };
    let mut ranges = segments(&fa);
    ranges.extend(segments(&fb));
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<u64>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    let mut ba = vec![0u8; 8 << 20];
    let mut bb = vec![0u8; 8 << 20];
    for r in merged {
        let mut offset = r.start;
        while offset < r.end {
            let n = (r.end - offset).min(ba.len() as u64) as usize;
            fa.read_exact_at(&mut ba[..n], offset)
                .unwrap_or_else(|e| panic!("read {} at {offset}: {e}", a.display()));
            fb.read_exact_at(&mut bb[..n], offset)
                .unwrap_or_else(|e| panic!("read {} at {offset}: {e}", b.display()));
            if ba[..n] != bb[..n] {
                let i = (0..n).find(|&i| ba[i] != bb[i]).unwrap();
                panic!(
                    "{} and {} differ at byte {} ({:#04x} vs {:#04x})",
                    a.display(),
                    b.display(),
                    offset + i as u64,
                    ba[i],
                    bb[i]
                );
            }
            offset += n as u64;
        }
    }
}

/// What `assert_same_tree` compares beyond names, kinds and bytes.
#[derive(Clone, Copy)]
pub struct TreeCheck {
    /// Permission bits (mode & 0o7777) of files and directories.
    pub modes: bool,
    /// File mtimes to the nanosecond.
    pub file_mtimes: bool,
    /// Directory mtimes to the nanosecond.
    pub dir_mtimes: bool,
}

/// Everything: bytes, modes, file and directory mtimes.
pub const EXACT: TreeCheck = TreeCheck {
    modes: true,
    file_mtimes: true,
    dir_mtimes: true,
};

/// Entries of a tree by relative path (raw bytes), symlinks and special files included.
pub fn list_tree(root: &Path) -> BTreeMap<Vec<u8>, fs::Metadata> {
    fn walk(root: &Path, rel: &Path, out: &mut BTreeMap<Vec<u8>, fs::Metadata>) {
        let dir = root.join(rel);
        for e in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            let md = fs::symlink_metadata(root.join(&r)).unwrap();
            let is_dir = md.is_dir();
            out.insert(r.as_os_str().as_bytes().to_vec(), md);
            if is_dir {
                walk(root, &r, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// Panics unless `dst` holds exactly the regular files, directories and symlinks of `src`
/// (special files of `src` must be absent from `dst`), with identical bytes, symlinks as
/// symlinks with identical targets (never followed) and, as `check` says, modes and
/// mtimes (a symlink's own). Returns (regular files and symlinks, the files' total bytes):
/// what `longhaul cp` counts as files.
pub fn assert_same_tree(src: &Path, dst: &Path, check: TreeCheck) -> (u64, u64) {
    let a = list_tree(src);
    let b = list_tree(dst);
    let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    let (mut files, mut bytes) = (0u64, 0u64);
    for (rel, ma) in &a {
        let ft = ma.file_type();
        let copied = ft.is_file() || ft.is_dir() || ft.is_symlink();
        let Some(mb) = b.get(rel) else {
            assert!(!copied, "{} missing in {}", show(rel), dst.display());
            continue;
        };
        assert!(
            copied,
            "{} is neither a file, a directory nor a symlink in the source but exists in {}",
            show(rel),
            dst.display()
        );
        let fb = mb.file_type();
        assert_eq!(
            (ft.is_dir(), ft.is_symlink()),
            (fb.is_dir(), fb.is_symlink()),
            "{}: kind differs",
            show(rel)
        );
        assert!(
            fb.is_file() || fb.is_dir() || fb.is_symlink(),
            "{}: not a regular file, directory or symlink in {}",
            show(rel),
            dst.display()
        );
        let p = Path::new(OsStr::from_bytes(rel));
        if ft.is_symlink() {
            files += 1;
            assert_eq!(
                fs::read_link(src.join(p)).unwrap(),
                fs::read_link(dst.join(p)).unwrap(),
                "symlink {}: target differs",
                show(rel)
            );
            if check.file_mtimes {
                assert_eq!(mtime_of(ma), mtime_of(mb), "{}: mtime differs", show(rel));
            }
        } else if ft.is_file() {
            files += 1;
            bytes += ma.len();
            assert_same_bytes(&src.join(p), &dst.join(p));
            if check.file_mtimes {
                assert_eq!(mtime_of(ma), mtime_of(mb), "{}: mtime differs", show(rel));
            }
        } else if check.dir_mtimes {
            assert_eq!(
                mtime_of(ma),
                mtime_of(mb),
                "directory {}: mtime differs",
                show(rel)
            );
        }
        if check.modes {
            assert_eq!(
                ma.mode() & 0o7777,
                mb.mode() & 0o7777,
                "{}: mode differs ({:o} vs {:o})",
                show(rel),
                ma.mode() & 0o7777,
                mb.mode() & 0o7777
            );
        }
    }
    let extra: Vec<String> = b
        .keys()
        .filter(|k| !a.contains_key(*k))
        .map(|k| show(k))
        .collect();
    assert!(
        extra.is_empty(),
        "{} holds entries the source does not: {extra:?}",
        dst.display()
    );
    (files, bytes)
}

/// Relative paths (lossy) of every entry under `root`, for "nothing else was written".
pub fn names_under(root: &Path) -> Vec<String> {
    list_tree(root)
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

/// The work files left under `root` (part files, manifests, anything whose name holds
/// `.longhaul-`), by relative path (lossy); empty when a copy cleaned up after itself.
pub fn work_files(root: &Path) -> Vec<String> {
    (list_tree(root).into_keys())
        .filter(|rel| {
            let name = Path::new(OsStr::from_bytes(rel))
                .file_name()
                .unwrap_or_default();
            name.as_bytes().windows(10).any(|w| w == b".longhaul-")
        })
        .map(|rel| String::from_utf8_lossy(&rel).into_owned())
        .collect()
}

/// True if some regular file under `root` contains `needle`.
pub fn any_file_contains(root: &Path, needle: &[u8]) -> bool {
    list_tree(root).iter().any(|(rel, md)| {
        md.file_type().is_file()
            && fs::read(root.join(OsStr::from_bytes(rel)))
                .map(|d| d.windows(needle.len()).any(|w| w == needle))
                .unwrap_or(false)
    })
}

/// A path from raw bytes (for names that are not UTF-8).
pub fn os(bytes: &[u8]) -> OsString {
    OsString::from_vec(bytes.to_vec())
}
