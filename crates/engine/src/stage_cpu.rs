//! Where a transfer's CPU time goes, by stage: the cipher (TLS sealing and opening, with
//! rustls's copies), the hash (BLAKE3 of the chunks), the disk (reading and writing the
//! files, from or to the page cache or the device); the rest of the process's CPU time is
//! the socket calls, the kernel's TCP work charged to this process, and the control.
//!
//! Each stage's work is timed with the calling thread's CPU clock into a per-thread
//! tally ([`timed`]); the data-stream threads move their tally into the session's
//! [`StageTimes`] after every chunk ([`StageTimes::take_thread`]). Two clock reads per
//! timed call, a few per 256 KiB piece: about a millisecond per GB. The thread's CPU clock
//! is a system call (0.5 us on this VM), so a loop that changes stage every few
//! microseconds (a TLS sender's records: read, hash, seal, 16 KiB each) is timed as one
//! [`Stretch`] instead: its CPU time read twice, split among its stages by their shares
//! of the wall clock (which the vDSO reads for 20 ns).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A stage of the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// TLS: sealing or opening records, and rustls's copies in and out of its buffers.
    Cipher = 0,
    /// BLAKE3 of chunk bytes.
    Hash = 1,
    /// File reads and writes (page cache or device).
    Disk = 2,
}

const STAGES: usize = 3;

thread_local! {
    static TALLY: [Cell<u64>; STAGES] = const { [Cell::new(0), Cell::new(0), Cell::new(0)] };
}

/// Runs `f`, adding the calling thread's CPU time in it to this thread's tally of `stage`.
pub fn timed<T>(stage: Stage, f: impl FnOnce() -> T) -> T {
    let before = longhaul_sys::cpu::thread_cpu_time();
    let out = f();
    let spent = longhaul_sys::cpu::thread_cpu_time().saturating_sub(before);
    TALLY.with(|t| {
        let c = &t[stage as usize];
        c.set(c.get().saturating_add(spent.as_nanos() as u64));
    });
    out
}

/// A stretch of work that changes stage every few microseconds, without blocking: its CPU
/// time (the thread's clock, read at [`Stretch::begin`] and [`Stretch::end`]) goes to its
/// stages in proportion to the wall time each took ([`Stretch::done`]). Timing each step
/// with the CPU clock cost 2.1 us per 16 KiB record, 0.13 s/GB, at a TLS sender.
pub struct Stretch {
    cpu: Duration,
    start: std::time::Instant,
    last: std::time::Instant,
    wall: [Duration; STAGES],
}

impl Stretch {
    /// Starts the stretch.
    pub fn begin() -> Self {
        let now = std::time::Instant::now();
        Self {
            cpu: longhaul_sys::cpu::thread_cpu_time(),
            start: now,
            last: now,
            wall: [Duration::ZERO; STAGES],
        }
    }

    /// The time since the last step (or the start) was `stage`'s.
    pub fn done(&mut self, stage: Stage) {
        let now = std::time::Instant::now();
        self.wall[stage as usize] += now - std::mem::replace(&mut self.last, now);
    }

    /// Ends the stretch: its CPU time, split by the stages' shares of its wall time, into
    /// this thread's tally (the share of time in no step goes to none).
    pub fn end(self) {
        let cpu = longhaul_sys::cpu::thread_cpu_time().saturating_sub(self.cpu);
        let wall = self.start.elapsed();
        if wall.is_zero() {
            return;
        }
        TALLY.with(|t| {
            for (cell, w) in t.iter().zip(self.wall) {
                let share = cpu.as_nanos() as f64 * (w.as_secs_f64() / wall.as_secs_f64()).min(1.0);
                cell.set(cell.get().saturating_add(share as u64));
            }
        });
    }
}

/// A session's CPU time per stage, summed over its threads.
#[derive(Debug, Default)]
pub struct StageTimes {
    nanos: [AtomicU64; STAGES],
}

impl StageTimes {
    /// Moves the calling thread's tally (since its last take) into these totals.
    pub fn take_thread(&self) {
        TALLY.with(|t| {
            for (cell, total) in t.iter().zip(&self.nanos) {
                let n = cell.replace(0);
                if n > 0 {
                    total.fetch_add(n, Ordering::Relaxed);
                }
            }
        });
    }

