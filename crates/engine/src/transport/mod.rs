//! The one transport under `bench` and `cp`: every connection either command makes or
//! accepts, and how it is set up.
//!
//! - `connect`: reaching the server's address, the control connection's SYN first.
//! - [`dial`]: the client's side — resolving and reaching the server, the handshake's
//!   first round trip (the RTT's first sample), data connections opened concurrently
//!   with the control connection's remaining round trips, and their per-stream proofs.
//! - [`attach`]: the server's side of the data connections — the table of sessions
//!   expecting streams, and waiting for a session's streams to attach.
//! - [`control`]: the control connection once a run or transfer is under way — one
//!   writer shared by every thread (coalesced writes), one reader thread, keepalives and
//!   a user timeout.
//! - [`sockopts`]: applying a [`longhaul_policy::TransportPlan`] to a data socket
//!   (buffers before connect, congestion control, pacing, the receiver's window clamp).
//! - [`framed`]: reading and writing whole protocol frames on a stream.
//! - [`setup`]: the one driver of the client's set-up machines on the control connection
//!   (reads bounded by each machine's wait).
//! - [`secure`]: the stream every connection runs on, plain TCP or TLS 1.3 over it, with
//!   `TcpStream`'s surface (shared clones, one reader and several writers, half-close).
//! - [`record`]: TLS 1.3's record layer after rustls's handshake (sans-I/O: seal into
//!   and open in the socket's own buffers).
//! - [`BenchError`]: why a client's session could not be set up.
//! - [`tls`]: the provider and configs, the server's identity, the client's trust
//!   (pinned, known-servers, CA).
//!
//! The decisions (buffers, congestion control, probe, pacing) are made once, without
//! I/O, by [`longhaul_policy::plan_transport`], at both ends of both commands.
//!
//! TLS wraps a connection where it is made or accepted ([`dial::dial`],
//! [`dial::DataDialer`], the server's per-connection handler); everything after works on
//! [`secure::SecureStream`]. ssh start-up (`crate::ssh`) only changes what [`dial::dial`]
//! is given: the far end's address, one-time token and pinned certificate instead of a
//! daemon's address, the shared token and the known-servers file.

pub mod attach;
mod connect;
pub mod connect_back;
pub mod control;
pub mod dial;
mod error;
pub mod framed;
pub mod record;
pub mod secure;
pub mod setup;
pub mod sockopts;
pub mod tls;

pub use error::BenchError;
