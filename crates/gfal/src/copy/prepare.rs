//! Before a copy moves bytes: the source must be a regular file (its size is the copy's
//! total), and the destination is made ready as gfal2's parameters say: an existing one
//! refused or removed; a missing parent made, or, when that is not asked for, refused
//! with ENOENT (a daemon would make it on its own, but gfal2's callers count on the
//! refusal).

use std::io::ErrorKind;

use longhaul_proto::namespace::FsErrorKind;

use super::{CopyParams, Direction, EventSide, Hooks, Stage};
use crate::error::{errno_of_io, Note, PluginError, Side};
use crate::namespace::{self, EntryStat};
use crate::settings::Settings;
use crate::url::LonghaulUrl;

/// Permissions of the parent directories a copy makes.
const PARENT_MODE: u32 = 0o755;

/// The source's size; it must be a regular file.
pub(super) fn source_size(settings: &Settings, d: &Direction) -> Result<u64, PluginError> {
    let at = |e: PluginError| e.at(Side::Source, Note::None);
    let (is_file, size, shown) = match d {
        Direction::Upload { local, .. } => {
            let m = std::fs::metadata(local).map_err(|e| {
                PluginError::new(errno_of_io(&e), format!("source {}: {e}", local.display()))
            });
            let m = m.map_err(at)?;
            (m.is_file(), m.len(), local.display().to_string())
        }
        Direction::Download { remote: u, .. } | Direction::ThirdParty { from: u, .. } => {
            let s = remote_stat(settings, u).map_err(at)?;
            let is_file = s.mode & libc::S_IFMT == libc::S_IFREG;
            (is_file, s.size, u.shown())
        }
    };
    if !is_file {
        return Err(at(PluginError::new(
            libc::EISDIR,
            format!("source {shown} is not a regular file; gfal2 copies one file at a time"),
        )));
    }
    Ok(size)
}

/// Makes the destination ready: refuses or removes an existing one, makes its parent.
pub(super) fn destination(
    settings: &Settings,
    d: &Direction,
    params: &CopyParams,
    hooks: &dyn Hooks,
) -> Result<(), PluginError> {
    let dest = |e: PluginError, note| e.at(Side::Destination, note);
    match d {
        Direction::Upload { remote: u, .. } | Direction::ThirdParty { to: u, .. } => {
            let fs = namespace::remote(settings, &u.endpoint)?;
            match fs.stat(&u.path) {
                Ok(s) => {
                    let st = EntryStat::from(s);
                    existing(st.is_dir(), &u.shown(), params.replace)?;
                    hooks.event(
                        EventSide::Destination,
                        Stage::OverwriteDestination,
                        &u.shown(),
                    );
                    fs.unlink(&u.path).map_err(|e| {
                        dest(
                            PluginError::from(e).context(format!("replacing {}", u.shown())),
                            Note::Overwrite,
                        )
                    })?;
                }
                Err(e) if e.kind == FsErrorKind::NotFound => {}
                Err(e) => return Err(dest(PluginError::from(e).context(u.shown()), Note::None)),
            }
            let Some(parent) = u.parent() else {
                return Ok(());
            };
            let shown = format!(
                "longhaul://{}/{}",
                u.endpoint.target(),
                String::from_utf8_lossy(&parent)
            );
            if params.create_parent {
                fs.mkdir(&parent, PARENT_MODE, true).map_err(|e| {
                    let e = PluginError::from(e);
                    dest(
                        e.context(format!("making the parent directory {shown}")),
                        Note::Parent,
                    )
                })?;
            } else {
                let is_dir = match fs.stat(&parent) {
                    Ok(s) => Some(EntryStat::from(s).is_dir()),
                    Err(e) if e.kind == FsErrorKind::NotFound => None,
                    Err(e) => return Err(dest(PluginError::from(e).context(shown), Note::Parent)),
                };
                parent_there(is_dir, &shown)?;
            }
        }
        Direction::Download { local, .. } => {
            match std::fs::symlink_metadata(local) {
                Ok(m) => {
                    let shown = local.display().to_string();
                    existing(m.is_dir(), &shown, params.replace)?;
                    hooks.event(EventSide::Destination, Stage::OverwriteDestination, &shown);
                    std::fs::remove_file(local).map_err(|e| {
                        dest(
                            PluginError::new(errno_of_io(&e), format!("replacing {shown}: {e}")),
                            Note::Overwrite,
                        )
                    })?;
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(dest(
                        PluginError::new(errno_of_io(&e), format!("{}: {e}", local.display())),
                        Note::None,
                    ))
                }
            }
            let Some(parent) = local.parent().filter(|p| !p.as_os_str().is_empty()) else {
                return Ok(());
            };
            let shown = parent.display().to_string();
            let io = |e: std::io::Error, what: &str| {
                let e = PluginError::new(errno_of_io(&e), format!("{what}{shown}: {e}"));
                dest(e, Note::Parent)
            };
            if params.create_parent {
                std::fs::create_dir_all(parent)
                    .map_err(|e| io(e, "making the parent directory "))?;
            } else {
                let is_dir = match std::fs::metadata(parent) {
                    Ok(m) => Some(m.is_dir()),
                    Err(e) if e.kind() == ErrorKind::NotFound => None,
                    Err(e) => return Err(io(e, "")),
                };
                parent_there(is_dir, &shown)?;
            }
        }
    }
    Ok(())
}

