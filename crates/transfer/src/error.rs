//! The one error type of the transfer core. Every message names the offending value and,
//! where there is one, what the caller or user can do about it.

use thiserror::Error;

/// Everything the transfer core can refuse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    // --- peer-supplied paths ---
    /// The path was empty.
    #[error("path is empty; the peer must name a file below the served root")]
    EmptyPath,
    /// The path started with `/`.
    #[error("path {path:?} is absolute; only paths relative to the served root are accepted")]
    AbsolutePath {
        /// The path, lossily decoded.
        path: String,
    },
    /// The path held a NUL byte.
    #[error("path {path:?} contains a NUL byte at offset {offset}")]
    NulInPath {
        /// The path, lossily decoded.
        path: String,
        /// Byte offset of the first NUL.
        offset: usize,
    },
    /// A component was `..`.
    #[error("path {path:?} contains `..`; paths may not leave the served root")]
    ParentComponent {
        /// The path, lossily decoded.
        path: String,
    },
    /// A component was empty (`a//b`, trailing `/`) or `.`.
    #[error(
        "path {path:?} has an empty or `.` component at index {index}; send a normalised path"
    )]
    EmptyComponent {
        /// The path, lossily decoded.
        path: String,
        /// Index of the component (0-based).
        index: usize,
    },
    /// One component was longer than the file system allows.
    #[error("a name in path {path:?} is {len} bytes; at most {max} bytes per name")]
    NameTooLong {
        /// The path, lossily decoded (truncated for display).
        path: String,
        /// Length of the offending component in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// The whole path was too long, or too deep.
    #[error("path of {len} bytes and {depth} components exceeds the bound of {max_len} bytes / {max_depth} components")]
    PathTooLong {
        /// Length in bytes.
        len: usize,
        /// Number of components (counted up to the bound).
        depth: usize,
        /// The byte bound.
        max_len: usize,
        /// The depth bound.
        max_depth: usize,
    },

    // --- resume manifests ---
    /// The manifest is shorter than its header.
    #[error(
        "resume manifest truncated: {len} bytes, header needs {need}; the file will be sent again"
    )]
    ManifestTruncated {
        /// Bytes available.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// Magic or version did not match.
    #[error("resume manifest has an unknown format (magic/version {found:02x?}); the file will be sent again")]
    ManifestFormat {
        /// The first bytes found.
        found: Vec<u8>,
    },
    /// A checksum did not match.
    #[error(
        "resume manifest {part} checksum mismatch at byte {offset}; the file will be sent again"
    )]
    ManifestChecksum {
        /// `header` or `record`.
        part: &'static str,
        /// Byte offset of the part.
        offset: usize,
    },
    /// A field held a value outside its bounds.
    #[error("resume manifest field {field} = {value} is out of bounds ({bound}); the file will be sent again")]
    ManifestField {
        /// Field name.
        field: &'static str,
        /// The value found.
        value: u64,
        /// Description of the bound.
        bound: &'static str,
    },
    /// The same chunk was recorded twice with different hashes.
    #[error("resume manifest records chunk {index} twice with different hashes; the file will be sent again")]
    ManifestConflict {
        /// The chunk index.
        index: u32,
    },

    // --- receiving ---
    /// A chunk's index, offset or length does not fit the file's chunk grid.
    #[error("chunk {index} at offset {offset} with {len} bytes refused: {why}")]
    ChunkPlacement {
        /// Chunk index.
        index: u32,
        /// Offset announced.
        offset: u64,
        /// Length announced.
        len: u64,
        /// What was wrong.
        why: &'static str,
    },
    /// A chunk's bytes do not hash to what the sender announced.
    #[error("chunk {index}: the BLAKE3 of the bytes received ({}..) differs from the sender's ({}..); it will be sent again", crate::integrity::short_hex(computed), crate::integrity::short_hex(claimed))]
    ChunkHashMismatch {
        /// Chunk index.
        index: u32,
        /// Hash announced by the sender.
        claimed: crate::integrity::ChunkHash,
        /// Hash of the bytes received.
        computed: crate::integrity::ChunkHash,
    },
    /// The file is not complete yet.
    #[error("file has {verified} of {chunks} chunks verified; it cannot be put in place yet")]
    NotComplete {
        /// Verified chunks.
        verified: u32,
        /// All chunks.
        chunks: u32,
    },
    /// The whole-file digests differ.
    #[error("BLAKE3 of the received file {ours} differs from the sender's {senders}; the partial file is kept, rerun to send it again")]
    DigestMismatch {
        /// Receiver's digest, hex.
        ours: String,
        /// Sender's digest, hex.
        senders: String,
    },

    // --- scheduling ---
    /// A file list or configuration the scheduler cannot plan.
    #[error("cannot schedule: {what} = {value} ({bound})")]
    ScheduleBounds {
        /// What was out of bounds.
        what: &'static str,
        /// Its value.
        value: u64,
        /// Description of the bound.
        bound: &'static str,
    },
    /// A report named a chunk that is not in flight on that stream.
    #[error(
        "chunk {file}:{index} is not in flight on stream {stream}; the report is stale or wrong"
    )]
    NotInFlight {
        /// File id.
        file: crate::scheduler::FileId,
        /// Chunk index.
        index: u32,
        /// Stream that reported.
        stream: crate::scheduler::StreamId,
    },
    /// A chunk failed more often than allowed.
    #[error("chunk {file}:{index} failed {attempts} times; giving up on this file (check the disk and the path, then rerun to resume)")]
    RetriesExhausted {
        /// File id.
        file: crate::scheduler::FileId,
        /// Chunk index.
        index: u32,
        /// Attempts made.
        attempts: u32,
    },
    /// A chunk index beyond the file's chunk count.
    #[error("chunk {file}:{index} does not exist (file has {chunks} chunks)")]
    NoSuchChunk {
        /// File id.
        file: crate::scheduler::FileId,
        /// Chunk index.
        index: u32,
        /// Chunk count of the file (0 if the file id is unknown).
        chunks: u32,
    },

    // --- command-line locations (`cp SRC... DST`) ---
    /// An empty command-line argument.
    #[error("an empty argument is not a path; name a local path, [USER@]HOST:PATH or longhaul://HOST/PATH")]
    EmptyLocation,
    /// `:path` with nothing before the colon.
    #[error("{arg:?} has an empty host; write HOST:PATH (or ./{arg} for a local file)")]
    EmptyHost {
        /// The argument, lossily decoded.
        arg: String,
    },
    /// `[...` without the `]:` that closes an IPv6 address.
    #[error("{arg:?}: an IPv6 host is written [ADDR]:PATH (ssh) or longhaul://[ADDR]:PORT/PATH (daemon)")]
    BadBracketHost {
        /// The argument, lossily decoded.
        arg: String,
    },
    /// `longhaul://H1,H2,.../PATH` naming fewer than 2 or more than 64 hosts, or an
    /// empty one.
    #[error("{arg:?}: a striped copy names 2 to 64 hosts at each end, separated by commas (longhaul://H1[:PORT],H2[:PORT]/PATH)")]
    BadStripeHosts {
        /// The argument, lossily decoded.
        arg: String,
    },
    /// The host part is not UTF-8.
    #[error("{arg:?}: the host name is not valid UTF-8")]
    NonUtf8Host {
        /// The argument, lossily decoded.
        arg: String,
    },
    /// The daemon form of longhaul before ssh start-up, `host:PORT:path`: now an ssh path
    /// `PORT:path`, refused so that it does not silently change meaning.
    #[error("{host}:{port}:{rest} is the old daemon form; to reach a daemon write longhaul://{host}:{port}/{rest}; for a remote file named {port}:{rest} (over ssh) write {host}:./{port}:{rest}")]
    OldDaemonForm {
        /// The host (IPv6 in brackets).
        host: String,
        /// The digits after the host.
        port: String,
        /// The rest, lossily decoded.
        rest: String,
    },
    /// A `[user@]host` that ssh must not get (an option, white space, a bad character).
    #[error("{arg:?}: {why}")]
    BadSshHost {
        /// The argument, lossily decoded.
        arg: String,
        /// What is wrong with it.
        why: String,
    },
    /// A port of 0 or above 65535.
    #[error("port {value} in {arg:?} is not in 1..=65535")]
    BadPort {
        /// The digits as typed.
        value: String,
        /// The argument, lossily decoded.
        arg: String,
    },

    // --- placement of received entries ---
    /// A path written with a trailing `/` (`dir/`) is not an existing directory.
    #[error("{path}/: Not a directory (a trailing / names an existing directory to copy into or from; create it first, or drop the / to name a file)")]
    NotADirectory {
        /// The path, lossily decoded, without the trailing `/`.
        path: String,
    },
    /// Several sources, and the destination is not an existing directory.
    #[error("target {target} is not a directory; several sources need an existing directory")]
    TargetNotDirectory {
        /// The destination path, lossily decoded.
        target: String,
    },
    /// The receiver's work files (`.NAME.longhaul-part`, `.NAME.longhaul-manifest`)
    /// would not fit the path bounds beside the destination.
    #[error("destination {path:?} is too close to the path length bound ({max} bytes) to hold the work file {suffix} beside it; use a shorter destination path")]
    NoRoomForWorkFile {
        /// The destination path, lossily decoded.
        path: String,
        /// The work-file suffix that did not fit.
        suffix: &'static str,
        /// The path bound.
        max: usize,
    },

    // --- filter rules ---
    /// An `--exclude` / `--include` rule cannot be used.
    #[error("filter rule {rule} ({pattern:?}): {why}")]
    FilterRule {
        /// The rule's number on the command line, from 1.
        rule: usize,
        /// The pattern, lossily decoded (cut to a readable length).
        pattern: String,
        /// What is wrong and what to do.
        why: String,
    },
    // --- chunk-hash cache ---
    /// A cache record cannot hold these hashes (the caller just does not cache them).
    #[error("chunk-hash cache record: {field} is {value}, {bound}; the hashes are not cached")]
    HashCacheField {
        /// The field out of bounds.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The bound it broke.
        bound: &'static str,
    },
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Lossy display form of a peer path, cut to a readable length.
pub(crate) fn display_path(bytes: &[u8]) -> String {
    const SHOW: usize = 200;
    let shown = &bytes[..bytes.len().min(SHOW)];
    let mut s = String::from_utf8_lossy(shown).into_owned();
    if bytes.len() > SHOW {
        s.push_str("...");
    }
    s
}
