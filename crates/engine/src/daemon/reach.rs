//! Where a client's path lands in the files a server serves: its root (or area) and the
//! path below it, confined as that root confines; an area's read-only flag, caps and
//! local user applied. One rule for a push's destination, a pull's source, a ticket's
//! path and a relayed pull's destination.

use std::sync::Arc;

use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::location::user_path;
use longhaul_transfer::session::ListCaps;
use longhaul_transfer::{RequestedPath, SafeRelPath};

use super::transfer::ServedFiles;

/// A client's path, landed.
pub struct Landed<'a> {
    /// The root the path is below.
    pub root: &'a Arc<ServedRoot>,
    /// The path below it (`None`: the root itself).
    pub path: Option<SafeRelPath>,
    /// It ended in `/`: it must be a directory.
    pub dir_required: bool,
    /// What one push may write there.
    pub caps: ListCaps,
    /// The exported area, if the files are areas.
    pub area: Option<&'a str>,
}

/// Lands `wire` (a request's path) in `files` for a client that proved `token`; `write`
/// when the client will write there (a read-only area refuses). With an area's `user`,
/// this thread (and the threads it starts) becomes that user first. `caps` are the
/// server's, for files that are not an area's. The error is the words to refuse with.
pub fn land<'a>(
    files: &'a ServedFiles,
    token: usize,
    wire: &[u8],
    write: bool,
    caps: ListCaps,
) -> Result<Landed<'a>, String> {
    match files {
        ServedFiles::Nothing => {
            Err("this server serves no files; start it with `longhaul serve --root DIR`".into())
        }
        ServedFiles::Root(root) => match RequestedPath::from_wire(wire) {
            Ok(r) => Ok(Landed {
                root,
                path: r.path,
                dir_required: r.dir_required,
                caps,
                area: None,
            }),
            Err(e) => Err(format!("refused path: {e}")),
        },
        ServedFiles::Areas(areas) => {
            let r = areas.reach(token, wire)?;
            if write && r.area.read_only {
                return Err(format!(
                    "area {} is read-only: pull from it, or push to an area you may write",
                    r.area.name
                ));
            }
            if let Some(who) = &r.area.user {
                // Before any file of the area is touched; this thread and the ones it
                // starts stay that user until the session ends.
                longhaul_sys::creds::become_user(who).map_err(|e| format!("on the server, {e}"))?;
            }
            Ok(Landed {
                root: &r.area.root,
                path: r.path,
                dir_required: r.dir_required,
                caps: r.area.caps,
                area: Some(r.area.name.as_str()),
            })
        }
        ServedFiles::User { root, home } => match user_path(home, wire) {
            Ok(path) => Ok(Landed {
                root,
                path,
                dir_required: wire.len() > 1 && wire.ends_with(b"/"),
                caps,
                area: None,
            }),
            Err(e) => Err(format!("refused path: {e}")),
        },
    }
}
