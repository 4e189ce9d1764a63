//! Process-level knobs: privileges, the file-creation mask, termination signals, timer
//! slack, stdio redirection.

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

/// Whether the process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The process's file-creation mask (`umask`), read from `/proc/self/status` (Linux >=
/// 4.7) rather than with `umask(2)`, which can only read it by changing it (a race with
/// any thread creating a file meanwhile). 0o022 where it cannot be read.
pub fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .map_or(0o022, |m| m & 0o777)
}

/// Sets the calling thread's timer slack (PR_SET_TIMERSLACK), in nanoseconds (>= 1).
/// The default 50 us makes every timed sleep up to 50 us late.
pub fn set_timer_slack(slack_ns: u64) -> io::Result<()> {
    // SAFETY: prctl(PR_SET_TIMERSLACK, n) takes an unsigned long by value.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            slack_ns.max(1) as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SIGINT, SIGTERM and SIGHUP blocked in this thread (and in threads spawned after), so that
/// they can be waited for with [`TerminationSignals::wait`] instead of killing the process.
#[derive(Debug)]
pub struct TerminationSignals {
    set: libc::sigset_t,
}

impl TerminationSignals {
    /// Blocks the signals in the calling thread. Call before spawning threads.
    pub fn block() -> io::Result<TerminationSignals> {
        // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: set is a valid sigset_t.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGHUP);
        }
        // SAFETY: set is initialised; the old mask is not wanted.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(TerminationSignals { set })
    }

    /// Waits up to `timeout` for one of the signals; returns its number if one came.
    pub fn wait(&self, timeout: Duration) -> Option<i32> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: set and ts are valid; info may be null.
        let sig = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &ts) };
        (sig > 0).then_some(sig)
    }
}

/// Whether process `pid` exists.
pub fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid)
}

/// When process `pid` started, in clock ticks after boot (field 22 of `/proc/PID/stat`):
/// with the pid, it names one process for good, where a pid alone is reused.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields 3.. follow the
    // last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Sends SIGTERM to process `pid`.
pub fn terminate(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: kill has no memory preconditions.
    if unsafe { libc::kill(pid, libc::SIGTERM) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends SIGKILL to `pid`.
pub fn kill_now(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: kill has no memory preconditions.
    if unsafe { libc::kill(pid, libc::SIGKILL) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Points stdout and stderr at `file` (for a process that keeps running after whoever
/// started it stopped reading its output).
pub fn redirect_stdio(file: &std::fs::File) -> io::Result<()> {
    for target in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: both fds are open; dup2 replaces target atomically.
        if unsafe { libc::dup2(file.as_raw_fd(), target) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Gives the calling thread real-time (SCHED_FIFO) priority `priority` (1..=99), so timed
/// wakeups preempt ordinary processes at once. The kernel's RT throttling
/// (sched_rt_runtime_us) still leaves other tasks a share of each CPU.
pub fn set_realtime_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority.clamp(1, 99),
    };
    // SAFETY: param is valid; pthread_self() is the calling thread.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// The CPUs the calling thread may run on (`sched_getaffinity(2)`), in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid cpu_set_t of the size passed; 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: cpu is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Pins the calling thread to one CPU (`sched_setaffinity(2)`).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu is below CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: set is a valid cpu_set_t of the size passed; 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
