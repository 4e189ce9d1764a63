//! Path mathematics with no I/O: bandwidth-delay product, socket buffers, TCP response
//! models (Reno, Mathis, CUBIC, HighSpeed TCP), router buffers and the Land Speed Record metric.
//!
//! - [`units`]: parse and format human units (`10G`, `250ms`, `64MiB`, `28983km`).
//! - [`buffers`]: BDP, socket buffer (2 x BDP), window-scale ceiling, router buffers, goodput.
//! - [`tcp_response`]: Reno recovery, Mathis, CUBIC (RFC 9438), HighSpeed TCP (RFC 3649).
//! - [`path`]: [`PathSpec`], the path every formula works from.
//! - [`plan`]: every figure of `longhaul plan` for one path, computed at once.
//! - [`lsr`]: the Land Speed Record metric in bit-meters/second, its rules and history.
//! - [`geo`], [`airports`], [`route`]: great-circle distances, the airport table, routes.
//! - [`scenario`]: the record runs `longhaul demo` re-enacts.
#![forbid(unsafe_code)]

mod error;

pub mod airports;
pub mod buffers;
pub mod geo;
pub mod lsr;
pub mod path;
pub mod plan;
pub mod route;
pub mod scenario;
pub mod tcp_response;
pub mod units;

pub use error::ModelError;
pub use path::PathSpec;
