//! A reliable, ordered byte stream (one direction of a TCP connection) in virtual time:
//! the sending end's window, pacing, loss detection and retransmission, and the receiving
//! end's reassembly and acks. The link itself is `longhaul-linkem`; this module only
//! decides what each end puts on it.
//!
//! # The model, and what it leaves out
//! - Segments carry at most [`MSS`] payload bytes plus [`HEADER_BYTES`] of headers on the
//!   wire. Packets carry sequence ranges, not bytes: the stream's bytes sit in one buffer
//!   ([`Flow::write`] appends, [`Flow::read`] takes the delivered prefix), as if copied.
//! - Every transmission has its own packet number (QUIC-like, so an RTT sample is never
//!   ambiguous). The receiver acks every segment at once with its packet number and the
//!   cumulative point (what TCP's SACK blocks and ACK field say together, minus delayed
//!   acks); a lost ack is covered by the next one's cumulative point.
//! - Loss: a segment is lost when a segment sent [`DUP_THRESH`] transmissions later was
//!   acked (the link keeps FIFO order, so this never fires spuriously), or when it is
//!   older than the RTO (srtt + max(4 rttvar, 200 ms), Linux's rule, doubled on each
//!   expiry). Lost ranges are sent again before new data.
//! - Window: slow start from [`TransportConfig::initial_window_segments`], growing by the
//!   bytes acked up to [`TransportConfig::max_window_bytes`], and then held. Loss does
//!   not shrink it: longhaul holds its pacing at the rate its probe found and treats
//!   random loss as not congestion (BBR's view), so a Reno/CUBIC window cut is left out.
//! - Pacing: each segment is spaced by its wire time at [`TransportConfig::pace_bps`]
//!   (the held rate's per-stream share), so the bottleneck queue stays near empty.
//! - The receive window: new data is sent only while `snd_nxt - snd_una` stays within
//!   [`TransportConfig::recv_window_bytes`] (the receiver's buffer holds what arrived
//!   after a hole); the application reads in zero time, so only holes fill it.
//! - The send buffer: the application may write while unacked + unsent bytes are below
//!   [`TransportConfig::send_buffer_bytes`] ([`Flow::send_buffer_free`]); a write is never
//!   split (a chunk goes in whole), so the buffer can overshoot by one chunk.
//! - FIN takes one sequence number, as in TCP. A cut ([`Flow::cut`]) stops both ends at
//!   once (an RST that arrives in zero time) and drops what is in flight.

use std::collections::{BTreeMap, VecDeque};

/// Payload bytes per segment (1500-byte MTU, TCP with timestamps).
pub const MSS: u64 = 1448;
/// IP + TCP header bytes per segment on the wire.
pub const HEADER_BYTES: u64 = 52;
/// Wire bytes of an ack.
pub const ACK_BYTES: u32 = 52;
/// Later transmissions acked before a segment counts as lost (TCP's dupthresh).
pub const DUP_THRESH: u64 = 3;
/// The floor of the RTO's variance term (Linux's `tcp_rto_min`).
const MIN_RTO_VAR_NS: u64 = 200_000_000;
/// The RTO before any RTT sample (RFC 6298).
const INITIAL_RTO_NS: u64 = 1_000_000_000;
const MAX_RTO_NS: u64 = 60_000_000_000;

/// How one stream's sending end behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportConfig {
    /// Initial congestion window, in segments.
    pub initial_window_segments: u64,
    /// Congestion window held after slow start, payload bytes.
    pub max_window_bytes: u64,
    /// The receiver's buffer: most bytes between the cumulative ack and the newest sent.
    pub recv_window_bytes: u64,
    /// The send buffer the application writes into (unacked + unsent bytes).
    pub send_buffer_bytes: u64,
    /// Pacing rate over wire bytes, bit/s.
    pub pace_bps: u64,
}

/// A segment to put on the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Packet number of this transmission.
    pub pn: u64,
    /// First sequence number.
    pub seq: u64,
    /// Sequence numbers covered (payload bytes, or 1 for the FIN alone).
    pub len: u64,
    /// Wire bytes.
    pub wire_bytes: u32,
}

