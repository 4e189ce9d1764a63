//! `--delete`: what the destination holds that the source lacks, sans-I/O (rsync's
//! `--delete`).
//!
//! Only directories the transfer sends are looked into ([`DeletePlan::sent_dir`]): an
//! entry found in one is an *extra* when the file list puts nothing of that name there,
//! it is not excluded by the transfer's rules ([`Filter`], matched as the source's path
//! would be, so an excluded file is never deleted), and it is not a work file of a file
//! of this transfer (`.NAME.longhaul-part` / `-manifest` of a listed `NAME`: a resumable
//! part stays). An extra directory is listed in turn: what it holds is deleted under the
//! same rules, and the directory itself only if nothing in it is kept (rsync keeps a
//! directory holding an excluded file: "cannot delete non-empty directory").
//!
//! The plan asks for listings ([`DeletePlan::next_listing`], answered with
//! [`DeletePlan::listed`]: names and kinds as `lstat` sees them, never following a
//! symlink) and then gives the removals ([`DeletePlan::removals`]), deepest first so each
//! directory is empty when its turn comes. A symlink is an entry like a file: the link is
//! removed, never what it points to. For a dry run (`-n`) the removals are the answer:
//! nothing needs to be removed to know them. [`dest_extras`] is the one-directory rule
//! as a pure function.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::filter::Filter;
use crate::path::{MAX_DEPTH, MAX_PATH_BYTES};

/// Most destination entries one plan looks at (the wire's file-id space): past it the
/// plan stops listing and says so.
pub const MAX_DEST_ENTRIES: usize = 1 << 24;

/// What a destination entry is, as `lstat` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DestKind {
    /// A regular file.
    File,
    /// A directory (not a symlink to one).
    Dir,
    /// A symlink (to anything, or nothing).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// One entry of a destination directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestEntry {
    /// Its name (one component).
    pub name: Vec<u8>,
    /// What it is.
    pub kind: DestKind,
}

/// A directory to list: `below` (empty: `sent` itself) inside `sent`, a directory the
/// transfer sends. The driver opens `sent` as the transfer's other files are opened, and
/// `below` without following any symlink.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DestListing {
    /// A directory the transfer sends, below the root.
    pub sent: PathBuf,
    /// An extra directory inside it (empty: `sent` itself).
    pub below: PathBuf,
}

impl DestListing {
    /// The directory's path below the root.
    pub fn path(&self) -> PathBuf {
        if self.below.as_os_str().is_empty() {
            return self.sent.clone();
        }
        self.sent.join(&self.below)
    }
}

/// One entry to remove: `below` inside the sent directory `sent` (never empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Removal {
    /// The directory the transfer sends that holds it, below the root.
    pub sent: PathBuf,
    /// Its path inside `sent`.
    pub below: PathBuf,
    /// What it is (a directory is removed with `rmdir` once emptied; anything else is
    /// unlinked).
    pub kind: DestKind,
}

impl Removal {
    /// Its path below the root.
    pub fn path(&self) -> PathBuf {
        self.sent.join(&self.below)
    }
}

/// The extras of one destination directory (see the module docs): the entries of `found`
/// not named in `listed`, not excluded by `filter` (`filter_rel`: the directory's path
/// below the top of the transfer, as [`Filter::excludes`] takes it), and not work files of
/// the names in `listed` (give them in `listed` too: [`crate::place::part_name`]).
pub fn dest_extras<'a>(
    filter: &Filter,
    filter_rel: &[u8],
    listed: &HashSet<Vec<u8>>,
    found: &'a [DestEntry],
) -> Vec<&'a DestEntry> {
    found
        .iter()
        .filter(|e| !listed.contains(&e.name))
        .filter(|e| !filter.excludes(&join(filter_rel, &e.name), e.kind == DestKind::Dir))
        .collect()
}

