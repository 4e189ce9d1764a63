//! Turning a peer-supplied relative path into components that cannot leave the served root.
//!
//! Network input is hostile: the bytes may be absolute, hold `..`, NUL, empty components,
//! or be absurdly long. [`parse_peer_path`] refuses all of these with an error naming the
//! value; what it returns is a list of plain names, each safe to hand to `openat`-style
//! calls relative to a directory descriptor. Symlinks on disk are the driver's business
//! (`longhaul-sys` opens with `RESOLVE_BENEATH`); this module only judges the bytes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::error::{display_path, Error, Result};

/// Longest single name, in bytes (Linux `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;
/// Longest whole path, in bytes, excluding a terminating NUL (Linux `PATH_MAX` - 1).
pub const MAX_PATH_BYTES: usize = 4095;
/// Deepest path, in components.
pub const MAX_DEPTH: usize = 256;

/// A relative path known to be safe: 1..=[`MAX_DEPTH`] plain names, none empty, `.`, `..`,
/// or holding `/` or NUL, each at most [`MAX_NAME_BYTES`] bytes, joined at most
/// [`MAX_PATH_BYTES`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SafeRelPath {
    /// The path as `/`-joined bytes (already validated).
    joined: Vec<u8>,
}

impl SafeRelPath {
    /// The names from the top of the tree down to the file.
    pub fn components(&self) -> impl Iterator<Item = &[u8]> {
        self.joined.split(|&b| b == b'/')
    }

    /// Number of components.
    pub fn depth(&self) -> usize {
        self.components().count()
    }

    /// The `/`-joined bytes, as they would be sent on the wire.
    pub fn as_bytes(&self) -> &[u8] {
        &self.joined
    }

    /// The path as a relative [`PathBuf`] (never absolute, never with `..`).
    pub fn to_path_buf(&self) -> PathBuf {
        PathBuf::from(OsStr::from_bytes(&self.joined))
    }

    /// The last component (the file's own name).
    pub fn file_name(&self) -> &[u8] {
        self.components().last().unwrap_or(&[])
    }

    /// The path of the parent directory, or `None` for a name directly under the root.
    pub fn parent(&self) -> Option<SafeRelPath> {
        let cut = self.joined.iter().rposition(|&b| b == b'/')?;
        Some(SafeRelPath {
            joined: self.joined[..cut].to_vec(),
        })
    }
}