/// Counters of one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Segments put on the link, first transmissions and retransmissions.
    pub segments_sent: u64,
    /// Retransmitted segments.
    pub retransmitted: u64,
    /// Payload bytes retransmitted.
    pub retransmitted_bytes: u64,
    /// Segments that arrived and were already there (a retransmission not needed).
    pub duplicates: u64,
    /// RTO expiries.
    pub rtos: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sent {
    seq: u64,
    len: u64,
    sent_ns: u64,
}

/// One direction of a connection: the sending end's state and the receiving end's.
#[derive(Debug)]
pub struct Flow {
    cfg: TransportConfig,
    /// Bytes written and not yet read by the receiving application, from `read`.
    bytes: Vec<u8>,
    head: usize,
    /// Stream offset of `bytes[head]`.
    read: u64,
    written: u64,
    fin: bool,
    cut: bool,
    /// The sending end is gone (its process died): it sends nothing more.
    halted: bool,
    // The sending end.
    snd_una: u64,
    snd_nxt: u64,
    next_pn: u64,
    outstanding: BTreeMap<u64, Sent>,
    in_flight: u64,
    largest_acked: Option<u64>,
    retransmit: VecDeque<(u64, u64)>,
    cwnd: u64,
    srtt_ns: Option<u64>,
    rttvar_ns: u64,
    backoff: u32,
    next_send_ns: u64,
    // The receiving end.
    received: BTreeMap<u64, u64>,
    rcv_nxt: u64,
    /// Counters.
    pub stats: FlowStats,
}

impl Flow {
    /// A new stream.
    pub fn new(cfg: TransportConfig) -> Self {
        Flow {
            cfg,
            bytes: Vec::new(),
            head: 0,
            read: 0,
            written: 0,
            fin: false,
            cut: false,
            halted: false,
            snd_una: 0,
            snd_nxt: 0,
            next_pn: 0,
            outstanding: BTreeMap::new(),
            in_flight: 0,
            largest_acked: None,
            retransmit: VecDeque::new(),
            cwnd: cfg.initial_window_segments * MSS,
            srtt_ns: None,
            rttvar_ns: 0,
            backoff: 0,
            next_send_ns: 0,
            received: BTreeMap::new(),
            rcv_nxt: 0,
            stats: FlowStats::default(),
        }
    }

    // ---- the sending application ----

    /// Appends bytes to the stream.
    pub fn write(&mut self, data: &[u8]) {
        assert!(!self.fin, "write after close");
        if self.cut {
            return;
        }
        if self.head > (1 << 20) && self.head * 2 > self.bytes.len() {
            self.bytes.drain(..self.head);
            self.head = 0;
        }
        self.bytes.extend_from_slice(data);
        self.written += data.len() as u64;
    }

    /// Closes the sending direction (FIN after the written bytes).
    pub fn close(&mut self) {
        self.fin = true;
    }

    /// Whether the application may write (the send buffer is not full).
    pub fn send_buffer_free(&self) -> bool {
        !self.cut && self.written - self.snd_una.min(self.written) < self.cfg.send_buffer_bytes
    }

    /// Stops the stream at both ends at once; what is in flight is lost.
    pub fn cut(&mut self) {
        self.cut = true;
        self.outstanding.clear();
        self.retransmit.clear();
        self.in_flight = 0;
    }

    /// The sending end's process died: nothing more is sent (what is on the link still
    /// arrives, as the kernel of a killed process has no more to say until its reset).
    pub fn halt(&mut self) {
        self.halted = true;
        self.outstanding.clear();
        self.retransmit.clear();
        self.in_flight = 0;
    }

    /// Whether the stream was cut.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    // ---- the receiving application ----

    /// Bytes delivered in order and not yet read.
    pub fn readable(&self) -> usize {
        (self.rcv_nxt.min(self.written) - self.read) as usize
    }

    /// Takes up to `max` delivered bytes.
    pub fn read(&mut self, max: usize) -> &[u8] {
        let n = self.readable().min(max);
        let out = &self.bytes[self.head..self.head + n];
        self.head += n;
        self.read += n as u64;
        out
    }

    /// The sender closed the stream and every byte was read.
    pub fn at_eof(&self) -> bool {
        self.fin && self.rcv_nxt > self.written && self.read == self.written
    }

    // ---- the sending end of the transport ----

    /// The end of the sequence space the application filled (the FIN counts one).
    fn seq_end(&self) -> u64 {
        self.written + u64::from(self.fin)
    }

