//! One data stream of the receiving end (see [`super`]): read a chunk header, ask the
//! session about it, read and hash the payload in cache-sized pieces, write it after the
//! session's check, record it, and only then let the session ack it. A warm-up run at the
//! head of the stream (`CHUNK_FLAG_WARMUP`, bounded) is read and dropped.

use std::io::{self, Read};
use std::net::Shutdown;
use std::ops::Range;
use std::sync::Arc;

use longhaul_proto::transfer::ChunkHeader;
use longhaul_proto::ChunkKey;
use longhaul_sys::aligned::AlignedBuf;
use longhaul_transfer::session::recv::Arrival;
use longhaul_transfer::session::RecvInput;

use super::Shared;
use crate::cp::chunk_io::PIECE;
use crate::cp::CpError;
use crate::stage_cpu::{timed, Stage};
use crate::transport::secure::SecureStream;

/// One data stream: read chunks until the sender closes it.
pub(super) fn stream_loop(sh: &Arc<Shared>, stream: usize, mut sock: SecureStream) {
    let mut buf = AlignedBuf::new();
    let mut hdr = [0u8; ChunkHeader::LEN];
    // Whether a run (warm-up or chunk) came on this stream yet.
    let mut began = false;
    loop {
        if sh.stop.raised() {
            let _ = sock.shutdown(Shutdown::Both);
            return;
        }
        let chunk = match read_header(&mut sock, &mut hdr) {
            Ok(true) => receive_chunk(sh, stream, &mut sock, &hdr, &mut buf, &mut began),
            // A clean end: the sender is done with this stream.
            Ok(false) => {
                sh.progress.stages().take_thread();
                return;
            }
            Err(e) => Err(read_failed(stream, e)),
        };
        sh.progress.stages().take_thread();
        match chunk {
            Ok(()) => {}
            Err(ChunkFail::Stream) => return,
            Err(ChunkFail::Stop(why)) => {
                sh.fail(why);
                let _ = sock.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

/// What a failed read of a data stream means. Bytes that fail TLS authentication were
/// altered on the way (an attack or a broken middlebox, not a lost connection): the
/// transfer stops and says so. Anything else is the stream failing: the sender
/// reassigns its chunks to the others.
fn read_failed(stream: usize, e: io::Error) -> ChunkFail {
    if e.kind() != io::ErrorKind::InvalidData {
        return ChunkFail::Stream;
    }
    ChunkFail::Stop(format!(
        "data stream {stream}: {e}; no file was committed from it (verified chunks are kept: \
         run the same command again to resume, and look for what alters traffic between \
         the hosts)"
    ))
}

enum ChunkFail {
    /// The stream broke mid-chunk: the sender sends the chunk again on another.
    Stream,
    /// The transfer stops.
    Stop(String),
}

/// Reads the trailer of hash-after chunk `h` and gives the chunk with its hash; a header
/// that is not this chunk's trailer stops the transfer (the sender broke the protocol).
fn trailer_of(
    sock: &mut SecureStream,
    stream: usize,
    h: &ChunkHeader,
    key: &ChunkKey,
) -> Result<ChunkHeader, ChunkFail> {
    let mut b = [0u8; ChunkHeader::LEN];
    sock.read_exact(&mut b)
        .map_err(|e| read_failed(stream, e))?;
    let t = ChunkHeader::decode(&b, key)
        .map_err(|e| ChunkFail::Stop(format!("data stream {stream}: {e}")))?;
    h.with_trailer(&t).ok_or_else(|| {
        ChunkFail::Stop(format!(
            "data stream {stream}: chunk {} of file {} was followed by {t:?}, not its \
             trailer (the sender breaks the protocol; install the same longhaul version at \
             both ends)",
            h.index, h.file
        ))
    })
}

/// Reads a whole header; `false` on a clean end of stream before it.
fn read_header(sock: &mut SecureStream, hdr: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < hdr.len() {
        match sock.read(&mut hdr[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// The smallest part a piece is cut into (the record layer reads parts this large
/// straight into the chunk's buffer).
const MIN_PART: usize = 32 * 1024;

/// The parts a piece of `len` bytes is read in, each with the bytes sure to follow it in
/// the chunk (`after` follow the piece): the whole piece when at least as much follows
/// it, else halves down to [`MIN_PART`]. A read's low-water mark may only wait for what
/// is sure to come after it ([`SecureStream::expect_bulk`]), so the chunk's last piece,
/// read whole, woke every few packets: through a delay line at MTU 1500, sixty wake-ups
/// for its 256 KiB, a third of the receiver's system calls. Halving keeps half of
/// what is left to come behind each read.
fn read_parts(len: usize, after: usize) -> impl Iterator<Item = (Range<usize>, usize)> {
    let mut start = 0;
    std::iter::from_fn(move || {
        let rest = len.checked_sub(start).filter(|&r| r > 0)?;
        let take = if after >= rest || rest <= MIN_PART {
            rest
        } else {
            rest / 2
        };
        let part = start..start + take;
        start += take;
        Some((part, len - start + after))
    })
}

fn receive_chunk(
    sh: &Shared,
    stream: usize,
    sock: &mut SecureStream,
    hdr: &[u8; ChunkHeader::LEN],
    buf: &mut AlignedBuf,
    began: &mut bool,
) -> Result<(), ChunkFail> {
    let stop = |e: CpError| ChunkFail::Stop(e.to_string());
    let h = ChunkHeader::decode(hdr, &sh.chunk_key)
        .map_err(|e| ChunkFail::Stop(format!("data stream {stream}: {e}")))?;
    if h.is_warmup() {
        if std::mem::replace(began, true) {
            return Err(ChunkFail::Stop(format!(
                "data stream {stream}: a warm-up run after the stream's first run (the sender \
                 breaks the protocol; install the same longhaul version at both ends)"
            )));
        }
        // Not payload: neither counted in the transfer nor kept.
        buf.resize(h.len as usize);
        for piece in buf.chunks_mut(PIECE) {
            sock.read_exact(piece).map_err(|e| read_failed(stream, e))?;
        }
        crate::startup::note_warmup(h.payload_len() + ChunkHeader::LEN as u64);
        return Ok(());
    }
    *began = true;
    crate::startup::note_first_data();
    // A hash that follows the bytes: the session sees the chunk as if it came first.
    let wire = h;
    let h = if wire.hash_after() {
        ChunkHeader { flags: 0, ..wire }
    } else {
        wire
    };
    let plan = sh
        .lock()
        .and_then(|mut s| Ok(s.chunk_header(&h)?))
        .map_err(stop)?;
    if plan.same {
        // Sync: the old copy's chunk, taken from it at the commit.
        return sh
            .with(|s| Ok(s.chunk_reused(&h).map(|_| ())?))
            .map_err(stop);
    }
    let mut hasher = plan.hasher;
    if plan.hole {
        hasher.update_zeros(u64::from(h.len));
    } else {
        // Hash each piece as it arrives, while it is in cache; write after the check.
        // The rest of the payload is on its way whatever this end does: reads wake once
        // a piece of it is queued, not at every few packets.
        buf.resize(plan.payload as usize);
        let mut left = buf.len();
        for piece in buf.chunks_mut(PIECE) {
            left -= piece.len();
            for (part, after) in read_parts(piece.len(), left) {
                // What follows this part is sure to come while any read of it waits (a
                // read of the part may take the part's own bytes with it).
                sock.expect_bulk(after);
                sock.read_exact(&mut piece[part])
                    .map_err(|e| read_failed(stream, e))?;
            }
            sh.progress.stream_bytes(stream, piece.len() as u64);
            timed(Stage::Hash, || hasher.update(piece));
        }
        // The next header may be the stream's last bytes.
        sock.expect_bulk(0);
    }
    let h = if wire.hash_after() {
        trailer_of(sock, stream, &wire, &sh.chunk_key)?
    } else {
        h
    };
    let computed = hasher.finish();
    let arrival = sh
        .with(|s| Ok(s.chunk_arrived(&h, computed)?))
        .map_err(stop)?;
    if arrival != Arrival::Write {
        return Ok(());
    }
    let data = sh
        .store
        .data(plan.id)
        .ok_or_else(|| ChunkFail::Stop(format!("file {} was never opened", plan.id)))?;
    let written = timed(Stage::Disk, || {
        sh.store
            .write_chunk(&data, plan.lazy.as_ref(), h.offset, plan.hole, buf)
    })
    .and_then(|()| {
        let record = sh
            .lock()
            .and_then(|mut s| Ok(s.chunk_written(h.file, h.index, computed)?))
            .map_err(io::Error::other)?;
        match record {
            Some(r) => sh.store.append_record(&data, &r),
            None => Ok(()),
        }
    });
    if let Err(e) = written {
        if let Ok(mut s) = sh.session.lock() {
            // Never refused: the chunk is only taken back (it comes again).
            let _ = s.handle(RecvInput::ChunkWriteFailed {
                file: h.file,
                index: h.index,
            });
        }
        return Err(ChunkFail::Stop(format!(
            "writing {}: {e}{}",
            plan.name.display(),
            if e.raw_os_error() == Some(libc::ENOSPC) {
                "; free space on the receiving side and run the same command again (verified chunks are kept)"
            } else {
                ""
            }
        )));
    }
    sh.with(|s| {
        Ok(s.handle(RecvInput::ChunkRecorded {
            file: h.file,
            index: h.index,
            hash: computed,
            len: u64::from(h.len),
        })?)
    })
    .map_err(stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_with_enough_after_it_is_read_whole_and_the_last_in_halves() {
        let k = 1024;
        let whole: Vec<_> = read_parts(256 * k, 256 * k).collect();
        assert_eq!(whole, vec![(0..256 * k, 256 * k)]);
        // The chunk's last piece: each read has as much sure to come behind it as it
        // takes itself, down to the smallest part.
        let last: Vec<_> = read_parts(256 * k, 0).collect();
        assert_eq!(
            last,
            vec![
                (0..128 * k, 128 * k),
                (128 * k..192 * k, 64 * k),
                (192 * k..224 * k, 32 * k),
                (224 * k..256 * k, 0),
            ]
        );
        // A short last piece, and one with a little after it.
        assert_eq!(
            read_parts(20 * k, 0).collect::<Vec<_>>(),
            vec![(0..20 * k, 0)]
        );
        let some: Vec<_> = read_parts(100 * k, 10 * k).collect();
        assert_eq!(
            some,
            vec![
                (0..50 * k, 60 * k),
                (50 * k..75 * k, 35 * k),
                (75 * k..100 * k, 10 * k)
            ]
        );
        assert_eq!(read_parts(0, 0).count(), 0);
    }
}
