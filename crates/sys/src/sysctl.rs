//! Kernel parameters under `/proc/sys`: read, write, and tell whether a parameter can be
//! written in the caller's network namespace.
//!
//! `net.ipv4.tcp_*` parameters are per network namespace. Some `net.core.*` parameters
//! (`rmem_max`, `wmem_max`, ...) are global: in a child namespace they are shown read-only
//! (kernel 6.18) or are missing altogether (older kernels).

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// Longest value accepted from or written to a sysctl file, in bytes.
const MAX_VALUE_BYTES: usize = 4096;

/// The file behind a sysctl name: `net.ipv4.tcp_rmem` -> `/proc/sys/net/ipv4/tcp_rmem`.
///
/// Refuses names with anything but ASCII letters, digits, `_`, `-` and single dots, so a
/// name can never leave `/proc/sys`.
pub fn path_of(name: &str) -> io::Result<PathBuf> {
    let valid = !name.is_empty()
        && name.len() <= 256
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    if !valid {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a sysctl name (expected e.g. net.ipv4.tcp_rmem)"),
        ));
    }
    Ok(PathBuf::from("/proc/sys").join(name.replace('.', "/")))
}

/// Reads a sysctl; whitespace runs (the tabs of `tcp_rmem`) become single spaces.
/// `Ok(None)` when the parameter does not exist (in this namespace or on this kernel).
pub fn read(name: &str) -> io::Result<Option<String>> {
    let path = path_of(name)?;
    match fs::read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_VALUE_BYTES)]);
            Ok(Some(text.split_whitespace().collect::<Vec<_>>().join(" ")))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("reading {}: {e}", path.display()),
        )),
    }
}

/// Whether the parameter exists and its file is writable by its owner here. A global
/// parameter seen from a child network namespace is read-only.
pub fn is_writable(name: &str) -> io::Result<bool> {
    let path = path_of(name)?;
    match fs::metadata(&path) {
        Ok(meta) => Ok(meta.permissions().mode() & 0o200 != 0),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes a sysctl (needs CAP_NET_ADMIN / root). The kernel checks the value.
pub fn write(name: &str, value: &str) -> io::Result<()> {
    if value.len() > MAX_VALUE_BYTES || value.contains('\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("sysctl value for {name} is not one line of at most {MAX_VALUE_BYTES} bytes"),
        ));
    }
    let path = path_of(name)?;
    fs::write(&path, format!("{value}\n")).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing {value:?} to {}: {e}", path.display()),
        )
    })
}

/// The identity of the caller's network namespace, e.g. `net:[4026531833]`.
pub fn network_namespace_id() -> io::Result<String> {
    let link = fs::read_link("/proc/self/ns/net")?;
    Ok(link.to_string_lossy().into_owned())
}

/// Whether the process runs as root (effective uid 0), as writing sysctls needs.
pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The memory page size in bytes (`tcp_mem` counts pages).
pub fn page_size_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 for unknown names.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_proc_sys_and_cannot_escape() {
        assert_eq!(
            path_of("net.ipv4.tcp_rmem").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/tcp_rmem")
        );
        for bad in [
            "",
            "net..core",
            "../etc/passwd",
            "net/core/rmem_max",
            ".net",
            "a b",
        ] {
            assert!(path_of(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reads_real_parameters() {
        let rmem = read("net.ipv4.tcp_rmem")
            .unwrap()
            .expect("tcp_rmem exists on Linux");
        assert_eq!(rmem.split(' ').count(), 3, "{rmem:?}");
        assert_eq!(read("net.ipv4.no_such_parameter_longhaul").unwrap(), None);
        assert!(!is_writable("net.ipv4.no_such_parameter_longhaul").unwrap());
        assert!(network_namespace_id().unwrap().starts_with("net:["));
        assert!(page_size_bytes().is_power_of_two());
    }
}
