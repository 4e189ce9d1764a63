//! Drivers that move real bytes: the transport under bench and cp (connections,
//! handshake, data streams, the control link), bench streams, cp's file ends, pacing,
//! telemetry sampling, starting the far end over ssh, the chunk-hash cache of sync, and
//! jump-start's path cache and route metrics. The emulator is its own crate,
//! `longhaul-emulate`.
#![forbid(unsafe_code)]

pub mod bench;
mod cache_dir;
pub mod client_start;
pub mod cp;
pub mod daemon;
pub mod datarun;
pub mod host;
pub mod jump;
pub mod path_cache;
pub mod ssh;
pub mod stage_cpu;
pub mod startup;
pub mod telemetry;
pub mod token;
pub mod transport;
pub mod tune_apply;
pub mod tune_host;

/// The chunk-hash cache, where it has always been named.
pub use cp::hash_cache;
