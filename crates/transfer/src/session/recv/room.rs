//! What a file list may ask of the destination: a daemon's caps on one transfer
//! (`serve --max-bytes`, `--max-files`), checked entry by entry as the list arrives, and
//! the room on the destination's file system, checked once every file of the list is
//! decided and before any part file is made, so a transfer that cannot fit is refused
//! before any data is sent.
//!
//! The bytes needed are the sizes of the files to be received (not those already in
//! place, skipped or only compared) less what resumable part files hold verified. A
//! sparse file counts its full size: the list carries sizes, not allocations, so a
//! transfer of sparse files may be refused although its data would fit. The inodes
//! needed: one per directory of the list, per file received, and per resume manifest.
//! The check is made against the room measured when the transfer began; others writing
//! to the same file system meanwhile can still fill it (the transfer then stops with
//! the disk-full error and resumes on a rerun).

use super::types::{CapsSetBy, ListCaps, RecvEvent, Room};
use super::RecvSession;
use crate::session::{Refusal, SessionError};

/// What the list asks of the destination's file system so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Needs {
    /// Bytes to write.
    pub bytes: u64,
    /// Inodes to create.
    pub inodes: u64,
}

impl RecvSession {
    /// Refuses the transfer before any data if the list needs more than `room` (measured
    /// by the driver on the destination's file system).
    pub fn with_room(mut self, room: Room) -> Self {
        self.room = Some(room);
        self
    }

    /// Refuses a list that names more than `caps` allows, as it arrives.
    pub fn with_caps(mut self, caps: ListCaps) -> Self {
        self.caps = caps;
        self
    }

    /// The caps against the list as received so far (`entries` files and directories of
    /// `self.outcome.total_bytes` bytes).
    pub(super) fn check_caps(&self, entries: u64) -> Result<(), SessionError> {
        let ListCaps {
            max_bytes,
            max_files,
            set_by,
        } = self.caps;
        let setting = |key: &str, max: u64| match set_by {
            CapsSetBy::Flags => format!("longhaul serve --{} {max}", key.replace('_', "-")),
            CapsSetBy::Area => format!("this area's {key} = {max} in the server's config"),
        };
        if let Some(max) = max_files.filter(|&m| entries > m) {
            return Err(Refusal::TooManyFiles {
                max,
                setting: setting("max_files", max),
            }
            .into());
        }
        let total = self.outcome.total_bytes;
        if let Some(max) = max_bytes.filter(|&m| total > m) {
            return Err(Refusal::TooManyBytes {
                max,
                total,
                setting: setting("max_bytes", max),
            }
            .into());
        }
        Ok(())
    }

    /// Counts what one decided entry will write.
    pub(super) fn need(&mut self, bytes: u64, inodes: u64) {
        self.needs.bytes = self.needs.bytes.saturating_add(bytes);
        self.needs.inodes = self.needs.inodes.saturating_add(inodes);
    }

    /// Opens a file's data now if the list is settled, else once it is.
    pub(super) fn open_when_settled(&mut self, open: RecvEvent) {
        if self.opens_released {
            self.events.push_back(open);
        } else {
            self.pending_opens.push(open);
        }
    }

    /// Once the list has ended and every file is decided: checks the room, then asks the
    /// driver to open the files (in list order). A shortage refuses the transfer with
    /// nothing opened.
    pub(super) fn release_opens(&mut self) -> Result<(), SessionError> {
        if self.opens_released || !self.list_ended || self.looking > 0 {
            return Ok(());
        }
        if let Some(room) = &self.room {
            check_room(room, self.needs)?;
        }
        self.opens_released = true;
        let opens = std::mem::take(&mut self.pending_opens);
        self.events.extend(opens);
        self.release_links();
        // Nothing is deleted before the list is known to fit.
        self.start_deletion();
        Ok(())
    }
}

/// Whether `needs` fits in `room`; the refusal names both and what to do.
fn check_room(room: &Room, needs: Needs) -> Result<(), SessionError> {
    if needs.bytes > room.free_bytes {
        return Err(Refusal::NoSpace {
            on: room.on.to_string(),
            needs: needs.bytes,
            free: room.free_bytes,
        }
        .into());
    }
    if let Some(free) = room.free_inodes.filter(|&f| needs.inodes > f) {
        return Err(Refusal::NoInodes {
            on: room.on.to_string(),
            needs: needs.inodes,
            free,
        }
        .into());
    }
    Ok(())
}

