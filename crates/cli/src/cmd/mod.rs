//! One module per subcommand; each exposes `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod bench;
pub mod clean;
pub mod common;
pub mod completions;
pub mod cp;
pub mod demo;
pub mod emulate;
pub mod man;
pub mod plan;
pub mod plot;
mod png;
pub mod record;
pub mod serve;
mod serve_config;
pub mod ssh;
pub mod ssh_bridge;
pub mod ssh_server;
pub mod sync;
pub mod token;
pub mod tune;
