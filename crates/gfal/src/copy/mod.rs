//! gfal2's file copy (`gfalt_copy_file`, what FTS3 runs for each transfer) when one end
//! or both are `longhaul://`:
//!
//! - `file://` to `longhaul://`: an upload, this host pushing to the daemon;
//! - `longhaul://` to `file://`: a download, this host pulling from the daemon;
//! - `longhaul://A` to `longhaul://B`: a third-party copy, B pulling from A with a
//!   one-time ticket this host asks A for (the bytes do not pass through this host).
//!
//! As gfal2's own copies do, unless the copy is strict: the source must be a file; an
//! existing destination is an error (EEXIST) unless the copy may replace it, when it is
//! removed first; the destination's parent is made when asked (`create_parent`), else it
//! must exist (ENOENT); and the
//! checksums the parameters ask for are compared (source and destination, or either
//! against the user's value; ADLER32 unless another is named). The `file://` side's
//! checksum comes from gfal2 (its file plugin). Progress goes to gfal2's monitor
//! callbacks every second, stages to its event callbacks.
//!
//! Not honoured: the timeout (a copy runs to its end or its error) and gfal2's cancel.

pub mod monitor;
mod prepare;
mod transfer;

use std::path::PathBuf;

use crate::checksum;
use crate::error::{Note, PluginError, Side};
use crate::namespace;
use crate::settings::Settings;
use crate::url::{claims as claims_url, is_file_url, parse_file, parse_longhaul, LonghaulUrl};

pub use monitor::Sample;

/// gfal2's transfer parameters that a copy honours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyParams {
    /// Replace an existing destination (`overwrite`).
    pub replace: bool,
    /// Make the destination's missing parent directories (`create_parent`).
    pub create_parent: bool,
    /// Check nothing and prepare nothing: only move the bytes (`strict_copy`).
    pub strict: bool,
    /// The checksums to compare.
    pub checksum: ChecksumCheck,
    /// Data streams (`nbstreams`; `None`: longhaul's choice from the path).
    pub streams: Option<u16>,
}

/// Which checksums a copy compares (gfal2's `gfalt_set_checksum`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChecksumCheck {
    /// The source's.
    pub source: bool,
    /// The destination's.
    pub target: bool,
    /// The algorithm (`ADLER32` unless named).
    pub algorithm: String,
    /// The value the user expects, if given.
    pub expected: Option<String>,
}

impl ChecksumCheck {
    /// From gfal2's mode bits (1 source, 2 target), type and value.
    pub fn from_gfal(mode: i32, algorithm: &str, expected: &str) -> Self {
        Self {
            source: mode & 1 != 0,
            target: mode & 2 != 0,
            algorithm: if algorithm.is_empty() {
                "ADLER32".into()
            } else {
                algorithm.into()
            },
            expected: Some(expected.trim().to_string()).filter(|v| !v.is_empty()),
        }
    }
}

/// What a copy is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Direction {
    /// A local file to a daemon.
    Upload {
        /// The local file.
        local: PathBuf,
        /// Where it goes.
        remote: LonghaulUrl,
    },
    /// A daemon's file to a local path.
    Download {
        /// The daemon's file.
        remote: LonghaulUrl,
        /// Where it goes.
        local: PathBuf,
    },
    /// One daemon's file to another daemon.
    ThirdParty {
        /// The source.
        from: LonghaulUrl,
        /// The destination.
        to: LonghaulUrl,
    },
}

/// Whether the plugin copies `src` to `dst` (gfal2 asks before every copy).
pub fn claims(src: &[u8], dst: &[u8]) -> bool {
    (claims_url(src) && (claims_url(dst) || is_file_url(dst)))
        || (is_file_url(src) && claims_url(dst))
}

