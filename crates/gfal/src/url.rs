//! The URLs the plugin is handed: `longhaul://HOST[:PORT]/PATH` (a daemon's files, PATH
//! below its root, port 5290 by default) and, as the other end of a copy, `file:///PATH`.
//!
//! Storage clients build URLs by joining a prefix and a path, so `longhaul://h//data/x`
//! (a doubled slash after the host) is common: every `/` after the host is dropped, and it
//! names `data/x` below the root, as `longhaul://h/data/x` does. The scheme's letters may be
//! in either case. Nothing is percent-decoded (gfal2 passes URLs as they were written).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use longhaul_engine::bench::DEFAULT_PORT;
use longhaul_transfer::location::parse_daemon;
use longhaul_transfer::RequestedPath;

use crate::error::PluginError;

/// The scheme the plugin claims.
pub const SCHEME: &[u8] = b"longhaul://";
/// The scheme of local files (gfal2's file plugin's).
pub const FILE_SCHEME: &[u8] = b"file://";

/// One daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address (an IPv6 address without brackets).
    pub host: String,
    /// Port (5290 when the URL names none).
    pub port: u16,
}

impl Endpoint {
    /// `HOST:PORT` or `[V6]:PORT`: what the engine dials, and the name the daemon's
    /// certificate is pinned under in the known-servers file.
    pub fn target(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A `longhaul://` URL, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LonghaulUrl {
    /// The daemon.
    pub endpoint: Endpoint,
    /// The path below its root, without leading slashes (empty: the root).
    pub path: Vec<u8>,
}

impl LonghaulUrl {
    /// The path's canonical wire form (`.` for the root), as a transfer request or a
    /// ticket names it.
    pub fn wire_path(&self) -> Result<Vec<u8>, PluginError> {
        RequestedPath::from_typed(&self.path)
            .map(|r| r.to_wire())
            .map_err(|e| bad_path(e).context(self.shown()))
    }

    /// The parent directory's path (`None` for the root and for an entry right below it).
    pub fn parent(&self) -> Option<Vec<u8>> {
        let trimmed = trim_trailing_slashes(&self.path);
        let slash = trimmed.iter().rposition(|&b| b == b'/')?;
        Some(trimmed[..slash].to_vec())
    }

    /// The URL written back (for messages).
    pub fn shown(&self) -> String {
        format!(
            "longhaul://{}/{}",
            self.endpoint.target(),
            String::from_utf8_lossy(&self.path)
        )
    }
}

/// Whether gfal2 should give `url` to this plugin: its scheme is `longhaul://` (checked
/// fast; a malformed URL is still claimed so that its error comes from here, naming it).
pub fn claims(url: &[u8]) -> bool {
    has_scheme(url, SCHEME)
}

/// Whether `url` is a local file URL (`file://...`).
pub fn is_file_url(url: &[u8]) -> bool {
    has_scheme(url, FILE_SCHEME)
}

fn has_scheme(url: &[u8], scheme: &[u8]) -> bool {
    url.len() >= scheme.len() && url[..scheme.len()].eq_ignore_ascii_case(scheme)
}

/// Reads `longhaul://HOST[:PORT]/PATH`.
///
/// Errors (EINVAL): another scheme, an empty host, a bad port, a `[` without `]`, and a
/// path that leaves the root (`..`) or holds NUL.
pub fn parse_longhaul(url: &[u8]) -> Result<LonghaulUrl, PluginError> {
    if !claims(url) {
        return Err(invalid(url, "not a longhaul:// URL"));
    }
    let rest = &url[SCHEME.len()..];
    let spec = parse_daemon(rest, url).map_err(|e| invalid(url, &e.to_string()))?;
    let start = spec
        .path
        .iter()
        .position(|&b| b != b'/')
        .unwrap_or(spec.path.len());
    let path = spec.path[start..].to_vec();
    RequestedPath::from_typed(&path).map_err(|e| bad_path(e).context(shown(url)))?;
    Ok(LonghaulUrl {
        endpoint: Endpoint {
            host: spec.host,
            port: spec.port.unwrap_or(DEFAULT_PORT),
        },
        path,
    })
}

/// Reads `file:///PATH` (an empty host, as gfal2's file plugin takes; or `localhost`) as
/// the local path `/PATH`.
pub fn parse_file(url: &[u8]) -> Result<PathBuf, PluginError> {
    if !is_file_url(url) {
        return Err(invalid(url, "not a file:// URL"));
    }
    let rest = &url[FILE_SCHEME.len()..];
    let path = if rest.first() == Some(&b'/') {
        rest
    } else if rest.len() > 9 && rest[..9].eq_ignore_ascii_case(b"localhost") && rest[9] == b'/' {
        &rest[9..]
    } else {
        return Err(invalid(
            url,
            "a file URL names an absolute local path: file:///PATH",
        ));
    };
    if path.contains(&0) {
        return Err(invalid(url, "the path holds a NUL byte"));
    }
    Ok(PathBuf::from(OsStr::from_bytes(path)))
}

fn trim_trailing_slashes(p: &[u8]) -> &[u8] {
    let end = p.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    &p[..end]
}

fn shown(url: &[u8]) -> String {
    String::from_utf8_lossy(url).into_owned()
}

fn invalid(url: &[u8], why: &str) -> PluginError {
    PluginError::new(libc::EINVAL, format!("{}: {why}", shown(url)))
}

fn bad_path(e: longhaul_transfer::Error) -> PluginError {
    PluginError::new(libc::EINVAL, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> LonghaulUrl {
        parse_longhaul(s.as_bytes()).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn host_port_and_path_are_read_with_the_default_port() {
        let u = url("longhaul://data.example.org/run1/file.root");
        assert_eq!(u.endpoint.host, "data.example.org");
        assert_eq!(u.endpoint.port, 5290);
        assert_eq!(u.endpoint.target(), "data.example.org:5290");
        assert_eq!(u.path, b"run1/file.root");
        let u = url("LONGHAUL://127.0.0.1:4000/x");
        assert_eq!(u.endpoint.target(), "127.0.0.1:4000");
        let u = url("longhaul://[::1]:4001/a/b/");
        assert_eq!(u.endpoint.host, "::1");
        assert_eq!(u.endpoint.target(), "[::1]:4001");
        assert_eq!(u.path, b"a/b/");
    }

    #[test]
    fn doubled_slashes_after_the_host_name_the_same_path_and_none_is_the_root() {
        assert_eq!(url("longhaul://h//data/x").path, b"data/x");
        assert_eq!(url("longhaul://h:1///data/x").path, b"data/x");
        assert_eq!(url("longhaul://h").path, b"");
        assert_eq!(url("longhaul://h/").path, b"");
        assert_eq!(url("longhaul://h/").wire_path().unwrap(), b".");
        assert_eq!(url("longhaul://h//a/./b").wire_path().unwrap(), b"a/b");
    }

    #[test]
    fn bad_urls_are_refused_with_einval_naming_them() {
        for bad in [
            "longhaul:///x",
            "longhaul://h:port/x",
            "longhaul://[::1/x",
            "longhaul://h/../etc/passwd",
            "longhaul://h/a/../../b",
            "file:///x",
        ] {
            let e = parse_longhaul(bad.as_bytes()).unwrap_err();
            assert_eq!(e.errno, libc::EINVAL, "{bad}");
            assert!(!e.message.is_empty(), "{bad}");
        }
        let e = parse_longhaul(b"longhaul://h/a/../../b").unwrap_err();
        assert!(
            e.message.contains("longhaul://h/a/../../b"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_plugin_claims_its_scheme_only() {
        assert!(claims(b"longhaul://h/x"));
        assert!(claims(b"LongHaul://h/x"));
        assert!(claims(b"longhaul://"));
        assert!(!claims(b"longhaul:/h/x"));
        assert!(!claims(b"file:///tmp/x"));
        assert!(!claims(b"davs://h/x"));
        assert!(!claims(b""));
    }

    #[test]
    fn the_parent_of_a_path_is_the_path_up_to_its_last_slash() {
        assert_eq!(url("longhaul://h/a/b/c").parent(), Some(b"a/b".to_vec()));
        assert_eq!(url("longhaul://h/a/b/c/").parent(), Some(b"a/b".to_vec()));
        assert_eq!(url("longhaul://h/a").parent(), None);
        assert_eq!(url("longhaul://h/").parent(), None);
    }

    #[test]
    fn file_urls_name_absolute_local_paths() {
        assert_eq!(
            parse_file(b"file:///tmp/a b").unwrap(),
            PathBuf::from("/tmp/a b")
        );
        assert_eq!(
            parse_file(b"file://localhost/tmp/x").unwrap(),
            PathBuf::from("/tmp/x")
        );
        for bad in ["file://host/tmp/x", "file://tmp/x", "longhaul://h/x"] {
            assert_eq!(
                parse_file(bad.as_bytes()).unwrap_err().errno,
                libc::EINVAL,
                "{bad}"
            );
        }
        assert!(is_file_url(b"FILE:///x"));
        assert!(!is_file_url(b"longhaul://h/x"));
    }

    #[test]
    fn a_url_is_shown_as_it_is_dialled() {
        assert_eq!(url("longhaul://h//a/b").shown(), "longhaul://h:5290/a/b");
    }
}
