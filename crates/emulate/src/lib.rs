//! `longhaul emulate`: two network namespaces joined by TUN devices, with a user-space
//! packet loop per direction between them that applies the link model of
//! `longhaul-linkem` (rate, drop-tail queue, delay, jitter, loss, reordering) per wire
//! segment of each offload super-packet. Reading super-packets and cutting them into runs
//! is pure and lives in `longhaul_linkem::gso` and `longhaul_linkem::wire`; this crate
//! owns the devices, namespaces, threads and clocks; `control` is the running emulator as
//! other processes see it (its stats file, taking it down).
#![forbid(unsafe_code)]

pub mod control;
mod defaults;
mod emulator;
mod error;
pub mod log;
mod pump;
pub mod state;
pub mod stats;
pub mod topology;

pub use defaults::PathDefaults;
pub use emulator::{
    preflight, validate, Emulator, EmulatorConfig, DEFAULT_MAX_BURST, DEFAULT_MAX_HELD_BYTES,
    MTU_RANGE,
};
pub use error::EmulateError;
pub use stats::{DirectionStats, EmulatorStats};
pub use topology::End;
