//! What limited a transfer, from the kernel's chrono counters (TCP_INFO busy_time,
//! rwnd_limited, sndbuf_limited) and the pacing asked for — with no I/O.

use serde::Serialize;

/// The verdict on what held a connection (or a whole run) back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitedBy {
    /// The receiver's advertised window was full.
    ReceiverWindow,
    /// The sender's socket buffer was full.
    SendBuffer,
    /// The congestion window: the network (bottleneck, queue, loss) set the pace.
    Network,
    /// The sending application did not keep the socket busy (CPU, disk, ...).
    Application,
    /// The pacing rate that was asked for.
    Pacing,
    /// Not known at this end: it receives, and the sender's counters are at the other end
    /// (`longhaul cp` pulling from a server). [`judge`] never returns it.
    Unknown,
}

impl LimitedBy {
    /// A short human description.
    pub fn describe(self) -> &'static str {
        match self {
            LimitedBy::ReceiverWindow => "receiver window",
            LimitedBy::SendBuffer => "send buffer",
            LimitedBy::Network => "network (congestion window)",
            LimitedBy::Application => "application (sender idle)",
            LimitedBy::Pacing => "pacing rate (as asked)",
            LimitedBy::Unknown => {
                "unknown (this end received; the sender's counters are on the server)"
            }
        }
    }

    /// What the user can do about it.
    pub fn advice(self) -> &'static str {
        match self {
            LimitedBy::ReceiverWindow => {
                "the receiver's buffer is smaller than the path needs: run the receiver as root (longhaul then overrides the caps) or raise net.core.rmem_max and net.ipv4.tcp_rmem on it"
            }
            LimitedBy::SendBuffer => {
                "the sender's buffer is smaller than the path needs: run the sender as root or raise net.core.wmem_max and net.ipv4.tcp_wmem on it"
            }
            LimitedBy::Network => {
                "the path itself set the pace; if that is below its capacity, look for loss (retransmits) and try more streams or --rate to pace at the bottleneck"
            }
            LimitedBy::Application => {
                "the sender could not keep the connection busy: check its CPU (the figures above) and try more streams"
            }
            LimitedBy::Pacing => "the run went at the rate asked for with --rate",
            LimitedBy::Unknown => {
                "to see what limits the sending side, push the same data to the server instead of pulling it, or run longhaul bench --reverse against it"
            }
        }
    }
}

/// Chrono counters over some span of a connection (differences of TCP_INFO fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chrono {
    /// Length of the span, microseconds.
    pub elapsed_us: u64,
    /// Time with data in flight, microseconds.
    pub busy_us: u64,
    /// Part of the busy time limited by the receiver's window.
    pub rwnd_limited_us: u64,
    /// Part of the busy time limited by the send buffer.
    pub sndbuf_limited_us: u64,
}

/// Judges what limited a sender over a span.
///
/// `paced_fraction` is the achieved rate divided by the pacing rate asked for (None when
/// unpaced). Pacing wins when the run reached 90 % of the asked rate; otherwise the largest
/// share among receiver window, send buffer, idle sender and congestion window wins.
pub fn judge(c: Chrono, paced_fraction: Option<f64>) -> LimitedBy {
    if paced_fraction.is_some_and(|f| f >= 0.9) {
        return LimitedBy::Pacing;
    }
    if c.elapsed_us == 0 {
        // Nothing was observed: no counter can speak against the network.
        return LimitedBy::Network;
    }
    let elapsed = c.elapsed_us as f64;
    let busy = c.busy_us.min(c.elapsed_us) as f64;
    let rwnd = c.rwnd_limited_us as f64;
    let sndbuf = c.sndbuf_limited_us as f64;
    let idle = elapsed - busy;
    let cwnd = (busy - rwnd - sndbuf).max(0.0);
    let shares = [
        (LimitedBy::ReceiverWindow, rwnd),
        (LimitedBy::SendBuffer, sndbuf),
        (LimitedBy::Application, idle),
        (LimitedBy::Network, cwnd),
    ];
    let mut best = shares[3];
    for s in shares {
        if s.1 > best.1 {
            best = s;
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(elapsed: u64, busy: u64, rwnd: u64, sndbuf: u64) -> Chrono {
        Chrono {
            elapsed_us: elapsed,
            busy_us: busy,
            rwnd_limited_us: rwnd,
            sndbuf_limited_us: sndbuf,
        }
    }

    #[test]
    fn each_counter_wins_when_it_dominates() {
        assert_eq!(judge(c(100, 100, 80, 0), None), LimitedBy::ReceiverWindow);
        assert_eq!(judge(c(100, 100, 0, 70), None), LimitedBy::SendBuffer);
        assert_eq!(judge(c(100, 20, 0, 0), None), LimitedBy::Application);
        assert_eq!(judge(c(100, 100, 10, 10), None), LimitedBy::Network);
    }

    #[test]
    fn pacing_wins_when_the_asked_rate_was_reached() {
        assert_eq!(judge(c(100, 100, 80, 0), Some(0.95)), LimitedBy::Pacing);
        assert_eq!(
            judge(c(100, 100, 80, 0), Some(0.5)),
            LimitedBy::ReceiverWindow
        );
    }

    #[test]
    fn bogus_counters_do_not_panic() {
        assert_eq!(judge(c(0, 50, 100, 100), None), LimitedBy::Network);
        assert_eq!(judge(c(10, 50, 100, 100), None), LimitedBy::ReceiverWindow);
        assert_eq!(judge(Chrono::default(), None), LimitedBy::Network);
    }
}
