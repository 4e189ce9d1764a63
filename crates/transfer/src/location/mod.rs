//! Where a `longhaul cp` argument points: a local path, a path on a host reached over ssh,
//! or a path below a `longhaul serve` daemon's root. The split is rsync's (`host:path`
//! vs `rsync://host/path`):
//!
//! ```text
//! [user@]host:path           ssh (scp's rule: a ':' before the first '/' makes it remote);
//! [user@][v6]:path           path absolute, or relative to the remote user's home; empty:
//!                            the home itself; `..` allowed
//! longhaul://host[:port]/path     a daemon; path below its --root (default port 5290)
//! longhaul://[v6][:port]/path
//! ```
//!
//! The old daemon form `host:port:path` would now read as the ssh path `port:path`; it is
//! refused with a hint ([`Error::OldDaemonForm`]) instead of silently changing meaning.
//! `/a:b`, `./a:b` and `dir/a:b` are local files. A daemon path becomes a [`SafeRelPath`]
//! with [`remote_path`] (absolute paths and `..` refused); an ssh path is resolved by the far
//! end with [`user_path`].

mod ssh;
#[cfg(test)]
mod tests;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use crate::error::{display_path, Error, Result};
use crate::path::SafeRelPath;

pub use ssh::{parse_ssh_host, parse_ssh_url, ssh_top, user_path, SshHost, SshSpec};

/// The scheme of a daemon location.
pub const DAEMON_SCHEME: &str = "longhaul://";

/// One side of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A path on this machine.
    Local(PathBuf),
    /// `longhaul://host[:port]/path`: a path below the root of a `longhaul serve --root DIR`.
    Daemon(RemoteSpec),
    /// `[user@]host:path`: a path on a host reached over ssh.
    Ssh(SshSpec),
}

/// `longhaul://HOST[:PORT]/PATH` as written on the command line.
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
    /// the same host, port and path.
    pub fn to_arg(&self) -> OsString {
        let mut out = Vec::with_capacity(self.host.len() + self.path.len() + 20);
        out.extend_from_slice(DAEMON_SCHEME.as_bytes());
        out.extend_from_slice(bracketed(&self.host).as_bytes());
        if let Some(port) = self.port {
            out.extend_from_slice(format!(":{port}").as_bytes());
        }
        out.push(b'/');
        out.extend_from_slice(&self.path);
        OsString::from_vec(out)
    }
}

impl fmt::Display for RemoteSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.to_arg().as_bytes()))
    }
}

/// Reads one `cp` argument as a local path, a daemon URL or an ssh `[user@]host:path`.
///
/// Errors: an empty argument, an empty host, a `[` without `]`, a non-UTF-8 host, a bad
/// port, a host or user starting with `-` (it would reach ssh as an option), and the old
/// daemon form `host:DIGITS:path`.
pub fn parse_location(arg: &OsStr) -> Result<Location> {
    let bytes = arg.as_bytes();
    if bytes.is_empty() {
        return Err(Error::EmptyLocation);
    }
    if let Some(rest) = bytes.strip_prefix(DAEMON_SCHEME.as_bytes()) {
        return parse_daemon(rest, bytes).map(Location::Daemon);
    }
    // scp's rule: only a ':' before the first '/' makes an argument remote, so the host
    // part lies within `head`.
    let head = match bytes.iter().position(|&b| b == b'/') {
        Some(slash) => &bytes[..slash],
        None => bytes,
    };
    let colon = head.iter().position(|&b| b == b':');
    let host_end = match head.iter().position(|&b| b == b'[') {
        Some(open) if colon.map_or(true, |c| open < c) => {
            match head[open..].iter().position(|&b| b == b']') {
                Some(close) if head.get(open + close + 1) == Some(&b':') => open + close + 1,
                _ if colon.is_some() => {
                    return Err(Error::BadBracketHost {
                        arg: display_path(bytes),
                    })
                }
                _ => return Ok(Location::Local(PathBuf::from(arg))),
            }
        }
        _ => match colon {
            Some(c) => c,
            None => return Ok(Location::Local(PathBuf::from(arg))),
        },
    };
    let host = parse_ssh_host(&bytes[..host_end], bytes)?;
    let path = &bytes[host_end + 1..];
    if let Some((digits, rest)) = split_port(path) {
        return Err(Error::OldDaemonForm {
            host: bracketed(&host.host),
            port: String::from_utf8_lossy(digits).into_owned(),
            rest: display_path(rest),
        });
    }
    Ok(Location::Ssh(SshSpec {
        host,
        path: path.to_vec(),
    }))
}

