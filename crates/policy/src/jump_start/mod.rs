//! Jump-start for repeat transfers, with no I/O: whether a run to a path seen before may
//! start at the rate the last run held there ([`decide`]), how a server bounds what a client
//! asks of it ([`bound_request`]), and the validation of the first round trips
//! ([`JumpValidator`]).
//!
//! Modelled on the IETF's Careful Resume (draft-ietf-tsvwg-careful-resume, RFC 9959): a
//! *Reconnaissance* phase (the run measures the RTT before any data and compares it with the
//! remembered one: [`decide`]), an *Unvalidated* phase (the first RTT: the data is sent at
//! the jump rate before any ACK can say whether the path takes it), a *Validating* phase
//! (the ACKs of that data come back: delivery rate, RTT, loss), then *Normal* (confirmed:
//! the rate probe takes over at the remembered rate) or *Safe Retreat* (a loss or a queue:
//! pace down to half of what was delivered, then hand over to the normal start-up).
//!
//! Where longhaul differs from the draft, and why:
//! - The draft jumps to half the saved cwnd because a QUIC sender may burst the jump; here
//!   every stream is paced from its first byte (SO_MAX_PACING_RATE), so the jump is a *rate*,
//!   not a burst, and can be close to the remembered one: [`START_SHARE`] (95 %) of the
//!   delivered rate the last run held. That rate was already below the bottleneck (the
//!   probe holds at the delivery rate it saw, which excludes headers: about 98 % of the wire
//!   at MTU 4470), so the start leaves ~7 % of the bottleneck free for cross traffic that
//!   arrived since and for the emulator's or router's jitter; the validator catches anything
//!   bigger within two round trips. 90 % would cost another 5 % of every round trip until
//!   the confirmation, and at 436 ms a 20 s run has only 45 round trips.
//! - The initial window is sized to carry that rate for one RTT (rate x RTT / MSS per
//!   stream), not more: the pacer, not the window, sets the rate.
//! - A record is trusted for [`MAX_AGE`] (a day): repeat transfers between research sites are
//!   daily or nightly jobs, so a shorter lifetime would never help the case that matters,
//!   and the validator protects the run if the path changed within the day.
//! - A loss retreats only if it is the jump's: with a queue in the RTT, or more than 1 % of
//!   the delivered segments lost. The draft retreats on any loss, which on a path with its
//!   own random loss halves every jump (measured: 1 Gbit/s x 100 ms, 1e-3 loss, a repeat
//!   bench held 430-700 Mbit/s after retreating where a first run reached 940).

use std::time::Duration;

use serde::Serialize;

/// Share of the remembered rate the run starts at, before validation.
pub const START_SHARE: f64 = 0.95;
/// Oldest record trusted.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// Relative RTT change that makes a record untrusted (10 %) ...
pub const RTT_TOLERANCE: f64 = 0.10;
/// ... or this much absolute change, whichever is larger (short paths jitter by a few ms).
pub const RTT_TOLERANCE_ABS: Duration = Duration::from_millis(3);
/// Shortest RTT worth a jump: on a LAN the normal start-up is over in milliseconds.
pub const MIN_RTT: Duration = Duration::from_millis(10);
/// Slowest remembered rate worth a jump (10 Mbit/s): below it, ten segments per RTT is
/// already most of the path on any RTT a jump is used for.
pub const MIN_RATE_BPS: u64 = 10_000_000;
/// Fastest rate a jump may start at (400 Gbit/s, the fastest paths the project targets).
pub const MAX_RATE_BPS: u64 = 400_000_000_000;
/// Largest initial window per stream, segments (the kernel's own default is 10).
pub const MAX_INIT_CWND: u32 = 1 << 20;
/// The kernel's initial window, segments: what a run gets without a jump.
pub const KERNEL_INIT_CWND: u32 = 10;
/// Streams of a jump-start run when the user gave none: the jump's initial windows carry
/// the rate, so the many streams a first run starts with ([`crate::streams_for_path`])
/// are not needed (on an emulated 436 ms path 64 streams' jumps fell short of the rate
/// for five round trips, where 8 and 1 stream held it from the first). Not fewer than 16:
/// where the sending host holds packets below TCP (a shaper on its own interface), a
/// paced stream may keep only about a millisecond of its rate queued there, and 8 streams
/// held 80 % of a 500 Mbit/s x 150 ms path whose shaper 16 and 32 streams filled to
/// 90-94 % (bench and cp alike); on the emulator at 1 Gbit/s 16 did as well as 8.
pub const JUMP_STREAMS: u16 = 16;

