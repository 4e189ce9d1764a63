//! Drivers that move real bytes: bench streams, pacing, telemetry sampling and the
//! emulator's packet loop.
#![forbid(unsafe_code)]

pub mod bench;
pub mod conn;
pub mod cp;
pub mod emulate;
pub mod host;
pub mod token;
pub mod tune_apply;
pub mod tune_host;
