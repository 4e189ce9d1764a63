//! Where a `longhaul cp` argument points: a local path or `HOST[:PORT]:PATH` on a server.
//!
//! The rule is scp's: an argument is remote when a `:` comes before its first `/`, so
//! `/a:b`, `./a:b` and `dir/a:b` are local files. Remote forms:
//!
//! ```text
//! host:path          host.example:data/run7
//! host:port:path     host:5290:data        (port: digits only, followed by ':')
//! [v6]:path          [2001:db8::1]:data
//! [v6]:port:path     [::1]:5290:data
//! host:              the server's root itself (empty path)
//! ```
//!
//! A remote path is relative to the server's `--root`; [`remote_path`] turns it into a
//! [`SafeRelPath`] (or `None` for the root) and refuses absolute paths and `..`.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use crate::error::{display_path, Error, Result};
use crate::path::SafeRelPath;
use crate::requested::RequestedPath;

/// One side of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A path on this machine.
    Local(PathBuf),
    /// A path below the root of a `longhaul serve --root DIR`.
    Remote(RemoteSpec),
}

/// `HOST[:PORT]:PATH` as written on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSpec {
    /// Host name or address; an IPv6 address without its brackets.
    pub host: String,
    /// Port, when given (`None`: the default port).
    pub port: Option<u16>,
    /// Path below the server's root as typed (raw bytes; empty = the root). Check it with
    /// [`remote_path`] before use.
    pub path: Vec<u8>,
}

impl RemoteSpec {
    /// The spec written back as a command-line argument that [`parse_location`] reads as
    /// the same host, port and [`remote_path`]. A path that would read as a port
    /// (`80:x` without a port) is written `./80:x`.
    pub fn to_arg(&self) -> OsString {
        let mut out = Vec::with_capacity(self.host.len() + self.path.len() + 10);
        if self.host.contains(':') {
            out.push(b'[');
            out.extend_from_slice(self.host.as_bytes());
            out.push(b']');
        } else {
            out.extend_from_slice(self.host.as_bytes());
        }
        out.push(b':');
        match self.port {
            Some(port) => {
                out.extend_from_slice(port.to_string().as_bytes());
                out.push(b':');
            }
            None if split_port(&self.path).is_some() => out.extend_from_slice(b"./"),
            None => {}
        }
        out.extend_from_slice(&self.path);
        OsString::from_vec(out)
    }
}

impl fmt::Display for RemoteSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.to_arg().as_bytes()))
    }
}

/// Reads one `cp` argument as a local path or a remote `HOST[:PORT]:PATH`.
///
/// Errors: an empty argument, an empty host (`:path`), a `[` without `]:`, a non-UTF-8
/// host, a port that is 0 or above 65535.
pub fn parse_location(arg: &OsStr) -> Result<Location> {
    let bytes = arg.as_bytes();
    if bytes.is_empty() {
        return Err(Error::EmptyLocation);
    }
    let slash = bytes.iter().position(|&b| b == b'/');
    let colon = bytes.iter().position(|&b| b == b':');
    let before_slash = |i: usize| match slash {
        Some(s) => i < s,
        None => true,
    };

    let (host, rest) = if bytes[0] == b'[' {
        match bytes.iter().position(|&b| b == b']') {
            Some(close) if bytes.get(close + 1) == Some(&b':') => {
                (&bytes[1..close], &bytes[close + 2..])
            }
            _ if colon.is_some_and(before_slash) => {
                return Err(Error::BadBracketHost {
                    arg: display_path(bytes),
                })
            }
            _ => return Ok(Location::Local(PathBuf::from(arg))),
        }
    } else {
        match colon {
            Some(c) if before_slash(c) => (&bytes[..c], &bytes[c + 1..]),
            _ => return Ok(Location::Local(PathBuf::from(arg))),
        }
    };
    if host.is_empty() {
        return Err(Error::EmptyHost {
            arg: display_path(bytes),
        });
    }
    let host = std::str::from_utf8(host)
        .map_err(|_| Error::NonUtf8Host {
            arg: display_path(bytes),
        })?
        .to_string();
    let (port, path) = match split_port(rest) {
        Some((digits, path)) => (Some(parse_port(digits, bytes)?), path),
        None => (None, rest),
    };
    Ok(Location::Remote(RemoteSpec {
        host,
        port,
        path: path.to_vec(),
    }))
}

/// The path of a remote spec below the served root: `None` for the root itself (empty or
/// `.`), else a [`SafeRelPath`]. `.` and empty components are dropped (`./a//b` = `a/b`);
/// absolute paths, `..`, NUL and over-long paths are refused with [`parse_peer_path`]'s
/// errors. Whether a trailing `/` asks for a directory: [`RequestedPath::from_typed`].
///
/// [`parse_peer_path`]: crate::path::parse_peer_path
pub fn remote_path(spec: &RemoteSpec) -> Result<Option<SafeRelPath>> {
    RequestedPath::from_typed(&spec.path).map(|r| r.path)
}

/// `digits ':' path` -> `(digits, path)` when `rest` starts with a port.
fn split_port(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = rest.iter().position(|&b| !b.is_ascii_digit())?;
    if end == 0 || rest[end] != b':' {
        return None;
    }
    Some((&rest[..end], &rest[end + 1..]))
}