/// Reads a copy's two URLs.
pub fn plan(src: &[u8], dst: &[u8]) -> Result<Direction, PluginError> {
    let at = |side| move |e: PluginError| e.at(side, Note::None);
    match (claims_url(src), claims_url(dst)) {
        (true, true) => Ok(Direction::ThirdParty {
            from: parse_longhaul(src).map_err(at(Side::Source))?,
            to: parse_longhaul(dst).map_err(at(Side::Destination))?,
        }),
        (true, false) => Ok(Direction::Download {
            remote: parse_longhaul(src).map_err(at(Side::Source))?,
            local: parse_file(dst).map_err(at(Side::Destination))?,
        }),
        (false, true) => Ok(Direction::Upload {
            local: parse_file(src).map_err(at(Side::Source))?,
            remote: parse_longhaul(dst).map_err(at(Side::Destination))?,
        }),
        (false, false) => Err(PluginError::new(
            libc::EPROTONOSUPPORT,
            format!(
                "the longhaul plugin copies to or from longhaul:// URLs, not {} to {}",
                String::from_utf8_lossy(src),
                String::from_utf8_lossy(dst)
            ),
        )),
    }
}

/// Which side an event concerns (gfal2's `gfal_event_side_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventSide {
    /// The source.
    Source = 0,
    /// The destination.
    Destination = 1,
    /// The transfer.
    None = 2,
}

/// The stages a copy tells gfal2's event callbacks about (gfal2's `GFAL_EVENT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Checks and preparation begin.
    PrepareEnter = 0,
    /// They are done.
    PrepareExit = 1,
    /// The bytes begin to move.
    TransferEnter = 2,
    /// They are in place.
    TransferExit = 3,
    /// A checksum is asked for.
    ChecksumEnter = 4,
    /// It is known.
    ChecksumExit = 5,
    /// An existing destination is removed to be replaced.
    OverwriteDestination = 6,
    /// How the bytes move (`streamed`: through this host; `3rd pull`).
    TransferType = 7,
}

/// How bad a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Detail.
    Debug = 0,
    /// Worth knowing.
    Info = 1,
    /// Something the user should look at.
    Warning = 2,
}

/// What a copy needs from gfal2 while it runs.
pub trait Hooks {
    /// gfal2's checksum of a URL another plugin serves (`file://`).
    fn foreign_checksum(&self, url: &[u8], algorithm: &str) -> Result<String, PluginError>;
    /// Reports progress to the monitor callbacks.
    fn monitor(&self, sample: &Sample);
    /// Tells the event callbacks about a stage.
    fn event(&self, side: EventSide, stage: Stage, description: &str);
    /// A line in gfal2's log.
    fn log(&self, level: LogLevel, message: &str);
}

/// Copies `src` to `dst` as `params` ask.
pub fn copy(
    settings: &Settings,
    params: &CopyParams,
    src: &[u8],
    dst: &[u8],
    hooks: &dyn Hooks,
) -> Result<(), PluginError> {
    let direction = plan(src, dst)?;
    let check = &params.checksum;
    let shown = |u: &[u8]| String::from_utf8_lossy(u).into_owned();
    hooks.event(
        EventSide::None,
        Stage::PrepareEnter,
        &format!("{} => {}", shown(src), shown(dst)),
    );
    let size = prepare::source_size(settings, &direction)?;
    let source_sum = if check.source && !params.strict {
        let sum = side_checksum(settings, src, check, EventSide::Source, hooks)
            .map_err(|e| e.at(Side::Source, Note::Checksum))?;
        if let Some(expected) = &check.expected {
            if !checksum::same(&sum, expected) {
                return Err(mismatch(
                    Side::Source,
                    &check.algorithm,
                    "the user's value",
                    expected,
                    &sum,
                ));
            }
        }
        Some(sum)
    } else {
        None
    };
    if !params.strict {
        prepare::destination(settings, &direction, params, hooks)?;
    }
    hooks.event(EventSide::None, Stage::PrepareExit, "");
    let kind = match direction {
        Direction::ThirdParty { .. } => "3rd pull",
        _ => "streamed",
    };
    hooks.event(EventSide::None, Stage::TransferType, kind);
    hooks.event(
        EventSide::None,
        Stage::TransferEnter,
        &format!("{size} bytes"),
    );
    transfer::run(settings, &direction, params, hooks)?;
    hooks.event(
        EventSide::None,
        Stage::TransferExit,
        &format!("{size} bytes"),
    );
    if check.target && !params.strict {
        let sum = side_checksum(settings, dst, check, EventSide::Destination, hooks)
            .map_err(|e| e.at(Side::Destination, Note::Checksum))?;
        let (against, what) = match (&check.expected, &source_sum) {
            (Some(expected), _) => (expected, "the user's value"),
            (None, Some(source)) => (source, "the source's"),
            (None, None) => return Ok(()),
        };
        if !checksum::same(&sum, against) {
            return Err(mismatch(
                Side::Destination,
                &check.algorithm,
                what,
                against,
                &sum,
            ));
        }
    }
    Ok(())
}

