//! The link model with no I/O: a bottleneck with a drop-tail queue, delay, jitter, loss,
//! reordering and duplication, driven in virtual time.
