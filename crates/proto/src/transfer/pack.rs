//! Splitting long lists (file entries, chunk hashes, verified runs) into as many
//! transfer messages as the frame and per-frame bounds need.

use crate::error::ProtoError;
use crate::limits::MAX_FRAME_BODY;
use crate::wire::invalid;

use super::validate::validate_entry;
use super::{
    EntryId, EntryKind, FileEntry, TransferMessage, MAX_ENTRIES_PER_FRAME, MAX_FILE_ID,
    MAX_HASHES_PER_FRAME, MAX_RANGES_PER_FRAME,
};

/// Splits a file list into `FileEntries` frames that each fit the frame limit, ids
/// starting at `first_id`. Fails only if an entry breaks a bound by itself.
pub fn pack_file_entries(
    entries: &[FileEntry],
    first_id: EntryId,
) -> Result<Vec<TransferMessage>, ProtoError> {
    const FIXED: usize = 1 + 4 + 2; // type, first id, count
    let mut out = Vec::new();
    let mut batch: Vec<FileEntry> = Vec::new();
    let mut batch_first = first_id;
    let mut size = FIXED;
    for (i, e) in entries.iter().enumerate() {
        let id = first_id
            .after(i)
            .filter(|id| id.0 <= MAX_FILE_ID)
            .ok_or_else(|| invalid("file id", format!("more than {} files", MAX_FILE_ID + 1)))?;
        validate_entry(e)?;
        let need = entry_wire_len(e);
        if !batch.is_empty()
            && (size + need > MAX_FRAME_BODY || batch.len() == MAX_ENTRIES_PER_FRAME)
        {
            out.push(TransferMessage::FileEntries {
                first_id: batch_first,
                entries: std::mem::take(&mut batch),
            });
            batch_first = id;
            size = FIXED;
        }
        size += need;
        batch.push(e.clone());
    }
    if !batch.is_empty() {
        out.push(TransferMessage::FileEntries {
            first_id: batch_first,
            entries: batch,
        });
    }
    Ok(out)
}

/// Splits the chunk hashes of a receiver's copy of one file into `OldChunks` frames of
/// at most [`MAX_HASHES_PER_FRAME`] hashes each (none for no hashes).
pub fn pack_old_chunks(file: EntryId, hashes: &[[u8; 32]]) -> Vec<TransferMessage> {
    hashes
        .chunks(MAX_HASHES_PER_FRAME)
        .enumerate()
        .map(|(i, c)| TransferMessage::OldChunks {
            file,
            first: (i * MAX_HASHES_PER_FRAME) as u32,
            hashes: c.to_vec(),
        })
        .collect()
}

/// Splits the verified runs of one file into `HaveChunks` frames of at most
/// [`MAX_RANGES_PER_FRAME`] runs each (none for no runs).
pub fn pack_have_chunks(file: EntryId, runs: &[(u32, u32)]) -> Vec<TransferMessage> {
    runs.chunks(MAX_RANGES_PER_FRAME)
        .map(|c| TransferMessage::HaveChunks {
            file,
            ranges: c.to_vec(),
        })
        .collect()
}

fn entry_wire_len(e: &FileEntry) -> usize {
    let target = match e.kind {
        EntryKind::Symlink | EntryKind::HardLink => 2 + e.link_target.len(),
        EntryKind::File | EntryKind::Dir => 0,
    };
    2 + e.path.len() + 1 + 8 + 8 + 4 + 4 + 8 + target
}
