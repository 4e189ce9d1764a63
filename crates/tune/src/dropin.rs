//! The sysctl drop-in file `--apply` writes, and the previous values `--revert` restores.

use crate::findings::{SysctlChange, Target};
use crate::TuneError;
use longhaul_model::units::{format_bytes, format_rate_bps, format_seconds};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where `--apply` writes its one drop-in file (read by systemd-sysctl at boot).
pub const DEFAULT_DROPIN_PATH: &str = "/etc/sysctl.d/90-longhaul.conf";
/// Where `--apply` saves the values it replaced.
pub const DEFAULT_STATE_PATH: &str = "/var/lib/longhaul/tune-previous.json";

/// The drop-in file for `changes`, with a header saying what wrote it and for which path.
pub fn render_dropin(changes: &[SysctlChange], target: &Target) -> String {
    let mut text = format!(
        "# Written by `longhaul tune --apply` for {} at {} RTT: socket buffers of {} (2 x BDP).\n\
         # `longhaul tune --revert` restores the previous values and this file's previous state.\n",
        format_rate_bps(target.rate_bps as f64),
        format_seconds(target.rtt.as_secs_f64()),
        format_bytes(target.socket_buffer_bytes() as f64),
    );
    for change in changes {
        text.push_str(&format!("{} = {}\n", change.name, change.value));
    }
    text
}

/// What `--apply` replaced, so `--revert` can put it back exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviousState {
    /// Network namespace the values were read in (`net:[4026531833]`); tcp_* values are
    /// per namespace.
    pub netns: String,
    /// The drop-in file that was written.
    pub dropin_path: String,
    /// Its content before the first `--apply`; `None` if it did not exist.
    pub dropin_previous: Option<String>,
    /// Sysctl values before the first `--apply` changed them, by name.
    pub values: BTreeMap<String, String>,
}

impl PreviousState {
    /// Reads a saved state.
    pub fn from_json(text: &str) -> Result<PreviousState, TuneError> {
        Ok(serde_json::from_str(text)?)
    }

    /// The saved state as pretty JSON.
    pub fn to_json(&self) -> String {
        // A map of strings always serialises.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Records a value about to be replaced, unless an earlier `--apply` already recorded the
    /// original (a second `--apply` must not make its own values the ones to revert to).
    pub fn remember(&mut self, name: &str, current: &str) {
        self.values
            .entry(name.to_string())
            .or_insert_with(|| current.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dropin_lists_each_change() {
        let target = Target {
            rate_bps: 1_000_000_000,
            rtt: Duration::from_millis(180),
        };
        let changes = vec![
            SysctlChange {
                name: "net.ipv4.tcp_rmem".into(),
                value: "4096 131072 45000000".into(),
            },
            SysctlChange {
                name: "net.ipv4.tcp_no_metrics_save".into(),
                value: "1".into(),
            },
        ];
        let text = render_dropin(&changes, &target);
        assert!(text.starts_with("# Written by `longhaul tune --apply` for 1.00 Gbit/s at 180 ms"));
        assert!(text.contains("45.0 MB"));
        assert!(text.ends_with(
            "net.ipv4.tcp_rmem = 4096 131072 45000000\nnet.ipv4.tcp_no_metrics_save = 1\n"
        ));
    }

    #[test]
    fn state_keeps_the_first_original() {
        let mut state = PreviousState::default();
        state.remember("net.ipv4.tcp_rmem", "4096 131072 6291456");
        state.remember("net.ipv4.tcp_rmem", "4096 131072 45000000");
        assert_eq!(state.values["net.ipv4.tcp_rmem"], "4096 131072 6291456");
        let back = PreviousState::from_json(&state.to_json()).unwrap();
        assert_eq!(back, state);
        assert!(PreviousState::from_json("{").is_err());
    }
}