/// Bytes for a message: SI units with one decimal (`6.4 GB`), bytes below 1 kB.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["kB", "MB", "GB", "TB", "PB", "EB"];
    if n < 1000 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1000.0;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use longhaul_proto::transfer::{EntryId, EntryKind, FileEntry, TransferMessage};

    use super::*;
    use crate::session::recv::LookResult;
    use crate::session::{RecvConfig, RecvSession};

    fn cfg() -> RecvConfig {
        RecvConfig::into_directory(1 << 20)
    }

    fn file(path: &str, size: u64) -> FileEntry {
        FileEntry {
            path: path.as_bytes().to_vec(),
            kind: EntryKind::File,
            size,
            mtime_secs: 1,
            mtime_nanos: 0,
            mode: 0o644,
            fingerprint: 0,
            link_target: Vec::new(),
        }
    }

    fn room(free_bytes: u64) -> Room {
        Room {
            free_bytes,
            free_inodes: Some(1000),
            on: "/dst".into(),
        }
    }

    /// Sends a list of `sizes`, answers every look with "nothing there", and returns
    /// the first error and the events asked for.
    fn list(rx: &mut RecvSession, sizes: &[u64]) -> (Result<(), SessionError>, Vec<RecvEvent>) {
        let entries = sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| file(&format!("f{i}"), s))
            .collect();
        let mut events = Vec::new();
        let r = (|| {
            rx.handle(TransferMessage::FileEntries {
                first_id: EntryId(0),
                entries,
            })?;
            rx.handle(TransferMessage::FileListEnd {
                files: sizes.len() as u32,
                bytes: sizes.iter().sum(),
                deleted: 0,
            })?;
            while let Some(ev) = rx.poll_event() {
                if let RecvEvent::Look { id, .. } = ev {
                    rx.looked(id, LookResult::default())?;
                }
                events.push(ev);
            }
            Ok(())
        })();
        (r, events)
    }

    #[test]
    fn a_list_that_does_not_fit_is_refused_with_both_figures_before_any_file_is_opened() {
        let mut rx = RecvSession::new(cfg()).with_room(room(5_000_000));
        let (r, events) = list(&mut rx, &[4_000_000, 3_000_000, 100]);
        let Err(SessionError::Refused(why)) = r else {
            panic!("not refused: {r:?}")
        };
        assert_eq!(
            why,
            Refusal::NoSpace {
                on: "/dst".into(),
                needs: 7_000_100,
                free: 5_000_000
            }
        );
        assert_eq!(
            why.to_string(),
            "not enough space on /dst: the transfer needs 7.0 MB, 5.0 MB free; free some \
             space and run the same command again, or copy less"
        );
        assert!(
            !events.iter().any(|e| matches!(e, RecvEvent::Open { .. })),
            "{events:?}"
        );
        assert!(rx.poll_transmit().is_none(), "answered a refused list");
    }

    #[test]
    fn a_list_that_fits_opens_every_file_and_ends_the_list() {
        let mut rx = RecvSession::new(cfg()).with_room(room(7_000_100));
        let (r, events) = list(&mut rx, &[4_000_000, 3_000_000, 100]);
        r.unwrap();
        let opens = events
            .iter()
            .filter(|e| matches!(e, RecvEvent::Open { .. }))
            .count();
        assert_eq!(opens, 3, "{events:?}");
    }

    #[test]
    fn too_few_inodes_are_refused() {
        let mut rx = RecvSession::new(cfg()).with_room(Room {
            free_inodes: Some(2),
            ..room(u64::MAX)
        });
        let (r, _) = list(&mut rx, &[1, 2, 3]);
        let Err(SessionError::Refused(why)) = r else {
            panic!("not refused: {r:?}")
        };
        assert!(matches!(why, Refusal::NoInodes { free: 2, .. }), "{why}");
        assert!(
            why.to_string().starts_with("not enough inodes on /dst"),
            "{why}"
        );
    }

    #[test]
    fn caps_refuse_a_list_as_it_arrives() {
        let caps = |max_bytes, max_files| ListCaps {
            set_by: CapsSetBy::Flags,
            max_bytes,
            max_files,
        };
        let mut rx = RecvSession::new(cfg()).with_caps(caps(None, Some(2)));
        let (r, _) = list(&mut rx, &[1, 2, 3]);
        let Err(SessionError::Refused(why)) = r else {
            panic!("not refused: {r:?}")
        };
        assert!(matches!(why, Refusal::TooManyFiles { max: 2, .. }), "{why}");
        assert!(why.to_string().contains("--max-files 2"), "{why}");
        let mut rx = RecvSession::new(cfg()).with_caps(caps(Some(5), None));
        let (r, _) = list(&mut rx, &[1, 2, 3]);
        let Err(SessionError::Refused(why)) = r else {
            panic!("not refused: {r:?}")
        };
        assert!(matches!(why, Refusal::TooManyBytes { max: 5, .. }), "{why}");
        assert!(why.to_string().contains("--max-bytes 5"), "{why}");
        let mut rx = RecvSession::new(cfg()).with_caps(caps(Some(6), Some(3)));
        list(&mut rx, &[1, 2, 3]).0.unwrap();
    }

    #[test]
    fn human_bytes_reads_as_the_messages_say() {
        assert_eq!(human_bytes(999), "999 bytes");
        assert_eq!(human_bytes(6_400_000_000), "6.4 GB");
        assert_eq!(human_bytes(2_100_000_000), "2.1 GB");
    }
}