    fn wire_bytes(&self, seq: u64, len: u64) -> u32 {
        let payload = len.min(self.written.saturating_sub(seq));
        (HEADER_BYTES + payload) as u32
    }

    /// Skips retransmissions that were acked meanwhile.
    fn prune_retransmit(&mut self) {
        while let Some(&(seq, len)) = self.retransmit.front() {
            if seq + len <= self.snd_una || self.is_received_range(seq, len) {
                self.retransmit.pop_front();
            } else {
                break;
            }
        }
    }

    /// The range the next segment would cover, if windows allow one now.
    fn next_range(&mut self) -> Option<(u64, u64, bool)> {
        if self.cut || self.halted {
            return None;
        }
        self.prune_retransmit();
        if let Some(&(seq, len)) = self.retransmit.front() {
            return (self.in_flight + len <= self.cwnd.max(MSS)).then_some((seq, len, true));
        }
        let end = self.seq_end();
        if self.snd_nxt >= end {
            return None;
        }
        let len = (end - self.snd_nxt).min(MSS);
        let fits = self.in_flight + len <= self.cwnd
            && self.snd_nxt + len - self.snd_una <= self.cfg.recv_window_bytes;
        fits.then_some((self.snd_nxt, len, false))
    }

    /// When this end next wants to send (given its windows now), if at all.
    pub fn next_send_ns(&mut self, now_ns: u64) -> Option<u64> {
        self.next_range().map(|_| self.next_send_ns.max(now_ns))
    }

    /// The next segment to send at `now_ns`, if pacing and the windows allow one.
    pub fn poll_send(&mut self, now_ns: u64) -> Option<Segment> {
        if now_ns < self.next_send_ns {
            return None;
        }
        let (seq, len, again) = self.next_range()?;
        if again {
            self.retransmit.pop_front();
            self.stats.retransmitted += 1;
            self.stats.retransmitted_bytes += len.min(self.written.saturating_sub(seq));
        } else {
            self.snd_nxt += len;
        }
        let pn = self.next_pn;
        self.next_pn += 1;
        self.outstanding.insert(
            pn,
            Sent {
                seq,
                len,
                sent_ns: now_ns,
            },
        );
        self.in_flight += len;
        self.stats.segments_sent += 1;
        let wire_bytes = self.wire_bytes(seq, len);
        let tx_ns = (u64::from(wire_bytes) * 8 * 1_000_000_000).div_ceil(self.cfg.pace_bps);
        self.next_send_ns = self.next_send_ns.max(now_ns) + tx_ns;
        Some(Segment {
            pn,
            seq,
            len,
            wire_bytes,
        })
    }

    fn rto_ns(&self) -> u64 {
        let base = match self.srtt_ns {
            Some(srtt) => srtt + (4 * self.rttvar_ns).max(MIN_RTO_VAR_NS),
            None => INITIAL_RTO_NS,
        };
        (base << self.backoff.min(16)).min(MAX_RTO_NS)
    }

    /// When the oldest segment in flight times out.
    pub fn rto_deadline(&self) -> Option<u64> {
        let (_, oldest) = self.outstanding.first_key_value()?;
        Some(oldest.sent_ns + self.rto_ns())
    }

    /// The RTO fired (`now_ns` >= [`Flow::rto_deadline`]): every segment older than the
    /// RTO is lost.
    pub fn on_timeout(&mut self, now_ns: u64) {
        let rto = self.rto_ns();
        let mut fired = false;
        while let Some((&pn, s)) = self.outstanding.first_key_value() {
            if s.sent_ns + rto > now_ns {
                break;
            }
            let s = *s;
            self.outstanding.remove(&pn);
            self.lose(s);
            fired = true;
        }
        if fired {
            self.stats.rtos += 1;
            self.backoff += 1;
        }
    }

    fn lose(&mut self, s: Sent) {
        self.in_flight -= s.len;
        if s.seq + s.len > self.snd_una {
            self.retransmit.push_back((s.seq, s.len));
        }
    }