/// What one sent directory keeps.
#[derive(Debug, Default)]
struct Sent {
    /// The transfer sends it (else only names kept in it are known).
    sent: bool,
    /// Its path below the top of the transfer (for the rules).
    filter_rel: Vec<u8>,
    /// Names the list puts in it, and their work files.
    keep: HashSet<Vec<u8>>,
}

/// The deletions of one transfer, planned from listings; see the module docs.
#[derive(Debug)]
pub struct DeletePlan {
    filter: std::sync::Arc<Filter>,
    sent: BTreeMap<PathBuf, Sent>,
    queue: VecDeque<DestListing>,
    /// Listings asked for and not answered.
    waiting: HashSet<DestListing>,
    started: bool,
    /// Extras found: (sent dir, path below it) -> kind.
    extras: BTreeMap<(PathBuf, PathBuf), DestKind>,
    /// Extra directories that keep something (an excluded entry, one that could not be
    /// listed): not removed.
    kept: HashSet<(PathBuf, PathBuf)>,
    seen: usize,
    problems: Vec<String>,
}

impl DeletePlan {
    /// A plan protecting what `filter` excludes.
    pub fn new(filter: std::sync::Arc<Filter>) -> Self {
        Self {
            filter,
            sent: BTreeMap::new(),
            queue: VecDeque::new(),
            waiting: HashSet::new(),
            started: false,
            extras: BTreeMap::new(),
            kept: HashSet::new(),
            seen: 0,
            problems: Vec::new(),
        }
    }

    /// The transfer sends the directory `rel` (below the root), whose path below the top
    /// of the transfer is `filter_rel` (empty: the top itself).
    pub fn sent_dir(&mut self, rel: &Path, filter_rel: &[u8]) {
        let s = self.sent.entry(rel.to_path_buf()).or_default();
        s.sent = true;
        s.filter_rel = filter_rel.to_vec();
    }

    /// The list puts `name` into the directory `parent` (below the root); a name kept
    /// whether or not `parent` is a sent directory.
    pub fn keep(&mut self, parent: &Path, name: &[u8]) {
        self.sent
            .entry(parent.to_path_buf())
            .or_default()
            .keep
            .insert(name.to_vec());
    }

