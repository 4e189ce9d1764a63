//! Drivers of `longhaul cp`: the source walk, and (to come) the sender and receiver.

pub mod walk;
