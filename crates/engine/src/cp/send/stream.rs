//! One data stream of the sending end: it takes its next work from the session, reads and
//! hashes each chunk and sends it as a header and the bytes; a hole, or a chunk equal to
//! the receiver's old copy (sync), goes as a header alone.

use std::fs::File;
use std::io::{self, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::{Duration, Instant};

use longhaul_proto::transfer::{
    ChunkHeader, EntryId, CHUNK_FLAG_HASH_AFTER, CHUNK_FLAG_HOLE, CHUNK_FLAG_SAME,
};
use longhaul_sys::aligned::AlignedBuf;
use longhaul_sys::file_io;
use longhaul_transfer::scheduler::{Chunk, StreamId};
use longhaul_transfer::session::{SendInput, Work};
use longhaul_transfer::{sparse, ChunkGrid, ChunkHash, ChunkHasher};

use super::Shared;
use crate::cp::chunk_io::{hash_all_chunks, hash_range};
use crate::cp::CpError;
use crate::transport::secure::SecureStream;

/// Most data segments looked up per sparse file (the rest is sent as data).
const MAX_SEGMENTS: usize = 1 << 16;

/// One data stream: pull work, send it, until nothing is left or the transfer stops.
pub(super) fn stream_loop(sh: &Arc<Shared>, stream: StreamId, mut sock: SecureStream) {
    let mut buf = AlignedBuf::new();
    let mut open: Option<(EntryId, File)> = None;
    loop {
        let work = {
            let Ok(mut s) = sh.session.lock() else { return };
            loop {
                if sh.stop.raised() {
                    let _ = sock.shutdown(Shutdown::Both);
                    return;
                }
                match s.next_work(stream, Instant::now()) {
                    Work::Send(w) => {
                        let chunks: Vec<ChunkWork> = w
                            .chunks
                            .iter()
                            .map(|c| ChunkWork {
                                chunk: *c,
                                entry: s.entry_of(c),
                                hasher: s.hasher(c),
                                size: s.file_size(c),
                                old: s.old_hash(c),
                            })
                            .collect();
                        break chunks;
                    }
                    Work::Finished => {
                        // Everything verified: the receiver sees EOF on this stream.
                        let _ = sock.shutdown(Shutdown::Write);
                        return;
                    }
                    Work::Wait => {}
                }
                s = match sh.wake.wait_timeout(s, Duration::from_millis(100)) {
                    Ok((g, _)) => g,
                    Err(_) => return,
                };
            }
        };
        for ChunkWork {
            chunk,
            entry,
            hasher,
            size,
            old,
        } in work
        {
            let origin = &sh.origins[entry.slot()];
            if open.as_ref().map(|(e, _)| *e) != Some(entry) {
                match sh.root.open(origin) {
                    Ok(f) => open = Some((entry, f)),
                    Err(e) => {
                        sh.fail(format!("opening {}: {e}", origin.display()));
                        return;
                    }
                }
            }
            let Some((_, file)) = open.as_ref() else {
                return;
            };
            let work = ChunkWork {
                chunk,
                entry,
                hasher,
                size,
                old,
            };
            let sent = send_chunk(sh, stream.0 as usize, file, &work, &mut sock, &mut buf);
            sh.progress.stages().take_thread();
            match sent {
                Ok(Sent {
                    hash,
                    payload,
                    same,
                }) => {
                    let Ok(mut s) = sh.session.lock() else { return };
                    let done = if same {
                        SendInput::ChunkReused { chunk, hash }
                    } else {
                        SendInput::ChunkSent {
                            chunk,
                            hash,
                            payload,
                        }
                    };
                    let r = s.handle(done).map_err(CpError::from);
                    if let Err(e) = r.and_then(|()| sh.pump(&mut s)) {
                        drop(s);
                        sh.fail(e.to_string());
                        return;
                    }
                }
                Err(SendFail::Read(e)) => {
                    sh.fail(format!("reading {}: {e}", origin.display()));
                    return;
                }
                Err(SendFail::Net(e)) => {
                    // The stream is gone: its chunks go to the others.
                    let last = match sh.session.lock() {
                        Ok(mut s) => s.handle(SendInput::StreamFailed {
                            stream,
                            why: e.to_string(),
                        }),
                        Err(_) => return,
                    };
                    if let Err(e) = last {
                        sh.fail(e.to_string());
                    }
                    sh.wake.notify_all();
                    return;
                }
            }
        }
    }
}

enum SendFail {
    Read(io::Error),
    Net(io::Error),
}

/// A chunk handed to a stream, with what sending it needs from the session.
struct ChunkWork {
    chunk: Chunk,
    /// Its entry in the file list.
    entry: EntryId,
    hasher: longhaul_transfer::ChunkHasher,
    /// The file's size.
    size: u64,
    /// Sync: the hash of the receiver's old copy of this chunk.
    old: Option<longhaul_transfer::ChunkHash>,
}

/// What went out for a chunk.
struct Sent {
    hash: [u8; 32],
    /// Payload bytes (0 for a hole or a chunk the receiver has).
    payload: u64,
    /// Sent as equal to the receiver's old copy (`CHUNK_FLAG_SAME`).
    same: bool,
}

/// Sends one chunk: header with its hash, then the bytes (nothing for a hole, or for a
/// chunk whose hash equals the receiver's old copy's: sync).
fn send_chunk(
    sh: &Shared,
    stream: usize,
    file: &File,
    work: &ChunkWork,
    sock: &mut SecureStream,
    buf: &mut AlignedBuf,
) -> Result<Sent, SendFail> {
    let (chunk, entry, size) = (&work.chunk, work.entry, work.size);
    let mut hasher = work.hasher.clone();
    let range = chunk.offset..chunk.offset + chunk.len;
    // Holes are looked up only in files of at least a megabyte.
    let hole = chunk.len > 0
        && size >= 1 << 20
        && in_hole(sh, entry, file, range).map_err(SendFail::Read)?;
    let mut header = ChunkHeader {
        file: entry,
        index: chunk.id.index,
        flags: 0,
        offset: chunk.offset,
        len: chunk.len as u32,
        hash: [0; 32],
    };
    let header_only = |mut header: ChunkHeader, flag: u32, sock: &mut SecureStream| {
        header.flags = flag;
        crate::startup::note_first_data();
        sock.write_all(&header.encode(&sh.chunk_key))
            .map_err(SendFail::Net)?;
        Ok(Sent {
            hash: header.hash,
            payload: 0,
            same: flag == CHUNK_FLAG_SAME,
        })
    };
    if hole {
        hasher.update_zeros(chunk.len);
        header.hash = hasher.finish();
        let flag = if work.old == Some(header.hash) {
            CHUNK_FLAG_SAME
        } else {
            CHUNK_FLAG_HOLE
        };
        return header_only(header, flag, sock);
    }
    // Read and hash in pieces that stay in cache; the bytes then go to the socket from
    // the page cache (no copy through this buffer). Had the file changed since the read,
    // the receiver's hash check refuses the chunk.
    // Sync: a compared file is hashed once as a whole, on every core (or its hashes come
    // from the cache): a chunk equal to the receiver's copy then goes without a read.
    if let Some(old) = work.old {
        let known = source_hashes(sh, entry, file, size);
        if known.and_then(|h| h.get(chunk.id.index as usize).copied()) == Some(old) {
            header.hash = old;
            return header_only(header, CHUNK_FLAG_SAME, sock);
        }
    }
    if sh.hash_after && work.old.is_none() && sock.is_tls() {
        return send_hash_after(sh, stream, file, header, hasher, sock);
    }
    header.hash = hash_range(file, hasher, chunk.offset, chunk.len, buf).map_err(SendFail::Read)?;
    if work.old == Some(header.hash) {
        return header_only(header, CHUNK_FLAG_SAME, sock);
    }
    crate::startup::note_first_data();
    sock.write_all(&header.encode(&sh.chunk_key))
        .map_err(SendFail::Net)?;
    // Counted as it is handed to the socket, not once it has all gone: the telemetry
    // counts what crossed, at most what was written, and a chunk is seconds of a
    // stream's share at the start (64 x 4 MiB is 2.1 s of 1 Gbit/s).
    sh.progress.stream_bytes(stream, chunk.len);
    sock.send_file_range(file, chunk.offset, chunk.len, buf)
        .map_err(sending_failed)?;
    Ok(Sent {
        hash: header.hash,
        payload: chunk.len,
        same: false,
    })
}

/// Sends a chunk whose hash follows its bytes ([`CHUNK_FLAG_HASH_AFTER`], then its
/// trailer): each record is hashed between its read and its sealing, so the file is read
/// once. The hash describes the bytes sent, whatever a writer did to the file meanwhile
/// (hash-first framing reads twice and a chunk that differs between its reads is sent
/// again; neither makes a snapshot of a file written while it is copied).
fn send_hash_after(
    sh: &Shared,
    stream: usize,
    file: &File,
    mut header: ChunkHeader,
    mut hasher: ChunkHasher,
    sock: &mut SecureStream,
) -> Result<Sent, SendFail> {
    header.flags = CHUNK_FLAG_HASH_AFTER;
    crate::startup::note_first_data();
    sock.write_all(&header.encode(&sh.chunk_key))
        .map_err(SendFail::Net)?;
    sh.progress.stream_bytes(stream, u64::from(header.len));
    let mut hash = |plain: &[u8]| hasher.update(plain);
    sock.send_file_range_hashed(file, header.offset, u64::from(header.len), &mut hash)
        .map_err(sending_failed)?;
    let hash = hasher.finish();
    sock.write_all(&header.trailer(hash).encode(&sh.chunk_key))
        .map_err(SendFail::Net)?;
    Ok(Sent {
        hash,
        payload: u64::from(header.len),
        same: false,
    })
}

/// A file's bytes that could not be sent: the file ended early (it shrank), or the
/// stream failed.
fn sending_failed(e: io::Error) -> SendFail {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        SendFail::Read(io::Error::other("the file shrank while being sent"))
    } else {
        SendFail::Net(e)
    }
}

