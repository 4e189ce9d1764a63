//! gfal2's namespace operations on `longhaul://` URLs: stat, list, mkdir, unlink, rmdir
//! and checksums, each one request to the daemon ([`RemoteFs`]), its refusal turned into
//! the errno gfal2 expects and a message naming the URL.

use longhaul_engine::cp::remote_fs::RemoteFs;
use longhaul_proto::namespace::{FsEntry, FsKind, FsStat};

use crate::checksum;
use crate::error::PluginError;
use crate::settings::Settings;
use crate::url::{parse_longhaul, Endpoint, LonghaulUrl};

/// An entry's metadata as `struct stat` carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryStat {
    /// `st_mode`: the file type bits (`S_IFREG`, `S_IFDIR`, `S_IFLNK`) and the permissions.
    pub mode: u32,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime_secs: i64,
    /// Its nanoseconds.
    pub mtime_nanos: u32,
}

impl From<FsStat> for EntryStat {
    fn from(s: FsStat) -> Self {
        let kind = match s.kind {
            FsKind::File => libc::S_IFREG,
            FsKind::Dir => libc::S_IFDIR,
            FsKind::Symlink => libc::S_IFLNK,
            // The daemon does not say which; a FIFO is what `ls` would show nothing odd for.
            FsKind::Other => libc::S_IFIFO,
        };
        Self {
            mode: kind | (s.mode & 0o7777),
            size: s.size,
            mtime_secs: s.mtime_secs,
            mtime_nanos: s.mtime_nanos,
        }
    }
}

impl EntryStat {
    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
}

/// A directory's entries, fetched whole when it is opened and handed out one by one.
#[derive(Debug)]
pub struct Listing {
    entries: std::vec::IntoIter<FsEntry>,
}

impl Listing {
    /// A listing of `entries`.
    pub fn new(entries: Vec<FsEntry>) -> Self {
        Self {
            entries: entries.into_iter(),
        }
    }

    /// The next entry's name and metadata.
    pub fn next_entry(&mut self) -> Option<(Vec<u8>, EntryStat)> {
        self.entries.next().map(|e| (e.name, e.stat.into()))
    }
}

/// The daemon at `endpoint`, with its token and the trust settings.
pub fn remote(settings: &Settings, endpoint: &Endpoint) -> Result<RemoteFs, PluginError> {
    Ok(RemoteFs {
        target: endpoint.target(),
        token: settings.token(endpoint)?,
        security: settings.security()?,
    })
}

/// Runs `op` on the daemon and path of `url`; an error names what was done to which URL.
fn on<T>(
    settings: &Settings,
    url: &[u8],
    what: &str,
    op: impl FnOnce(&RemoteFs, &LonghaulUrl) -> Result<T, PluginError>,
) -> Result<T, PluginError> {
    let parsed = parse_longhaul(url)?;
    let fs = remote(settings, &parsed.endpoint)?;
    op(&fs, &parsed).map_err(|e| e.context(format!("{what} {}", parsed.shown())))
}

/// The entry at `url` (a symlink itself, not what it points to).
pub fn stat(settings: &Settings, url: &[u8]) -> Result<EntryStat, PluginError> {
    on(settings, url, "stat", |fs, u| Ok(fs.stat(&u.path)?.into()))
}

/// The entries of the directory at `url`.
pub fn list(settings: &Settings, url: &[u8]) -> Result<Listing, PluginError> {
    on(settings, url, "list", |fs, u| {
        Ok(Listing::new(fs.list(&u.path)?))
    })
}

/// Makes the directory `url` with `mode`; with `parents`, its missing parents too and an
/// existing directory is no error.
pub fn mkdir(settings: &Settings, url: &[u8], mode: u32, parents: bool) -> Result<(), PluginError> {
    on(settings, url, "mkdir", |fs, u| {
        Ok(fs.mkdir(&u.path, mode & 0o7777, parents)?)
    })
}

