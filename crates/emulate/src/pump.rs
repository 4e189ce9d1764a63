//! The packet loop of one direction: read everything the sending end's TUN device has,
//! let the link model decide each packet's fate (per wire segment), cut super-packets
//! whose segments were partly lost, hold the survivors in a delay line, and write what is
//! due into the receiving end's TUN device, sleeping (timerfd, then a short spin) until
//! the next release.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use longhaul_linkem::{DelayLine, Link, Packet, Verdict};
use longhaul_sys::timer::{monotonic_ns, ReadOrDeadline};
use longhaul_sys::tun::{TunDevice, MAX_PACKET_LEN};

use super::log::{LogEvent, PacketLog};
use super::stats::DirectionStats;
use longhaul_linkem::gso::{cut_run, Layout, VNET_HDR_LEN};
use longhaul_linkem::wire::{Chunk, WirePacing};

/// SCHED_FIFO priority of the packet loops (middle of the range: above every ordinary
/// task, below the kernel's own real-time threads).
const REALTIME_PRIORITY: i32 = 50;
/// Packets read in one go before due packets get written.
const READ_BURST: usize = 64;
/// A release this close (ns) is waited for by spinning, not sleeping.
const SPIN_NS: u64 = 30_000;
/// The most (ns) a packet is released before its time to make up for late timer
/// wake-ups (see [`learn_early`]).
const MAX_EARLY_NS: u64 = 250_000;
/// Only sleeps at least this long (ns) teach [`learn_early`]: their lateness is the host's
/// timer and scheduler latency; short sleeps come in a busy loop, late because of the work.
const LEARN_FROM_SLEEP_NS: u64 = 1_000_000;
/// How often (ns) the loop publishes its counters.
const PUBLISH_NS: u64 = 20_000_000;
/// Big buffers kept for reuse when idle.
const POOL_MAX: usize = 256;
/// Packets up to this size are copied into a right-sized buffer instead of keeping a
/// 64 KiB one.
const SMALL_PACKET: usize = 4096;

/// What a direction's thread needs.
pub(crate) struct Pump {
    pub rx: Arc<TunDevice>,
    pub tx: Arc<TunDevice>,
    pub link: Link,
    pub stats: Arc<Mutex<DirectionStats>>,
    pub stop: Arc<AtomicBool>,
    pub epoch_ns: u64,
    pub realtime: bool,
    /// The CPU this loop is pinned to when it runs real-time (see [`loop_cpus`]).
    pub cpu: Option<usize>,
    pub max_held_bytes: u64,
    pub pacing: WirePacing,
    pub log: Option<PacketLog>,
}

struct State {
    verdict: Verdict,
    line: DelayLine<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    scratch: Vec<u8>,
    /// Bytes of the packets in `line`.
    held_bytes: u64,
    /// Memory those packets hold (their buffers' capacity): what the limit bounds.
    held_memory: u64,
    /// Latest release of an in-order packet.
    last_release_ns: u64,
    /// Chunks of the packet being handled (reused).
    chunks: Vec<Chunk>,
    counters: DirectionStats,
    /// How long before its time a packet is released: see [`learn_early`].
    early_ns: u64,
}

/// The CPUs the two real-time packet loops are pinned to, given the CPUs this process may
/// use: each its own among the last two when there are four or more, both on the last one
/// otherwise. Two SCHED_FIFO loops free to spread over a 2-core host could hold both
/// cores at once (each spins before a release), leaving the TCP endpoints under test and
/// everything else only the kernel's 5 % real-time throttling margin; on one core they
/// leave the other whole. `None` when the set is empty (nothing to pin to).
pub(crate) fn loop_cpus(allowed: &[usize]) -> [Option<usize>; 2] {
    match allowed {
        [] => [None, None],
        [.., a, b] if allowed.len() >= 4 => [Some(*b), Some(*a)],
        [.., last] => [Some(*last), Some(*last)],
    }
}

/// The next early-release allowance after a timed sleep woke `late_ns` past its
/// deadline: a moving average of what the spin before each release does not absorb, at
/// most [`MAX_EARLY_NS`]. On a virtual machine a timer wake-up can run 100-250 us late,
/// which delayed every packet after an idle moment by that much (a configured 50 ms RTT
/// measured 50.4-50.56 ms). Waking earlier and spinning longer fixed it but starved a
/// 2-core host (the loop runs real-time); releasing a little early costs nothing.
fn learn_early(early_ns: u64, late_ns: u64) -> u64 {
    ((early_ns * 7 + late_ns.saturating_sub(SPIN_NS)) / 8).min(MAX_EARLY_NS)
}

