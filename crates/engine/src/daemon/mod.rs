//! The daemon: `longhaul serve`, and the far end that `cp` and `bench` start over ssh. It
//! accepts control and data connections on one port, admits them at its door (bounded
//! pending connections, deadlines, eviction of the stalest), authenticates each, and runs
//! bench runs and cp transfers as sessions within a memory budget, counting what it does
//! for `serve --metrics`.

pub mod areas;
mod conn;
mod door;
pub mod error;
mod host_report;
pub mod memory;
pub mod metrics;
mod namespace;
mod reach;
mod relay;
pub mod server;
mod session;
pub mod tickets;
pub mod transfer;

pub use areas::{Area, Areas};
pub use error::ServeError;
pub use server::{ServeConfig, ServeLimits, Server};
pub use transfer::ServedFiles;
