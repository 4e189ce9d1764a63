//! The error type of `longhaul-tune`.

/// Everything that can go wrong in `longhaul-tune`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// The saved previous values could not be read back.
    #[error("the saved tuning state is not valid JSON ({0}); inspect or delete the state file")]
    BadState(#[from] serde_json::Error),
}
