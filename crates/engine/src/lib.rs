//! Drivers that move real bytes: bench streams, pacing, telemetry sampling and the
//! emulator's packet loop.

pub mod emulate;
