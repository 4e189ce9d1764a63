//! Why a session stopped, typed ([`SessionError`]): the peer broke the protocol
//! ([`PeerMisbehaved`], one variant per rule it broke), this end refused what it asked for
//! (a sentence for the user that says what to do), or this end gave up
//! ([`LocalFailure`]). Drivers and tests match the variants; the texts are for people.

use super::recv::human_bytes;
use crate::Error as TransferError;
use longhaul_proto::transfer::EntryId;

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
    Refused(#[from] Refusal),
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
        file: EntryId,
    },
    /// A chunk's payload before its file was opened.
    #[error("a chunk for file {file} before it was opened")]
    ChunkBeforeOpen {
        /// The entry it named.
        file: EntryId,
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
        file: EntryId,
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
        file: EntryId,
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
        file: EntryId,
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
        file: EntryId,
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
        file: EntryId,
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
        file: EntryId,
    },
    /// A skip after the receiver's answers ended, or a second skip.
    #[error("the receiver skipped file {file} after its answers ended, or twice")]
    SkippedLate {
        /// The entry.
        file: EntryId,
    },
    /// An ack before the list was answered.
    #[error("an ack before the list was answered")]
    AckBeforeAnswers,
    /// An ack of a file that was not sent.
    #[error("the receiver acked file {file}, which was not sent")]
    AckedUnsent {
        /// The entry.
        file: EntryId,
    },
    /// An ack, refusal or skip the chunk scheduler cannot take (a chunk it does not hold,
    /// or one not in flight).
    #[error("{0}")]
    Scheduler(Box<TransferError>),
}

/// What this end refuses of the peer's list, and why; each text says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// File entries out of order, or more than announced.
    #[error("file entries out of order or too many (first id {first_id}, expected {expected})")]
    EntriesOutOfOrder {
        /// The first id of the batch.
        first_id: EntryId,
        /// The id expected.
        expected: usize,
    },
    /// A path this end does not take (`..`, absolute, too long, ...).
    #[error("refused path {path}: {cause}")]
    Path {
        /// The path as sent.
        path: String,
        /// What is wrong with it.
        cause: Box<TransferError>,
    },
    /// A path of a source's contents (`dir/`) that this end does not take.
    #[error("refused path: {0}")]
    ContentsPath(Box<TransferError>),
    /// A path naming one of longhaul's own work files.
    #[error(
        "refused path {path}: it names a longhaul work file (.NAME.longhaul-part or \
         .NAME.longhaul-manifest)"
    )]
    WorkFile {
        /// The path.
        path: String,
    },
    /// A pull's answer outside what was asked for.
    #[error(
        "the sender named {path}, which is not inside what was asked for ({asked}); refused, \
         nothing of it was written"
    )]
    NotAsked {
        /// The path.
        path: String,
        /// What was asked for.
        asked: String,
    },
    /// A directory or a file inside one, without `-r`.
    #[error(
        "the sender named {path}, a directory or a file inside one, but -r was not given; \
         refused, nothing of it was written"
    )]
    NotRecursive {
        /// The path.
        path: String,
    },
    /// A source's contents (`dir/`) beside other sources.
    #[error("a source named with a trailing slash (its contents) must be the only one")]
    ContentsNotAlone,
    /// A source's contents (`dir/`) that is a file.
    #[error("{path}/ names the contents of a directory, but it is a file")]
    ContentsOfAFile {
        /// The path.
        path: String,
    },
    /// Sizes that add up past what any list of real files holds.
    #[error(
        "the file list's sizes add up to more than {} bytes at {path} ({size} bytes): not a \
         list of real files",
        u64::MAX
    )]
    SizesOverflow {
        /// The entry where the sum overflowed.
        path: String,
        /// Its size.
        size: u64,
    },
    /// The destination is a FIFO, socket or device.
    #[error(
        "the destination {path} is {what}, not a regular file: longhaul copies regular files, \
         directories and symlinks; remove it or name another destination"
    )]
    SpecialDestination {
        /// The destination.
        path: String,
        /// What it is.
        what: &'static str,
    },
    /// A directory where a file goes.
    #[error("the destination {path} is a directory; a file cannot replace it")]
    DirectoryInTheWay {
        /// The destination.
        path: String,
    },
    /// A striped copy with an option it does not take.
    #[error("a striped copy takes no {what}: run it as one copy")]
    NotStriped {
        /// The option ("sync", "--delete", "hard links (sync -H)", ...).
        what: &'static str,
    },
    /// More files than a daemon's cap on one transfer.
    #[error(
        "the transfer names more than {max} files and directories, and this server takes at \
         most {max} per transfer ({setting}); copy fewer at a time {AGAIN}"
    )]
    TooManyFiles {
        /// The cap.
        max: u64,
        /// Where it is set.
        setting: String,
    },
    /// More bytes than a daemon's cap on one transfer.
    #[error(
        "the transfer's files hold more than {} ({total} bytes so far), and this server takes \
         at most {} per transfer ({setting}); copy less at a time {AGAIN}",
        human_bytes(*max),
        human_bytes(*max)
    )]
    TooManyBytes {
        /// The cap.
        max: u64,
        /// The list's bytes so far.
        total: u64,
        /// Where it is set.
        setting: String,
    },
    /// Not enough free space at the destination.
    #[error(
        "not enough space on {on}: the transfer needs {}, {} free; free some space and run \
         the same command again, or copy less",
        human_bytes(*needs),
        human_bytes(*free)
    )]
    NoSpace {
        /// The file system.
        on: String,
        /// Bytes the list writes.
        needs: u64,
        /// Bytes free.
        free: u64,
    },
    /// Not enough free inodes at the destination.
    #[error(
        "not enough inodes on {on}: the transfer creates {needs} files and directories, \
         {free} free; remove some files and run the same command again, or copy fewer"
    )]
    NoInodes {
        /// The file system.
        on: String,
        /// Inodes the list creates.
        needs: u64,
        /// Inodes free.
        free: u64,
    },
    /// What the transfer core refuses of an entry: its placement, its work files' names,
    /// its data file's plan.
    #[error("{0}")]
    Entry(Box<TransferError>),
    /// A destination's data file that cannot be planned (`path`: the destination).
    #[error("{path}: {cause}")]
    Data {
        /// The destination.
        path: String,
        /// Why.
        cause: Box<TransferError>,
    },
}

/// Said of a cap, whose refusal a rerun meets again (its words also keep the driver from
/// adding its advice to rerun).
const AGAIN: &str = "(do not just run the same command again: it is refused the same way)";

impl Refusal {
    /// [`Refusal::Entry`].
    pub(crate) fn entry(e: TransferError) -> Self {
        Self::Entry(Box::new(e))
    }
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
        file: EntryId,
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
pub(crate) fn out_of_turn(answer: &'static str, file: EntryId) -> SessionError {
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
