//! The `longhaul tune --apply`/`--revert` transaction, with no I/O: which sysctls `--apply`
//! writes and which it must skip (global ones, read-only in a child network namespace), the
//! state it saves before writing anything, the commands a user who is not root can run
//! instead, and what `--revert` puts back (each saved value, then the drop-in file's previous
//! state). A driver (`longhaul_engine::tune_apply`) reads the host, asks this module what to
//! do and does it.

use std::path::Path;

use crate::dropin::{render_dropin, PreviousState};
use crate::facts::HostFacts;
use crate::findings::{Finding, SysctlChange, Target};
use crate::TuneError;

/// What `--apply` prints as the previous value of a sysctl the host did not show.
pub const ABSENT_VALUE: &str = "absent";

/// Why `--revert` leaves a saved value alone.
pub const REVERT_SKIP_REASON: &str = "not writable in this network namespace";

/// The sysctl changes the findings ask for, in the order of the findings.
pub fn changes_of(findings: &[Finding]) -> Vec<SysctlChange> {
    findings.iter().filter_map(|f| f.change.clone()).collect()
}

/// One sysctl `--apply` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlWrite {
    /// Sysctl name.
    pub name: String,
    /// Value to write.
    pub value: String,
    /// Its value before the write, as the host showed it ([`ABSENT_VALUE`] if it did not).
    pub previous: String,
}

/// A sysctl `--apply` leaves alone, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlSkip {
    /// Sysctl name.
    pub name: String,
    /// Why it is not written here and how to change it anyway.
    pub reason: String,
}

/// Everything `--apply` does, decided before anything is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyPlan {
    /// The state to save first, so a failure half-way can be reverted.
    pub state: PreviousState,
    /// The drop-in file's new content.
    pub dropin_text: String,
    /// Sysctls to write, in this order.
    pub writes: Vec<SysctlWrite>,
    /// Sysctls not writable in this network namespace.
    pub skips: Vec<SysctlSkip>,
}

impl ApplyPlan {
    /// The plan for `changes` (non-empty: see [`changes_of`]) on a host with `facts`, given
    /// the `state` to extend (see [`PreviousState::for_apply`]) and which sysctls are
    /// writable here. A writable sysctl's current value is remembered in the state unless an
    /// earlier `--apply` already remembered the original.
    pub fn new(
        target: &Target,
        facts: &HostFacts,
        changes: &[SysctlChange],
        mut state: PreviousState,
        writable: impl Fn(&str) -> bool,
    ) -> ApplyPlan {
        let mut writes = Vec::new();
        let mut skips = Vec::new();
        for change in changes {
            if writable(&change.name) {
                if let Some(current) = facts.get(&change.name) {
                    state.remember(&change.name, current);
                }
                writes.push(SysctlWrite {
                    name: change.name.clone(),
                    value: change.value.clone(),
                    previous: facts.get(&change.name).unwrap_or(ABSENT_VALUE).to_string(),
                });
            } else {
                skips.push(SysctlSkip {
                    name: change.name.clone(),
                    reason: format!(
                        "global, read-only in this network namespace: it takes effect at boot \
                         from the drop-in, or run `sysctl -w {}=\"{}\"` in the host namespace",
                        change.name, change.value
                    ),
                });
            }
        }
        ApplyPlan {
            state,
            dropin_text: render_dropin(changes, target),
            writes,
            skips,
        }
    }
}

/// The shell commands that do what `--apply` would, for a user who is not root.
pub fn apply_commands(dropin_path: &Path, dropin_text: &str) -> String {
    format!(
        "tee {dropin} <<'EOF'\n{dropin_text}EOF\nsysctl -p {dropin}\n",
        dropin = dropin_path.display()
    )
}

/// What `--revert` does with the drop-in file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropinRestore<'a> {
    /// Write back the content it had before the first `--apply`.
    Rewrite(&'a str),
    /// Remove it: it did not exist before the first `--apply`.
    Remove,
}

impl PreviousState {
    /// The state a first `--apply` starts from: nothing remembered yet, the drop-in file at
    /// `dropin_path` with its current content (`None` if it does not exist).
    pub fn fresh(
        netns: &str,
        dropin_path: &Path,
        dropin_previous: Option<String>,
    ) -> PreviousState {
        PreviousState {
            netns: netns.to_string(),
            dropin_path: dropin_path.display().to_string(),
            dropin_previous,
            values: Default::default(),
        }
    }

