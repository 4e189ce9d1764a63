//! A served root with each resolver this kernel has: the tests of what is done below a
//! root run once with the component walk and once more with `openat2` where it exists.

use std::path::Path;

use longhaul_sys::served_root::ServedRoot;

/// The directory `root` opened as a served root with each resolver this kernel has (the
/// no-symlinks walk always, `openat2` where available); says SKIP for the one it lacks.
pub fn each_resolver(root: &Path) -> Vec<ServedRoot> {
    let each = ServedRoot::open_each(root)
        .unwrap_or_else(|e| panic!("served root {}: {e}", root.display()));
    if each.len() < 2 {
        eprintln!("SKIP openat2 resolver: openat2 not available on this kernel");
    }
    each
}