/// The path of a daemon spec below the served root: `None` for the root itself (empty or
/// `.`), else a [`SafeRelPath`]. `.` and empty components are dropped (`dir/` = `dir`,
/// `./a//b` = `a/b`); absolute paths, `..`, NUL and over-long paths are refused with
/// [`parse_peer_path`](crate::path::parse_peer_path)'s errors. Whether a trailing `/` asks for a directory:
/// [`RequestedPath::from_typed`](crate::requested::RequestedPath::from_typed).
pub fn remote_path(spec: &RemoteSpec) -> Result<Option<SafeRelPath>> {
    crate::requested::RequestedPath::from_typed(&spec.path).map(|r| r.path)
}

/// `longhaul://H1[:PORT],H2[:PORT],.../PATH`: the hosts of one end of a striped copy
/// (`longhaul_proto::stripe`), 2 to 64 of them, each serving the same PATH; `None` when
/// the argument is not a daemon URL with a comma in its host part.
pub fn parse_striped(arg: &OsStr) -> Result<Option<Vec<RemoteSpec>>> {
    let bytes = arg.as_bytes();
    let Some(rest) = bytes.strip_prefix(DAEMON_SCHEME.as_bytes()) else {
        return Ok(None);
    };
    let (authority, path) = split_authority(rest);
    if !authority.contains(&b',') {
        return Ok(None);
    }
    let hosts: Vec<&[u8]> = authority.split(|&b| b == b',').collect();
    let max = usize::from(longhaul_proto::stripe::MAX_SHARES);
    if hosts.len() > max || hosts.iter().any(|h| h.is_empty()) {
        return Err(Error::BadStripeHosts {
            arg: display_path(bytes),
        });
    }
    hosts
        .into_iter()
        .map(|h| parse_daemon(&[h, b"/", path].concat(), bytes))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// `authority[/path]` -> (authority, path).
fn split_authority(rest: &[u8]) -> (&[u8], &[u8]) {
    match rest.iter().position(|&b| b == b'/') {
        Some(s) => (&rest[..s], &rest[s + 1..]),
        None => (rest, &[][..]),
    }
}

/// Reads what follows `longhaul://`: `host[:port][/path]` or `[v6][:port][/path]`.
pub fn parse_daemon(rest: &[u8], arg: &[u8]) -> Result<RemoteSpec> {
    let (authority, path) = split_authority(rest);
    if authority.contains(&b',') {
        // Several hosts: only a striped copy between two daemons takes them.
        return Err(Error::BadStripeHosts {
            arg: display_path(arg),
        });
    }
    let (host, port) = if authority.first() == Some(&b'[') {
        let close =
            authority
                .iter()
                .position(|&b| b == b']')
                .ok_or_else(|| Error::BadBracketHost {
                    arg: display_path(arg),
                })?;
        let after = &authority[close + 1..];
        let port = match after {
            [] => None,
            [b':', digits @ ..] => Some(parse_port(digits, arg)?),
            _ => {
                return Err(Error::BadBracketHost {
                    arg: display_path(arg),
                })
            }
        };
        (&authority[1..close], port)
    } else {
        match authority.iter().position(|&b| b == b':') {
            Some(c) => (&authority[..c], Some(parse_port(&authority[c + 1..], arg)?)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(Error::EmptyHost {
            arg: display_path(arg),
        });
    }
    let host = std::str::from_utf8(host).map_err(|_| Error::NonUtf8Host {
        arg: display_path(arg),
    })?;
    Ok(RemoteSpec {
        host: host.to_string(),
        port,
        path: path.to_vec(),
    })
}

/// An IPv6 address in brackets, any other host as it is.
pub(crate) fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// `digits ':' path` -> `(digits, path)` when `rest` starts with a port.
fn split_port(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = rest.iter().position(|&b| !b.is_ascii_digit())?;
    if end == 0 || rest[end] != b':' {
        return None;
    }
    Some((&rest[..end], &rest[end + 1..]))
}

/// A port: 1..=65535, digits only (leading zeros allowed).
pub fn parse_port(digits: &[u8], arg: &[u8]) -> Result<u16> {
    let value = String::from_utf8_lossy(digits).into_owned();
    let port = if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        None
    } else {
        // At most 5 significant digits fit; longer strings (leading zeros aside) are too big.
        let trimmed = value.trim_start_matches('0');
        if trimmed.len() > 5 {
            None
        } else {
            trimmed.parse::<u32>().ok().or(Some(0))
        }
    };
    match port {
        Some(p @ 1..=65535) => Ok(p as u16),
        _ => Err(Error::BadPort {
            value,
            arg: display_path(arg),
        }),
    }
}
