//! How a run uses the path, with no I/O: [`plan_transport`], the one place `bench` and `cp`
//! decide buffers, congestion control, probing and pacing for their data streams
//! ([`transport`]); the socket buffer each stream needs and what to do when the kernel
//! caps it ([`window`]), which congestion control to run ([`congestion`]), the rate probe that finds the bottleneck when the user gave no rate
//! ([`probe`]), jump-start for a path seen before ([`jump_start`]), the verdict on what limited a run ([`verdict`]) and the watchdog that gives
//! up on a stuck one ([`watchdog`]); who the server lets wait at its door, and for how
//! long ([`admission`]); how much memory it commits to sessions ([`memory`]); and how much
//! it says about the connections it turns away ([`log_limit`]).
//!
//! Nothing here reads a clock or a sysctl: the drivers in `longhaul-engine` pass in the
//! measured RTT, this host's [`BufferCaps`] and congestion controls, and `now` (a
//! `clippy.toml` in this crate forbids `Instant::now`). That keeps `bench` and `cp` on
//! one set of rules and every rule testable without a socket.

#![forbid(unsafe_code)]

pub mod admission;
pub mod congestion;
pub mod data_start;
mod error;
pub mod jump_start;
pub mod log_limit;
pub mod memory;
pub mod path_record;
pub mod probe;
pub mod relay_from;
pub mod steady_rate;
pub mod transport;
pub mod verdict;
pub mod watchdog;
pub mod window;

pub use admission::{
    Admitted, Arrival, DoorLimits, Doorway, PendingId, SessionQueue, Source, Stage, Ticket,
};
pub use congestion::{check_congestion, default_congestion};
pub use error::PolicyError;
pub use jump_start::{
    decide as decide_jump, JumpAction, JumpInputs, JumpPlan, JumpRequest, JumpSample,
    JumpValidator, NoJump, PathMemory, ServerView, JUMP_STREAMS,
};
pub use log_limit::{LogLimiter, LogLine};
pub use memory::{MemoryBudget, MemoryNeed, MemoryRefusal, Reservation};
pub use probe::{Pacing, Phase, RateProbe, StartUpExit, StreamSample, DRAIN_GAIN, PROBE_EVERY};
pub use relay_from::{IpNet, RelayFrom};
pub use transport::{
    plan_transport, streams_for_path, warmup_bytes, Congestion, Role, TransportPlan,
    TransportRequest, Window, MAX_PATH_STREAMS, MIN_PROBE_RTT,
};
pub use verdict::{judge, Chrono, LimitedBy};
pub use watchdog::{Watchdog, STALL};
pub use window::{
    choice_bytes, choose, describe, needed_buffer, plan_buffer, BufferCaps, BufferChoice, Side,
    MAX_WINDOW, PROBE_CEILING_BPS,
};

/// An `Instant` to build test times from: the one place tests may read the clock.
#[cfg(test)]
#[allow(clippy::disallowed_methods)] // Tests need some Instant to offset from; the code under test never reads it.
pub(crate) fn test_epoch() -> std::time::Instant {
    std::time::Instant::now()
}