    /// The state `--apply` extends: the one `saved` at `state_path` by an earlier `--apply`
    /// (which must be of this network namespace, `netns`), else [`PreviousState::fresh`]
    /// with what `fresh` returns (called only when nothing was saved).
    pub fn for_apply(
        saved: Option<PreviousState>,
        netns: &str,
        state_path: &Path,
        fresh: impl FnOnce() -> PreviousState,
    ) -> Result<PreviousState, TuneError> {
        match saved {
            Some(saved) if saved.netns != netns => Err(TuneError::ApplyInOtherNamespace {
                state_path: state_path.display().to_string(),
                saved: saved.netns,
                here: netns.to_string(),
            }),
            Some(saved) => Ok(saved),
            None => Ok(fresh()),
        }
    }

    /// Checks that `--revert` runs in the network namespace the values were saved in.
    pub fn check_revert_namespace(&self, netns: &str, state_path: &Path) -> Result<(), TuneError> {
        if self.netns == netns {
            return Ok(());
        }
        Err(TuneError::RevertInOtherNamespace {
            state_path: state_path.display().to_string(),
            saved: self.netns.clone(),
            here: netns.to_string(),
        })
    }

    /// The sysctl values `--revert` writes back, by name.
    pub fn restores(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// What `--revert` does with the drop-in file at [`PreviousState::dropin_path`].
    pub fn dropin_restore(&self) -> DropinRestore<'_> {
        match &self.dropin_previous {
            Some(text) => DropinRestore::Rewrite(text),
            None => DropinRestore::Remove,
        }
    }