    /// An ack of transmission `pn`, with the receiver's cumulative point.
    pub fn on_ack(&mut self, now_ns: u64, pn: u64, cumulative: u64) {
        if self.cut || self.halted {
            return;
        }
        if let Some(s) = self.outstanding.remove(&pn) {
            self.in_flight -= s.len;
            self.sample_rtt(now_ns - s.sent_ns);
            if self.cwnd < self.cfg.max_window_bytes {
                self.cwnd = (self.cwnd + s.len).min(self.cfg.max_window_bytes);
            }
            self.backoff = 0;
            self.largest_acked = Some(self.largest_acked.map_or(pn, |l| l.max(pn)));
        }
        self.snd_una = self.snd_una.max(cumulative);
        // Whatever the cumulative point covers arrived (its own ack may have been lost).
        while let Some((&p, s)) = self.outstanding.first_key_value() {
            if s.seq + s.len > self.snd_una {
                break;
            }
            self.in_flight -= s.len;
            self.outstanding.remove(&p);
        }
        if let Some(largest) = self.largest_acked {
            while let Some((&p, s)) = self.outstanding.first_key_value() {
                if p + DUP_THRESH > largest {
                    break;
                }
                let s = *s;
                self.outstanding.remove(&p);
                self.lose(s);
            }
        }
    }

    fn sample_rtt(&mut self, rtt: u64) {
        match self.srtt_ns {
            None => {
                self.srtt_ns = Some(rtt);
                self.rttvar_ns = rtt / 2;
            }
            Some(srtt) => {
                self.rttvar_ns = (3 * self.rttvar_ns + srtt.abs_diff(rtt)) / 4;
                self.srtt_ns = Some((7 * srtt + rtt) / 8);
            }
        }
    }

    // ---- the receiving end of the transport ----

    fn is_received_range(&self, seq: u64, len: u64) -> bool {
        if seq + len <= self.rcv_nxt {
            return true;
        }
        self.received
            .range(..=seq)
            .next_back()
            .is_some_and(|(_, &end)| end >= seq + len)
    }

    /// A segment arrived: returns the cumulative point for its ack and the payload bytes
    /// new to this end (0 for a duplicate; segments are always sent again whole).
    pub fn on_data(&mut self, seq: u64, len: u64) -> (u64, u64) {
        if self.is_received_range(seq, len) {
            self.stats.duplicates += 1;
            return (self.rcv_nxt, 0);
        }
        let new = len.min(self.written.saturating_sub(seq));
        let (mut start, mut end) = (seq, seq + len);
        // Merge with overlapping or touching ranges.
        if let Some((&s, &e)) = self.received.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
                self.received.remove(&s);
            }
        }
        while let Some((&s, &e)) = self.received.range(start..).next() {
            if s > end {
                break;
            }
            end = end.max(e);
            self.received.remove(&s);
        }
        if start <= self.rcv_nxt {
            self.rcv_nxt = self.rcv_nxt.max(end);
        } else {
            self.received.insert(start, end);
        }
        (self.rcv_nxt, new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> TransportConfig {
        TransportConfig {
            initial_window_segments: 10,
            max_window_bytes: 100 * MSS,
            recv_window_bytes: 1000 * MSS,
            send_buffer_bytes: 1 << 30,
            pace_bps: 1_000_000_000,
        }
    }

    #[test]
    fn reassembles_out_of_order_and_counts_duplicates() {
        let mut f = Flow::new(cfg());
        f.write(&[7; 5000]);
        assert_eq!(f.on_data(1448, 1448), (0, 1448));
        assert_eq!(f.on_data(0, 1448), (2896, 1448));
        assert_eq!(f.on_data(0, 1448), (2896, 0));
        assert_eq!(f.stats.duplicates, 1);
        assert_eq!(f.readable(), 2896);
        assert_eq!(f.read(10_000).len(), 2896);
    }

    #[test]
    fn three_later_acks_declare_a_loss_and_it_is_sent_again_first() {
        let mut f = Flow::new(cfg());
        f.write(&[1; 10 * 1448]);
        let segs: Vec<Segment> = (0..10)
            .map(|i| f.poll_send(i * 1_000_000).expect("window open"))
            .collect();
        for s in &segs[1..4] {
            f.on_ack(200_000_000, s.pn, 0);
        }
        let again = f.poll_send(200_000_000).expect("retransmission");
        assert_eq!((again.seq, again.len), (0, 1448));
        assert_eq!(f.stats.retransmitted, 1);
    }
}
