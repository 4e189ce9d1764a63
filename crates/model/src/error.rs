//! The error type of `longhaul-model`: a human-unit value that could not be parsed, or a
//! path description that the formulas cannot work with.

/// Everything that can go wrong in `longhaul-model`.
///
/// Each message names the value that was wrong and says what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A human-unit value (`10G`, `250ms`, `64MiB`, ...) could not be parsed.
    #[error("invalid {kind} {input:?}: {problem}; {accepted}")]
    Unit {
        /// What was being parsed: "rate", "duration", "size", "distance", "probability".
        kind: &'static str,
        /// The text as the user gave it.
        input: String,
        /// What is wrong with it.
        problem: String,
        /// The accepted forms, as a sentence the user can act on.
        accepted: &'static str,
    },
    /// A path parameter is outside what the formulas can use.
    #[error("invalid path: {field} = {value}: {problem}")]
    Path {
        /// The parameter, e.g. "mtu_bytes".
        field: &'static str,
        /// Its value as text.
        value: String,
        /// Why it cannot be used and what would work.
        problem: String,
    },
}
