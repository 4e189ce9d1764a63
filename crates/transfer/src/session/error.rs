//! Why a session stopped, typed ([`SessionError`]): the peer broke the protocol
//! ([`PeerMisbehaved`], one variant per rule it broke), this end refused what it asked for
//! (a sentence for the user that says what to do), or this end gave up
//! ([`LocalFailure`]). Drivers and tests match the variants; the texts are for people.

use crate::Error as TransferError;

/// Why a session stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The peer broke the protocol (a message out of place, a file or chunk it cannot
    /// name): tell it and stop.
    #[error("protocol error: {0}")]
    Protocol(#[from] PeerMisbehaved),
    /// This end refuses what the peer asked for (a path, a placement, more than the caps
    /// or the room allow): tell it and stop. The text names the remedy.
    #[error("{0}")]
    Refused(String),
    /// This end gave up (a chunk refused too often, every stream lost, a local failure).
    #[error("{0}")]
    GaveUp(#[from] LocalFailure),
}

/// A rule of the protocol the peer broke. The sender's breaches are seen by the receiving
/// session, the receiver's by the sending one; `file` is the entry's id in the list and
/// `path` the name this end gave it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerMisbehaved {
    /// A message the session does not take at this point.
    #[error("unexpected {message} {when}")]
    Unexpected {
        /// The message's kind.
        message: &'static str,
        /// When it came ("during the transfer", ...).
        when: &'static str,
    },
    /// A chunk in a `--checksum-only` transfer, which moves none.
    #[error("a chunk arrived in a --checksum-only transfer")]
    ChunkInCheck,
    /// A chunk of a file that is not being received (unknown, finished or skipped).
    #[error("a chunk for file {file}, which is not being received")]
    ChunkNotReceived {
        /// The entry it named.
        file: u32,
    },
    /// A chunk's payload before its file was opened.
    #[error("a chunk for file {file} before it was opened")]
    ChunkBeforeOpen {
        /// The entry it named.
        file: u32,
    },
    /// A chunk longer than the transfer's chunk size, or with flags this end does not know.
    #[error(
        "chunk {index} of {path}: length {len} above the chunk size {chunk_size} or unknown \
         flags {flags:#x}"
    )]
    ChunkMalformed {
        /// The file.
        path: String,
        /// The chunk's index.
        index: u32,
        /// Its length.
        len: u64,
        /// The transfer's chunk size.
        chunk_size: u64,
        /// Its flags.
        flags: u32,
    },
    /// A chunk whose index, offset and length are not one of the file's chunks.
    #[error(
        "chunk {index} of {path} at offset {offset} with length {len}: off the file's chunk \
         grid ({chunks} chunks of {chunk_size} bytes, {size} bytes in all)"
    )]
    ChunkOffGrid {
        /// The file.
        path: String,
        /// The chunk's index.
        index: u32,
        /// Its offset.
        offset: u64,
        /// Its length.
        len: u64,
        /// The file's chunks.
        chunks: u32,
        /// The transfer's chunk size.
        chunk_size: u64,
        /// The file's size.
        size: u64,
    },
    /// A chunk sent as equal to this end's old copy that this end never named.
    #[error(
        "chunk {index} of {path}: the sender says it equals this end's copy, but this end \
         named no such chunk with that hash"
    )]
    ReuseUnnamed {
        /// The file.
        path: String,
        /// The chunk's index.
        index: u32,
    },
    /// A chunk the file's receiver refused for a reason other than its hash (a hash
    /// mismatch is answered with a refusal and the chunk comes again).
    #[error("chunk {index} of {path}: {cause}")]
    ChunkRefused {
        /// The file.
        path: String,
        /// The chunk's index.
        index: u32,
        /// What the receiver found.
        cause: Box<TransferError>,
    },
    /// A striped copy: a chunk of another share.
    #[error(
        "chunk {index} of {path} belongs to another share of this striped copy (this end \
         receives {share}); refused, nothing of it was written"
    )]
    OtherShare {
        /// The file.
        path: String,
        /// The chunk's index.
        index: u32,
        /// The share this end receives.
        share: String,
    },
    /// `sync -n`: a report for an entry that is not a file of the list.
    #[error("a dry-run report for file {file}, which is not a file of the list")]
    DryRunNotAFile {
        /// The entry it named.
        file: u32,
    },
    /// `TransferDone` before every entry was received whole.
    #[error(
        "the sender ended the transfer with {unfinished} {} not received whole; nothing \
         unfinished was committed (run the same command again to resume)",
        if *unfinished == 1 { "entry" } else { "entries" }
    )]
    EndedEarly {
        /// Entries not finished.
        unfinished: usize,
    },
    /// A digest (or `SourceChanged`) for a file not being received, or a second one.
    #[error("a digest for file {file}, which is not being received (or twice)")]
    DigestOutOfPlace {
        /// The entry it named.
        file: u32,
    },
    /// A hard link entry whose target is not a path this end takes.
    #[error("hard link {link} names {target}: {cause}")]
    HardLinkTarget {
        /// The link's path.
        link: String,
        /// The target it named.
        target: String,
        /// Why the target is refused.
        cause: Box<TransferError>,
    },
    /// A hard link entry whose target is not an earlier file of the list.
    #[error("hard link {link} names {target}, which is not an earlier file of the list")]
    HardLinkNotEarlier {
        /// The link's path.
        link: String,
        /// The target it named.
        target: String,
    },
    /// The receiver claimed chunks of a file out of order, overlapping or past its end.
    #[error(
        "the receiver claims chunks {first}+{count} of file {file} (with {chunks} chunks) out \
         of order, overlapping or past its end"
    )]
    ClaimOutOfOrder {
        /// The entry.
        file: u32,
        /// The first chunk claimed.
        first: u32,
        /// How many.
        count: u32,
        /// The file's chunks.
        chunks: u32,
    },
    /// Sync: old chunk hashes out of order or past the file's end.
    #[error(
        "the receiver sent old chunk hashes {first}+{count} of file {file} (with {chunks} \
         chunks) out of order or past its end"
    )]
    OldHashesOutOfOrder {
        /// The entry.
        file: u32,
        /// The first chunk.
        first: u32,
        /// How many hashes.
        count: usize,
        /// The file's chunks.
        chunks: u32,
    },
    /// The receiver claimed chunks past a file's end.
    #[error("the receiver claims chunks {first}+{count} of a file with {chunks}")]
    ClaimPastEnd {
        /// The first chunk claimed.
        first: u32,
        /// How many.
        count: u32,
        /// The file's chunks.
        chunks: u32,
    },
    /// The receiver named an entry that is not a file, link or hard link of the list.
    #[error("the receiver named file {file}, which is not a file of this transfer")]
    NotAFile {
        /// The entry it named.
        file: u32,
    },
    /// An answer ahead of the list after answers came, or in a check or dry run.
    #[error("an answer ahead of the list, after answers or in a check")]
    LateAnswerAhead,
    /// The receiver chose another chunk size where it may not.
    #[error("the receiver chose chunks of {theirs} bytes instead of {ours}")]
    ChunkSize {
        /// Its choice.
        theirs: u64,
        /// This end's.
        ours: u64,
    },
    /// A commit of a file the receiver had skipped.
    #[error("the receiver committed file {file}, which it skipped")]
    CommittedSkipped {
        /// The entry.
        file: u32,
    },
    /// A skip after the receiver's answers ended, or a second skip.
    #[error("the receiver skipped file {file} after its answers ended, or twice")]
    SkippedLate {
        /// The entry.
        file: u32,
    },
    /// An ack before the list was answered.
    #[error("an ack before the list was answered")]
    AckBeforeAnswers,
    /// An ack of a file that was not sent.
    #[error("the receiver acked file {file}, which was not sent")]
    AckedUnsent {
        /// The entry.
        file: u32,
    },
    /// An ack, refusal or skip the chunk scheduler cannot take (a chunk it does not hold,
    /// or one not in flight).
    #[error("{0}")]
    Scheduler(Box<TransferError>),
}

