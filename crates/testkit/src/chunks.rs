//! Chunks moved as the data streams' drivers move them, for the tests that drive a
//! sending and a receiving session against each other (transfer's session pairs, the
//! engine's set-up simulation): a chunk hashed and counted as sent, and a chunk received:
//! checked, hashed and, when new, written and recorded.

use longhaul_proto::transfer::ChunkHeader;
use longhaul_transfer::scheduler::Chunk;
use longhaul_transfer::session::recv::Arrival;
use longhaul_transfer::session::{RecvInput, RecvSession, SendInput, SendSession, SessionError};

/// Sends chunk `c` whose bytes are `d` as a sending driver does: hashed with the session's
/// own hasher and counted as sent. Returns its header.
pub fn send_chunk(tx: &mut SendSession, c: &Chunk, d: &[u8]) -> ChunkHeader {
    let mut h = tx.hasher(c);
    h.update(d);
    let hash = h.finish();
    tx.handle(SendInput::ChunkSent {
        chunk: *c,
        hash,
        payload: c.len,
    })
    .expect("the session takes the chunk it handed out");
    ChunkHeader {
        file: tx.entry_of(c),
        index: c.id.index,
        flags: 0,
        offset: c.offset,
        len: c.len as u32,
        hash,
    }
}

/// Receives chunk `header` whose bytes are `d` as a data stream's driver does: its header
/// checked, its bytes hashed and, when the session finds it new, written and its record
/// appended (the chunk acked). Returns what the session made of it.
pub fn receive_chunk(
    rx: &mut RecvSession,
    header: &ChunkHeader,
    d: &[u8],
) -> Result<Arrival, SessionError> {
    let mut plan = rx.chunk_header(header)?;
    plan.hasher.update(d);
    let arrival = rx.chunk_arrived(header, plan.hasher.finish())?;
    if arrival == Arrival::Write {
        rx.chunk_written(header.file, header.index, header.hash)?;
        rx.handle(RecvInput::ChunkRecorded {
            file: header.file,
            index: header.index,
            hash: header.hash,
            len: d.len() as u64,
        })?;
    }
    Ok(arrival)
}
