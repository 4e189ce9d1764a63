//! The sans-I/O core of `longhaul cp`: no sockets, no files, no clocks.
//!
//! - [`scheduler`]: files cut into chunks, streams pulling the next chunk when free,
//!   in-flight tracking, retries and per-file completion.
//! - [`manifest`]: the receiver's resume record of verified chunks per file.
//! - [`receiver`]: one file's receiving side: resume or start over, chunk checks, the
//!   order of sync and manifest record, the digest gate before the rename.
//! - [`path`]: turning a peer-supplied relative path into safe components.
//! - [`location`]: reading a `cp` argument as a local path, an ssh `[USER@]HOST:PATH` or a
//!   daemon's `longhaul://HOST[:PORT]/PATH`; the far end's reading of an ssh path.
//! - [`requested`]: the path a request names below a root, and its trailing `/`.
//! - [`place`]: cp's placement of received entries and the receiver's work-file names.
//! - [`mode`]: the permission bits a receiver sets (setuid and setgid dropped by default).
//! - [`integrity`]: per-chunk BLAKE3 subtree hashes and the whole-file BLAKE3 they merge into.
//! - [`file_hashes`]: a file's chunk hashes merged into its BLAKE3, in any order.
//! - [`grid`]: a file's chunk grid (each chunk's range and hasher).
//! - [`hash_cache`]: the chunk-hash cache's record (a file's chunk hashes with its
//!   identity, trusted only while that identity holds).
//! - [`session`]: both ends of a transfer as state machines (messages and chunk events
//!   in, messages and driver work out).
//! - [`filter`]: `--exclude` / `--include` rules (rsync's patterns, first match wins).
//! - [`delete`]: `--delete`'s plan: what the destination holds that the source lacks.
//! - [`sparse`]: which blocks of a received chunk hold data (the rest stay holes).
//!
//! Drivers (in `engine`) do the I/O; see `docs/cp-design.md` for how the pieces fit.
#![forbid(unsafe_code)]

pub mod adler32;
pub mod answering;
pub mod delete;
pub mod error;
pub mod file_hashes;
pub mod filter;
pub mod grid;
pub mod hash_cache;
pub mod integrity;
mod le_bytes;
pub mod location;
pub mod manifest;
pub mod mode;
pub mod opening;
pub mod path;
pub mod place;
pub mod receiver;
pub mod request;
pub mod requested;
pub mod scheduler;
pub mod session;
pub mod sparse;

pub use delete::{dest_extras, DeletePlan, DestEntry, DestKind, DestListing, Removal};
pub use error::{Error, Result};
pub use file_hashes::FileHashes;
pub use filter::Filter;
pub use grid::ChunkGrid;
pub use hash_cache::{CachedHashes, FileIdentity};
pub use integrity::{
    chunk_hash, digest_hex, file_digest, source_fingerprint, ChunkHash, ChunkHasher, Digest,
};
pub use location::{parse_location, remote_path, Location, RemoteSpec, SshHost, SshSpec};
pub use manifest::{
    decide_resume, Loaded, ResumeDecision, ResumeManifest, SourceIdentity, StartOverReason,
};
pub use mode::received_mode;
pub use path::{parse_peer_path, SafeRelPath, MAX_NAME_BYTES, MAX_PATH_BYTES};
pub use place::{manifest_name, part_name, place_entry};
pub use receiver::{ChunkCheck, FileReceiver, Opened, PartStart};
pub use requested::{names_a_directory, require_directory, RequestedPath};
pub use scheduler::{
    chunk_size_for, Chunk, ChunkId, ChunkScheduler, FileCompleted, FileId, Retry, SchedulerConfig,
    StreamId, WorkUnit,
};
