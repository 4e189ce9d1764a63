//! A gfal2 plugin for `longhaul://HOST[:PORT]/PATH` URLs, so that what reaches storage
//! through gfal2 (FTS3, Rucio, `gfal-copy`, Python's `gfal2`) can use longhaul daemons:
//! stat, listing, mkdir, unlink, rmdir, ADLER32 and BLAKE3 checksums, and copies to, from
//! and between daemons. Built as `libgfal_plugin_longhaul.so`, loaded by an unmodified
//! gfal2 from its plugin directory.
//!
//! Its parts: `ffi` (the boundary with gfal2 and the C shim, `shim.c`: the only unsafe
//! code), [`url`] (what the URLs name), [`settings`] (token and trust), [`namespace`] and
//! [`copy`] (the operations, in safe Rust over the engine's `RemoteFs` and `run_cp`),
//! [`checksum`] (names, printing and comparison as gfal2 does them) and [`error`] (errnos).
#![deny(unsafe_code)]

pub mod checksum;
pub mod copy;
pub mod error;
#[allow(unsafe_code)]
mod ffi;
pub mod namespace;
pub mod settings;
pub mod url;

pub use error::PluginError;
