//! The ssh side of locations: `[user@]host` (and `ssh://[user@]host[:port]` for bench), and
//! how the far end turns the path the user typed into a path below `/`.
//!
//! The far end acts with the ssh user's own rights, as scp does: an absolute path is taken
//! as given, a relative one from the user's home, `..` allowed. [`user_path`] resolves `.`
//! and `..` by the names alone (`a/link/..` is `a`, where the kernel would go to the
//! link target's parent), so the result is a plain path below `/` that the far end opens
//! following symlinks.

use std::os::unix::ffi::OsStrExt;

use crate::error::{display_path, Error, Result};
use crate::path::{parse_peer_path, SafeRelPath};

use super::{bracketed, parse_port};

/// Longest user or host name accepted.
const MAX_NAME: usize = 255;

/// Who and where to ssh to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    /// The remote user (`None`: ssh's default, from ~/.ssh/config or the local name).
    pub user: Option<String>,
    /// Host name or address as ssh gets it (an IPv6 address without brackets).
    pub host: String,
    /// Port (only from `ssh://host:port`; else ssh's own default or `-e "ssh -p N"`).
    pub port: Option<u16>,
}

impl SshHost {
    /// `user@host` or `host`: ssh's destination argument.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

/// `[user@]host:path` as written on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshSpec {
    /// Who and where.
    pub host: SshHost,
    /// The path as typed (raw bytes; empty = the remote user's home).
    pub path: Vec<u8>,
}

impl std::fmt::Display for SshSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = match &self.host.user {
            Some(u) => format!("{u}@{}", bracketed(&self.host.host)),
            None => bracketed(&self.host.host),
        };
        write!(f, "{host}:{}", String::from_utf8_lossy(&self.path))
    }
}

/// Reads `[user@]host`, `[user@][v6]` (the part of an argument before its `:`). `arg` is
/// the whole argument, for messages.
pub fn parse_ssh_host(part: &[u8], arg: &[u8]) -> Result<SshHost> {
    let bad = |why: &str| Error::BadSshHost {
        arg: display_path(arg),
        why: why.to_string(),
    };
    let text = std::str::from_utf8(part).map_err(|_| Error::NonUtf8Host {
        arg: display_path(arg),
    })?;
    let (user, host) = match text.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, text),
    };
    let host = match host.strip_prefix('[') {
        Some(inner) => inner
            .strip_suffix(']')
            .ok_or_else(|| Error::BadBracketHost {
                arg: display_path(arg),
            })?,
        None => host,
    };
    if host.is_empty() {
        return Err(Error::EmptyHost {
            arg: display_path(arg),
        });
    }
    if let Some(u) = user {
        if u.is_empty() {
            return Err(bad("the user before '@' is empty"));
        }
        if u.starts_with('-') {
            return Err(bad(
                "a user name may not start with '-' (ssh would read an option)",
            ));
        }
    }
    if host.starts_with('-') {
        return Err(bad(
            "a host name may not start with '-' (ssh would read an option)",
        ));
    }
    let plain = |s: &str| !s.chars().any(|c| c.is_whitespace() || c.is_control());
    if !plain(host) || !user.map_or(true, plain) {
        return Err(bad("white space or control characters in the user or host"));
    }
    if host.contains(['[', ']', '/']) || (host.contains(':') && !part.contains(&b'[')) {
        return Err(bad(
            "the host holds '[', ']', '/' or ':' (write an IPv6 address as [ADDR])",
        ));
    }
    if host.len() > MAX_NAME || user.is_some_and(|u| u.len() > MAX_NAME) {
        return Err(bad("the user or host is longer than 255 bytes"));
    }
    Ok(SshHost {
        user: user.map(str::to_string),
        host: host.to_string(),
        port: None,
    })
}

/// Reads `ssh://[user@]host[:port]` (the part after `ssh://`; a trailing `/` is allowed).
pub fn parse_ssh_url(rest: &[u8], arg: &[u8]) -> Result<SshHost> {
    let rest = rest.strip_suffix(b"/").unwrap_or(rest);
    // The port is after the last ':' that is not inside brackets.
    let close = rest.iter().rposition(|&b| b == b']');
    let colon = rest.iter().rposition(|&b| b == b':');
    let (part, port) = match colon {
        Some(c) if close.map_or(!rest[..c].contains(&b':'), |x| x < c) => {
            (&rest[..c], Some(parse_port(&rest[c + 1..], arg)?))
        }
        _ => (rest, None),
    };
    let mut host = parse_ssh_host(part, arg)?;
    host.port = port;
    Ok(host)
}

/// The far end's reading of a typed path: absolute as given, else from `home`; `.` and
/// empty names dropped, `..` taking away the name before it (never above `/`). The result
/// is relative to `/` (`None`: `/` itself). Refused: NUL, and results over the path bounds.
pub fn user_path(home: &std::path::Path, raw: &[u8]) -> Result<Option<SafeRelPath>> {
    let mut names: Vec<&[u8]> = Vec::new();
    if raw.first() != Some(&b'/') {
        names.extend(
            home.as_os_str()
                .as_bytes()
                .split(|&b| b == b'/')
                .filter(|c| !c.is_empty() && *c != b"."),
        );
        // A home with `..` in it is not something sshd sets; resolve it the same way.
        names = resolve(names);
    }
    if raw.contains(&0) || raw.len() > crate::path::MAX_PATH_BYTES {
        // Let the validator name the problem with the value as typed.
        return parse_peer_path(raw).map(Some);
    }
    names.extend(raw.split(|&b| b == b'/'));
    let names = resolve(names);
    if names.is_empty() {
        return Ok(None);
    }
    parse_peer_path(&names.join(&b'/')).map(Some)
}

fn resolve(names: Vec<&[u8]>) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        match n {
            b"" | b"." => {}
            b".." => {
                out.pop();
            }
            _ => out.push(n),
        }
    }
    out
}

/// The base name every entry of a pull of the ssh path `raw` starts with, when the client
/// can know it: the last name once `.` and `..` are resolved. `None` when the path ends
/// at `/`, at the home itself, or climbs above what it names (`..` beyond its own names):
/// then the far end's name for it is accepted as the one top.
pub fn ssh_top(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out: Vec<&[u8]> = Vec::new();
    for n in raw.split(|&b| b == b'/') {
        match n {
            b"" | b"." => {}
            b".." => {
                out.pop()?;
            }
            _ => out.push(n),
        }
    }
    out.last().map(|n| n.to_vec())
}
