//! `longhaul bench`: memory-to-memory path tests, client and server.

pub mod client;
mod door;
pub mod memory;
pub mod metrics;
pub mod pacer;
pub mod peer;
pub mod report;
pub mod run;
mod serve_conn;
pub mod serve_error;
mod serve_session;
pub mod server;
pub mod stream;

pub use client::{run_bench, BenchConfig, BenchError, BenchObserver, DEFAULT_PORT};
pub use peer::{peer_report, PeerReport};
pub use serve_error::ServeError;
pub use server::{ServeConfig, ServeLimits, Server};
