//! Host tuning for long fat paths, with no I/O: from the facts a driver read off a host
//! ([`HostFacts`]) and the path to serve ([`Target`]), the findings ([`inspect`]) with their
//! severity, why they matter and the command that fixes them; the sysctl drop-in file that
//! `longhaul tune --apply` writes ([`render_dropin`]); and the saved previous values that
//! `--revert` restores ([`PreviousState`]); the apply/revert transaction itself ([`ApplyPlan`],
//! [`PreviousState::for_apply`], [`PreviousState::dropin_restore`]); a host's findings as bounded JSON for
//! `longhaul tune --peer` ([`report_to_json`], [`report_from_json`]).
#![forbid(unsafe_code)]

mod dropin;
mod error;
mod facts;
mod findings;
mod report;
mod transaction;

pub use dropin::{render_dropin, PreviousState, DEFAULT_DROPIN_PATH, DEFAULT_STATE_PATH};
pub use error::TuneError;
pub use facts::{HostFacts, InterfaceFacts, SYSCTLS_INSPECTED};
pub use findings::{inspect, Finding, Severity, SysctlChange, Target, SOCKET_BUFFER_LIMIT_BYTES};
pub use report::{report_from_json, report_to_json, HostReport, MAX_REPORT_FINDINGS};
pub use transaction::{
    apply_commands, changes_of, ApplyPlan, DropinRestore, SysctlSkip, SysctlWrite, ABSENT_VALUE,
    REVERT_SKIP_REASON,
};
