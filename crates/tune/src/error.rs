//! The error type of `longhaul-tune`.

/// Everything that can go wrong in `longhaul-tune`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// The saved previous values could not be read back.
    #[error("the saved tuning state is not valid JSON ({0}); inspect or delete the state file")]
    BadState(#[from] serde_json::Error),
    /// A peer's host report (`longhaul tune --peer`) could not be read.
    #[error(
        "the peer's host report is not valid: {0}; is the peer running the same longhaul release?"
    )]
    BadReport(String),
    /// `--apply` found values saved in another network namespace.
    #[error(
        "{state_path} holds values saved in network namespace {saved}, but this is {here}: run \
         --revert there first, or use another --state file here"
    )]
    ApplyInOtherNamespace {
        /// The state file.
        state_path: String,
        /// The namespace the values were saved in.
        saved: String,
        /// This network namespace.
        here: String,
    },
    /// `--revert` runs in another network namespace than the values were saved in.
    #[error(
        "{state_path} holds values saved in network namespace {saved}, but this is {here}: run \
         --revert there"
    )]
    RevertInOtherNamespace {
        /// The state file.
        state_path: String,
        /// The namespace the values were saved in.
        saved: String,
        /// This network namespace.
        here: String,
    },
}
