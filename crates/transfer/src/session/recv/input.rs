//! The receiving session's one input ([`RecvInput`]): a message from the sender or the
//! driver's answer to an event, given to [`RecvSession::handle`].
//!
//! Everything the driver reports after the fact arrives here, so a driver (the engine's
//! store, the simulator, a test) holds its answers as values and has one dispatch. The
//! data path's questions that need an answer at once, on the stream that asked
//! ([`RecvSession::chunk_header`], [`RecvSession::chunk_arrived`],
//! [`RecvSession::chunk_reused`], [`RecvSession::chunk_written`]), stay calls that return it.

use longhaul_proto::transfer::EntryId;
use std::path::PathBuf;

use longhaul_proto::transfer::TransferMessage;

use super::types::{LookResult, OldCopy};
use super::RecvSession;
use crate::delete::{DestEntry, DestListing, Removal};
use crate::integrity::ChunkHash;
use crate::session::SessionError;

/// Where a committed file was put in place ([`RecvInput::Placed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// By this commit.
    Here,
    /// A striped copy's file another share put in place first (the last two shares to
    /// finish may both find every chunk recorded): done, and counted by that share.
    ByAnotherShare,
}

/// One input to a [`RecvSession`]. A failure is a `String` the driver wrote for the user
/// (the file's line in the outcome says it).
#[derive(Debug)]
pub enum RecvInput {
    /// A control message from the sender.
    Message(TransferMessage),
    /// The answer to [`RecvEvent::Look`](super::RecvEvent::Look): what is at the
    /// destination of `file`.
    Looked {
        /// The entry's id.
        file: EntryId,
        /// What the driver found.
        found: LookResult,
    },
    /// The answer to [`RecvEvent::HashOld`](super::RecvEvent::HashOld) (sync): the
    /// destination's old copy of `file`, hashed chunk by chunk.
    OldHashed {
        /// The entry's id.
        file: EntryId,
        /// Its chunk hashes, or why they could not be read.
        old: Result<OldCopy, String>,
    },
    /// The answer to [`RecvEvent::Open`](super::RecvEvent::Open): the data file of `file`
    /// is open; `intact` when the resume plan's chunks were found whole in it.
    Opened {
        /// The entry's id.
        file: EntryId,
        /// The chunks the resume plan keeps are whole on disk.
        intact: bool,
    },
    /// A chunk's write failed (its manifest record was not appended): it will come again.
    ChunkWriteFailed {
        /// The entry's id.
        file: EntryId,
        /// The chunk's index in the file.
        index: u32,
    },
    /// A chunk's manifest record is on disk: the chunk is acked.
    ChunkRecorded {
        /// The entry's id.
        file: EntryId,
        /// The chunk's index in the file.
        index: u32,
        /// Its BLAKE3.
        hash: ChunkHash,
        /// Its length in bytes.
        len: u64,
    },
    /// The answer to [`RecvEvent::HashFromFile`](super::RecvEvent::HashFromFile) for one chunk already on
    /// disk.
    Hashed {
        /// The entry's id.
        file: EntryId,
        /// The chunk's index in the file.
        index: u32,
        /// Its BLAKE3.
        hash: ChunkHash,
    },
    /// The answer to [`RecvEvent::Commit`](super::RecvEvent::Commit).
    Placed {
        /// The entry's id.
        file: EntryId,
        /// Where it was put in place, or why it was not.
        result: Result<Placed, String>,
    },
    /// The answer to [`RecvEvent::MakeSymlink`](super::RecvEvent::MakeSymlink).
    SymlinkMade {
        /// The entry's id.
        file: EntryId,
        /// Made, or why not.
        result: Result<(), String>,
    },
    /// The answer to [`RecvEvent::MakeHardLink`](super::RecvEvent::MakeHardLink).
    HardLinkMade {
        /// The entry's id.
        file: EntryId,
        /// Made, or why not.
        result: Result<(), String>,
    },
    /// The answer to [`RecvEvent::FixDirs`](super::RecvEvent::FixDirs): the directories'
    /// modes and times are set.
    DirsFixed,
    /// Directories the driver created for this transfer (the only ones whose mode it sets).
    DirsCreated(Vec<PathBuf>),
    /// The answer to [`RecvEvent::ListDest`](super::RecvEvent::ListDest) (`--delete`).
    DestListed {
        /// The directory listed.
        listing: DestListing,
        /// What is in it, or why it could not be read.
        found: Result<Vec<DestEntry>, String>,
    },
    /// The answer to [`RecvEvent::Remove`](super::RecvEvent::Remove) (`--delete`): each
    /// removal and how it went.
    Removed(Vec<(Removal, Result<(), String>)>),
    /// The answer to [`RecvEvent::GatherShares`](super::RecvEvent::GatherShares): the
    /// other shares' manifests of `file`, each as read (`None`: none there).
    SharesGathered {
        /// The entry's id.
        file: EntryId,
        /// One per other share, in the order asked.
        manifests: Vec<Option<Vec<u8>>>,
    },
}

impl From<TransferMessage> for RecvInput {
    fn from(msg: TransferMessage) -> Self {
        RecvInput::Message(msg)
    }
}

impl RecvSession {
    /// One input: a message from the sender or the driver's answer to an event. An error
    /// ends the session (later inputs change nothing); tell the peer and stop.
    pub fn handle(&mut self, input: impl Into<RecvInput>) -> Result<(), SessionError> {
        let r = match input.into() {
            RecvInput::Message(msg) => self.on_message(msg),
            RecvInput::Looked { file, found } => self.looked(file, found),
            RecvInput::OldHashed { file, old } => self.old_hashed(file, old),
            RecvInput::Opened { file, intact } => self.opened(file, intact),
            RecvInput::ChunkWriteFailed { file, index } => {
                self.chunk_write_failed(file, index);
                Ok(())
            }
            RecvInput::ChunkRecorded {
                file,
                index,
                hash,
                len,
            } => {
                self.chunk_recorded(file, index, hash, len);
                Ok(())
            }
            RecvInput::Hashed { file, index, hash } => {
                self.hashed(file, index, hash);
                Ok(())
            }
            RecvInput::Placed {
                file,
                result: Ok(Placed::ByAnotherShare),
            } => {
                self.placed_by_another_share(file);
                Ok(())
            }
            RecvInput::Placed { file, result } => {
                self.placed(file, result.map(|_| ()));
                Ok(())
            }
            RecvInput::SymlinkMade { file, result } => {
                self.symlink_made(file, result);
                Ok(())
            }
            RecvInput::HardLinkMade { file, result } => {
                self.hardlink_made(file, result);
                Ok(())
            }
            RecvInput::DirsFixed => {
                self.dirs_fixed();
                Ok(())
            }
            RecvInput::DirsCreated(made) => {
                self.dirs_created(made);
                Ok(())
            }
            RecvInput::DestListed { listing, found } => {
                self.dest_listed(&listing, found);
                Ok(())
            }
            RecvInput::Removed(results) => {
                self.removed(results);
                Ok(())
            }
            RecvInput::SharesGathered { file, manifests } => self.shares_gathered(file, manifests),
        };
        if r.is_err() {
            self.fail();
        }
        r
    }
}
