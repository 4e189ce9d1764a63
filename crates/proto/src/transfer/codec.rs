//! The frame codec of the transfer messages: [`encode_transfer_frame`] and
//! [`decode_transfer_frame`], one arm per message type on each side, and the path fields
//! they share.

use crate::error::ProtoError;
use crate::limits::{MAX_FRAME_BODY, MAX_TEXT};
use crate::wire::{invalid, Reader, Writer};
use crate::FRAME_HEADER_LEN;

use super::validate::validate;
use super::EntryId;
use super::{
    ty, CopyDirection, EntryKind, FileEntry, RejectReason, SkipReason, TransferMessage,
    TransferOptions, TransferParams, MAX_ENTRIES_PER_FRAME, MAX_FILTER_RULES, MAX_HASHES_PER_FRAME,
    MAX_PATH_BYTES, MAX_RANGES_PER_FRAME, MAX_REASON_BYTES,
};

// Named by a doc link only.
#[cfg(doc)]
use super::pack_file_entries;

/// Appends `msg` as one frame. Refuses (rather than cuts) a message that breaks a bound,
/// so what is encoded always decodes; use [`pack_file_entries`] to split long lists.
pub fn encode_transfer_frame(msg: &TransferMessage, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    validate(msg)?;
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    let mut w = Writer(out);
    match msg {
        TransferMessage::TransferParams(p) => {
            w.u8(ty::TRANSFER_PARAMS);
            w.u8(match p.direction {
                CopyDirection::Push => 0,
                CopyDirection::Pull => 1,
            });
            w.u16(p.streams);
            w.u64(p.chunk_size);
            w.u64(p.rate_bps);
            w.u64(p.window_bytes);
            w.u32(p.rtt_us);
            w.u32(p.options.bits());
            w.text(&p.congestion, crate::limits::MAX_CONGESTION_NAME);
            w.path(&p.path);
            w.jump_ask(p.jump.as_ref());
        }
        TransferMessage::TransferReady {
            chunk_size,
            jump_start_bps,
            jump_note,
        } => {
            w.u8(ty::TRANSFER_READY);
            w.u64(*chunk_size);
            w.u64(*jump_start_bps);
            w.text(jump_note, MAX_TEXT);
        }
        TransferMessage::FileEntries { first_id, entries } => {
            w.u8(ty::FILE_ENTRIES);
            w.u32(first_id.0);
            w.u16(entries.len() as u16);
            for e in entries {
                w.path(&e.path);
                w.u8(match e.kind {
                    EntryKind::File => 0,
                    EntryKind::Dir => 1,
                    EntryKind::Symlink => 2,
                    EntryKind::HardLink => 3,
                });
                w.u64(e.size);
                w.u64(e.mtime_secs as u64);
                w.u32(e.mtime_nanos);
                w.u32(e.mode);
                w.u64(e.fingerprint);
                if matches!(e.kind, EntryKind::Symlink | EntryKind::HardLink) {
                    w.path(&e.link_target);
                }
            }
        }
        TransferMessage::FileListEnd {
            files,
            bytes,
            deleted,
        } => {
            w.u8(ty::FILE_LIST_END);
            w.u32(*files);
            w.u64(*bytes);
            w.u32(*deleted);
        }
        TransferMessage::HaveChunks { file, ranges } => {
            w.u8(ty::HAVE_CHUNKS);
            w.u32(file.0);
            w.u16(ranges.len() as u16);
            for &(first, count) in ranges {
                w.u32(first);
                w.u32(count);
            }
        }
        TransferMessage::OldChunks {
            file,
            first,
            hashes,
        } => {
            w.u8(ty::OLD_CHUNKS);
            w.u32(file.0);
            w.u32(*first);
            w.u16(hashes.len() as u16);
            for h in hashes {
                w.bytes(h);
            }
        }
        TransferMessage::SkipFile { file, reason } => {
            w.u8(ty::SKIP_FILE);
            w.u32(file.0);
            w.u8(match reason {
                SkipReason::AlreadyComplete => 0,
                SkipReason::Exists => 1,
                SkipReason::PathRefused => 2,
                SkipReason::Missing => 3,
                SkipReason::OtherShare => 4,
            });
        }
        TransferMessage::ChunkVerified { file, index } => {
            w.u8(ty::CHUNK_VERIFIED);
            w.u32(file.0);
            w.u32(*index);
        }
        TransferMessage::ChunkRejected {
            file,
            index,
            reason,
        } => {
            w.u8(ty::CHUNK_REJECTED);
            w.u32(file.0);
            w.u32(*index);
            w.u8(match reason {
                RejectReason::Checksum => 0,
                RejectReason::WriteFailed => 1,
                RejectReason::Unknown => 2,
            });
        }
        TransferMessage::FileDigest { file, blake3 } => {
            w.u8(ty::FILE_DIGEST);
            w.u32(file.0);
            w.0.extend_from_slice(blake3);
        }
        TransferMessage::FileCommitted { file, ok, reason } => {
            w.u8(ty::FILE_COMMITTED);
            w.u32(file.0);
            w.u8(u8::from(*ok));
            w.text(reason, MAX_REASON_BYTES);
        }
        TransferMessage::SourceChanged { file, reason } => {
            w.u8(ty::SOURCE_CHANGED);
            w.u32(file.0);
            w.text(reason, MAX_REASON_BYTES);
        }
        TransferMessage::WouldSend { file, bytes } => {
            w.u8(ty::WOULD_SEND);
            w.u32(file.0);
            w.u64(*bytes);
        }
        TransferMessage::TransferDone { files, bytes } => {
            w.u8(ty::TRANSFER_DONE);
            w.u32(*files);
            w.u64(*bytes);
        }
        TransferMessage::FilterRules { rules } => {
            w.u8(ty::FILTER_RULES);
            w.u16(rules.len() as u16);
            for (include, pattern) in rules {
                w.u8(u8::from(*include));
                w.path(pattern);
            }
        }
    }
    let body = out.len() - start - FRAME_HEADER_LEN;
    if body > MAX_FRAME_BODY {
        out.truncate(start);
        return Err(invalid(
            "frame",
            format!("{body} bytes exceed the frame limit of {MAX_FRAME_BODY}; split the list"),
        ));
    }
    out[start..start + FRAME_HEADER_LEN].copy_from_slice(&(body as u32).to_be_bytes());
    Ok(())
}