/// The checksum of one end: the daemon's for `longhaul://`, gfal2's for anything else.
fn side_checksum(
    settings: &Settings,
    url: &[u8],
    check: &ChecksumCheck,
    side: EventSide,
    hooks: &dyn Hooks,
) -> Result<String, PluginError> {
    hooks.event(side, Stage::ChecksumEnter, &check.algorithm);
    let sum = if claims_url(url) {
        namespace::checksum(settings, url, &check.algorithm, 0, 0)?
    } else {
        hooks.foreign_checksum(url, &check.algorithm)?
    };
    hooks.event(
        side,
        Stage::ChecksumExit,
        &format!("{}={sum}", check.algorithm),
    );
    Ok(sum)
}

fn mismatch(side: Side, algorithm: &str, what: &str, want: &str, got: &str) -> PluginError {
    let whose = match side {
        Side::Source => "source",
        _ => "destination",
    };
    PluginError::new(
        libc::EIO,
        format!("{algorithm} of the {whose} is {got}, but {what} is {want}"),
    )
    .at(side, Note::ChecksumMismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_copies_when_one_end_is_longhaul_and_the_other_longhaul_or_local() {
        let lh = b"longhaul://h/x".as_slice();
        let file = b"file:///tmp/x".as_slice();
        assert!(claims(file, lh));
        assert!(claims(lh, file));
        assert!(claims(lh, lh));
        assert!(!claims(file, file));
        assert!(!claims(b"davs://h/x", lh));
        assert!(!claims(lh, b"root://h//x"));
    }

    #[test]
    fn a_copys_direction_comes_from_its_two_schemes() {
        match plan(b"file:///tmp/a", b"longhaul://h:1/b").unwrap() {
            Direction::Upload { local, remote } => {
                assert_eq!(local, PathBuf::from("/tmp/a"));
                assert_eq!(remote.path, b"b");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            plan(b"longhaul://h/a", b"file:///tmp/b").unwrap(),
            Direction::Download { .. }
        ));
        assert!(matches!(
            plan(b"longhaul://a/x", b"longhaul://b/y").unwrap(),
            Direction::ThirdParty { .. }
        ));
    }

    #[test]
    fn a_bad_url_is_blamed_on_its_side() {
        let e = plan(b"file://host/a", b"longhaul://h/b").unwrap_err();
        assert_eq!(e.copy.map(|c| c.side), Some(Side::Source));
        let e = plan(b"longhaul://h/a", b"longhaul://h/../b").unwrap_err();
        assert_eq!(e.copy.map(|c| c.side), Some(Side::Destination));
        assert_eq!(e.errno, libc::EINVAL);
    }

    #[test]
    fn gfal2s_checksum_parameters_default_to_adler32() {
        let c = ChecksumCheck::from_gfal(3, "", "");
        assert!(c.source && c.target);
        assert_eq!(c.algorithm, "ADLER32");
        assert_eq!(c.expected, None);
        let c = ChecksumCheck::from_gfal(2, "blake3", " 0a0b ");
        assert!(!c.source && c.target);
        assert_eq!(c.algorithm, "blake3");
        assert_eq!(c.expected.as_deref(), Some("0a0b"));
        assert_eq!(
            ChecksumCheck::from_gfal(0, "", ""),
            ChecksumCheck {
                algorithm: "ADLER32".into(),
                ..ChecksumCheck::default()
            }
        );
    }

    #[test]
    fn a_mismatch_names_both_values_and_blames_the_side_checked() {
        let e = mismatch(Side::Destination, "ADLER32", "the source's", "0a", "0b");
        assert_eq!(e.errno, libc::EIO);
        assert_eq!(
            e.message,
            "ADLER32 of the destination is 0b, but the source's is 0a"
        );
        assert_eq!(
            e.copy.map(|c| (c.side, c.note)),
            Some((Side::Destination, Note::ChecksumMismatch))
        );
    }
}
