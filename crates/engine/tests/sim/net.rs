//! The network of one run: both directions of the path (`longhaul-linkem`'s [`Duplex`],
//! whose releases wait in [`DelayLine`]s) and the streams over it, stepped on a virtual
//! clock in nanoseconds.
//!
//! End `a` is the sending host, end `b` the receiving one. Every stream's segments travel
//! in its own direction and its acks in the other, through the same links, so data and
//! the control connection share the bottleneck's queue as on a real path.

use longhaul_linkem::{DelayLine, Direction, Duplex, LinkConfig, Packet, Verdict};

use super::transport::{Flow, TransportConfig, ACK_BYTES};

/// What a packet on the link is.
#[derive(Debug, Clone, Copy)]
enum Wire {
    Data {
        flow: usize,
        pn: u64,
        seq: u64,
        len: u64,
    },
    Ack {
        flow: usize,
        pn: u64,
        cumulative: u64,
    },
}

/// The path and the streams of one run.
pub struct Net {
    /// Virtual time, ns.
    pub now: u64,
    duplex: Duplex,
    /// Releases per direction: [a -> b, b -> a].
    lines: [DelayLine<Wire>; 2],
    verdict: Verdict,
    /// The streams; each one's data goes in `dirs[i]`.
    pub flows: Vec<Flow>,
    dirs: Vec<Direction>,
    /// Flows whose bytes count as the transfer's data (the data streams).
    counted: Vec<bool>,
    /// Payload bytes that reached the receiving end of the counted flows for the first
    /// time (in order or not: what the link carried usefully), and when.
    pub delivered: Vec<(u64, u64)>,
    delivered_total: u64,
}

fn slot(dir: Direction) -> usize {
    match dir {
        Direction::AToB => 0,
        Direction::BToA => 1,
    }
}

fn reverse(dir: Direction) -> Direction {
    match dir {
        Direction::AToB => Direction::BToA,
        Direction::BToA => Direction::AToB,
    }
}

impl Net {
    /// A network starting at `now` over links configured as given.
    pub fn new(now: u64, forward: LinkConfig, backward: LinkConfig, seed: u64) -> Self {
        Net {
            now,
            duplex: Duplex::new(forward, backward, seed),
            lines: [DelayLine::new(), DelayLine::new()],
            verdict: Verdict::default(),
            flows: Vec::new(),
            dirs: Vec::new(),
            counted: Vec::new(),
            delivered: Vec::new(),
            delivered_total: 0,
        }
    }

    /// Opens a stream whose bytes go in `dir`; `counted`: its bytes are the transfer's.
    pub fn open(&mut self, dir: Direction, cfg: TransportConfig, counted: bool) -> usize {
        self.flows.push(Flow::new(cfg));
        self.dirs.push(dir);
        self.counted.push(counted);
        self.flows.len() - 1
    }

    /// The links' counters.
    pub fn link_stats(&self) -> longhaul_linkem::DuplexStats {
        self.duplex.stats()
    }

    fn offer(&mut self, dir: Direction, wire_bytes: u32, what: Wire) {
        let now = self.now;
        self.duplex
            .link_mut(dir)
            .offer(now, Packet::single(wire_bytes), &mut self.verdict);
        for run in &self.verdict.runs {
            for _ in 0..run.copies {
                self.lines[slot(dir)].push(run.release_ns, what);
            }
        }
    }

    /// Delivers every packet due now, acking data at once.
    pub fn deliver_due(&mut self) {
        for s in 0..2 {
            while let Some((_, w)) = self.lines[s].pop_due(self.now) {
                match w {
                    Wire::Data { flow, pn, seq, len } => {
                        if self.flows[flow].is_cut() {
                            continue;
                        }
                        let (cumulative, new) = self.flows[flow].on_data(seq, len);
                        if self.counted[flow] && new > 0 {
                            self.delivered_total += new;
                            self.delivered.push((self.now, self.delivered_total));
                        }
                        let back = reverse(self.dirs[flow]);
                        self.offer(
                            back,
                            ACK_BYTES,
                            Wire::Ack {
                                flow,
                                pn,
                                cumulative,
                            },
                        );
                    }
                    Wire::Ack {
                        flow,
                        pn,
                        cumulative,
                    } => self.flows[flow].on_ack(self.now, pn, cumulative),
                }
            }
        }
    }

    /// Fires the retransmission timers that are due.
    pub fn fire_timers(&mut self) {
        let now = self.now;
        for f in &mut self.flows {
            if f.rto_deadline().is_some_and(|d| d <= now) {
                f.on_timeout(now);
            }
        }
    }

    /// Puts on the links every segment that pacing and the windows allow now.
    pub fn transmit(&mut self) {
        for i in 0..self.flows.len() {
            while let Some(seg) = self.flows[i].poll_send(self.now) {
                let what = Wire::Data {
                    flow: i,
                    pn: seg.pn,
                    seq: seg.seq,
                    len: seg.len,
                };
                self.offer(self.dirs[i], seg.wire_bytes, what);
            }
        }
    }

    /// The next moment something happens on the network, if anything will.
    pub fn next_event(&mut self) -> Option<u64> {
        let now = self.now;
        let lines = self.lines.iter().filter_map(|l| l.next_release());
        let flows = self.flows.iter_mut().flat_map(|f| {
            let send = f.next_send_ns(now);
            let rto = f.rto_deadline();
            [send, rto]
        });
        lines.chain(flows.flatten()).min()
    }

    /// Payload bytes that reached the receiving end of the data streams.
    pub fn delivered_total(&self) -> u64 {
        self.delivered_total
    }
}