/// Delivered share of the start rate that confirms the jump.
const CONFIRM_SHARE: f64 = 0.80;
/// RTT rise over the minimum that shows a queue: 10 % or 5 ms, whichever is larger.
const QUEUE_SHARE: f64 = 0.10;
const QUEUE_ABS: Duration = Duration::from_millis(5);
/// Round trips after which a jump that has not been confirmed retreats.
const MAX_VALIDATE_RTTS: u32 = 5;
/// Retransmissions up to one in this many delivered segments, with no queue, are the
/// path's own loss (a random loss rate), not the jump's: an overshoot of a few percent
/// into a full drop-tail buffer drops that share of what it sends.
const LIGHT_LOSS_DENOM: u64 = 100;

/// What the last run to a path left behind (one record of the per-user path cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathMemory {
    /// The delivered rate that run held, all streams, bit/s.
    pub rate_bps: u64,
    /// Its minimum RTT.
    pub min_rtt: Duration,
    /// Its maximum segment size, bytes.
    pub mss: u32,
    /// How long ago it was written.
    pub age: Duration,
    /// How many runs in a row found about the same rate.
    pub confirmations: u32,
}

/// Why a run does not jump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum NoJump {
    /// `--no-jump-start`.
    Disabled,
    /// The user fixed the rate or the window: nothing to jump to.
    FixedRate,
    /// No record of this path (never jump to an unseen path).
    NotSeen,
    /// The record is older than [`MAX_AGE`].
    Stale {
        /// Its age, seconds.
        age_s: u64,
    },
    /// The RTT now differs from the remembered one: maybe another path.
    RttChanged {
        /// Remembered, ms.
        then_ms: u64,
        /// Measured now, ms.
        now_ms: u64,
    },
    /// The path is too short or too slow for a jump to matter.
    NotWorth,
    /// This end may not set the initial window (needs root or CAP_NET_ADMIN).
    NeedsPrivilege,
    /// The server declined (its own view of the path differs, or it may not).
    PeerDeclined {
        /// What it said.
        why: String,
    },
}

impl NoJump {
    /// One line for a human.
    pub fn describe(&self) -> String {
        match self {
            NoJump::Disabled => "turned off (--no-jump-start)".into(),
            NoJump::FixedRate => "the rate or window is fixed by the user".into(),
            NoJump::NotSeen => "no earlier run to this path".into(),
            NoJump::Stale { age_s } => format!("the path's record is {age_s} s old"),
            NoJump::RttChanged { then_ms, now_ms } => {
                format!("the RTT is {now_ms} ms now, {then_ms} ms when remembered")
            }
            NoJump::NotWorth => "the path is too short or slow for a jump to matter".into(),
            NoJump::NeedsPrivilege => "setting the initial window (route metric initcwnd) \
                 needs root or CAP_NET_ADMIN (or a BPF sock_ops program)"
                .into(),
            NoJump::PeerDeclined { why } => format!("the server declined: {why}"),
        }
    }
}

/// How a run jumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct JumpPlan {
    /// The remembered rate, bit/s.
    pub remembered_bps: u64,
    /// The remembered minimum RTT, microseconds.
    pub remembered_rtt_us: u64,
    /// Total pacing rate from the first byte, bit/s.
    pub start_bps: u64,
    /// Initial congestion window per stream, segments (route metric `initcwnd`).
    pub init_cwnd: u32,
    /// Initial receive window per stream, segments (route metric `initrwnd`).
    pub init_rwnd: u32,
}

/// What [`decide`] needs.
#[derive(Debug, Clone, Copy)]
pub struct JumpInputs {
    /// The path's record, if any.
    pub memory: Option<PathMemory>,
    /// The RTT measured now (before any data).
    pub rtt_now: Duration,
    /// Data streams of the run.
    pub streams: u16,
    /// `--no-jump-start`.
    pub disabled: bool,
    /// The rate probe runs (auto window, no `--rate`): the jump needs it to take over.
    pub probing: bool,
    /// This end may set route metrics (root or CAP_NET_ADMIN).
    pub privileged: bool,
}