/// Removes the file or symlink `url`.
pub fn unlink(settings: &Settings, url: &[u8]) -> Result<(), PluginError> {
    on(settings, url, "unlink", |fs, u| Ok(fs.unlink(&u.path)?))
}

/// Removes the empty directory `url`.
pub fn rmdir(settings: &Settings, url: &[u8]) -> Result<(), PluginError> {
    on(settings, url, "rmdir", |fs, u| Ok(fs.rmdir(&u.path)?))
}

/// The checksum `algorithm` (`ADLER32`, `BLAKE3`) of the whole file at `url`, printed as
/// gfal2 prints it. Part of a file (`offset`, `length` not 0) is refused with ENOSYS, as
/// gfal2's interface asks.
pub fn checksum(
    settings: &Settings,
    url: &[u8],
    algorithm: &str,
    offset: i64,
    length: u64,
) -> Result<String, PluginError> {
    let kind = checksum::algorithm(algorithm)?;
    if offset != 0 || length != 0 {
        return Err(PluginError::new(
            libc::ENOSYS,
            format!(
                "a checksum of part of a file (offset {offset}, length {length}) is not \
                 supported by longhaul://; ask for the whole file"
            ),
        ));
    }
    on(settings, url, "checksum", |fs, u| {
        checksum::to_hex(kind, &fs.checksum(&u.path, kind)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs_stat(kind: FsKind, mode: u32) -> FsStat {
        FsStat {
            kind,
            size: 12,
            mode,
            mtime_secs: 1_700_000_000,
            mtime_nanos: 5,
        }
    }

    #[test]
    fn the_kind_becomes_st_modes_type_bits() {
        let s = EntryStat::from(fs_stat(FsKind::File, 0o644));
        assert_eq!(s.mode, libc::S_IFREG | 0o644);
        assert!(!s.is_dir());
        assert_eq!(
            (s.size, s.mtime_secs, s.mtime_nanos),
            (12, 1_700_000_000, 5)
        );
        let d = EntryStat::from(fs_stat(FsKind::Dir, 0o2755));
        assert_eq!(d.mode, libc::S_IFDIR | 0o2755);
        assert!(d.is_dir());
        assert_eq!(
            EntryStat::from(fs_stat(FsKind::Symlink, 0o777)).mode & libc::S_IFMT,
            libc::S_IFLNK
        );
    }

    #[test]
    fn a_listing_hands_out_its_entries_in_order_then_nothing() {
        let mut l = Listing::new(vec![
            FsEntry {
                name: b"a".to_vec(),
                stat: fs_stat(FsKind::File, 0o600),
            },
            FsEntry {
                name: b"sub".to_vec(),
                stat: fs_stat(FsKind::Dir, 0o700),
            },
        ]);
        let (name, st) = l.next_entry().unwrap();
        assert_eq!((name.as_slice(), st.is_dir()), (&b"a"[..], false));
        let (name, st) = l.next_entry().unwrap();
        assert_eq!((name.as_slice(), st.is_dir()), (&b"sub"[..], true));
        assert!(l.next_entry().is_none());
        assert!(l.next_entry().is_none());
    }

    #[test]
    fn part_of_a_file_or_an_unknown_algorithm_is_refused_before_any_connection() {
        // Port 1 on loopback: were a connection tried, the error would be another.
        let s = Settings::default();
        let e = checksum(&s, b"longhaul://127.0.0.1:1/f", "ADLER32", 10, 0).unwrap_err();
        assert_eq!(e.errno, libc::ENOSYS);
        let e = checksum(&s, b"longhaul://127.0.0.1:1/f", "MD5", 0, 0).unwrap_err();
        assert_eq!(e.errno, libc::ENOSYS);
    }

    #[test]
    fn a_bad_url_is_refused_before_any_connection() {
        let e = stat(&Settings::default(), b"longhaul://h/../x").unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
    }
}
