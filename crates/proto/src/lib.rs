//! The longhaul wire protocol, with no I/O: frame codec, messages, authentication and the
//! control-session state machines for both ends.