/// Validates a peer-supplied path (bytes, `/`-separated, relative to the served root).
///
/// Refuses: empty input, a leading `/`, NUL anywhere, `..`, `.` or empty components
/// (`a//b`, trailing `/`), a name over [`MAX_NAME_BYTES`], a path over [`MAX_PATH_BYTES`]
/// or [`MAX_DEPTH`] components. The checks look at each byte at most a few times and
/// allocate only after the input is known to be within bounds.
pub fn parse_peer_path(bytes: &[u8]) -> Result<SafeRelPath> {
    if bytes.is_empty() {
        return Err(Error::EmptyPath);
    }
    if bytes.len() > MAX_PATH_BYTES {
        return Err(Error::PathTooLong {
            len: bytes.len(),
            depth: bytes.split(|&b| b == b'/').take(MAX_DEPTH + 1).count(),
            max_len: MAX_PATH_BYTES,
            max_depth: MAX_DEPTH,
        });
    }
    if let Some(offset) = bytes.iter().position(|&b| b == 0) {
        return Err(Error::NulInPath {
            path: display_path(bytes),
            offset,
        });
    }
    if bytes[0] == b'/' {
        return Err(Error::AbsolutePath {
            path: display_path(bytes),
        });
    }
    let mut depth = 0usize;
    for (index, name) in bytes.split(|&b| b == b'/').enumerate() {
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(Error::PathTooLong {
                len: bytes.len(),
                depth,
                max_len: MAX_PATH_BYTES,
                max_depth: MAX_DEPTH,
            });
        }
        match name {
            b".." => {
                return Err(Error::ParentComponent {
                    path: display_path(bytes),
                })
            }
            b"" | b"." => {
                return Err(Error::EmptyComponent {
                    path: display_path(bytes),
                    index,
                })
            }
            _ if name.len() > MAX_NAME_BYTES => {
                return Err(Error::NameTooLong {
                    path: display_path(bytes),
                    len: name.len(),
                    max: MAX_NAME_BYTES,
                })
            }
            _ => {}
        }
    }
    Ok(SafeRelPath {
        joined: bytes.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_are_accepted() {
        let p = parse_peer_path(b"data/run 7/\xc3\xa9t\xc3\xa9.h5").unwrap();
        let names: Vec<&[u8]> = p.components().collect();
        assert_eq!(names, vec![&b"data"[..], b"run 7", "été.h5".as_bytes()]);
        assert_eq!(p.depth(), 3);
        assert_eq!(p.file_name(), "été.h5".as_bytes());
        assert_eq!(p.parent().unwrap().as_bytes(), b"data/run 7");
        assert_eq!(p.to_path_buf(), PathBuf::from("data/run 7/été.h5"));
        assert!(parse_peer_path(b"f").unwrap().parent().is_none());
        // Names that only look dangerous are fine.
        assert!(parse_peer_path(b"...").is_ok());
        assert!(parse_peer_path(b"..a/.b/c..").is_ok());
        assert!(parse_peer_path(b"a\\..\\b").is_ok());
    }

    #[test]
    fn escapes_are_refused() {
        assert_eq!(parse_peer_path(b""), Err(Error::EmptyPath));
        assert!(matches!(
            parse_peer_path(b"/etc/passwd"),
            Err(Error::AbsolutePath { .. })
        ));
        assert!(matches!(
            parse_peer_path(b".."),
            Err(Error::ParentComponent { .. })
        ));
        assert!(matches!(
            parse_peer_path(b"a/../../b"),
            Err(Error::ParentComponent { .. })
        ));
        assert!(matches!(
            parse_peer_path(b"a/.."),
            Err(Error::ParentComponent { .. })
        ));
        assert!(matches!(
            parse_peer_path(b"a\0b"),
            Err(Error::NulInPath { offset: 1, .. })
        ));
        assert!(matches!(
            parse_peer_path(b"a//b"),
            Err(Error::EmptyComponent { index: 1, .. })
        ));
        assert!(matches!(
            parse_peer_path(b"a/"),
            Err(Error::EmptyComponent { index: 1, .. })
        ));
        assert!(matches!(
            parse_peer_path(b"./a"),
            Err(Error::EmptyComponent { index: 0, .. })
        ));
    }

    #[test]
    fn bounds_are_exact() {
        let name = vec![b'x'; MAX_NAME_BYTES];
        assert!(parse_peer_path(&name).is_ok());
        let long = vec![b'x'; MAX_NAME_BYTES + 1];
        assert!(matches!(
            parse_peer_path(&long),
            Err(Error::NameTooLong {
                len: 256,
                max: 255,
                ..
            })
        ));
        // 16 names of 255 bytes joined by 15 slashes = 4095 bytes: exactly the bound.
        let path = vec![name.clone(); 16].join(&b'/');
        assert_eq!(path.len(), MAX_PATH_BYTES);
        assert!(parse_peer_path(&path).is_ok());
        let mut over = path.clone();
        over.push(b'y');
        assert!(matches!(
            parse_peer_path(&over),
            Err(Error::PathTooLong { .. })
        ));
        let deep = vec![&b"d"[..]; MAX_DEPTH].join(&b'/');
        assert_eq!(parse_peer_path(&deep).unwrap().depth(), MAX_DEPTH);
        let deeper = vec![&b"d"[..]; MAX_DEPTH + 1].join(&b'/');
        assert!(matches!(
            parse_peer_path(&deeper),
            Err(Error::PathTooLong { .. })
        ));
    }

    #[test]
    fn errors_name_the_value() {
        let e = parse_peer_path(b"x/../etc").unwrap_err().to_string();
        assert!(e.contains("x/../etc"), "{e}");
    }
}
