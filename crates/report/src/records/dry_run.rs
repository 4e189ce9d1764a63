//! A dry run's records (`sync -n`): a `would_send` line per file a real run would create or
//! update, a `would_delete` line per entry it would remove, and an `end` with the totals.

use serde::{Deserialize, Serialize};

use super::RecordKind;

/// A file a real run would send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WouldSend {
    /// The entry's path, as listed from the source's base name.
    pub path: String,
    /// Whether the file would be created or updated.
    pub action: SendAction,
    /// The file's size, bytes.
    pub size: u64,
    /// Payload bytes that would cross.
    pub bytes: u64,
}

impl RecordKind for WouldSend {
    const TYPE: &'static str = "would_send";
}

/// What a real run would do with a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SendAction {
    /// The destination has no copy: the whole file would cross.
    Create,
    /// The destination's copy would be compared chunk by chunk; the chunks that differ
    /// would cross.
    Update,
}

impl SendAction {
    /// `update` when the destination's copy is compared, else `create`.
    pub fn of(compared: bool) -> Self {
        if compared {
            Self::Update
        } else {
            Self::Create
        }
    }
}

/// An entry a real run with `--delete` would remove.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WouldDelete {
    /// The entry's path.
    pub path: String,
}

impl RecordKind for WouldDelete {
    const TYPE: &'static str = "would_delete";
}

/// The `end` line of a dry run: nothing was changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DryRunEnd {
    /// No file failed.
    pub ok: bool,
    /// Always `true`: what tells this `end` from a run's.
    pub dry_run: bool,
    /// Entries that would be removed (`--delete`).
    pub would_delete: u64,
    /// Files that would be sent or updated.
    pub files: u64,
    /// Bytes that would cross.
    pub would_send_bytes: u64,
    /// Files the quick check found unchanged.
    pub unchanged_files: u64,
    /// Files whose copies were compared chunk by chunk.
    pub compared_files: u64,
    /// Why each failed file failed.
    pub failures: Vec<String>,
    /// `push` or `pull`.
    pub direction: String,
}

impl RecordKind for DryRunEnd {
    const TYPE: &'static str = "end";
}
