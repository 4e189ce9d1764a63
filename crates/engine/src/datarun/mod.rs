//! The data streams of a run, shared by both ends of a bench run and by cp's sender: the
//! streams that move bytes memory to memory ([`stream`]), a run of them with its samples
//! and totals ([`run`]), and the sender's pacer that holds the rate the probe chose
//! ([`pacer`]).

pub mod pacer;
pub mod run;
pub mod stream;
