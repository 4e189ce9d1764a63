//! The test kit: what the integration tests of several crates share, so that no test file
//! keeps its own copy.
//!
//! - [`Rng`]: the one seeded generator of test data, delivery orders and kill points
//!   (SplitMix64), with its seed from `LONGHAUL_TEST_SEED` or the clock when a test wants
//!   a fresh one each run ([`Rng::from_env`]).
//! - [`tree`]: files and trees on disk: writing them (random content, modes, mtimes) and
//!   comparing two byte for byte (sparse-aware), with modes and mtimes as asked.
//! - [`served`]: a served root opened with each resolver this kernel has.
//! - [`receiver`]: an empty destination's answers to a receiving session.
//! - [`chunks`]: a chunk sent and received as the data streams' drivers do.
//!
//! # Layering
//!
//! This crate depends on `longhaul-sys` (the bottom of the workspace, for sparse reads
//! and the served root), `longhaul-linkem` (its SplitMix64 step, for [`Rng`]),
//! `longhaul-proto` and `longhaul-transfer` (for [`receiver`] and [`chunks`]). Any crate's *integration* tests (`tests/*.rs`)
//! may take it as a dev-dependency, those crates' own included: Cargo builds one copy of
//! the crate under test for its integration tests and this kit, so their types are the
//! same. Unit tests inside a crate's `src`
//! (`#[cfg(test)]`) compile the crate a second time and must not use it for that
//! crate's types.
//!
//! What needs a crate's own types stays as one shared module in that crate's tests, used
//! by each of its test files that needs it: the in-memory session pair and its entry
//! builders in `crates/transfer/tests/pair`, the in-process server in
//! `crates/engine/tests/support`, the simulator in `crates/engine/tests/sim`, the
//! `longhaul` binary's runner and `serve` process in `crates/cli/tests/support`. The fluid
//! bottleneck model is a unit-test module of `longhaul-policy`'s rate controller
//! (`crates/policy/src/probe/fluid.rs`), its one user.

#![forbid(unsafe_code)]

pub mod chunks;
pub mod receiver;
pub mod rng;
pub mod served;
pub mod tree;

pub use rng::Rng;
