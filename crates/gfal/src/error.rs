//! What the plugin reports to gfal2 when an operation fails: an errno (gfal2 and FTS3 act
//! on it: ENOENT and EEXIST are final, EIO may be retried), a message that says what failed
//! and what to do, and for a copy the side that failed (FTS3 reads `SOURCE`,
//! `DESTINATION` or `TRANSFER` and a note such as `CHECKSUM MISMATCH` from the message).

use longhaul_engine::cp::remote_fs::FsError;
use longhaul_proto::namespace::FsErrorKind;

/// A failed operation, as gfal2 is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PluginError {
    /// The errno gfal2 puts in the GError's code.
    pub errno: i32,
    /// What happened, with the value involved and what to do.
    pub message: String,
    /// For a copy: which side failed and why (gfalt_set_error's side and note).
    pub copy: Option<CopyFailure>,
}

/// Which side of a copy failed (gfal2's `GFALT_ERROR_SOURCE` ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The source.
    Source = 0,
    /// The destination.
    Destination = 1,
    /// The transfer between them.
    Transfer = 2,
}

/// Why that side failed (gfal2's `GFALT_ERROR_*` notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// No particular reason.
    None = 0,
    /// A checksum could not be had.
    Checksum = 1,
    /// Checksums differ.
    ChecksumMismatch = 2,
    /// The destination exists and may not be replaced.
    Exists = 3,
    /// The destination could not be replaced.
    Overwrite = 4,
    /// The destination's parent directory could not be made.
    Parent = 5,
}

/// The side and note of a failed copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyFailure {
    /// Which side.
    pub side: Side,
    /// Why.
    pub note: Note,
}

impl PluginError {
    /// An error with `errno` and `message`.
    pub fn new(errno: i32, message: impl Into<String>) -> Self {
        Self {
            errno,
            message: message.into(),
            copy: None,
        }
    }

    /// The same error, told as a copy's failure on `side` for `note` (a side already
    /// set stays).
    pub fn at(mut self, side: Side, note: Note) -> Self {
        if self.copy.is_none() {
            self.copy = Some(CopyFailure { side, note });
        }
        self
    }

    /// The same error with `context` before its message (`context: message`).
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

/// The errno gfal2 expects for a kind the daemon names.
pub fn errno_of(kind: FsErrorKind) -> i32 {
    match kind {
        FsErrorKind::NotFound => libc::ENOENT,
        FsErrorKind::Exists => libc::EEXIST,
        FsErrorKind::NotEmpty => libc::ENOTEMPTY,
        FsErrorKind::NotADirectory => libc::ENOTDIR,
        FsErrorKind::IsADirectory => libc::EISDIR,
        FsErrorKind::Denied => libc::EACCES,
        FsErrorKind::Other => libc::EIO,
    }
}

impl From<FsError> for PluginError {
    fn from(e: FsError) -> Self {
        PluginError::new(errno_of(e.kind), e.message)
    }
}

/// The errno of a local I/O error (EIO when the OS gave none).
pub fn errno_of_io(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_the_daemon_names_has_its_posix_errno() {
        let table = [
            (FsErrorKind::NotFound, libc::ENOENT),
            (FsErrorKind::Exists, libc::EEXIST),
            (FsErrorKind::NotEmpty, libc::ENOTEMPTY),
            (FsErrorKind::NotADirectory, libc::ENOTDIR),
            (FsErrorKind::IsADirectory, libc::EISDIR),
            (FsErrorKind::Denied, libc::EACCES),
            (FsErrorKind::Other, libc::EIO),
        ];
        for (kind, errno) in table {
            let e = PluginError::from(FsError {
                kind,
                message: "why".into(),
            });
            assert_eq!(e.errno, errno, "{kind:?}");
            assert_eq!(e.message, "why");
            assert_eq!(e.copy, None);
        }
    }

    #[test]
    fn the_first_side_named_is_kept_and_context_goes_first() {
        let e = PluginError::new(libc::EIO, "lost")
            .at(Side::Destination, Note::Checksum)
            .at(Side::Source, Note::None)
            .context("checksum of longhaul://h/x");
        assert_eq!(e.message, "checksum of longhaul://h/x: lost");
        assert_eq!(
            e.copy,
            Some(CopyFailure {
                side: Side::Destination,
                note: Note::Checksum
            })
        );
    }

    #[test]
    fn a_local_error_keeps_its_errno() {
        let e = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(errno_of_io(&e), libc::ENOSPC);
        assert_eq!(errno_of_io(&std::io::Error::other("x")), libc::EIO);
    }
}