/// Decodes one transfer frame from the start of `buf`: `Ok(None)` until it is complete,
/// else the message and the bytes it used. Never allocates more than the frame holds.
pub fn decode_transfer_frame(buf: &[u8]) -> Result<Option<(TransferMessage, usize)>, ProtoError> {
    let Some(header) = buf.get(..FRAME_HEADER_LEN) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len > MAX_FRAME_BODY {
        return Err(ProtoError::FrameTooLarge {
            len,
            max: MAX_FRAME_BODY,
        });
    }
    let Some(body) = buf.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len) else {
        return Ok(None);
    };
    let mut r = Reader(body);
    let msg = match r.u8("message type")? {
        ty::TRANSFER_PARAMS => TransferMessage::TransferParams(TransferParams {
            direction: match r.u8("direction")? {
                0 => CopyDirection::Push,
                1 => CopyDirection::Pull,
                v => {
                    return Err(invalid(
                        "direction",
                        format!("{v} is not push (0) or pull (1)"),
                    ))
                }
            },
            streams: r.u16("streams")?,
            chunk_size: r.u64("chunk size")?,
            rate_bps: r.u64("rate")?,
            window_bytes: r.u64("window")?,
            rtt_us: r.u32("rtt")?,
            options: TransferOptions::from_bits(r.u32("flags")?)?,
            congestion: r.text("congestion", crate::limits::MAX_CONGESTION_NAME)?,
            path: r.path()?,
            jump: r.jump_ask()?,
        }),
        ty::TRANSFER_READY => TransferMessage::TransferReady {
            chunk_size: r.u64("chunk size")?,
            jump_start_bps: r.u64("jump start rate")?,
            jump_note: r.text("jump note", MAX_TEXT)?,
        },
        ty::FILE_ENTRIES => {
            let first_id = EntryId(r.u32("first id")?);
            let n = r.count("entries", MAX_ENTRIES_PER_FRAME)?;
            let mut entries = Vec::with_capacity(n.min(body.len() / 34));
            for _ in 0..n {
                let path = r.path()?;
                let kind = match r.u8("entry kind")? {
                    0 => EntryKind::File,
                    1 => EntryKind::Dir,
                    2 => EntryKind::Symlink,
                    3 => EntryKind::HardLink,
                    v => {
                        return Err(invalid(
                            "entry kind",
                            format!("{v} is not file (0), dir (1), symlink (2) or hard link (3)"),
                        ))
                    }
                };
                entries.push(FileEntry {
                    path,
                    kind,
                    size: r.u64("size")?,
                    mtime_secs: r.u64("mtime")? as i64,
                    mtime_nanos: r.u32("mtime nanos")?,
                    mode: r.u32("mode")?,
                    fingerprint: r.u64("fingerprint")?,
                    link_target: if matches!(kind, EntryKind::Symlink | EntryKind::HardLink) {
                        r.link_target()?
                    } else {
                        Vec::new()
                    },
                });
            }
            TransferMessage::FileEntries { first_id, entries }
        }
        ty::FILE_LIST_END => TransferMessage::FileListEnd {
            files: r.u32("files")?,
            bytes: r.u64("bytes")?,
            deleted: r.u32("deleted")?,
        },
        ty::HAVE_CHUNKS => {
            let file = EntryId(r.u32("file")?);
            let n = r.count("ranges", MAX_RANGES_PER_FRAME)?;
            let mut ranges = Vec::with_capacity(n.min(body.len() / 8));
            for _ in 0..n {
                ranges.push((r.u32("range start")?, r.u32("range count")?));
            }
            TransferMessage::HaveChunks { file, ranges }
        }
        ty::OLD_CHUNKS => {
            let file = EntryId(r.u32("file")?);
            let first = r.u32("first chunk")?;
            let n = r.count("hashes", MAX_HASHES_PER_FRAME)?;
            let mut hashes = Vec::with_capacity(n.min(body.len() / 32));
            for _ in 0..n {
                hashes.push(r.array("chunk hash")?);
            }
            if first.checked_add(n as u32).is_none() {
                return Err(invalid("first chunk", format!("{first} + {n} overflows")));
            }
            TransferMessage::OldChunks {
                file,
                first,
                hashes,
            }
        }
        ty::SKIP_FILE => TransferMessage::SkipFile {
            file: EntryId(r.u32("file")?),
            reason: match r.u8("skip reason")? {
                0 => SkipReason::AlreadyComplete,
                1 => SkipReason::Exists,
                2 => SkipReason::PathRefused,
                3 => SkipReason::Missing,
                4 => SkipReason::OtherShare,
                v => return Err(invalid("skip reason", format!("{v} is unknown"))),
            },
        },
        ty::CHUNK_VERIFIED => TransferMessage::ChunkVerified {
            file: EntryId(r.u32("file")?),
            index: r.u32("chunk index")?,
        },
        ty::CHUNK_REJECTED => TransferMessage::ChunkRejected {
            file: EntryId(r.u32("file")?),
            index: r.u32("chunk index")?,
            reason: match r.u8("reject reason")? {
                0 => RejectReason::Checksum,
                1 => RejectReason::WriteFailed,
                2 => RejectReason::Unknown,
                v => return Err(invalid("reject reason", format!("{v} is unknown"))),
            },
        },
        ty::FILE_DIGEST => TransferMessage::FileDigest {
            file: EntryId(r.u32("file")?),
            blake3: r.array("blake3 digest")?,
        },
        ty::FILE_COMMITTED => TransferMessage::FileCommitted {
            file: EntryId(r.u32("file")?),
            ok: match r.u8("ok")? {
                0 => false,
                1 => true,
                v => return Err(invalid("ok", format!("{v} is not a boolean"))),
            },
            reason: r.text("reason", MAX_REASON_BYTES)?,
        },
        ty::SOURCE_CHANGED => TransferMessage::SourceChanged {
            file: EntryId(r.u32("file")?),
            reason: r.text("reason", MAX_REASON_BYTES)?,
        },
        ty::WOULD_SEND => TransferMessage::WouldSend {
            file: EntryId(r.u32("file")?),
            bytes: r.u64("bytes")?,
        },
        ty::TRANSFER_DONE => TransferMessage::TransferDone {
            files: r.u32("files")?,
            bytes: r.u64("bytes")?,
        },
        ty::FILTER_RULES => {
            let n = r.count("filter rules", MAX_FILTER_RULES)?;
            let mut rules = Vec::with_capacity(n.min(body.len() / 4));
            for _ in 0..n {
                let include = match r.u8("rule kind")? {
                    0 => false,
                    1 => true,
                    v => {
                        return Err(invalid(
                            "rule kind",
                            format!("{v} is not exclude (0) or include (1)"),
                        ))
                    }
                };
                rules.push((include, r.path()?));
            }
            TransferMessage::FilterRules { rules }
        }
        t => return Err(ProtoError::UnknownType(t)),
    };
    if !r.0.is_empty() {
        return Err(ProtoError::TrailingBytes {
            kind: msg.kind(),
            extra: r.0.len(),
        });
    }
    validate(&msg)?;
    Ok(Some((msg, FRAME_HEADER_LEN + len)))
}
impl Writer<'_> {
    fn path(&mut self, p: &[u8]) {
        self.u16(p.len() as u16);
        self.0.extend_from_slice(p);
    }
}

impl Reader<'_> {
    fn path(&mut self) -> Result<Vec<u8>, ProtoError> {
        let n = self.u16("path length")? as usize;
        if n == 0 || n > MAX_PATH_BYTES {
            return Err(invalid(
                "path",
                format!("{n} bytes is outside 1..={MAX_PATH_BYTES}"),
            ));
        }
        Ok(self.take(n, "path")?.to_vec())
    }

    fn link_target(&mut self) -> Result<Vec<u8>, ProtoError> {
        let n = self.u16("link target length")? as usize;
        if n == 0 || n > MAX_PATH_BYTES {
            return Err(invalid(
                "link target",
                format!("{n} bytes is outside 1..={MAX_PATH_BYTES}"),
            ));
        }
        Ok(self.take(n, "link target")?.to_vec())
    }
}
