//! Where a received entry lands (cp's placement rules) and the names of the receiver's
//! work files beside it.
//!
//! The sender's entry paths start with the source's base name (`cp -r run7 host:dst`
//! sends `run7`, `run7/a`, ...). With `target` the destination path below the receiver's
//! top (`None` = the top itself, always a directory):
//!
//! | target | sources | entry `run7/a` lands at |
//! |---|---|---|
//! | an existing directory `dst` | any | `dst/run7/a` |
//! | missing, or a file, `dst` | one | `dst/a` (`cp FILE host:NAME` gives `NAME`) |
//! | missing, or a file | several | error: several sources need an existing directory |
//!
//! A file being received is `.NAME.longhaul-part` (with `.NAME.longhaul-manifest`) in
//! the same directory until its digest matched; a symlink is made as `.NAME.longhaul-link`
//! and renamed over `NAME`. Names that would exceed 255 bytes are shortened
//! deterministically with a hash of the full name.

use xxhash_rust::xxh3::xxh3_64;

use crate::error::{display_path, Error, Result};
use crate::path::{parse_peer_path, SafeRelPath, MAX_NAME_BYTES, MAX_PATH_BYTES};

/// Suffix of the partial file being received.
pub const PART_SUFFIX: &str = ".longhaul-part";
/// Suffix of the resume manifest beside a partial file.
pub const MANIFEST_SUFFIX: &str = ".longhaul-manifest";
/// Suffix of a received symlink before it is renamed into place.
pub const LINK_SUFFIX: &str = ".longhaul-link";

/// The destination path of `entry` (see the module table). The result obeys
/// [`parse_peer_path`]'s bounds and leaves room for [`part_name`], [`manifest_name`] and
/// [`link_name`] beside it, so all succeed on it.
pub fn place_entry(
    target: Option<&SafeRelPath>,
    target_is_dir: bool,
    multiple_sources: bool,
    entry: &SafeRelPath,
) -> Result<SafeRelPath> {
    let joined = match target {
        None => entry.as_bytes().to_vec(),
        Some(t) if target_is_dir => [t.as_bytes(), entry.as_bytes()].join(&b'/'),
        Some(t) if multiple_sources => {
            return Err(Error::TargetNotDirectory {
                target: display_path(t.as_bytes()),
            })
        }
        Some(t) => {
            let mut out = t.as_bytes().to_vec();
            for c in entry.components().skip(1) {
                out.push(b'/');
                out.extend_from_slice(c);
            }
            out
        }
    };
    let placed = parse_peer_path(&joined)?;
    manifest_name(&placed)?;
    part_name(&placed)?;
    link_name(&placed)?;
    Ok(placed)
}

/// `dir/.NAME.longhaul-part` for `dir/NAME`: the partial file, renamed to `NAME` once
/// verified. Fails only when the path is within a few bytes of [`MAX_PATH_BYTES`]
/// (never for a path returned by [`place_entry`]).
pub fn part_name(final_path: &SafeRelPath) -> Result<SafeRelPath> {
    work_name(final_path, PART_SUFFIX)
}

/// `dir/.NAME.longhaul-manifest` for `dir/NAME`: the resume manifest of the partial
/// file. Fails like [`part_name`].
pub fn manifest_name(final_path: &SafeRelPath) -> Result<SafeRelPath> {
    work_name(final_path, MANIFEST_SUFFIX)
}

/// `dir/.NAME.2-of-3.longhaul-manifest` for `dir/NAME`: the resume manifest of one
/// share of a striped copy (`longhaul_proto::stripe`), beside the part file all the
/// shares write. Fails like [`part_name`] (also within a few bytes more of the limit).
pub fn share_manifest_name(
    final_path: &SafeRelPath,
    share: longhaul_proto::stripe::Share,
) -> Result<SafeRelPath> {
    let suffix = format!(".{}{MANIFEST_SUFFIX}", share.label());
    work_name_as(final_path, &suffix, MANIFEST_SUFFIX)
}

/// `dir/.NAME.longhaul-link` for `dir/NAME`: where a received symlink is made before it
/// is renamed over `NAME` (never the part name: another transfer's part file there must
/// not be renamed into place). Fails like [`part_name`].
pub fn link_name(final_path: &SafeRelPath) -> Result<SafeRelPath> {
    work_name(final_path, LINK_SUFFIX)
}