impl State {
    /// Keeps in-order packets in order: a release no earlier than the last one's (a
    /// reordered packet is exempt and does not move the mark).
    fn in_order(&mut self, release_ns: u64, reordered: bool) -> u64 {
        if reordered {
            return release_ns;
        }
        self.last_release_ns = self.last_release_ns.max(release_ns);
        self.last_release_ns
    }

    /// Puts a packet into the delay line unless its buffer would take the memory held past
    /// `max` bytes (then it is dropped and counted as a fault: memory is bounded whatever
    /// the config). The buffer's capacity counts, not the packet's length: a 5 kB packet
    /// in a 64 KiB buffer holds 64 KiB.
    fn hold(&mut self, release_ns: u64, pkt: Vec<u8>, max: u64) {
        let memory = pkt.capacity() as u64;
        if self.held_memory + memory > max {
            self.counters.overflow_drops += 1;
            return;
        }
        self.held_memory += memory;
        self.held_bytes += pkt.len() as u64;
        self.line.push(release_ns, pkt);
    }

    /// Takes a released packet off the books.
    fn released(&mut self, pkt: &[u8], capacity: usize) {
        self.held_bytes -= pkt.len() as u64;
        self.held_memory -= capacity as u64;
    }
}

impl Pump {
    /// Runs until `stop` is set.
    pub fn run(mut self) -> io::Result<()> {
        let _ = longhaul_sys::process::set_timer_slack(1);
        let mut counters = DirectionStats::default();
        if self.realtime {
            // Not fatal: without it releases are late by up to a time slice under load.
            if let Some(cpu) = self.cpu {
                let _ = longhaul_sys::process::pin_to_cpu(cpu);
            }
            counters.realtime =
                longhaul_sys::process::set_realtime_priority(REALTIME_PRIORITY).is_ok();
        }
        let waiter = ReadOrDeadline::new(std::os::fd::AsFd::as_fd(&*self.rx))?;
        let mut st = State {
            verdict: Verdict::default(),
            line: DelayLine::new(),
            pool: Vec::new(),
            scratch: Vec::with_capacity(MAX_PACKET_LEN),
            held_bytes: 0,
            held_memory: 0,
            last_release_ns: 0,
            chunks: Vec::new(),
            counters,
            early_ns: 0,
        };
        let mut next_publish = 0;
        while !self.stop.load(Ordering::Relaxed) {
            let more = self.read_burst(&mut st)?;
            let now = self.now();
            self.release_due(&mut st, now);
            if now >= next_publish {
                self.publish(&mut st, now);
                next_publish = now + PUBLISH_NS;
            }
            if more {
                continue;
            }
            // When the next packet goes, on this loop's clock (early by `early_ns`).
            let next = st
                .line
                .next_release()
                .map(|t| t.saturating_sub(st.early_ns));
            match next {
                Some(t) if t <= self.now() + SPIN_NS => self.spin_until(&mut st, t)?,
                _ => {
                    let wake_at = next.map(|t| t.saturating_sub(SPIN_NS));
                    let slept_from = self.now();
                    let wake = waiter.wait(wake_at.map(|w| self.epoch_ns + w), 50)?;
                    st.counters.sleeps += 1;
                    if wake.readable {
                        st.counters.wakeups_readable += 1;
                    } else if let (Some(w), true) = (wake_at, wake.deadline) {
                        if w.saturating_sub(slept_from) >= LEARN_FROM_SLEEP_NS {
                            st.early_ns = learn_early(st.early_ns, self.now().saturating_sub(w));
                        }
                    }
                }
            }
        }
        self.publish(&mut st, self.now());
        if let Some(log) = &mut self.log {
            log.flush();
        }
        Ok(())
    }

    fn now(&self) -> u64 {
        monotonic_ns().saturating_sub(self.epoch_ns)
    }