/// Sync: the chunk hashes of entry `entry`'s source, computed once for all streams
/// (`None` if it could not be read whole: the chunks are then hashed one by one).
fn source_hashes(
    sh: &Shared,
    entry: EntryId,
    file: &File,
    size: u64,
) -> Option<Arc<Vec<ChunkHash>>> {
    let cell = sh
        .source_hashes
        .lock()
        .ok()?
        .entry(entry)
        .or_default()
        .clone();
    cell.get_or_init(|| {
        let cs = sh.session.lock().ok()?.chunk_size();
        let threads = super::super::old_copy::hash_threads();
        let hashes = match &sh.hash_cache {
            Some((cache, true)) => cache.chunk_hashes(file, size, cs, threads).map(|h| h.0),
            _ => hash_all_chunks(file, &ChunkGrid::new(size, cs), threads),
        };
        hashes.ok().map(Arc::new)
    })
    .clone()
}

/// Whether `range` of the file lies wholly in a hole (looked up once per file, only for
/// files with fewer blocks allocated than their size).
fn in_hole(
    sh: &Shared,
    entry: EntryId,
    file: &File,
    range: std::ops::Range<u64>,
) -> io::Result<bool> {
    let mut map = sh
        .sparse
        .lock()
        .map_err(|_| io::Error::other("sparse map poisoned"))?;
    if let std::collections::hash_map::Entry::Vacant(slot) = map.entry(entry) {
        let size = file.metadata()?.len();
        let segments = if file_io::allocated_bytes(file)? < size {
            file_io::data_segments(file, 0..size, MAX_SEGMENTS)?
        } else {
            std::iter::once(0..size).collect()
        };
        slot.insert(segments);
    }
    Ok(map
        .get(&entry)
        .is_some_and(|s| sparse::chunk_in_hole(s, range)))
}