/// Why this end gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocalFailure {
    /// The driver answered an event no file was waiting for: a bug of the driver.
    #[error("{answer} for file {file}, which was not waiting for it")]
    AnswerOutOfTurn {
        /// The answer ("a look", "old chunk hashes", ...).
        answer: &'static str,
        /// The entry it named.
        file: u32,
    },
    /// The driver gave an answer of a striped copy to a session without stripes.
    #[error("shares gathered on a copy without stripes")]
    NoStripes,
    /// A file's receiver refused a chunk's record (its manifest is inconsistent).
    #[error("{0}")]
    Record(Box<TransferError>),
    /// A fresh start's part file came back as a resume.
    #[error("a fresh start resumed (no manifest was given)")]
    FreshStartResumed,
    /// A striped copy's share could not be formed.
    #[error("{0}")]
    Share(String),
    /// The chunk scheduler could not be planned for the list.
    #[error("planning the chunks: {0}")]
    Planning(Box<TransferError>),
    /// The file list could not be packed into messages.
    #[error("packing the file list: {0}")]
    PackingList(String),
    /// The receiver refused a chunk as often as allowed.
    #[error("chunk {index} of {path} was refused {attempts} times ({reason}); giving up")]
    RefusedTooOften {
        /// The file.
        path: String,
        /// The chunk's index.
        index: u32,
        /// Tries.
        attempts: u32,
        /// The last refusal's reason.
        reason: String,
    },
    /// Every data stream failed.
    #[error("every data stream failed; the last: {last}")]
    EveryStreamFailed {
        /// Why the last one did.
        last: String,
    },
}

/// [`LocalFailure::AnswerOutOfTurn`], as the session returns it.
pub(crate) fn out_of_turn(answer: &'static str, file: u32) -> SessionError {
    LocalFailure::AnswerOutOfTurn { answer, file }.into()
}

impl PeerMisbehaved {
    /// [`PeerMisbehaved::Scheduler`].
    pub(crate) fn scheduler(e: TransferError) -> Self {
        Self::Scheduler(Box::new(e))
    }
}

impl LocalFailure {
    /// [`LocalFailure::Record`].
    pub(crate) fn record(e: TransferError) -> Self {
        Self::Record(Box::new(e))
    }

    /// [`LocalFailure::Planning`].
    pub(crate) fn planning(e: TransferError) -> Self {
        Self::Planning(Box::new(e))
    }
}