    /// The list is complete: every sent directory is to be listed.
    pub fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        // Names kept in directories the transfer does not send (a file's parent that is
        // the destination itself) ask for no listing.
        self.sent.retain(|_, s| s.sent);
        let sent: Vec<PathBuf> = self.sent.keys().cloned().collect();
        for rel in sent {
            self.ask(DestListing {
                sent: rel,
                below: PathBuf::new(),
            });
        }
    }

    /// The transfer sends no directory at all: nothing to list.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    fn ask(&mut self, l: DestListing) {
        self.waiting.insert(l.clone());
        self.queue.push_back(l);
    }

    /// The next directory to list, if any.
    pub fn next_listing(&mut self) -> Option<DestListing> {
        self.queue.pop_front()
    }

    /// Every listing asked for was answered: [`DeletePlan::removals`] is final.
    pub fn is_settled(&self) -> bool {
        self.started && self.waiting.is_empty()
    }

    /// The driver's answer to a listing: the entries (`lstat`), or why it failed.
    pub fn listed(&mut self, l: &DestListing, found: Result<Vec<DestEntry>, String>) {
        if !self.waiting.remove(l) {
            return;
        }
        let found = match found {
            Ok(f) => f,
            Err(why) => {
                self.problems.push(format!(
                    "{}: not looked into for --delete: {why}",
                    l.path().display()
                ));
                self.keep_up(&l.sent, &l.below);
                return;
            }
        };
        self.seen = self.seen.saturating_add(found.len());
        if self.seen > MAX_DEST_ENTRIES {
            self.problems.push(format!(
                "{}: more than {MAX_DEST_ENTRIES} entries at the destination; --delete \
                 stopped looking (delete the rest by hand, or sync subdirectories)",
                l.path().display()
            ));
            self.keep_up(&l.sent, &l.below);
            self.queue.clear();
            self.waiting.clear();
            return;
        }
        let Some(s) = self.sent.get(&l.sent) else {
            return;
        };
        let top = l.below.as_os_str().is_empty();
        let filter_rel = join_path(&s.filter_rel, &l.below);
        let keep_none = HashSet::new();
        let listed = if top { &s.keep } else { &keep_none };
        let (extras, excluded_here) = {
            let extras = dest_extras(&self.filter, &filter_rel, listed, &found);
            let names: HashSet<&[u8]> = extras.iter().map(|e| e.name.as_slice()).collect();
            let excluded = found
                .iter()
                .any(|e| !listed.contains(&e.name) && !names.contains(e.name.as_slice()));
            let extras: Vec<DestEntry> = extras.into_iter().cloned().collect();
            (extras, excluded)
        };
        if excluded_here && !top {
            self.keep_up(&l.sent, &l.below);
        }
        for e in extras {
            let below = l.below.join(OsStr::from_bytes(&e.name));
            if e.kind == DestKind::Dir {
                let full = l.sent.join(&below);
                let deep = full.components().count() >= MAX_DEPTH
                    || full.as_os_str().len() + 1 + 255 > MAX_PATH_BYTES;
                if deep {
                    self.problems.push(format!(
                        "{}: too deep to look into for --delete; left in place",
                        full.display()
                    ));
                    self.keep_up(&l.sent, &below);
                } else {
                    self.ask(DestListing {
                        sent: l.sent.clone(),
                        below: below.clone(),
                    });
                }
            }
            self.extras.insert((l.sent.clone(), below), e.kind);
        }
    }

    /// Marks the extra directory `below` (and every extra directory above it) as keeping
    /// something.
    fn keep_up(&mut self, sent: &Path, below: &Path) {
        let mut at = Some(below);
        while let Some(p) = at.filter(|p| !p.as_os_str().is_empty()) {
            self.kept.insert((sent.to_path_buf(), p.to_path_buf()));
            at = p.parent();
        }
    }

    /// What to remove, deepest first (a directory after everything in it); directories
    /// that keep something are left out.
    pub fn removals(&self) -> Vec<Removal> {
        let mut out: Vec<Removal> = self
            .extras
            .iter()
            .filter(|(key, kind)| **kind != DestKind::Dir || !self.kept.contains(key))
            .map(|((sent, below), kind)| Removal {
                sent: sent.clone(),
                below: below.clone(),
                kind: *kind,
            })
            .collect();
        out.sort_by(|a, b| {
            let depth = |r: &Removal| r.path().components().count();
            depth(b).cmp(&depth(a)).then_with(|| a.cmp(b))
        });
        out
    }

    /// What went wrong while planning (directories that could not be listed), for the
    /// user; those directories are left in place.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

/// `a/b` of byte paths (`b` alone when `a` is empty).
fn join(a: &[u8], b: &[u8]) -> Vec<u8> {
    if a.is_empty() {
        return b.to_vec();
    }
    let mut out = Vec::with_capacity(a.len() + 1 + b.len());
    out.extend_from_slice(a);
    out.push(b'/');
    out.extend_from_slice(b);
    out
}