    /// The totals so far.
    pub fn split(&self) -> StageSplit {
        let get = |s: Stage| Duration::from_nanos(self.nanos[s as usize].load(Ordering::Relaxed));
        StageSplit {
            cipher: get(Stage::Cipher),
            hash: get(Stage::Hash),
            disk: get(Stage::Disk),
        }
    }
}

/// CPU time per stage (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageSplit {
    /// TLS sealing or opening.
    pub cipher: Duration,
    /// BLAKE3.
    pub hash: Duration,
    /// File reads and writes.
    pub disk: Duration,
}

impl StageSplit {
    /// What the stages leave of `total` (the process's CPU time): socket calls, the
    /// kernel's TCP work charged to the process, the control.
    pub fn rest(&self, total: Duration) -> Duration {
        total.saturating_sub(self.cipher + self.hash + self.disk)
    }

    /// "cipher 0.81 s, hash 0.60 s, disk 0.44 s" (a server's log, which has no total
    /// per session).
    pub fn seconds_text(&self) -> String {
        format!(
            "cipher {:.2} s, hash {:.2} s, disk {:.2} s",
            self.cipher.as_secs_f64(),
            self.hash.as_secs_f64(),
            self.disk.as_secs_f64()
        )
    }

    /// "cipher 0.41, hash 0.30, disk 0.22, socket and the rest 0.35 s/GB" for `total` CPU
    /// seconds over `bytes`.
    pub fn per_gb_text(&self, total: Duration, bytes: u64) -> String {
        let gb = (bytes as f64 / 1e9).max(1e-9);
        let f = |d: Duration| d.as_secs_f64() / gb;
        format!(
            "cipher {:.2}, hash {:.2}, disk {:.2}, socket and the rest {:.2} s/GB",
            f(self.cipher),
            f(self.hash),
            f(self.disk),
            f(self.rest(total))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(d: Duration) -> u64 {
        let before = longhaul_sys::cpu::thread_cpu_time();
        let mut x = 0u64;
        while longhaul_sys::cpu::thread_cpu_time() - before < d {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        x
    }

    #[test]
    fn each_stage_gets_the_cpu_time_spent_in_it_and_only_after_a_take() {
        let times = StageTimes::default();
        timed(Stage::Hash, || spin(Duration::from_millis(30)));
        timed(Stage::Disk, || spin(Duration::from_millis(10)));
        assert_eq!(times.split(), StageSplit::default());
        times.take_thread();
        let s = times.split();
        assert!(s.hash >= Duration::from_millis(30), "{s:?}");
        assert!(s.disk >= Duration::from_millis(10), "{s:?}");
        assert!(s.disk < s.hash, "{s:?}");
        assert_eq!(s.cipher, Duration::ZERO);
        // A second take adds nothing new.
        times.take_thread();
        assert_eq!(times.split(), s);
        // Another thread's tally is its own until it takes.
        std::thread::scope(|sc| {
            sc.spawn(|| {
                timed(Stage::Cipher, || spin(Duration::from_millis(5)));
                times.take_thread();
            });
        });
        assert!(times.split().cipher >= Duration::from_millis(5));
        assert_eq!(
            s.rest(Duration::from_secs(1)),
            Duration::from_secs(1) - s.hash - s.disk
        );
    }

    #[test]
    fn a_stretch_splits_its_cpu_time_by_the_steps_and_gives_none_to_the_tail() {
        let times = StageTimes::default();
        let before = longhaul_sys::cpu::thread_cpu_time();
        let mut st = Stretch::begin();
        spin(Duration::from_millis(40));
        st.done(Stage::Hash);
        spin(Duration::from_millis(20));
        st.done(Stage::Disk);
        // In no step: neither stage's.
        spin(Duration::from_millis(20));
        st.end();
        let spent = longhaul_sys::cpu::thread_cpu_time() - before;
        times.take_thread();
        let s = times.split();
        // Shares of the wall clock: loose bounds, a busy host preempts the test.
        assert!(s.hash >= Duration::from_millis(20), "{s:?}");
        assert!(s.disk >= Duration::from_millis(8), "{s:?}");
        assert!(s.hash > s.disk, "{s:?}");
        assert_eq!(s.cipher, Duration::ZERO, "{s:?}");
        assert!(s.hash + s.disk <= spent, "{s:?} of {spent:?}");
        assert!(
            s.hash + s.disk <= Duration::from_millis(75),
            "the tail counted: {s:?}"
        );
    }
}