/// An existing destination: a directory is never replaced; a file only when allowed.
fn existing(is_dir: bool, shown: &str, replace: bool) -> Result<(), PluginError> {
    if is_dir {
        return Err(PluginError::new(
            libc::EISDIR,
            format!("destination {shown} is a directory; name the file to create"),
        )
        .at(Side::Destination, Note::Exists));
    }
    if !replace {
        return Err(PluginError::new(
            libc::EEXIST,
            format!("destination {shown} exists; allow overwriting to replace it"),
        )
        .at(Side::Destination, Note::Exists));
    }
    Ok(())
}

/// Without `create_parent`, the destination's directory must be there (`is_dir`: `None`
/// when nothing is).
fn parent_there(is_dir: Option<bool>, shown: &str) -> Result<(), PluginError> {
    let (errno, why) = match is_dir {
        Some(true) => return Ok(()),
        Some(false) => (libc::ENOTDIR, "is not a directory"),
        None => (libc::ENOENT, "does not exist"),
    };
    Err(PluginError::new(
        errno,
        format!(
            "the destination's directory {shown} {why}; create it first or ask for parent \
             directories to be made (create_parent)"
        ),
    )
    .at(Side::Destination, Note::Parent))
}

fn remote_stat(settings: &Settings, u: &LonghaulUrl) -> Result<EntryStat, PluginError> {
    let fs = namespace::remote(settings, &u.endpoint)?;
    fs.stat(&u.path)
        .map(EntryStat::from)
        .map_err(|e| PluginError::from(e).context(format!("source {}", u.shown())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn an_existing_directory_is_never_replaced_and_a_file_only_when_allowed() {
        let e = existing(true, "d", true).unwrap_err();
        assert_eq!(e.errno, libc::EISDIR);
        let e = existing(false, "f", false).unwrap_err();
        assert_eq!(e.errno, libc::EEXIST);
        assert!(e.message.contains("allow overwriting"), "{}", e.message);
        assert_eq!(
            e.copy.map(|c| (c.side, c.note)),
            Some((Side::Destination, Note::Exists))
        );
        assert!(existing(false, "f", true).is_ok());
    }

    #[test]
    fn a_local_source_must_be_a_regular_file_that_exists() {
        let dir = std::env::temp_dir().join(format!("lh-gfal-src-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let up = |local: &Path| Direction::Upload {
            local: local.to_path_buf(),
            remote: crate::url::parse_longhaul(b"longhaul://127.0.0.1:1/x").unwrap(),
        };
        let s = Settings::default();
        let e = source_size(&s, &up(&dir)).unwrap_err();
        assert_eq!(e.errno, libc::EISDIR);
        let e = source_size(&s, &up(&dir.join("missing"))).unwrap_err();
        assert_eq!(e.errno, libc::ENOENT);
        assert_eq!(e.copy.map(|c| c.side), Some(Side::Source));
        std::fs::write(dir.join("f"), b"12345").unwrap();
        assert_eq!(source_size(&s, &up(&dir.join("f"))).unwrap(), 5);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn without_create_parent_the_destinations_directory_must_be_one() {
        assert!(parent_there(Some(true), "d").is_ok());
        let e = parent_there(None, "longhaul://h:1/d").unwrap_err();
        assert_eq!(e.errno, libc::ENOENT);
        assert!(
            e.message.contains("longhaul://h:1/d does not exist"),
            "{}",
            e.message
        );
        assert_eq!(
            e.copy.map(|c| (c.side, c.note)),
            Some((Side::Destination, Note::Parent))
        );
        assert_eq!(
            parent_there(Some(false), "f").unwrap_err().errno,
            libc::ENOTDIR
        );
    }

    #[test]
    fn a_download_into_a_missing_local_directory_is_refused_or_the_directory_made() {
        let base = std::env::temp_dir().join(format!("lh-gfal-dst-{}", std::process::id()));
        let d = Direction::Download {
            remote: crate::url::parse_longhaul(b"longhaul://127.0.0.1:1/x").unwrap(),
            local: base.join("dir/file"),
        };
        let hooks = NoHooks;
        let mut params = CopyParams::default();
        let e = destination(&Settings::default(), &d, &params, &hooks).unwrap_err();
        assert_eq!(e.errno, libc::ENOENT);
        params.create_parent = true;
        destination(&Settings::default(), &d, &params, &hooks).unwrap();
        assert!(base.join("dir").is_dir());
        std::fs::write(base.join("dir/file"), b"old").unwrap();
        let e = destination(&Settings::default(), &d, &params, &hooks).unwrap_err();
        assert_eq!(e.errno, libc::EEXIST);
        params.replace = true;
        destination(&Settings::default(), &d, &params, &hooks).unwrap();
        assert!(!base.join("dir/file").exists(), "removed, to be replaced");
        std::fs::remove_dir_all(&base).unwrap();
    }

    struct NoHooks;

    impl Hooks for NoHooks {
        fn foreign_checksum(&self, _: &[u8], _: &str) -> Result<String, PluginError> {
            unreachable!("no checksum in preparation")
        }
        fn monitor(&self, _: &super::super::Sample) {}
        fn event(&self, _: EventSide, _: Stage, _: &str) {}
        fn log(&self, _: super::super::LogLevel, _: &str) {}
    }
}
