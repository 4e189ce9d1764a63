//! The one transport under `bench` and `cp`: every connection either command makes or
//! accepts, and how it is set up.
//!
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
//!
//! The decisions (buffers, congestion control, probe, pacing) are made once, without
//! I/O, by [`longhaul_policy::plan_transport`], at both ends of both commands.
//!
//! **Seams for what comes next.** A byte-stream wrapper (TLS) goes where a connection
//! is made or accepted: [`dial::dial`] and [`dial::DataDialer::attach`] on the client,
//! the server's accept loop before the first frame is read; everything after works on
//! the framed stream and on the data sockets these return. A different way of starting
//! the far end (ssh) replaces what [`dial::dial`] is given — an address and a token —
//! by what the far process reports over its ssh channel; nothing after the handshake
//! changes. Both commands get either once.

pub mod attach;
pub mod control;
pub mod dial;
pub mod framed;
pub mod secure;
pub mod sockopts;
pub mod tls;
