//! The records around a copy: a `warning` (a skipped entry, a host limit), over ssh the far
//! end's start (`far_start`), a `sync -c` pull's old copies hashed ahead (`hashed_ahead`),
//! and an `error` that ended a transfer.

use serde::{Deserialize, Serialize};

use super::RecordKind;

/// A warning: something skipped or limited, with its fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// The warning in words.
    pub message: String,
}

impl RecordKind for Warning {
    const TYPE: &'static str = "warning";
}

/// The far end's start over ssh, apart from the transfer (whose seconds start at its first
/// data stream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FarStart {
    /// Seconds the start took: ssh's login, the far start, an upload.
    pub seconds: f64,
    /// Bytes of this longhaul uploaded over ssh; `null` when nothing was uploaded.
    pub uploaded_bytes: Option<u64>,
    /// Seconds the upload took; `null` when nothing was uploaded.
    pub upload_seconds: Option<f64>,
    /// How the data connections reached the far end.
    pub data_via: DataVia,
    /// The port here the far end connected back to; `null` unless it did.
    pub connect_back_port: Option<u16>,
}

impl RecordKind for FarStart {
    const TYPE: &'static str = "far_start";
}

/// How a session's data connections reached the far end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataVia {
    /// The far end's own port.
    Tcp,
    /// From the far end to a port here.
    ConnectBack,
    /// Through ssh, one ssh connection per stream.
    Ssh,
}

/// A `sync --checksum` pull's old copies hashed while the far end started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HashedAhead {
    /// Files hashed ahead.
    pub files: u64,
    /// Of them, files whose hashes the receiver took instead of reading them again.
    pub used_files: u64,
    /// Their bytes.
    pub used_bytes: u64,
}

impl RecordKind for HashedAhead {
    const TYPE: &'static str = "hashed_ahead";
}

/// An error that ended a transfer (or, with `source`, one of several).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunError {
    /// Which source failed, when one of several did (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// What failed, with its causes.
    pub error: String,
}

impl RecordKind for RunError {
    const TYPE: &'static str = "error";
}
