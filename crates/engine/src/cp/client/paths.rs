//! The copy's paths as this end checks them: the remote path refused as typed, the base
//! name a pull's entries must start with, and a pull's local destination opened as the
//! receiving root.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;

use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::{parse_peer_path, RequestedPath};

use super::{CpConfig, CpError};
use crate::cp::recv::RecvTarget;

/// The receiving root and target for a local destination: an existing directory is the
/// root itself; anything else is a name in its parent directory.
pub(super) fn local_target(
    dest: &std::path::Path,
    no_clobber: bool,
    checksum_only: bool,
    sync: bool,
) -> Result<RecvTarget, CpError> {
    let (root, target) = if dest.is_dir() {
        (dest.to_path_buf(), None)
    } else {
        let name = dest
            .file_name()
            .ok_or_else(|| CpError::DestinationNotAName {
                path: dest.to_path_buf(),
            })?;
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let t = parse_peer_path(name.as_bytes()).map_err(|cause| CpError::DestinationName {
            path: dest.to_path_buf(),
            cause,
        })?;
        (parent, Some(t))
    };
    let root = ServedRoot::open(&root).map_err(|cause| CpError::Destination {
        what: "opening the destination directory",
        path: root.clone(),
        cause,
    })?;
    Ok(RecvTarget {
        root: Arc::new(root),
        target,
        no_clobber,
        checksum_only,
        sync,
        expect: None,
        keep_setuid: false,
        caps: Default::default(),
        delta: None,
        delete: None,
        answered_ahead: false,
        share: None,
        is_dir: None,
        hashed_ahead: None,
        answer_keepalive: false,
    })
}

/// The base name every entry of a pull of `remote_path` starts with (`None`: the served
/// root was asked for, whose name only the server knows).
pub(super) fn requested_top(remote_path: &[u8]) -> Result<Option<Vec<u8>>, CpError> {
    let requested = RequestedPath::from_typed(remote_path).map_err(|e| {
        CpError::Protocol(format!(
            "the remote path {}: {e}",
            String::from_utf8_lossy(remote_path)
        ))
    })?;
    Ok(requested.path.map(|p| p.file_name().to_vec()))
}

/// The remote path as typed is refused (before anything is sent).
pub(super) fn remote_refused(cfg: &CpConfig, e: longhaul_transfer::Error) -> CpError {
    CpError::Protocol(format!(
        "the remote path {}: {e}",
        String::from_utf8_lossy(&cfg.remote_path)
    ))
}
