//! A daemon's exported areas (as rsyncd's modules): each a root of its own, the tokens
//! that open it, read-only or read-write, and caps on what one push may write. A client
//! names the area as the first part of its path (`longhaul://host/AREA/dir/file`); the
//! token it proved ([`longhaul_proto::Keyring`]) decides which areas it may name. An area
//! the token does not open is answered exactly as one that does not exist, so a token
//! holder cannot learn the names of the others. An area may name the local user its
//! sessions run as.

use std::sync::Arc;

use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::session::ListCaps;
use longhaul_transfer::{parse_peer_path, RequestedPath, SafeRelPath};

/// The longest area name.
pub const MAX_AREA_NAME: usize = 64;

/// One exported area.
#[derive(Debug, Clone)]
pub struct Area {
    /// What clients call it: one path component of letters, digits, `.`, `_` and `-`.
    pub name: String,
    /// Its files, and nothing outside them.
    pub root: Arc<ServedRoot>,
    /// Pulls only: a push into it is refused before anything is written.
    pub read_only: bool,
    /// What one push may write into it.
    pub caps: ListCaps,
    /// The tokens that open it: their places in the server's keyring.
    pub tokens: Vec<usize>,
    /// The local user its sessions run as (a server started as root): the session's
    /// thread becomes that user before it touches a file ([`longhaul_sys::creds`]).
    pub user: Option<longhaul_sys::creds::UserCreds>,
}

/// The areas of one daemon.
#[derive(Debug, Clone)]
pub struct Areas(Vec<Area>);

/// Where a request lands: an area's root, the path below it, and the area's rules.
#[derive(Debug)]
pub struct Reached<'a> {
    /// The area.
    pub area: &'a Area,
    /// The path below the area's root (`None`: the root itself).
    pub path: Option<SafeRelPath>,
    /// The request ended in `/`: it must be a directory.
    pub dir_required: bool,
}

impl Areas {
    /// The areas, checked: at least one, names valid and distinct, each opened by a token.
    pub fn new(areas: Vec<Area>) -> Result<Self, String> {
        if areas.is_empty() {
            return Err("no areas: give at least one, or a single root".into());
        }
        for (i, a) in areas.iter().enumerate() {
            check_name(&a.name)?;
            if areas[..i].iter().any(|b| b.name == a.name) {
                return Err(format!("area {:?} is given twice", a.name));
            }
            if a.tokens.is_empty() {
                return Err(format!(
                    "area {:?} has no token: nobody could reach it",
                    a.name
                ));
            }
        }
        Ok(Self(areas))
    }

    /// Every area.
    pub fn list(&self) -> &[Area] {
        &self.0
    }

    /// The names of the areas token `token` opens, in the order given.
    pub fn open_to(&self, token: usize) -> Vec<&str> {
        self.0
            .iter()
            .filter(|a| a.tokens.contains(&token))
            .map(|a| a.name.as_str())
            .collect()
    }

    /// Where the path `wire` of a transfer request lands for a client holding `token`;
    /// the error says what to name instead (only the areas that token opens).
    pub fn reach(&self, token: usize, wire: &[u8]) -> Result<Reached<'_>, String> {
        let yours = || {
            let names = self.open_to(token);
            if names.is_empty() {
                "your token opens no area here".to_string()
            } else {
                format!("your token opens: {}", names.join(", "))
            }
        };
        let requested = RequestedPath::from_wire(wire).map_err(|e| format!("refused path: {e}"))?;
        let Some(path) = requested.path else {
            return Err(format!(
                "this server exports areas: name one as the first part of the path \
                 (HOST:AREA/path, longhaul://HOST/AREA/path); {}",
                yours()
            ));
        };
        let bytes = path.as_bytes();
        let (first, rest) = match bytes.iter().position(|&b| b == b'/') {
            Some(at) => (&bytes[..at], &bytes[at + 1..]),
            None => (bytes, &[][..]),
        };
        let area = self
            .0
            .iter()
            .find(|a| a.name.as_bytes() == first && a.tokens.contains(&token))
            .ok_or_else(|| {
                format!(
                    "no area {:?} here for your token; {}",
                    longhaul_proto::printable(&String::from_utf8_lossy(first)),
                    yours()
                )
            })?;
        let path = if rest.is_empty() {
            None
        } else {
            Some(parse_peer_path(rest).map_err(|e| format!("refused path: {e}"))?)
        };
        Ok(Reached {
            area,
            path,
            dir_required: requested.dir_required,
        })
    }
}

/// An area's name: one path component of letters, digits, `.`, `_` and `-`, not `.` or
/// `..`, at most [`MAX_AREA_NAME`] bytes.
pub fn check_name(name: &str) -> Result<(), String> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty()
        || name.len() > MAX_AREA_NAME
        || name == "."
        || name == ".."
        || !name.chars().all(fine)
    {
        return Err(format!(
            "area name {:?}: an area is named by 1 to {MAX_AREA_NAME} letters, digits, `.`, \
             `_` or `-` (one path component, not `.` or `..`)",
            longhaul_proto::printable(name)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn area(name: &str, tokens: &[usize], dir: &std::path::Path) -> Area {
        Area {
            name: name.into(),
            root: Arc::new(ServedRoot::open(dir).unwrap()),
            read_only: false,
            caps: ListCaps::default(),
            tokens: tokens.to_vec(),
            user: None,
        }
    }

    #[test]
    fn a_path_lands_in_the_area_its_token_opens_and_nowhere_else() {
        let dir = tempfile::tempdir().unwrap();
        let areas = Areas::new(vec![
            area("physics", &[0], dir.path()),
            area("cms", &[1], dir.path()),
            area("shared", &[0, 1], dir.path()),
        ])
        .unwrap();
        let r = areas.reach(0, b"physics/run1/f.h5").unwrap();
        assert_eq!(r.area.name, "physics");
        assert_eq!(r.path.unwrap().as_bytes(), b"run1/f.h5");
        let r = areas.reach(1, b"shared/").unwrap();
        assert_eq!((r.area.name.as_str(), r.path.is_none()), ("shared", true));
        assert!(r.dir_required);
        // Another token's area reads as one that does not exist, and names only its own.
        let theirs = areas.reach(1, b"physics/run1").unwrap_err();
        let missing = areas.reach(1, b"nowhere/run1").unwrap_err();
        assert!(theirs.contains("your token opens: cms, shared"), "{theirs}");
        assert!(!theirs.contains("physics,"), "{theirs}");
        assert_eq!(
            theirs.replace("physics", "X"),
            missing.replace("nowhere", "X")
        );
        // The root of the server is no area.
        let e = areas.reach(0, b".").unwrap_err();
        assert!(e.contains("name one as the first part"), "{e}");
        // Escapes stay refused.
        assert!(areas.reach(0, b"physics/../cms/x").is_err());
        assert!(areas.reach(0, b"/physics/x").is_err());
    }

    #[test]
    fn names_are_one_plain_component_and_given_once() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["", ".", "..", "a/b", "a b", "é", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name("cms-2026_v1.0").is_ok());
        let twice = Areas::new(vec![
            area("a", &[0], dir.path()),
            area("a", &[1], dir.path()),
        ]);
        assert!(twice.unwrap_err().contains("twice"));
        let locked = Areas::new(vec![area("a", &[], dir.path())]);
        assert!(locked.unwrap_err().contains("no token"));
        assert!(Areas::new(Vec::new()).is_err());
    }
}