fn parse_port(digits: &[u8], arg: &[u8]) -> Result<u16> {
    let value = String::from_utf8_lossy(digits).into_owned();
    // At most 5 significant digits fit; longer strings (leading zeros aside) are too big.
    let trimmed = value.trim_start_matches('0');
    let port = if trimmed.len() > 5 {
        None
    } else {
        trimmed.parse::<u32>().ok().or(Some(0))
    };
    match port {
        Some(p @ 1..=65535) => Ok(p as u16),
        _ => Err(Error::BadPort {
            value,
            arg: display_path(arg),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(arg: &str) -> RemoteSpec {
        match parse_location(OsStr::new(arg)).unwrap() {
            Location::Remote(r) => r,
            l => panic!("{arg} read as {l:?}"),
        }
    }

    fn is_local(arg: &[u8]) -> bool {
        matches!(
            parse_location(OsStr::from_bytes(arg)).unwrap(),
            Location::Local(p) if p.as_os_str().as_bytes() == arg
        )
    }

    fn spec(host: &str, port: Option<u16>, path: &str) -> RemoteSpec {
        RemoteSpec {
            host: host.into(),
            port,
            path: path.into(),
        }
    }

    #[test]
    fn host_and_path() {
        assert_eq!(remote("h:data/x"), spec("h", None, "data/x"));
        assert_eq!(remote("h.example.org:f"), spec("h.example.org", None, "f"));
        assert_eq!(remote("10.0.0.2:f"), spec("10.0.0.2", None, "f"));
        assert_eq!(remote("h:"), spec("h", None, ""));
        assert_eq!(remote("h:a:b"), spec("h", None, "a:b"));
        // Digits not followed by ':' are a path, not a port.
        assert_eq!(remote("h:5290"), spec("h", None, "5290"));
        assert_eq!(remote("h:12a:x"), spec("h", None, "12a:x"));
    }

    #[test]
    fn ports() {
        assert_eq!(remote("h:5290:data"), spec("h", Some(5290), "data"));
        assert_eq!(remote("h:1:"), spec("h", Some(1), ""));
        assert_eq!(remote("h:65535:a"), spec("h", Some(65535), "a"));
        assert_eq!(remote("h:00080:a"), spec("h", Some(80), "a"));
        for bad in ["0", "65536", "99999999999999999999999", "000"] {
            let e = parse_location(OsStr::new(&format!("h:{bad}:x"))).unwrap_err();
            assert!(
                matches!(e, Error::BadPort { ref value, .. } if value == bad),
                "{e:?}"
            );
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn ipv6() {
        assert_eq!(remote("[::1]:5290:d"), spec("::1", Some(5290), "d"));
        assert_eq!(
            remote("[2001:db8::1]:d/e"),
            spec("2001:db8::1", None, "d/e")
        );
        assert_eq!(remote("[::1]:"), spec("::1", None, ""));
        assert_eq!(
            remote("[fe80::1%eth0]:7:x"),
            spec("fe80::1%eth0", Some(7), "x")
        );
        for bad in ["[::1]", "[::1", "[::1]x:y", "[]:x"] {
            assert!(parse_location(OsStr::new(bad)).is_err(), "{bad}");
        }
        // A bracket with no ':' before the first '/' is just a file name.
        assert!(is_local(b"[x]/y:z"));
        assert!(is_local(b"[abc]"));
    }

    #[test]
    fn local_paths() {
        for arg in [
            &b"/abs/a:b"[..],
            b"./a:b",
            b"../a:b",
            b"dir/a:b",
            b"plain",
            b".",
            b"/",
            b"\xff\xfe",
        ] {
            assert!(is_local(arg), "{:?}", String::from_utf8_lossy(arg));
        }
    }

    #[test]
    fn errors() {
        assert_eq!(parse_location(OsStr::new("")), Err(Error::EmptyLocation));
        assert!(matches!(
            parse_location(OsStr::new(":x")),
            Err(Error::EmptyHost { .. })
        ));
        assert!(matches!(
            parse_location(OsStr::from_bytes(b"h\xff:x")),
            Err(Error::NonUtf8Host { .. })
        ));
    }

    #[test]
    fn remote_paths() {
        let p = |s: &str| remote_path(&spec("h", None, s));
        assert_eq!(p("").unwrap(), None);
        assert_eq!(p(".").unwrap(), None);
        assert_eq!(p("./").unwrap(), None);
        assert_eq!(p("a/b").unwrap().unwrap().as_bytes(), b"a/b");
        assert_eq!(p("./a//b/").unwrap().unwrap().as_bytes(), b"a/b");
        assert!(matches!(p("/etc"), Err(Error::AbsolutePath { .. })));
        assert!(matches!(p(".."), Err(Error::ParentComponent { .. })));
        assert!(matches!(p("a/../../b"), Err(Error::ParentComponent { .. })));
        let e = p("x/../y").unwrap_err().to_string();
        assert!(e.contains("x/../y") && e.contains(".."), "{e}");
    }

    #[test]
    fn to_arg_round_trips() {
        for s in [
            spec("h", None, "a"),
            spec("h", Some(9), "a:b"),
            spec("::1", Some(5290), ""),
            spec("::1", None, "12:x"),
            spec("h", None, "80:x"),
        ] {
            let back = remote(s.to_arg().to_str().unwrap());
            assert_eq!((&back.host, back.port), (&s.host, s.port));
            assert_eq!(remote_path(&back), remote_path(&s));
        }
        assert_eq!(spec("::1", Some(1), "d").to_string(), "[::1]:1:d");
    }
}
