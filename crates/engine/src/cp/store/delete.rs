//! `--delete` on disk: the entries of a destination directory as `lstat` sees them, the
//! removal of one extra, and a dry run's list of what would be removed.

use std::io;

use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::{DeletePlan, DestEntry, DestKind, DestListing, Removal};

/// `--delete`: the entries of a destination directory as `lstat` sees them (see
/// [`ServedRoot::read_dir_below`]: nothing below the sent directory is followed).
pub fn list_dest(root: &ServedRoot, listing: &DestListing) -> Result<Vec<DestEntry>, String> {
    use std::os::unix::ffi::OsStringExt;
    let entries = root
        .read_dir_below(
            &listing.sent,
            &listing.below,
            longhaul_transfer::delete::MAX_DEST_ENTRIES,
        )
        .map_err(|e| e.to_string())?;
    Ok(entries
        .into_iter()
        .map(|e| {
            let ft = e.metadata.file_type();
            let kind = if ft.is_dir() {
                DestKind::Dir
            } else if ft.is_symlink() {
                DestKind::Symlink
            } else if ft.is_file() {
                DestKind::File
            } else {
                DestKind::Other
            };
            DestEntry {
                name: e.name.into_vec(),
                kind,
            }
        })
        .collect())
}

/// `--delete`: removes one extra (a directory only if empty; a symlink as a link).
pub fn remove_extra(root: &ServedRoot, r: &Removal) -> Result<(), String> {
    match root.remove_below(&r.sent, &r.below, r.kind == DestKind::Dir) {
        // Gone already: what was asked.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other.map_err(|e| e.to_string()),
    }
}

/// `--delete -n` (a dry run): drives `plan`'s listings through the root and returns what
/// would be removed, deepest first, removing nothing.
pub fn plan_deletions(root: &ServedRoot, plan: &mut DeletePlan) -> Vec<Removal> {
    plan.start();
    while let Some(l) = plan.next_listing() {
        let found = list_dest(root, &l);
        plan.listed(&l, found);
    }
    plan.removals()
}