/// Whether and how a run jumps.
pub fn decide(i: &JumpInputs) -> Result<JumpPlan, NoJump> {
    if i.disabled {
        return Err(NoJump::Disabled);
    }
    if !i.probing {
        return Err(NoJump::FixedRate);
    }
    let m = i.memory.ok_or(NoJump::NotSeen)?;
    if m.age > MAX_AGE {
        return Err(NoJump::Stale {
            age_s: m.age.as_secs(),
        });
    }
    if !rtt_matches(m.min_rtt, i.rtt_now) {
        return Err(NoJump::RttChanged {
            then_ms: m.min_rtt.as_millis() as u64,
            now_ms: i.rtt_now.as_millis() as u64,
        });
    }
    if i.rtt_now < MIN_RTT || m.rate_bps < MIN_RATE_BPS || m.mss == 0 {
        return Err(NoJump::NotWorth);
    }
    if !i.privileged {
        return Err(NoJump::NeedsPrivilege);
    }
    let start_bps = (m.rate_bps.min(MAX_RATE_BPS) as f64 * START_SHARE) as u64;
    let cwnd = init_cwnd(start_bps, i.rtt_now, m.mss, i.streams);
    Ok(JumpPlan {
        remembered_bps: m.rate_bps,
        remembered_rtt_us: m.min_rtt.as_micros() as u64,
        start_bps,
        init_cwnd: cwnd,
        init_rwnd: cwnd,
    })
}

/// Whether an RTT measured now matches a remembered one.
pub fn rtt_matches(then: Duration, now: Duration) -> bool {
    let diff = if then > now { then - now } else { now - then };
    diff <= then.mul_f64(RTT_TOLERANCE).max(RTT_TOLERANCE_ABS)
}

/// Segments per stream that carry `rate_bps` (all streams) for one `rtt`, at least the
/// kernel's 10, at most [`MAX_INIT_CWND`].
pub fn init_cwnd(rate_bps: u64, rtt: Duration, mss: u32, streams: u16) -> u32 {
    let bytes = rate_bps as f64 / 8.0 * rtt.as_secs_f64() / f64::from(streams.max(1));
    let segs = (bytes / f64::from(mss.max(1))).ceil();
    (segs.min(f64::from(MAX_INIT_CWND)) as u32).max(KERNEL_INIT_CWND)
}

/// What a client asks a server-side sender (cp pull, bench --reverse) to jump to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JumpRequest {
    /// Total pacing rate to start at, bit/s.
    pub start_bps: u64,
    /// The rate to hold once confirmed, bit/s.
    pub remembered_bps: u64,
    /// Initial window per stream, segments.
    pub init_cwnd: u32,
}

/// What the server knows of the path by itself.
#[derive(Debug, Clone, Copy)]
pub struct ServerView {
    /// The RTT the server measured (its control connection's TCP_INFO min RTT).
    pub rtt: Duration,
    /// The RTT the client says it measured.
    pub client_rtt: Duration,
    /// The server's MSS toward the client, bytes.
    pub mss: u32,
    /// Data streams.
    pub streams: u16,
    /// The socket buffer each of the server's streams has, bytes: no stream can carry more
    /// than this per RTT.
    pub buffer_bytes: u64,
    /// The server's own cap on a session's rate, bit/s (None: none configured).
    pub max_rate_bps: Option<u64>,
    /// The server may set route metrics.
    pub privileged: bool,
}

/// The jump a server carries out for a client's request: never faster than the server's
/// own view allows (its buffers over the RTT it measured, its configured cap), the
/// initial window never larger than that rate needs for one RTT, and none at all when the
/// client's RTT disagrees with the server's.
pub fn bound_request(req: &JumpRequest, v: &ServerView) -> Result<JumpPlan, NoJump> {
    let decline = |why: &str| NoJump::PeerDeclined { why: why.into() };
    if !v.privileged {
        return Err(NoJump::NeedsPrivilege);
    }
    if !rtt_matches(v.rtt, v.client_rtt) || v.rtt < MIN_RTT {
        return Err(decline("its RTT differs from the client's"));
    }
    let rtt_s = v.rtt.as_secs_f64().max(1e-6);
    let buffer_cap = (v.buffer_bytes as f64 * 8.0 / rtt_s * f64::from(v.streams.max(1))) as u64;
    let cap = buffer_cap
        .min(MAX_RATE_BPS)
        .min(v.max_rate_bps.unwrap_or(u64::MAX));
    let remembered = req.remembered_bps.min(cap);
    let start = req.start_bps.min(remembered);
    if start < MIN_RATE_BPS || v.mss == 0 {
        return Err(decline("the rate asked for is too low for a jump"));
    }
    let cwnd = req
        .init_cwnd
        .min(init_cwnd(start, v.rtt, v.mss, v.streams))
        .max(KERNEL_INIT_CWND);
    Ok(JumpPlan {
        remembered_bps: remembered,
        remembered_rtt_us: v.rtt.as_micros() as u64,
        start_bps: start,
        init_cwnd: cwnd,
        init_rwnd: cwnd,
    })
}