/// Whether a directory entry's name is one of the receiver's work files (a sender may
/// leave them out of a tree: they are unfinished copies, not data).
pub fn is_work_name(name: &[u8]) -> bool {
    name.first() == Some(&b'.')
        && [PART_SUFFIX, MANIFEST_SUFFIX, LINK_SUFFIX]
            .iter()
            .any(|s| name.ends_with(s.as_bytes()))
}

fn work_name(final_path: &SafeRelPath, suffix: &'static str) -> Result<SafeRelPath> {
    work_name_as(final_path, suffix, suffix)
}

/// [`work_name`] with a suffix made at run time (`kind`: the work file's kind, named in
/// the error).
fn work_name_as(final_path: &SafeRelPath, suffix: &str, kind: &'static str) -> Result<SafeRelPath> {
    let name = final_path.file_name();
    let mut work = Vec::with_capacity(MAX_NAME_BYTES);
    work.push(b'.');
    if 1 + name.len() + suffix.len() <= MAX_NAME_BYTES {
        work.extend_from_slice(name);
    } else {
        // `.` + prefix + `~` + 16 hex digits + suffix = exactly MAX_NAME_BYTES.
        let keep = MAX_NAME_BYTES - 1 - 1 - 16 - suffix.len();
        work.extend_from_slice(&name[..keep]);
        work.extend_from_slice(format!("~{:016x}", xxh3_64(name)).as_bytes());
    }
    work.extend_from_slice(suffix.as_bytes());
    let joined = match final_path.parent() {
        Some(dir) => [dir.as_bytes(), &work].join(&b'/'),
        None => work,
    };
    if joined.len() > MAX_PATH_BYTES {
        return Err(Error::NoRoomForWorkFile {
            path: display_path(final_path.as_bytes()),
            suffix: kind,
            max: MAX_PATH_BYTES,
        });
    }
    parse_peer_path(&joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[u8]) -> SafeRelPath {
        parse_peer_path(s).unwrap()
    }

    fn place(target: Option<&[u8]>, dir: bool, many: bool, entry: &[u8]) -> Result<Vec<u8>> {
        let t = target.map(p);
        place_entry(t.as_ref(), dir, many, &p(entry)).map(|r| r.as_bytes().to_vec())
    }

    #[test]
    fn root_target_keeps_the_entry() {
        for many in [false, true] {
            // The root is a directory whatever the flag says.
            for dir in [false, true] {
                assert_eq!(place(None, dir, many, b"run7/a").unwrap(), b"run7/a");
                assert_eq!(place(None, dir, many, b"f").unwrap(), b"f");
            }
        }
    }

    #[test]
    fn directory_target_gets_the_entry_inside() {
        assert_eq!(place(Some(b"dst"), true, false, b"f").unwrap(), b"dst/f");
        assert_eq!(
            place(Some(b"d/e"), true, true, b"run7/x/y").unwrap(),
            b"d/e/run7/x/y"
        );
    }

    #[test]
    fn single_source_to_a_non_directory_replaces_the_top_name() {
        // cp FILE host:NAME -> NAME
        assert_eq!(place(Some(b"new"), false, false, b"f").unwrap(), b"new");
        // cp -r SRCDIR host:DST with DST missing -> DST/...
        assert_eq!(place(Some(b"dst"), false, false, b"src").unwrap(), b"dst");
        assert_eq!(
            place(Some(b"a/dst"), false, false, b"src/x/y").unwrap(),
            b"a/dst/x/y"
        );
    }

    #[test]
    fn several_sources_need_a_directory() {
        let e = place(Some(b"dst"), false, true, b"f").unwrap_err();
        assert_eq!(
            e,
            Error::TargetNotDirectory {
                target: "dst".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "target dst is not a directory; several sources need an existing directory"
        );
    }

    #[test]
    fn results_are_revalidated() {
        // 16 names of 255 bytes = 4095 bytes: fine alone, too long under a target.
        let name = vec![b'x'; MAX_NAME_BYTES];
        let long = vec![name.clone(); 16].join(&b'/');
        assert!(matches!(
            place(Some(b"d"), true, false, &long),
            Err(Error::PathTooLong { .. })
        ));
        let deep = vec![&b"d"[..]; 256].join(&b'/');
        assert!(matches!(
            place(Some(b"t"), true, false, &deep),
            Err(Error::PathTooLong { .. })
        ));
        // Replacing the top name keeps the depth: 256 components stay 256.
        assert!(place(Some(b"t"), false, false, &deep).is_ok());
        // A 255-byte last name: its work names are shortened to 255 bytes, so they fit.
        assert!(place(None, true, false, &long).is_ok());
        // No room for `.NAME.longhaul-manifest` beside a shorter last name at the bound.
        let mut edge = vec![vec![b'w'; 200]; 20].join(&b'/');
        edge.push(b'/');
        edge.resize(MAX_PATH_BYTES, b'y'); // last name: 75 bytes
        assert!(parse_peer_path(&edge).is_ok());
        assert!(matches!(
            place(None, true, false, &edge),
            Err(Error::NoRoomForWorkFile { .. })
        ));
    }

    #[test]
    fn work_names_sit_beside_the_file() {
        let f = p(b"d/e/data.h5");
        assert_eq!(
            part_name(&f).unwrap().as_bytes(),
            b"d/e/.data.h5.longhaul-part"
        );
        assert_eq!(
            manifest_name(&f).unwrap().as_bytes(),
            b"d/e/.data.h5.longhaul-manifest"
        );
        assert_eq!(part_name(&p(b"f")).unwrap().as_bytes(), b".f.longhaul-part");
        assert!(is_work_name(b".f.longhaul-part"));
        assert!(is_work_name(b".f.longhaul-manifest"));
        assert!(is_work_name(b".f.longhaul-link"));
        assert_eq!(
            link_name(&p(b"d/f")).unwrap().as_bytes(),
            b"d/.f.longhaul-link"
        );
        assert!(!is_work_name(b"f.longhaul-part"));
        assert!(!is_work_name(b".f"));
    }

    #[test]
    fn long_names_are_shortened_deterministically() {
        // The longest name that still fits unshortened, and one byte more.
        let fits = vec![b'a'; MAX_NAME_BYTES - 1 - MANIFEST_SUFFIX.len()];
        let m = manifest_name(&p(&fits)).unwrap();
        assert_eq!(m.as_bytes().len(), MAX_NAME_BYTES);
        assert_eq!(&m.as_bytes()[1..1 + fits.len()], &fits[..]);
        let mut over = fits.clone();
        over.push(b'a');
        for suffix_fn in [part_name, manifest_name] {
            for name in [&over, &vec![b'z'; MAX_NAME_BYTES]] {
                let path = [&b"dir/"[..], name].concat();
                let w = suffix_fn(&p(&path)).unwrap();
                assert!(w.file_name().len() <= MAX_NAME_BYTES);
                assert_eq!(w.parent().unwrap().as_bytes(), b"dir");
                assert!(is_work_name(w.file_name()));
                assert_eq!(w, suffix_fn(&p(&path)).unwrap(), "deterministic");
            }
        }
        // Two long names sharing the kept prefix get different work names.
        let mut a = vec![b'q'; MAX_NAME_BYTES];
        let b = a.clone();
        a[MAX_NAME_BYTES - 1] = b'r';
        assert_ne!(part_name(&p(&a)).unwrap(), part_name(&p(&b)).unwrap());
        // A multi-byte UTF-8 name is cut on a byte boundary; still a valid name.
        let e = "é".repeat(127);
        assert!(part_name(&p(e.as_bytes())).is_ok());
    }

    #[test]
    fn share_manifests_are_work_names_and_differ_by_share() {
        use longhaul_proto::stripe::Share;
        let (one, two) = (Share::new(0, 2).unwrap(), Share::new(1, 2).unwrap());
        let a = share_manifest_name(&p(b"dir/big.iso"), one).unwrap();
        assert_eq!(a.as_bytes(), b"dir/.big.iso.1-of-2.longhaul-manifest");
        assert!(is_work_name(a.file_name()));
        assert_ne!(a, share_manifest_name(&p(b"dir/big.iso"), two).unwrap());
        let long = share_manifest_name(&p(&[b'z'; MAX_NAME_BYTES]), two).unwrap();
        assert!(long.file_name().len() <= MAX_NAME_BYTES && is_work_name(long.file_name()));
    }
}