    /// The shell commands that do what `--revert` would, for a user who is not root; the
    /// state itself was read from `state_path`.
    pub fn revert_commands(&self, state_path: &Path) -> String {
        let mut commands = String::new();
        for (name, value) in self.restores() {
            commands.push_str(&format!("sysctl -w {name}=\"{value}\"\n"));
        }
        match self.dropin_restore() {
            DropinRestore::Rewrite(_) => commands.push_str(&format!(
                "# and restore {} as it was (saved in {})\n",
                self.dropin_path,
                state_path.display()
            )),
            DropinRestore::Remove => commands.push_str(&format!("rm {}\n", self.dropin_path)),
        }
        commands.push_str(&format!("rm {}\n", state_path.display()));
        commands
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::inspect;
    use std::time::Duration;

    fn target() -> Target {
        Target {
            rate_bps: 1_000_000_000,
            rtt: Duration::from_millis(180),
        }
    }

    fn change(name: &str, value: &str) -> SysctlChange {
        SysctlChange {
            name: name.into(),
            value: value.into(),
        }
    }

    fn facts(values: &[(&str, &str)]) -> HostFacts {
        HostFacts {
            sysctls: values
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            page_size_bytes: 4096,
            ..HostFacts::default()
        }
    }

    #[test]
    fn changes_are_the_findings_fixes_in_order() {
        let host = facts(&[
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
        ]);
        let findings = inspect(&host, &target());
        let changes = changes_of(&findings);
        let expected: Vec<SysctlChange> =
            findings.iter().filter_map(|f| f.change.clone()).collect();
        assert_eq!(changes, expected);
        assert!(changes.iter().any(|c| c.name == "net.ipv4.tcp_rmem"));
        assert!(changes_of(&[]).is_empty());
    }

    #[test]
    fn plan_writes_the_writable_skips_the_rest_and_remembers_only_what_it_writes() {
        let host = facts(&[
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ("net.core.rmem_max", "212992"),
        ]);
        let changes = vec![
            change("net.core.rmem_max", "45000000"),
            change("net.ipv4.tcp_rmem", "4096 131072 45000000"),
            change("net.ipv4.tcp_mtu_probing", "1"),
        ];
        let state = PreviousState::fresh("net:[1]", Path::new("/tmp/d.conf"), None);
        let plan = ApplyPlan::new(&target(), &host, &changes, state, |name| {
            name.starts_with("net.ipv4.")
        });
        assert_eq!(
            plan.writes,
            vec![
                SysctlWrite {
                    name: "net.ipv4.tcp_rmem".into(),
                    value: "4096 131072 45000000".into(),
                    previous: "4096 131072 6291456".into(),
                },
                SysctlWrite {
                    name: "net.ipv4.tcp_mtu_probing".into(),
                    value: "1".into(),
                    previous: ABSENT_VALUE.into(),
                },
            ]
        );
        assert_eq!(plan.skips.len(), 1);
        assert_eq!(plan.skips[0].name, "net.core.rmem_max");
        assert!(plan.skips[0]
            .reason
            .contains("sysctl -w net.core.rmem_max=\"45000000\""));
        // Only the written sysctl that had a value is remembered.
        assert_eq!(
            plan.state.values.keys().collect::<Vec<_>>(),
            vec!["net.ipv4.tcp_rmem"]
        );
        assert_eq!(plan.dropin_text, render_dropin(&changes, &target()));
    }

    #[test]
    fn a_second_apply_keeps_the_original_values() {
        let mut saved = PreviousState::fresh("net:[1]", Path::new("/tmp/d.conf"), None);
        saved.remember("net.ipv4.tcp_rmem", "4096 131072 6291456");
        let state =
            PreviousState::for_apply(Some(saved.clone()), "net:[1]", Path::new("/s.json"), || {
                unreachable!("a saved state is extended, not replaced")
            })
            .unwrap();
        let host = facts(&[("net.ipv4.tcp_rmem", "4096 131072 45000000")]);
        let changes = [change("net.ipv4.tcp_rmem", "4096 131072 90000000")];
        let plan = ApplyPlan::new(&target(), &host, &changes, state, |_| true);
        assert_eq!(plan.state, saved);
        assert_eq!(plan.writes[0].previous, "4096 131072 45000000");
    }

    #[test]
    fn a_state_of_another_namespace_is_refused_both_ways() {
        let saved = PreviousState::fresh("net:[1]", Path::new("/tmp/d.conf"), None);
        let err = PreviousState::for_apply(
            Some(saved.clone()),
            "net:[2]",
            Path::new("/s.json"),
            PreviousState::default,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "/s.json holds values saved in network namespace net:[1], but this is net:[2]: run \
             --revert there first, or use another --state file here"
        );
        let err = saved
            .check_revert_namespace("net:[2]", Path::new("/s.json"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "/s.json holds values saved in network namespace net:[1], but this is net:[2]: run \
             --revert there"
        );
        assert!(saved
            .check_revert_namespace("net:[1]", Path::new("/s.json"))
            .is_ok());
        let fresh = PreviousState::for_apply(None, "net:[2]", Path::new("/s.json"), || {
            PreviousState::fresh("net:[2]", Path::new("/d"), Some("old\n".into()))
        })
        .unwrap();
        assert_eq!(fresh.dropin_previous.as_deref(), Some("old\n"));
        assert_eq!(fresh.dropin_path, "/d");
    }

    #[test]
    fn apply_commands_write_the_dropin_and_load_it() {
        assert_eq!(
            apply_commands(Path::new("/etc/sysctl.d/90-longhaul.conf"), "a = 1\n"),
            "tee /etc/sysctl.d/90-longhaul.conf <<'EOF'\na = 1\nEOF\n\
             sysctl -p /etc/sysctl.d/90-longhaul.conf\n"
        );
    }

    #[test]
    fn revert_restores_values_then_the_dropin() {
        let mut state = PreviousState::fresh("net:[1]", Path::new("/d.conf"), None);
        state.remember("net.ipv4.tcp_wmem", "4096 16384 4194304");
        state.remember("net.ipv4.tcp_rmem", "4096 131072 6291456");
        assert_eq!(
            state.restores().collect::<Vec<_>>(),
            vec![
                ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
                ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
            ]
        );
        assert_eq!(state.dropin_restore(), DropinRestore::Remove);
        assert_eq!(
            state.revert_commands(Path::new("/s.json")),
            "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 6291456\"\n\
             sysctl -w net.ipv4.tcp_wmem=\"4096 16384 4194304\"\n\
             rm /d.conf\nrm /s.json\n"
        );
        state.dropin_previous = Some("# older\n".into());
        assert_eq!(state.dropin_restore(), DropinRestore::Rewrite("# older\n"));
        assert!(state
            .revert_commands(Path::new("/s.json"))
            .ends_with("# and restore /d.conf as it was (saved in /s.json)\nrm /s.json\n"));
    }

    #[test]
    fn a_state_file_round_trips_and_garbage_is_refused() {
        let mut state = PreviousState::fresh("net:[7]", Path::new("/d.conf"), Some("x\n".into()));
        state.remember("net.ipv4.tcp_sack", "1");
        assert_eq!(PreviousState::from_json(&state.to_json()).unwrap(), state);
        for bad in ["", "{", "[]", "{\"netns\":1}", "{\"netns\":\"n\"}"] {
            assert!(PreviousState::from_json(bad).is_err(), "{bad:?}");
        }
    }
}