fn join_path(a: &[u8], below: &Path) -> Vec<u8> {
    if below.as_os_str().is_empty() {
        return a.to_vec();
    }
    join(a, below.as_os_str().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn e(name: &str, kind: DestKind) -> DestEntry {
        DestEntry {
            name: name.as_bytes().to_vec(),
            kind,
        }
    }

    fn plan(rules: &[(bool, &str)]) -> DeletePlan {
        let f = Filter::new(rules.iter().map(|&(i, p)| (i, p.as_bytes()))).unwrap();
        DeletePlan::new(Arc::new(f))
    }

    fn shown(r: &[Removal]) -> Vec<String> {
        r.iter().map(|r| r.path().display().to_string()).collect()
    }

    #[test]
    fn extras_are_what_the_list_lacks_and_the_rules_allow() {
        let f = Filter::new([(false, b"*.keep".as_slice())]).unwrap();
        let listed: HashSet<Vec<u8>> = [b"a".to_vec()].into_iter().collect();
        let found = [
            e("a", DestKind::File),
            e("b", DestKind::File),
            e("c.keep", DestKind::File),
            e("l", DestKind::Symlink),
        ];
        let x: Vec<&[u8]> = dest_extras(&f, b"", &listed, &found)
            .iter()
            .map(|e| e.name.as_slice())
            .collect();
        assert_eq!(x, [b"b".as_slice(), b"l"]);
    }

    #[test]
    fn a_tree_of_extras_goes_deepest_first_and_keeps_excluded_files() {
        let mut p = plan(&[(false, "*.keep")]);
        p.sent_dir(Path::new("top"), b"");
        p.keep(Path::new("top"), b"f");
        p.keep(Path::new("top"), b".f.longhaul-part");
        p.start();
        let l = p.next_listing().unwrap();
        assert_eq!(l.path(), Path::new("top"));
        p.listed(
            &l,
            Ok(vec![
                e("f", DestKind::File),
                e(".f.longhaul-part", DestKind::File),
                e(".g.longhaul-part", DestKind::File),
                e("gone", DestKind::File),
                e("old", DestKind::Dir),
                e("mixed", DestKind::Dir),
                e("link", DestKind::Symlink),
                e("x.keep", DestKind::File),
            ]),
        );
        assert!(!p.is_settled());
        let mut asked = vec![];
        while let Some(l) = p.next_listing() {
            asked.push(l);
        }
        assert_eq!(asked.len(), 2);
        for l in asked {
            let found = if l.below == Path::new("old") {
                vec![e("deep", DestKind::Dir)]
            } else {
                vec![e("a", DestKind::File), e("b.keep", DestKind::File)]
            };
            p.listed(&l, Ok(found));
        }
        let l = p.next_listing().unwrap();
        assert_eq!(l.path(), Path::new("top/old/deep"));
        p.listed(&l, Ok(vec![e("z", DestKind::File)]));
        assert!(p.is_settled());
        assert_eq!(
            shown(&p.removals()),
            [
                "top/old/deep/z",
                "top/mixed/a",
                "top/old/deep",
                "top/.g.longhaul-part",
                "top/gone",
                "top/link",
                "top/old"
            ]
        );
    }

    #[test]
    fn an_unlistable_directory_is_left_with_its_parents() {
        let mut p = plan(&[]);
        p.sent_dir(Path::new("t"), b"");
        p.start();
        let l = p.next_listing().unwrap();
        p.listed(&l, Ok(vec![e("a", DestKind::Dir)]));
        let l = p.next_listing().unwrap();
        p.listed(&l, Ok(vec![e("b", DestKind::Dir), e("f", DestKind::File)]));
        let l = p.next_listing().unwrap();
        p.listed(&l, Err("Permission denied".into()));
        assert!(p.is_settled());
        assert_eq!(shown(&p.removals()), ["t/a/f"]);
        assert_eq!(p.problems().len(), 1);
    }

    #[test]
    fn rules_see_paths_below_the_top() {
        // The sent directory `dst/src/sub` is `sub` below the top: `/sub/x` protects.
        let mut p = plan(&[(false, "/sub/x"), (false, "/y")]);
        p.sent_dir(Path::new("dst/src/sub"), b"sub");
        p.start();
        let l = p.next_listing().unwrap();
        p.listed(
            &l,
            Ok(vec![
                e("x", DestKind::File),
                e("y", DestKind::File),
                e("z", DestKind::File),
            ]),
        );
        assert_eq!(shown(&p.removals()), ["dst/src/sub/y", "dst/src/sub/z"]);
    }

    #[test]
    fn a_destination_without_sent_directories_lists_nothing() {
        let mut p = plan(&[]);
        p.keep(Path::new(""), b"file");
        p.start();
        assert!(p.is_empty());
        assert!(p.next_listing().is_none());
        assert!(p.is_settled());
    }
}
