//! The I/O of `longhaul tune --apply`/`--revert`: where the drop-in and state files live
//! (flag, else `LONGHAUL_TUNE_DROPIN`/`LONGHAUL_TUNE_STATE`, else the defaults), reading
//! and writing them, reading and writing sysctls in this network namespace. What to change,
//! what to save and what to restore is decided by `longhaul_tune` ([`ApplyPlan`],
//! [`PreviousState`]); each step is reported to the caller as a [`TuneEvent`] as it happens,
//! so a failure half-way still shows what was done.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use longhaul_sys::sysctl;
use longhaul_tune::{
    apply_commands, changes_of, ApplyPlan, DropinRestore, Finding, HostFacts, PreviousState,
    Target, TuneError, DEFAULT_DROPIN_PATH, DEFAULT_STATE_PATH, REVERT_SKIP_REASON,
};

/// Environment variable that moves the drop-in file (below `--dropin`).
pub const DROPIN_ENV: &str = "LONGHAUL_TUNE_DROPIN";
/// Environment variable that moves the state file (below `--state`).
pub const STATE_ENV: &str = "LONGHAUL_TUNE_STATE";

/// Largest drop-in or state file read back, in bytes.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Everything that can go wrong applying or reverting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneApplyError {
    /// `--revert` found no state file.
    #[error(
        "nothing to revert: no saved values at {} (only a `longhaul tune --apply` saves them)",
        .0.display()
    )]
    NothingToRevert(PathBuf),
    /// The transaction refused the saved state (e.g. of another network namespace).
    #[error(transparent)]
    Tune(#[from] TuneError),
    /// The saved state is not valid.
    #[error("reading {}", path.display())]
    BadState {
        /// The state file.
        path: PathBuf,
        /// Why it is not valid.
        #[source]
        source: TuneError,
    },
    /// A drop-in or state file is too large to be one of longhaul's.
    #[error("{} is larger than 1 MiB; not a longhaul file", .0.display())]
    TooLarge(PathBuf),
    /// A file or directory operation failed.
    #[error("{action} {}", path.display())]
    File {
        /// `reading`, `writing`, `creating`, `removing`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// This network namespace could not be identified.
    #[error("reading /proc/self/ns/net")]
    Namespace(#[source] io::Error),
    /// Writing a sysctl failed.
    #[error("{action} {name} = {value}")]
    Sysctl {
        /// `applying` or `restoring`.
        action: &'static str,
        /// Sysctl name.
        name: String,
        /// Value written.
        value: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Checking whether a sysctl is writable failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Where `--apply` writes the drop-in file and saves the values it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunePaths {
    /// The sysctl drop-in file.
    pub dropin: PathBuf,
    /// The saved previous state.
    pub state: PathBuf,
}

impl TunePaths {
    /// The paths from the flags, else the environment ([`DROPIN_ENV`], [`STATE_ENV`]; an
    /// empty value counts as unset), else [`DEFAULT_DROPIN_PATH`] and [`DEFAULT_STATE_PATH`].
    pub fn resolve(dropin: Option<PathBuf>, state: Option<PathBuf>) -> TunePaths {
        TunePaths {
            dropin: path_from(dropin, DROPIN_ENV, DEFAULT_DROPIN_PATH),
            state: path_from(state, STATE_ENV, DEFAULT_STATE_PATH),
        }
    }
}

fn path_from(flag: Option<PathBuf>, env: &str, default: &str) -> PathBuf {
    flag.or_else(|| {
        std::env::var_os(env)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .unwrap_or_else(|| PathBuf::from(default))
}

/// One step of the transaction, reported as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TuneEvent<'a> {
    /// A sysctl left alone, and why.
    Skipped {
        /// Sysctl name.
        key: &'a str,
        /// Why.
        reason: &'a str,
    },
    /// The drop-in file was written.
    WroteDropin(&'a Path),
    /// `--apply` wrote a sysctl.
    Applied {
        /// Sysctl name.
        key: &'a str,
        /// Its value before.
        previous: &'a str,
        /// Its value now.
        value: &'a str,
    },
    /// The state file holds the values `--revert` restores.
    SavedState(&'a Path),
    /// `--revert` wrote a sysctl back.
    Reverted {
        /// Sysctl name.
        key: &'a str,
        /// Its value now.
        value: &'a str,
    },
    /// `--revert` put the drop-in file's previous content back.
    RestoredDropin(&'a Path),
    /// `--revert` removed the drop-in file (it did not exist before `--apply`).
    RemovedDropin(&'a Path),
}

/// How `--apply` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Every sysctl longhaul checks is already right; nothing was touched.
    NothingToApply,
    /// Not root: nothing was changed; these shell commands would do it as root.
    NotRoot {
        /// Commands writing the drop-in file and loading it.
        commands: String,
    },
    /// The drop-in file was written and `applied` sysctls were set.
    Applied {
        /// Number of sysctls written.
        applied: usize,
    },
}

/// How `--revert` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevertOutcome {
    /// Not root: nothing was changed; these shell commands would do it as root.
    NotRoot {
        /// Commands restoring each value, the drop-in file and removing the state.
        commands: String,
    },
    /// The saved values (this many) and the drop-in file were restored, the state removed.
    Reverted {
        /// Number of values in the state.
        values: usize,
    },
}

/// Whether this process may change sysctls (effective uid 0).
pub fn running_as_root() -> bool {
    sysctl::running_as_root()
}

/// This network namespace's identity, e.g. `net:[4026531833]`.
pub fn network_namespace() -> Result<String, TuneApplyError> {
    sysctl::network_namespace_id().map_err(TuneApplyError::Namespace)
}

/// `--apply`: writes the drop-in file and the sysctls the `findings` ask for in this network
/// namespace, after saving the values they replace (unless an earlier `--apply` saved the
/// originals). Returns without touching anything when there is nothing to change or when
/// not root.
pub fn apply(
    target: &Target,
    facts: &HostFacts,
    findings: &[Finding],
    paths: &TunePaths,
    mut on: impl FnMut(TuneEvent<'_>),
) -> Result<ApplyOutcome, TuneApplyError> {
    let changes = changes_of(findings);
    if changes.is_empty() {
        return Ok(ApplyOutcome::NothingToApply);
    }
    if !running_as_root() {
        let text = longhaul_tune::render_dropin(&changes, target);
        return Ok(ApplyOutcome::NotRoot {
            commands: apply_commands(&paths.dropin, &text),
        });
    }
    let netns = network_namespace()?;
    let saved = read_state(&paths.state)?;
    let dropin_previous = match saved {
        Some(_) => None,
        None => read_optional(&paths.dropin)?,
    };
    let state = PreviousState::for_apply(saved, &netns, &paths.state, || {
        PreviousState::fresh(&netns, &paths.dropin, dropin_previous)
    })?;
    let mut writable = std::collections::BTreeMap::new();
    for change in &changes {
        writable.insert(change.name.clone(), sysctl::is_writable(&change.name)?);
    }
    let plan = ApplyPlan::new(target, facts, &changes, state, |name| {
        writable.get(name).copied().unwrap_or(false)
    });
    for skip in &plan.skips {
        on(TuneEvent::Skipped {
            key: &skip.name,
            reason: &skip.reason,
        });
    }
    // Save what will be replaced before replacing anything, so a failure half-way can be
    // reverted.
    write_creating_dirs(&paths.state, &plan.state.to_json())?;
    write_creating_dirs(&paths.dropin, &plan.dropin_text)?;
    on(TuneEvent::WroteDropin(&paths.dropin));
    for write in &plan.writes {
        sysctl::write(&write.name, &write.value).map_err(|source| TuneApplyError::Sysctl {
            action: "applying",
            name: write.name.clone(),
            value: write.value.clone(),
            source,
        })?;
        on(TuneEvent::Applied {
            key: &write.name,
            previous: &write.previous,
            value: &write.value,
        });
    }
    on(TuneEvent::SavedState(&paths.state));
    Ok(ApplyOutcome::Applied {
        applied: plan.writes.len(),
    })
}

/// `--revert`: writes back every value the state file at `paths.state` saved, restores or
/// removes the drop-in file it names, then removes the state file. Not root: changes
/// nothing and returns the commands that would.
pub fn revert(
    paths: &TunePaths,
    mut on: impl FnMut(TuneEvent<'_>),
) -> Result<RevertOutcome, TuneApplyError> {
    let Some(state) = read_state(&paths.state)? else {
        return Err(TuneApplyError::NothingToRevert(paths.state.clone()));
    };
    if !running_as_root() {
        return Ok(RevertOutcome::NotRoot {
            commands: state.revert_commands(&paths.state),
        });
    }
    let netns = network_namespace()?;
    state.check_revert_namespace(&netns, &paths.state)?;
    for (name, value) in state.restores() {
        if sysctl::is_writable(name)? {
            sysctl::write(name, value).map_err(|source| TuneApplyError::Sysctl {
                action: "restoring",
                name: name.to_string(),
                value: value.to_string(),
                source,
            })?;
            on(TuneEvent::Reverted { key: name, value });
        } else {
            on(TuneEvent::Skipped {
                key: name,
                reason: REVERT_SKIP_REASON,
            });
        }
    }
    let dropin = Path::new(&state.dropin_path);
    match state.dropin_restore() {
        DropinRestore::Rewrite(text) => {
            write_creating_dirs(dropin, text)?;
            on(TuneEvent::RestoredDropin(dropin));
        }
        DropinRestore::Remove => match fs::remove_file(dropin) {
            Ok(()) => on(TuneEvent::RemovedDropin(dropin)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(file_error("removing", dropin, source)),
        },
    }
    fs::remove_file(&paths.state).map_err(|source| file_error("removing", &paths.state, source))?;
    Ok(RevertOutcome::Reverted {
        values: state.values.len(),
    })
}

fn file_error(action: &'static str, path: &Path, source: io::Error) -> TuneApplyError {
    TuneApplyError::File {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// A file's text, `None` if it does not exist; refuses files above [`MAX_FILE_BYTES`].
fn read_optional(path: &Path) -> Result<Option<String>, TuneApplyError> {
    match fs::metadata(path) {
        Ok(meta) if meta.len() > MAX_FILE_BYTES => Err(TuneApplyError::TooLarge(path.into())),
        Ok(_) => fs::read_to_string(path)
            .map(Some)
            .map_err(|source| file_error("reading", path, source)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(file_error("reading", path, source)),
    }
}

/// The saved state, `None` if there is none.
fn read_state(path: &Path) -> Result<Option<PreviousState>, TuneApplyError> {
    let Some(text) = read_optional(path)? else {
        return Ok(None);
    };
    PreviousState::from_json(&text)
        .map(Some)
        .map_err(|source| TuneApplyError::BadState {
            path: path.into(),
            source,
        })
}

/// Writes `text` to `path` (creating its directory), beside and renamed, so a crash never
/// leaves half a file.
fn write_creating_dirs(path: &Path, text: &str) -> Result<(), TuneApplyError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|source| file_error("creating", dir, source))?;
    }
    let tmp = path.with_extension("tmp-longhaul");
    fs::write(&tmp, text).map_err(|source| file_error("writing", &tmp, source))?;
    fs::rename(&tmp, path).map_err(|source| file_error("writing", path, source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_the_environment_which_beats_the_defaults() {
        let paths = TunePaths::resolve(Some("/a".into()), Some("/b".into()));
        assert_eq!(paths.dropin, PathBuf::from("/a"));
        assert_eq!(paths.state, PathBuf::from("/b"));
        assert_eq!(
            path_from(None, "LONGHAUL_TEST_UNSET_VARIABLE", DEFAULT_DROPIN_PATH),
            PathBuf::from(DEFAULT_DROPIN_PATH)
        );
    }

    #[test]
    fn files_are_written_whole_and_read_back_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/state.json");
        assert_eq!(read_optional(&path).unwrap(), None);
        write_creating_dirs(&path, "{}\n").unwrap();
        assert_eq!(read_optional(&path).unwrap().as_deref(), Some("{}\n"));
        assert!(!path.with_extension("tmp-longhaul").exists());
        let err = read_state(&path).unwrap_err();
        assert!(
            err.to_string().starts_with("reading ") && std::error::Error::source(&err).is_some(),
            "{err}"
        );
        let big = dir.path().join("big");
        fs::write(&big, vec![b'x'; MAX_FILE_BYTES as usize + 1]).unwrap();
        assert!(matches!(
            read_optional(&big),
            Err(TuneApplyError::TooLarge(_))
        ));
    }

    #[test]
    fn nothing_saved_means_nothing_to_revert() {
        let dir = tempfile::tempdir().unwrap();
        let paths = TunePaths::resolve(
            Some(dir.path().join("d.conf")),
            Some(dir.path().join("s.json")),
        );
        let err = revert(&paths, |_| {}).unwrap_err();
        assert!(err.to_string().starts_with("nothing to revert"), "{err}");
    }
}
