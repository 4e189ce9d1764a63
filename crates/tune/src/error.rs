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
}