/// The rate a run leaves in the path's record for the next run: the steady rate it
/// delivered, except after a confirmed jump that held close to where it started. Such a
/// run's rate was its own start (95 % of the memory) with the pacer's cap on it, not a
/// measure of the path: recording it took 5 % off the memory at every run (measured: a
/// 1 Gbit/s x 100 ms path with 1e-3 random loss, five 10 s benches in a row, 930 -> 870 ->
/// 860 -> 830 -> 800 Mbit/s). So the memory stays where it was unless the run delivered
/// well under it (`KEEP_SHARE`: the path slowed, and the next jump starts lower) or more
/// (it rises). A path that slowed less is caught by the next run's validator or held rate.
pub fn rate_to_remember(steady_bps: u64, remembered_bps: Option<u64>, confirmed: bool) -> u64 {
    match remembered_bps {
        Some(was) if confirmed && steady_bps as f64 >= was as f64 * KEEP_SHARE => {
            steady_bps.max(was)
        }
        _ => steady_bps,
    }
}

/// Of the remembered rate, what a confirmed jump's run must deliver to keep the memory
/// (its start, 95 %, less a few percent of headers and the pacer's own shortfall).
const KEEP_SHARE: f64 = 0.90;

/// One observation of all streams of a jumping sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JumpSample {
    /// Time since the data began.
    pub at: Duration,
    /// Sum of the streams' delivery-rate samples, bit/s.
    pub delivery_bps: u64,
    /// The streams' RTT now: the median smoothed RTT of those with data in flight
    /// ([`JumpSample::of_streams`]).
    pub srtt: Duration,
    /// Smallest minimum RTT of the streams (zero: none yet).
    pub min_rtt: Duration,
    /// Segments retransmitted so far, all streams.
    pub retransmits: u64,
    /// Segments delivered so far, all streams (delivered bytes over each stream's MSS).
    pub delivered_segments: u64,
}

impl JumpSample {
    /// One sample of all streams `at` a time since the data began.
    ///
    /// The RTT is the median of the busy streams' smoothed RTTs: a queue the jump builds at
    /// the bottleneck delays every stream, while one stream's hiccup (a delay line that
    /// stalls, a stream whose srtt still carries an old sample) is not the path's. The
    /// largest of 16 streams' RTTs took such hiccups for a queue: on a path with no
    /// offloads (model b, 1 Gbit/s x 150 ms) two of two 16-stream jumps retreated on a
    /// "queue" that 8 streams never saw. Streams with nothing in flight have no fresh RTT
    /// and do not count; with none busy, all do.
    pub fn of_streams(at: Duration, streams: &[crate::StreamSample]) -> Self {
        let busy: Vec<Duration> = streams
            .iter()
            .filter(|s| s.busy && !s.srtt.is_zero())
            .map(|s| s.srtt)
            .collect();
        let mut rtts = if busy.is_empty() {
            streams
                .iter()
                .map(|s| s.srtt)
                .filter(|r| !r.is_zero())
                .collect()
        } else {
            busy
        };
        rtts.sort_unstable();
        Self {
            at,
            delivery_bps: streams.iter().map(|s| s.delivery_bps).sum(),
            srtt: rtts.get(rtts.len() / 2).copied().unwrap_or_default(),
            min_rtt: streams
                .iter()
                .map(|s| s.min_rtt)
                .filter(|r| !r.is_zero())
                .min()
                .unwrap_or_default(),
            retransmits: streams.iter().map(|s| s.retransmits).sum(),
            delivered_segments: streams
                .iter()
                .map(|s| s.delivered_bytes / u64::from(s.mss.max(MIN_MSS)))
                .sum(),
        }
    }
}

/// The smallest MSS a stream may report (IPv4's minimum); also the guess when unknown.
const MIN_MSS: u32 = 536;

/// Where validation stands (Careful Resume's phases after Reconnaissance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JumpPhase {
    /// First RTT: nothing sent at the jump rate is acknowledged yet.
    Unvalidated,
    /// The ACKs of the jump are coming back.
    Validating,
    /// The path carried the jump: the rate probe holds from here.
    Confirmed,
    /// A loss, a queue or a shortfall: paced down, normal start-up from here.
    Retreated,
}

/// Why a jump retreated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Retreat {
    /// Segments were retransmitted with a queue, or more than 1 % of them.
    Loss,
    /// The RTT rose over the minimum: the jump built a queue.
    Queue,
    /// The path delivered much less than the jump rate for `MAX_VALIDATE_RTTS` round trips.
    Shortfall,
}

