//! Named network namespaces (`/run/netns/NAME`, as `ip netns` makes them): create and delete
//! them, run a thread inside one, run `ip` commands and programs in one.

use std::fs::File;
use std::io::{self, Read, Seek};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Where `ip netns` keeps the bind mounts of named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Path of the bind mount of namespace `name`.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(name)
}

/// Whether namespace `name` exists.
pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// A named network namespace that is deleted when this guard drops.
#[derive(Debug)]
pub struct NetnsGuard {
    name: String,
}

impl NetnsGuard {
    /// Creates namespace `name` (fails if it exists) with its loopback up.
    pub fn create(name: &str) -> io::Result<NetnsGuard> {
        if exists(name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("network namespace {name} already exists"),
            ));
        }
        run_ip(None, &["netns", "add", name])?;
        let guard = NetnsGuard {
            name: name.to_owned(),
        };
        ip(name, &["link", "set", "lo", "up"])?;
        Ok(guard)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let _ = delete(&self.name);
    }
}

/// Deletes namespace `name`; a missing namespace is not an error.
pub fn delete(name: &str) -> io::Result<()> {
    if !exists(name) {
        return Ok(());
    }
    run_ip(None, &["netns", "del", name])
}

/// Processes (other than this one) whose main thread is in namespace `name`: programs
/// started in it with `ip netns exec` or [`command_in`], which keep it alive after `ip
/// netns del`. Processes that vanish while being looked at are skipped.
pub fn processes_in(name: &str) -> io::Result<Vec<u32>> {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata(path(name))?;
    let me = std::process::id();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(m) = std::fs::metadata(format!("/proc/{pid}/ns/net")) {
            if m.dev() == ns.dev() && m.ino() == ns.ino() {
                pids.push(pid);
            }
        }
    }
    Ok(pids)
}

/// Names of all named namespaces.
pub fn list() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

/// Moves the calling thread into namespace `name`. Only this thread changes namespace;
/// sockets and TUN devices it creates afterwards belong to that namespace, and fds keep
/// their namespace when used from other threads.
pub fn enter(name: &str) -> io::Result<()> {
    let file = File::open(path(name))
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open namespace {name}: {e}")))?;
    // SAFETY: file is an open nsfs file; CLONE_NEWNET asks setns to check it is a net ns.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("setns into {name}: {e}")));
    }
    Ok(())
}

/// Runs `f` on a fresh thread inside namespace `name` and returns its result.
pub fn run_in<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let name = name.to_owned();
    std::thread::spawn(move || {
        enter(&name)?;
        f()
    })
    .join()
    .map_err(|_| io::Error::other("thread inside namespace panicked"))?
}

/// Runs `ip -n NS ARGS...`, failing with ip's own message.
pub fn ip(ns: &str, args: &[&str]) -> io::Result<()> {
    run_ip(Some(ns), args)
}

fn run_ip(ns: Option<&str>, args: &[&str]) -> io::Result<()> {
    let mut cmd = Command::new("ip");
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let out = cmd.args(args).stdin(Stdio::null()).output().map_err(|e| {
        io::Error::new(e.kind(), format!("cannot run `ip` (install iproute2): {e}"))
    })?;
    if out.status.success() {
        return Ok(());
    }
    let prefix = ns.map(|n| format!("-n {n} ")).unwrap_or_default();
    Err(io::Error::other(format!(
        "`ip {prefix}{}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// A `Command` that runs `program` inside namespace `ns` (through `ip netns exec`, which
/// also gives it a matching /sys).
pub fn command_in(ns: &str, program: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, program]);
    cmd
}

/// `/proc/net/dev` of one namespace, kept open so it can be re-read cheaply from any thread.
#[derive(Debug)]
pub struct NetDevFile {
    file: File,
}

impl NetDevFile {
    /// Opens `/proc/net/dev` as seen from namespace `ns`.
    pub fn open(ns: &str) -> io::Result<NetDevFile> {
        let file = run_in(ns, || File::open("/proc/thread-self/net/dev"))?;
        Ok(NetDevFile { file })
    }

    /// The file's current text.
    pub fn read(&mut self) -> io::Result<String> {
        self.file.rewind()?;
        let mut text = String::new();
        self.file.read_to_string(&mut text)?;
        Ok(text)
    }
}
