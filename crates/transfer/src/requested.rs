//! The path a transfer request names below a root (a push's destination, a pull's
//! source), and what a trailing `/` on it means: as with cp, scp and rsync, `dir/` names
//! a directory, so `cp f host:dir/` copies into `dir` and is refused (cp's "Not a
//! directory") when `dir` is missing or a file, instead of creating a file named `dir`.
//!
//! A user types the path loosely ([`RequestedPath::from_typed`]: `./a//b/` is `a/b/`);
//! the wire carries one canonical form ([`RequestedPath::to_wire`]: `.` for the root,
//! else a path [`parse_peer_path`] accepts, with one `/` appended for a directory), which
//! the server reads strictly ([`RequestedPath::from_wire`]). A local destination says the
//! same with [`names_a_directory`]; [`require_directory`] is the one check of both.

use crate::error::{display_path, Error, Result};
use crate::path::{parse_peer_path, SafeRelPath};

/// A path below a root as a transfer request names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedPath {
    /// The path (`None`: the root itself, always a directory).
    pub path: Option<SafeRelPath>,
    /// It was written with a trailing `/` (or `/.`): it must be an existing directory.
    pub dir_required: bool,
}

impl RequestedPath {
    /// Reads a path as a user typed it after `HOST:`: `.` and empty components are
    /// dropped (`./a//b` = `a/b`, empty or `.` = the root), and a trailing `/` or `/.`
    /// asks for a directory. Absolute paths, `..`, NUL and over-long paths are refused
    /// with [`parse_peer_path`]'s errors, naming the value as typed.
    pub fn from_typed(raw: &[u8]) -> Result<Self> {
        if raw.first() == Some(&b'/') {
            // Let the validator say why (absolute) with the value as typed.
            return parse_peer_path(raw).map(|p| Self {
                path: Some(p),
                dir_required: false,
            });
        }
        let kept: Vec<&[u8]> = raw
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        if kept.is_empty() {
            return Ok(Self::root());
        }
        Ok(Self {
            path: Some(parse_peer_path(&kept.join(&b'/'))?),
            dir_required: names_a_directory(raw),
        })
    }

    /// Reads the path of a transfer request: `.` (the root), or a path
    /// [`parse_peer_path`] accepts, optionally followed by one `/` (a directory).
    pub fn from_wire(raw: &[u8]) -> Result<Self> {
        if raw == b"." {
            return Ok(Self::root());
        }
        let (bytes, dir_required) = match raw.strip_suffix(b"/") {
            Some(rest) if !rest.is_empty() => (rest, true),
            _ => (raw, false),
        };
        Ok(Self {
            path: Some(parse_peer_path(bytes)?),
            dir_required,
        })
    }

    /// The canonical form [`Self::from_wire`] reads back as `self`.
    pub fn to_wire(&self) -> Vec<u8> {
        match &self.path {
            None => b".".to_vec(),
            Some(p) => {
                let mut out = p.as_bytes().to_vec();
                if self.dir_required {
                    out.push(b'/');
                }
                out
            }
        }
    }

    /// The root itself.
    pub fn root() -> Self {
        Self {
            path: None,
            dir_required: false,
        }
    }
}

/// Whether a path as typed names a directory by its form: it ends in `/` or `/.` (a bare
/// `.` or `/` is a directory anyway).
pub fn names_a_directory(raw: &[u8]) -> bool {
    raw.ends_with(b"/") || raw.ends_with(b"/.")
}

/// cp's "Not a directory": a path written as a directory (`dir/`) must be one. `shown`
/// names it in the error; `is_dir` is whether it exists and is a directory.
pub fn require_directory(dir_required: bool, is_dir: bool, shown: &[u8]) -> Result<()> {
    if dir_required && !is_dir {
        return Err(Error::NotADirectory {
            path: display_path(shown),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(s: &str) -> RequestedPath {
        RequestedPath::from_typed(s.as_bytes()).unwrap()
    }

    fn path_of(r: &RequestedPath) -> Option<&[u8]> {
        r.path.as_ref().map(SafeRelPath::as_bytes)
    }

    #[test]
    fn a_trailing_slash_asks_for_a_directory() {
        let r = typed("dir/");
        assert_eq!((path_of(&r), r.dir_required), (Some(&b"dir"[..]), true));
        let r = typed("a/b/.");
        assert_eq!((path_of(&r), r.dir_required), (Some(&b"a/b"[..]), true));
        let r = typed("./a//b//");
        assert_eq!((path_of(&r), r.dir_required), (Some(&b"a/b"[..]), true));
        let r = typed("dir");
        assert_eq!((path_of(&r), r.dir_required), (Some(&b"dir"[..]), false));
        let r = typed("a/./b");
        assert_eq!((path_of(&r), r.dir_required), (Some(&b"a/b"[..]), false));
    }

    #[test]
    fn the_root_in_any_spelling_is_the_root() {
        for s in ["", ".", "./", ".//.", "./."] {
            assert_eq!(typed(s), RequestedPath::root(), "{s:?}");
        }
    }

    #[test]
    fn escapes_are_still_refused() {
        for s in ["/etc/", "../", "a/../b/", "a/..", "x\0/"] {
            assert!(RequestedPath::from_typed(s.as_bytes()).is_err(), "{s:?}");
        }
        let e = RequestedPath::from_typed(b"/etc/").unwrap_err();
        assert!(matches!(e, Error::AbsolutePath { .. }), "{e:?}");
    }

    #[test]
    fn the_wire_form_round_trips() {
        for s in ["", ".", "dir", "dir/", "a/b/c/", "./a//b/", "x/."] {
            let r = typed(s);
            let wire = r.to_wire();
            assert_eq!(RequestedPath::from_wire(&wire).unwrap(), r, "{s:?}");
        }
        assert_eq!(typed("dir/").to_wire(), b"dir/");
        assert_eq!(typed("./").to_wire(), b".");
    }

    #[test]
    fn the_wire_form_is_strict() {
        // One canonical form: loose spellings are the client's to normalise.
        for s in [
            "", "/", "./a", "a//", "a//b", "a/./", "..", "../", "/etc/", "a/../",
        ] {
            assert!(
                RequestedPath::from_wire(s.as_bytes()).is_err(),
                "{s:?} accepted"
            );
        }
        let r = RequestedPath::from_wire(b"dir/").unwrap();
        assert_eq!((path_of(&r), r.dir_required), (Some(&b"dir"[..]), true));
    }

    #[test]
    fn a_directory_named_so_must_be_one() {
        assert!(names_a_directory(b"d/") && names_a_directory(b"d/."));
        assert!(!names_a_directory(b"d") && !names_a_directory(b"d/.x"));
        assert!(require_directory(true, true, b"d").is_ok());
        assert!(require_directory(false, false, b"d").is_ok());
        let e = require_directory(true, false, b"nodir").unwrap_err();
        assert_eq!(
            e,
            Error::NotADirectory {
                path: "nodir".into()
            }
        );
        let text = e.to_string();
        assert!(
            text.contains("nodir/") && text.contains("Not a directory"),
            "{text}"
        );
    }
}
