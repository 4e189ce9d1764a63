//! The sending session's one input ([`SendInput`]): a message from the receiver or what
//! the driver did, given to [`SendSession::handle`].
//!
//! A stream's question "what next?" ([`SendSession::next_work`]) needs its answer at once
//! and stays a call that returns it; everything reported after the fact arrives here.

use longhaul_proto::transfer::EntryId;
use longhaul_proto::transfer::TransferMessage;

use super::SendSession;
use crate::integrity::ChunkHash;
use crate::scheduler::{Chunk, StreamId};
use crate::session::SessionError;

/// One input to a [`SendSession`].
#[derive(Debug)]
pub enum SendInput {
    /// A control message from the receiver.
    Message(TransferMessage),
    /// The receiver answered the list before it was sent: its destination holds nothing
    /// of it, so it takes every file whole (`transfer_flags::ANSWERED_AHEAD`). Chunks flow
    /// at once, a round trip sooner than after its answers; it may still skip a file or a
    /// link while they flow (`SkipFile`: the file's chunks stop), and its `FileListEnd`
    /// comes when it has placed the list. Only before any answer (else an error).
    AnsweredAhead,
    /// A chunk went out on a stream with this hash.
    ChunkSent {
        /// The chunk.
        chunk: Chunk,
        /// Its BLAKE3.
        hash: ChunkHash,
        /// Bytes that crossed (0 for a hole).
        payload: u64,
    },
    /// Sync: a chunk went out as equal to the receiver's old copy (no bytes).
    ChunkReused {
        /// The chunk.
        chunk: Chunk,
        /// Its BLAKE3.
        hash: ChunkHash,
    },
    /// The answer to [`SendEvent::HashFromFile`](super::SendEvent::HashFromFile) for one
    /// chunk.
    Hashed {
        /// The entry's id.
        file: EntryId,
        /// The chunk's index in the file.
        index: u32,
        /// Its BLAKE3.
        hash: ChunkHash,
    },
    /// The answer to [`SendEvent::CheckSource`](super::SendEvent::CheckSource): how the
    /// source of `file` differs from its list entry now (`None`: it does not). Its digest
    /// goes out, or `SourceChanged`.
    SourceChecked {
        /// The entry's id.
        file: EntryId,
        /// What changed, for the user.
        changed: Option<String>,
    },
    /// A data stream failed: its chunks go to the others. An error when it was the last.
    StreamFailed {
        /// The stream's index.
        stream: StreamId,
        /// Why, for the user.
        why: String,
    },
}

impl From<TransferMessage> for SendInput {
    fn from(msg: TransferMessage) -> Self {
        SendInput::Message(msg)
    }
}

impl SendSession {
    /// One input: a message from the receiver or what the driver did. An error ends the
    /// session (later inputs change nothing); tell the peer and stop.
    pub fn handle(&mut self, input: impl Into<SendInput>) -> Result<(), SessionError> {
        let r = match input.into() {
            SendInput::Message(msg) => self.on_message(msg),
            SendInput::AnsweredAhead => self.answered_ahead(),
            SendInput::ChunkSent {
                chunk,
                hash,
                payload,
            } => {
                self.chunk_sent(&chunk, hash, payload);
                Ok(())
            }
            SendInput::ChunkReused { chunk, hash } => {
                self.chunk_reused(&chunk, hash);
                Ok(())
            }
            SendInput::Hashed { file, index, hash } => {
                self.hashed(file, index, hash);
                Ok(())
            }
            SendInput::SourceChecked { file, changed } => {
                self.source_checked(file, changed);
                Ok(())
            }
            SendInput::StreamFailed { stream, why } => self.stream_failed(stream, &why),
        };
        if r.is_err() {
            self.fail();
        }
        r
    }
}
