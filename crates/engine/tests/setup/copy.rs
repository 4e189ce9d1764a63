//! A copy's transfer in the set-up simulation, past its first byte to its commit: the
//! drivers' glue around the transfer sessions, shared by both ends. A data connection
//! takes whatever work its stream is given at once (the link has no rate: the set-up's
//! round trips are what this simulation counts), and a chunk is sent and received with
//! the test kit's [`send_chunk`] and [`receive_chunk`], as the data streams' drivers do.

use std::sync::LazyLock;
use std::time::Instant;

use longhaul_testkit::chunks::{receive_chunk, send_chunk};
use longhaul_testkit::Rng;
use longhaul_transfer::session::{RecvSession, SendEvent, SendInput, SendSession, Work};
use longhaul_transfer::StreamId;

use super::net::{Conn, CopyChunk, Packet, Side, Wire};
use super::SOURCE_BYTES;

/// The source file's bytes.
pub fn source_bytes() -> &'static [u8] {
    static BYTES: LazyLock<Vec<u8>> = LazyLock::new(|| {
        let mut rng = Rng::new(0x5e7_u64);
        let mut b = Vec::with_capacity(SOURCE_BYTES as usize);
        while (b.len() as u64) < SOURCE_BYTES {
            b.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        b.truncate(SOURCE_BYTES as usize);
        b
    });
    &BYTES
}

/// Answers what the sending session asks of its driver: the source did not change; it
/// never hashes from its file (the destination starts empty).
fn answer_sender(send: &mut SendSession) -> Result<(), String> {
    while let Some(ev) = send.poll_event() {
        match ev {
            SendEvent::CheckSource { entry } => send
                .handle(SendInput::SourceChecked {
                    file: entry,
                    changed: None,
                })
                .map_err(|e| e.to_string())?,
            SendEvent::HashFromFile { entry, .. } => {
                return Err(format!("the sender hashes file {entry} from disk"))
            }
        }
    }
    Ok(())
}

/// Each of `streams` sends every chunk its stream is given now, to `to`, and the driver
/// answers what that asks of it (each file's source check once its last chunk left);
/// returns whether any chunk left.
pub fn send_ready(
    send: &mut SendSession,
    streams: &[(Conn, u16)],
    now: Instant,
    wire: &mut Wire,
    to: Side,
) -> Result<bool, String> {
    let mut sent = false;
    for &(conn, s) in streams {
        while let Work::Send(unit) = send.next_work(StreamId(u32::from(s)), now) {
            for c in &unit.chunks {
                let bytes = source_bytes()[c.offset as usize..(c.offset + c.len) as usize].to_vec();
                let header = send_chunk(send, c, &bytes);
                wire.send(
                    to,
                    conn,
                    Packet::Chunk(Some(Box::new(CopyChunk { header, bytes }))),
                );
                sent = true;
            }
        }
    }
    answer_sender(send)?;
    Ok(sent)
}

/// A copy's chunk arrived at the receiving end.
pub fn receive(recv: &mut RecvSession, chunk: &CopyChunk) -> Result<(), String> {
    receive_chunk(recv, &chunk.header, &chunk.bytes)
        .map(drop)
        .map_err(|e| e.to_string())
}
