//! `longhaul bench`: memory-to-memory path tests: the client, the data streams and their
//! pacing, what a run reports, and `tune --peer`'s host report; the server's side of a run
//! is a session of the daemon ([`crate::daemon`]).

pub mod client;
pub mod peer;
pub mod report;

pub use client::{run_bench, BenchConfig, BenchError, BenchObserver, DEFAULT_PORT};
pub use peer::{peer_report, PeerReport};
