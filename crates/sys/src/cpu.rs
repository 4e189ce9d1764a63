//! CPU time of the calling thread and of the whole process.

use std::time::Duration;

/// CPU time (user + system) consumed by the calling thread.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is valid for writes; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// User and system CPU time consumed by the whole process so far.
pub fn process_cpu_times() -> (Duration, Duration) {
    // SAFETY: an all-zero rusage is a valid value; getrusage writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is valid for writes.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// User and system CPU time of the calling thread (RUSAGE_THREAD).
pub fn thread_cpu_times() -> (Duration, Duration) {
    // SAFETY: as in process_cpu_times.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is valid for writes.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_loop_costs_cpu() {
        let before = thread_cpu_time();
        let mut x = 0u64;
        while thread_cpu_time() - before < Duration::from_millis(20) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        let (u, s) = thread_cpu_times();
        assert!(u + s >= Duration::from_millis(15));
    }
}