    /// Reads up to a burst; true if the burst limit stopped it (more may wait).
    fn read_burst(&mut self, st: &mut State) -> io::Result<bool> {
        for _ in 0..READ_BURST {
            match self.rx.recv_vec(&mut st.scratch) {
                Ok(n) if n > VNET_HDR_LEN => {
                    let now = self.now();
                    self.handle(st, now);
                }
                Ok(_) => st.counters.runt_packets += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    st.counters.read_errors += 1;
                    if st.counters.read_errors > 1000 {
                        return Err(e);
                    }
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn handle(&mut self, st: &mut State, now: u64) {
        let layout = Layout::of(&st.scratch);
        let packet = match layout.transport {
            Some(_) => Packet::gso(
                layout.headers_len as u32,
                layout.payload_len as u32,
                layout.segment_payload as u32,
            ),
            None => Packet::single(layout.payload_len as u32),
        };
        self.link.offer(now, packet, &mut st.verdict);
        st.counters.reads += 1;
        if let Some(log) = &mut self.log {
            log.record(
                now,
                LogEvent::In,
                layout.payload_len + layout.headers_len,
                layout.segments,
            );
            if st.verdict.dropped_queue_segments + st.verdict.dropped_loss_segments > 0 {
                let lost = st.verdict.dropped_queue_segments + st.verdict.dropped_loss_segments;
                log.record(now, LogEvent::Drop, 0, lost);
            }
        }
        if st.verdict.is_dropped() {
            return;
        }
        let whole = st.verdict.is_whole();
        if whole && self.pacing.chunk_segments(&layout) >= layout.segments {
            let run = st.verdict.runs[0];
            let release = st.in_order(run.release_ns, st.verdict.reordered);
            let buf = take_packet(st);
            if run.copies > 1 {
                st.hold(release, buf.clone(), self.max_held_bytes);
            }
            st.hold(release, buf, self.max_held_bytes);
            return;
        }
        if !whole {
            st.counters.split_packets += 1;
        }
        st.chunks.clear();
        for run in &st.verdict.runs {
            let before = st.chunks.len();
            self.pacing.chunks(
                &layout,
                run.first_segment,
                run.segments,
                run.release_ns,
                &mut st.chunks,
            );
            if run.copies > 1 {
                for k in before..st.chunks.len() {
                    let c = st.chunks[k];
                    st.chunks.push(c);
                }
            }
        }
        let reordered = st.verdict.reordered;
        for k in 0..st.chunks.len() {
            let c = st.chunks[k];
            let release = st.in_order(c.release_ns, reordered);
            let mut out = Vec::with_capacity(
                VNET_HDR_LEN + layout.headers_len + c.segments as usize * layout.segment_payload,
            );
            if !cut_run(&st.scratch, &layout, c.first, c.segments, &mut out) {
                // Not splittable (cannot happen for a model that keeps one-segment packets
                // whole); forward the packet whole rather than corrupt it.
                st.counters.unsplittable += 1;
                out = st.scratch.clone();
            }
            st.hold(release, out, self.max_held_bytes);
        }
    }

    /// Writes every packet due at `now`, counting the early-release allowance.
    fn release_due(&mut self, st: &mut State, now: u64) {
        while let Some((release_ns, pkt)) = st.line.pop_due(now + st.early_ns) {
            st.released(&pkt, pkt.capacity());
            self.write(st, release_ns, pkt);
        }
    }

    fn write(&mut self, st: &mut State, release_ns: u64, pkt: Vec<u8>) {
        let sent_at = self.now();
        match self.tx.send(&pkt) {
            Ok(_) => st.counters.writes += 1,
            Err(_) => st.counters.write_errors += 1,
        }
        let late = sent_at.saturating_sub(release_ns);
        st.counters.record_lateness(late);
        if let Some(log) = &mut self.log {
            let layout = Layout::of(&pkt);
            log.record(
                sent_at,
                LogEvent::Out,
                layout.payload_len + layout.headers_len,
                layout.segments,
            );
        }
        if pkt.capacity() >= MAX_PACKET_LEN && st.pool.len() < POOL_MAX {
            st.pool.push(pkt);
        }
    }

    fn spin_until(&mut self, st: &mut State, t: u64) -> io::Result<()> {
        st.counters.spins += 1;
        loop {
            let now = self.now();
            if now >= t {
                self.release_due(st, now);
                return Ok(());
            }
            if self.read_burst(st)? {
                return Ok(());
            }
            std::hint::spin_loop();
        }
    }

    fn publish(&mut self, st: &mut State, now: u64) {
        st.counters.link = self.link.stats().clone();
        st.counters.in_flight_packets = st.line.len() as u64;
        st.counters.in_flight_bytes = st.held_bytes;
        let (backlog_bytes, _) = self.link.backlog(now);
        st.counters.backlog_bytes = backlog_bytes;
        if let Ok(mut shared) = self.stats.lock() {
            *shared = st.counters.clone();
        }
    }
}

/// Moves the just-read packet out of the scratch buffer into a buffer for the delay line:
/// a copy of its own size unless it fills a good part of a big buffer (a 9000-byte frame
/// kept in a 64 KiB buffer would hold seven times its size).
fn take_packet(st: &mut State) -> Vec<u8> {
    if st.scratch.len() <= SMALL_PACKET.max(MAX_PACKET_LEN / 4) {
        return st.scratch.clone();
    }
    let fresh = st
        .pool
        .pop()
        .unwrap_or_else(|| Vec::with_capacity(MAX_PACKET_LEN));
    std::mem::replace(&mut st.scratch, fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            verdict: Verdict::default(),
            line: DelayLine::new(),
            pool: Vec::new(),
            scratch: Vec::new(),
            held_bytes: 0,
            held_memory: 0,
            last_release_ns: 0,
            chunks: Vec::new(),
            counters: DirectionStats::default(),
            early_ns: 0,
        }
    }

    #[test]
    fn the_delay_line_limit_counts_the_memory_packets_hold() {
        let mut st = state();
        let max = 1 << 20;
        for i in 0..100 {
            let mut pkt = Vec::with_capacity(MAX_PACKET_LEN);
            pkt.resize(5000, 0);
            st.hold(i, pkt, max);
        }
        // 5000-byte packets in 64 KiB buffers: 15 fit in 1 MiB, not 209.
        assert_eq!(st.line.len() as u64, max / MAX_PACKET_LEN as u64);
        assert_eq!(st.counters.overflow_drops, 100 - st.line.len() as u64);
        assert!(st.held_memory <= max);
        while let Some((_, pkt)) = st.line.pop_due(u64::MAX) {
            st.released(&pkt, pkt.capacity());
        }
        assert_eq!((st.held_bytes, st.held_memory), (0, 0));
    }

    #[test]
    fn a_mid_sized_packet_gets_a_buffer_of_its_own_size() {
        let mut st = state();
        st.scratch = Vec::with_capacity(MAX_PACKET_LEN);
        st.scratch.resize(9000, 7);
        let pkt = take_packet(&mut st);
        assert_eq!(pkt.len(), 9000);
        assert!(pkt.capacity() < 2 * 9000, "{}", pkt.capacity());
    }

    #[test]
    fn real_time_loops_leave_a_core_to_the_rest() {
        assert_eq!(loop_cpus(&[]), [None, None]);
        assert_eq!(loop_cpus(&[0]), [Some(0), Some(0)]);
        assert_eq!(loop_cpus(&[0, 1]), [Some(1), Some(1)]);
        assert_eq!(loop_cpus(&[0, 1, 2]), [Some(2), Some(2)]);
        assert_eq!(loop_cpus(&[0, 1, 2, 3]), [Some(3), Some(2)]);
        assert_eq!(loop_cpus(&[2, 5, 7, 9, 11]), [Some(11), Some(9)]);
    }

    #[test]
    fn early_release_follows_late_wakeups_within_bounds() {
        // Wake-ups the spin absorbs teach nothing.
        assert_eq!(learn_early(0, SPIN_NS), 0);
        // Wake-ups 230 us late: packets go about 200 us early.
        let mut e = 0;
        for _ in 0..100 {
            e = learn_early(e, 230_000);
        }
        assert!((199_000..=200_000).contains(&e), "{e}");
        // ...and back on time when the host calms.
        for _ in 0..100 {
            e = learn_early(e, 0);
        }
        assert!(e < 1_000, "{e}");
        // A stall never sends packets more than 250 us early.
        assert_eq!(learn_early(MAX_EARLY_NS, 50_000_000), MAX_EARLY_NS);
    }
}
