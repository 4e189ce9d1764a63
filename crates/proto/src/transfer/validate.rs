//! The bounds of the transfer messages, checked on both sides: before a message is
//! encoded (so what is encoded always decodes) and after one is decoded.

use crate::error::ProtoError;
use crate::jump_ask::JumpAsk;
use crate::limits::MAX_TEXT;
use crate::wire::invalid;

use super::{
    EntryId, EntryKind, FileEntry, TransferMessage, MAX_CHUNK_BYTES, MAX_ENTRIES_PER_FRAME,
    MAX_FILE_ID, MAX_FILTER_RULES, MAX_HASHES_PER_FRAME, MAX_PATH_BYTES, MAX_RANGES_PER_FRAME,
    MAX_REASON_BYTES, MIN_CHUNK_BYTES,
};

pub(super) fn validate(msg: &TransferMessage) -> Result<(), ProtoError> {
    let file_id = |file: EntryId| {
        if file.0 > MAX_FILE_ID {
            Err(invalid("file id", format!("{file} exceeds {MAX_FILE_ID}")))
        } else {
            Ok(())
        }
    };
    let chunk = |c: u64| {
        if valid_chunk_size(c) {
            Ok(())
        } else {
            Err(invalid(
                "chunk size",
                format!("{c} bytes is not a power of two in 4 KiB..=1 GiB"),
            ))
        }
    };
    match msg {
        TransferMessage::TransferParams(p) => {
            if p.streams == 0 || p.streams > crate::limits::MAX_STREAMS {
                return Err(invalid(
                    "streams",
                    format!(
                        "{} is outside 1..={}",
                        p.streams,
                        crate::limits::MAX_STREAMS
                    ),
                ));
            }
            if !crate::limits::is_congestion_name(&p.congestion) {
                return Err(invalid(
                    "congestion",
                    format!("{:?} is not a congestion-control name", p.congestion),
                ));
            }
            chunk(p.chunk_size)?;
            path_len(&p.path)?;
            p.jump.as_ref().map_or(Ok(()), JumpAsk::validate)
        }
        TransferMessage::TransferReady {
            chunk_size,
            jump_note,
            ..
        } => {
            if jump_note.len() > MAX_TEXT {
                return Err(invalid(
                    "jump note",
                    format!("{} bytes exceed {MAX_TEXT}", jump_note.len()),
                ));
            }
            chunk(*chunk_size)
        }
        TransferMessage::FileEntries { first_id, entries } => {
            if entries.len() > MAX_ENTRIES_PER_FRAME {
                return Err(invalid(
                    "entries",
                    format!("{} exceed {MAX_ENTRIES_PER_FRAME} per frame", entries.len()),
                ));
            }
            let last = u64::from(first_id.0) + entries.len() as u64;
            if last > u64::from(MAX_FILE_ID) + 1 {
                return Err(invalid(
                    "file id",
                    format!("{first_id} + {} exceeds {MAX_FILE_ID}", entries.len()),
                ));
            }
            entries.iter().try_for_each(validate_entry)
        }
        TransferMessage::HaveChunks { file, ranges } => {
            file_id(*file)?;
            if ranges.len() > MAX_RANGES_PER_FRAME {
                return Err(invalid(
                    "ranges",
                    format!("{} exceed {MAX_RANGES_PER_FRAME} per frame", ranges.len()),
                ));
            }
            if ranges
                .iter()
                .any(|&(a, n)| n == 0 || a.checked_add(n).is_none())
            {
                return Err(invalid("ranges", "a range is empty or overflows".into()));
            }
            Ok(())
        }
        TransferMessage::OldChunks {
            file,
            first,
            hashes,
        } => {
            file_id(*file)?;
            if hashes.len() > MAX_HASHES_PER_FRAME
                || first.checked_add(hashes.len() as u32).is_none()
            {
                return Err(invalid(
                    "hashes",
                    format!(
                        "{} from chunk {first}: more than {MAX_HASHES_PER_FRAME} per frame or past the last chunk id",
                        hashes.len()
                    ),
                ));
            }
            Ok(())
        }
        TransferMessage::SkipFile { file, .. }
        | TransferMessage::WouldSend { file, .. }
        | TransferMessage::ChunkVerified { file, .. }
        | TransferMessage::ChunkRejected { file, .. }
        | TransferMessage::FileDigest { file, .. } => file_id(*file),
        TransferMessage::FileCommitted { file, reason, .. }
        | TransferMessage::SourceChanged { file, reason } => {
            if reason.len() > MAX_REASON_BYTES {
                return Err(invalid(
                    "reason",
                    format!("{} bytes exceed {MAX_REASON_BYTES}", reason.len()),
                ));
            }
            file_id(*file)
        }
        TransferMessage::FilterRules { rules } => {
            if rules.len() > MAX_FILTER_RULES {
                return Err(invalid(
                    "filter rules",
                    format!("{} exceed {MAX_FILTER_RULES}", rules.len()),
                ));
            }
            rules.iter().try_for_each(|(_, p)| path_len(p))
        }
        TransferMessage::FileListEnd { files, .. }
        | TransferMessage::TransferDone { files, .. } => {
            if *files > MAX_FILE_ID + 1 {
                return Err(invalid(
                    "files",
                    format!("{files} exceeds {}", MAX_FILE_ID + 1),
                ));
            }
            Ok(())
        }
    }
}

pub(super) fn validate_entry(e: &FileEntry) -> Result<(), ProtoError> {
    path_len(&e.path)?;
    if e.mtime_nanos >= 1_000_000_000 {
        return Err(invalid(
            "mtime nanos",
            format!("{} is not below 10^9", e.mtime_nanos),
        ));
    }
    if e.mode > 0o7777 {
        return Err(invalid(
            "mode",
            format!("{:#o} has bits beyond 0o7777", e.mode),
        ));
    }
    match e.kind {
        EntryKind::File => {}
        EntryKind::Dir if e.size != 0 => {
            return Err(invalid("size", format!("a directory with size {}", e.size)));
        }
        EntryKind::Dir => {}
        EntryKind::Symlink | EntryKind::HardLink if e.size != 0 => {
            let what = if e.kind == EntryKind::Symlink {
                "symlink"
            } else {
                "hard link"
            };
            return Err(invalid("size", format!("a {what} with size {}", e.size)));
        }
        EntryKind::Symlink | EntryKind::HardLink => {
            path_len(&e.link_target).map_err(|_| {
                invalid(
                    "link target",
                    format!(
                        "{} bytes is outside 1..={MAX_PATH_BYTES}",
                        e.link_target.len()
                    ),
                )
            })?;
            if e.link_target.contains(&0) {
                return Err(invalid("link target", "it contains a NUL byte".into()));
            }
        }
    }
    if matches!(e.kind, EntryKind::File | EntryKind::Dir) && !e.link_target.is_empty() {
        return Err(invalid(
            "link target",
            format!("a {:?} entry with a link target", e.kind),
        ));
    }
    Ok(())
}

fn path_len(p: &[u8]) -> Result<(), ProtoError> {
    if p.is_empty() || p.len() > MAX_PATH_BYTES {
        return Err(invalid(
            "path",
            format!("{} bytes is outside 1..={MAX_PATH_BYTES}", p.len()),
        ));
    }
    Ok(())
}

/// Whether `c` can be a chunk size: a power of two (so every chunk is a whole subtree of
/// the file's BLAKE3 tree) within [`MIN_CHUNK_BYTES`]..=[`MAX_CHUNK_BYTES`].
pub fn valid_chunk_size(c: u64) -> bool {
    (MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&c) && c.is_power_of_two()
}
