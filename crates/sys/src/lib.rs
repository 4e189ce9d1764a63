//! The only crate with `unsafe`: socket options, TCP_INFO, TUN devices, namespaces, sysctl.
//! Every function here is a thin, safe wrapper over one system interface; policy lives in
//! the callers.

pub mod aligned;
pub mod cpu;
pub mod creds;
pub mod direct_io;
pub mod file_io;
pub mod netdev;
pub mod netns;
pub mod peer_uid;
pub mod process;
pub mod route;
pub mod served_root;
pub mod socket;
pub mod sysctl;
pub mod tcp_info;
pub mod timer;
pub mod tun;
pub mod zerocopy;
