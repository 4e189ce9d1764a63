//! The only crate with `unsafe`: socket options, TCP_INFO, TUN devices, namespaces, sysctl.