/// What the sender does after a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JumpAction {
    /// Confirmed: pace at `rate_bps` (the remembered rate, all streams) and let the rate
    /// probe hold from there.
    Confirm {
        /// Total pacing rate, bit/s.
        rate_bps: u64,
        /// Segments were lost with no queue while the jump was validated: the path has
        /// loss of its own, which a loss-based congestion control would take for a full
        /// queue.
        path_loss: bool,
    },
    /// Safe retreat: pace at `rate_bps` for `drain`, then lift the cap and start the rate
    /// probe afresh.
    Retreat {
        /// Total pacing rate while the queue drains, bit/s.
        rate_bps: u64,
        /// How long to hold it.
        drain: Duration,
        /// Why.
        why: Retreat,
    },
}

/// Validates a jump over its first round trips.
#[derive(Debug, Clone)]
pub struct JumpValidator {
    plan: JumpPlan,
    rtt: Duration,
    phase: JumpPhase,
    base_retransmits: Option<u64>,
    base_segments: Option<u64>,
    best_delivery: u64,
    verdict: Option<JumpAction>,
}

impl JumpValidator {
    /// A validator for `plan` on a path whose RTT (measured before the data) is `rtt`.
    pub fn new(plan: JumpPlan, rtt: Duration) -> Self {
        Self {
            plan,
            rtt: rtt.max(Duration::from_millis(1)),
            phase: JumpPhase::Unvalidated,
            base_retransmits: None,
            base_segments: None,
            best_delivery: 0,
            verdict: None,
        }
    }

    /// The plan being validated.
    pub fn plan(&self) -> &JumpPlan {
        &self.plan
    }

    /// Where validation stands.
    pub fn phase(&self) -> JumpPhase {
        self.phase
    }

    /// The decision, once made.
    pub fn verdict(&self) -> Option<JumpAction> {
        self.verdict
    }

    /// Whether validation is over (confirmed or retreated).
    pub fn done(&self) -> bool {
        self.verdict.is_some()
    }

    /// Feeds one sample; returns the decision once, when it is made.
    pub fn on_sample(&mut self, s: JumpSample) -> Option<JumpAction> {
        if self.done() {
            return None;
        }
        let base = *self.base_retransmits.get_or_insert(s.retransmits);
        self.best_delivery = self.best_delivery.max(s.delivery_bps);
        if s.at >= self.rtt && self.phase == JumpPhase::Unvalidated {
            self.phase = JumpPhase::Validating;
        }
        let min_rtt = if s.min_rtt.is_zero() {
            self.rtt
        } else {
            s.min_rtt.min(self.rtt)
        };
        let queue = s.srtt.saturating_sub(min_rtt) > min_rtt.mul_f64(QUEUE_SHARE).max(QUEUE_ABS);
        let lost = s.retransmits.saturating_sub(base);
        let delivered = s
            .delivered_segments
            .saturating_sub(*self.base_segments.get_or_insert(s.delivered_segments));
        // A loss is the jump's when the RTT shows a queue or more than one in
        // `LIGHT_LOSS_DENOM` segments is lost; else it is the path's own random loss, which
        // every rate meets (1e-3 at 1 Gbit/s x 100 ms is six segments a round trip), and
        // retreating on it halved every jump on such a path.
        let why = if lost > 0 && (queue || lost * LIGHT_LOSS_DENOM > delivered) {
            Some(Retreat::Loss)
        } else if queue && self.phase == JumpPhase::Validating {
            // In the first RTT srtt is the handshake's: only the jump's own ACKs count.
            Some(Retreat::Queue)
        } else if s.at >= self.rtt * MAX_VALIDATE_RTTS {
            Some(Retreat::Shortfall)
        } else {
            None
        };
        let action = match why {
            Some(why) => {
                // Careful Resume's safe retreat: half of what the path delivered (never
                // more than half the jump), the queue drained for one RTT.
                let delivered = self.best_delivery.min(self.plan.start_bps);
                let rate = match why {
                    Retreat::Shortfall => delivered,
                    Retreat::Loss | Retreat::Queue => delivered / 2,
                }
                .max(MIN_RATE_BPS / 2);
                self.phase = JumpPhase::Retreated;
                JumpAction::Retreat {
                    rate_bps: rate,
                    drain: s.srtt.max(self.rtt),
                    why,
                }
            }
            None if self.phase == JumpPhase::Validating
                && s.at >= self.rtt * 2
                && s.delivery_bps as f64 >= self.plan.start_bps as f64 * CONFIRM_SHARE =>
            {
                self.phase = JumpPhase::Confirmed;
                JumpAction::Confirm {
                    rate_bps: self.plan.remembered_bps,
                    path_loss: lost > 0,
                }
            }
            None => return None,
        };
        self.verdict = Some(action);
        Some(action)
    }
}

#[cfg(test)]
mod tests;
