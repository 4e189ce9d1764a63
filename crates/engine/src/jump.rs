//! The jump-start driver (the decision and validator are `longhaul_policy::jump_start`):
//! looks up the path in the user's [`PathCache`], decides, sets the initial windows on the
//! route to the peer for the run ([`InitialWindows`], removed when the run ends, also when it
//! fails), bounds a client's request at a server, writes the path's record after a
//! successful run, and fills the `jump_start` object of the JSON start and end records.

use std::net::{IpAddr, TcpStream};
use std::time::Duration;

use longhaul_policy::jump_start::{self, bound_request, JumpAction, Retreat};
use longhaul_policy::{JumpInputs, JumpPlan, JumpRequest, JumpValidator, NoJump, ServerView};
use longhaul_proto::{JumpAsk, JumpOutcome};
use longhaul_sys::route::InitialWindows;
use serde::Serialize;

use crate::path_cache::{now_unix, PathCache, PathRecord};

/// What the JSON says about jump-start (`start.jump_start`, `end.jump_start`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct JumpReport {
    /// Whether the run started at the remembered rate.
    pub used: bool,
    /// The remembered delivered rate of the path, bit/s.
    pub remembered_rate_bps: Option<u64>,
    /// The remembered minimum RTT, ms.
    pub remembered_rtt_ms: Option<f64>,
    /// Runs that confirmed the record.
    pub confirmations: Option<u32>,
    /// Total pacing rate from the first byte, bit/s.
    pub start_rate_bps: Option<u64>,
    /// Route metric `initcwnd` per stream, segments.
    pub initcwnd: Option<u32>,
    /// Route metric `initrwnd` per stream, segments.
    pub initrwnd: Option<u32>,
    /// Why not used.
    pub not_used: Option<String>,
    /// What it would need (root / CAP_NET_ADMIN) when that is why.
    pub needs: Option<String>,
    /// The validation's verdict: `confirmed`, `retreated`, or `pending` (run ended first).
    pub verdict: Option<String>,
    /// Why it retreated: `loss`, `queue` or `shortfall`.
    pub retreat: Option<String>,
    /// What the server said when it did not follow the request.
    pub server_note: Option<String>,
}

impl JumpReport {
    fn not_used(why: &NoJump, memory: Option<&PathRecord>) -> Self {
        let mut r = Self::remembered(memory);
        r.not_used = Some(why.describe());
        if *why == NoJump::NeedsPrivilege {
            r.needs = Some(
                "root or CAP_NET_ADMIN to set the route metrics initcwnd/initrwnd (or a BPF \
                 sock_ops program that sets the initial window)"
                    .into(),
            );
        }
        r
    }

    fn remembered(memory: Option<&PathRecord>) -> Self {
        Self {
            remembered_rate_bps: memory.map(|m| m.rate_bps),
            remembered_rtt_ms: memory.map(|m| m.min_rtt_us as f64 / 1e3),
            confirmations: memory.map(|m| m.confirmations),
            ..Self::default()
        }
    }

    fn used(plan: &JumpPlan, memory: Option<&PathRecord>) -> Self {
        Self {
            used: true,
            start_rate_bps: Some(plan.start_bps),
            initcwnd: Some(plan.init_cwnd),
            initrwnd: Some(plan.init_rwnd),
            ..Self::remembered(memory)
        }
    }

    /// Records the validator's verdict (`None`: the run ended before one).
    pub fn set_verdict(&mut self, verdict: Option<JumpAction>) {
        self.set_outcome(verdict.map(outcome_of));
    }

    /// Records the verdict the sending server told (`None`: it told none: an older
    /// server, or the run ended before its validator decided).
    pub fn set_peer_outcome(&mut self, outcome: Option<JumpOutcome>) {
        match outcome {
            Some(o) => self.set_outcome(Some(o)),
            None if self.used => {
                self.verdict = Some("not told by the server (see its log)".into());
            }
            None => {}
        }
    }

    /// Records the verdict as the wire says it: this end's validator's, or the sending
    /// server's (`None`: the run ended before one).
    pub fn set_outcome(&mut self, outcome: Option<JumpOutcome>) {
        if !self.used {
            return;
        }
        let (v, why) = match outcome {
            Some(JumpOutcome::Confirmed) => ("confirmed", None),
            Some(JumpOutcome::RetreatedOnLoss) => ("retreated", Some("loss")),
            Some(JumpOutcome::RetreatedOnQueue) => ("retreated", Some("queue")),
            Some(JumpOutcome::RetreatedOnShortfall) => ("retreated", Some("shortfall")),
            None => ("pending", None),
        };
        self.verdict = Some(v.into());
        self.retreat = why.map(str::to_string);
    }

    /// The rate to record for the next run, given the steady rate this one delivered
    /// (see `longhaul_policy::jump_start::rate_to_remember`).
    pub fn rate_to_remember(&self, steady_bps: u64) -> u64 {
        let confirmed = self.used && self.verdict.as_deref() == Some("confirmed");
        jump_start::rate_to_remember(steady_bps, self.remembered_rate_bps, confirmed)
    }

    /// One line for the human output.
    pub fn describe(&self) -> String {
        if self.used {
            format!(
                "jump-start: {:.3} Gbit/s from the first byte (remembered {:.3} Gbit/s at \
                 {:.1} ms), initcwnd {}{}",
                self.start_rate_bps.unwrap_or(0) as f64 / 1e9,
                self.remembered_rate_bps.unwrap_or(0) as f64 / 1e9,
                self.remembered_rtt_ms.unwrap_or(0.0),
                self.initcwnd.unwrap_or(0),
                match (&self.verdict, &self.retreat) {
                    (Some(v), Some(r)) => format!(", {v} ({r})"),
                    (Some(v), None) => format!(", {v}"),
                    _ => String::new(),
                }
            )
        } else {
            format!(
                "jump-start: not used: {}",
                self.not_used.as_deref().unwrap_or("?")
            )
        }
    }
}

/// What the user asked of a client's run, as far as its jump and stream count go (bench
/// and cp alike).
#[derive(Debug, Clone, Copy)]
pub struct JumpWish {
    /// Jump-start allowed (`--no-jump-start` not given).
    pub enabled: bool,
    /// `-P`: the user's stream count.
    pub user_streams: Option<u16>,
    /// The rate probe runs (no `--rate`, no fixed window): a jump needs it to take over.
    pub probing: bool,
}

impl JumpWish {
    /// Whether the probe runs on a path of `rtt` (not below
    /// [`longhaul_policy::MIN_PROBE_RTT`]).
    fn probing_at(&self, rtt: Duration) -> bool {
        self.probing && rtt >= longhaul_policy::MIN_PROBE_RTT
    }

    /// The user's count within the protocol's bounds.
    pub(crate) fn user_count(&self) -> Option<u16> {
        self.user_streams
            .map(|n| n.clamp(1, longhaul_proto::limits::MAX_STREAMS))
    }
}

/// A path as the path cache keys it (both ends' addresses), with its RTT: measured at
/// the connect, or remembered before it.
#[derive(Debug, Clone, Copy)]
pub struct PathNow {
    /// The server's address.
    pub peer: IpAddr,
    /// This end's address toward it.
    pub local: IpAddr,
    /// The path's RTT.
    pub rtt: Duration,
}

impl PathNow {
    /// The path's record in the user's cache, if any.
    pub fn record(&self) -> Option<PathRecord> {
        lookup(self.peer, self.local)
    }
}

/// The record of the path from `local` to `peer` in the user's cache, if any.
pub(crate) fn lookup(peer: IpAddr, local: IpAddr) -> Option<PathRecord> {
    PathCache::open_default()
        .ok()
        .and_then(|c| c.lookup(peer, local))
}

/// A client's jump for one run: the plan, the route guard and the report.
pub struct ClientJump {
    /// The plan, when the run jumps.
    pub plan: Option<JumpPlan>,
    /// What the JSON says.
    pub report: JumpReport,
    route: Option<InitialWindows>,
    /// A planned jump's route being set meanwhile ([`ClientJump::set_route`] waits for it).
    route_setting: RouteSetting,
}

/// A route being set on a thread of its own: waited for when dropped, so that the route
/// it set is removed (a run that ends before it waits would otherwise leave it behind
/// if the process exits meanwhile).
#[derive(Default)]
struct RouteSetting(Option<std::thread::JoinHandle<std::io::Result<InitialWindows>>>);

impl RouteSetting {
    /// What setting the route came to (`None`: nothing was being set).
    fn wait(&mut self) -> Option<std::io::Result<InitialWindows>> {
        let handle = self.0.take()?;
        Some(
            handle
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("setting it panicked"))),
        )
    }
}

impl Drop for RouteSetting {
    fn drop(&mut self) {
        drop(self.wait());
    }
}

impl ClientJump {
    /// Decides for a run on `path` with `streams` data connections from the path's
    /// `record` (looked up by the caller), and (when it jumps) sets the initial windows on
    /// this end's route to the peer.
    pub fn prepare(
        wish: &JumpWish,
        path: PathNow,
        streams: u16,
        record: Option<PathRecord>,
    ) -> Self {
        let mut jump = Self::unrouted(wish, path, streams, record);
        if let Some(plan) = jump.plan {
            jump.take_route(InitialWindows::set(
                path.peer,
                plan.init_cwnd,
                plan.init_rwnd,
            ));
        }
        jump
    }

    /// [`ClientJump::prepare`] with the route set on a thread of its own meanwhile: a
    /// receiving run's data connections leave behind the request, so its route need only
    /// be there by then ([`ClientJump::set_route`]), and the control connection's TLS does
    /// not wait for it (`ip route` takes milliseconds).
    pub fn planned(
        wish: &JumpWish,
        path: PathNow,
        streams: u16,
        record: Option<PathRecord>,
    ) -> Self {
        let mut jump = Self::unrouted(wish, path, streams, record);
        if let Some(plan) = jump.plan {
            jump.route_setting = RouteSetting(Some(std::thread::spawn(move || {
                InitialWindows::set(path.peer, plan.init_cwnd, plan.init_rwnd)
            })));
        }
        jump
    }

    /// Waits for the route of a jump [`ClientJump::planned`]; one that could not be set
    /// ends the jump (its report says why).
    pub fn set_route(&mut self) {
        if let Some(set) = self.route_setting.wait() {
            self.take_route(set);
        }
    }

    /// The decision with its report, no route set yet.
    fn unrouted(wish: &JumpWish, path: PathNow, streams: u16, record: Option<PathRecord>) -> Self {
        match Self::decide(wish, path, streams, record.as_ref()) {
            Ok(plan) => Self {
                plan: Some(plan),
                report: JumpReport::used(&plan, record.as_ref()),
                route: None,
                route_setting: RouteSetting::default(),
            },
            Err(why) => Self::without(JumpReport::not_used(&why, record.as_ref())),
        }
    }

    /// Keeps the route that was set, or ends the jump when it could not be: the report
    /// is then the record's alone, with why.
    fn take_route(&mut self, set: std::io::Result<InitialWindows>) {
        match set {
            Ok(route) => self.route = Some(route),
            Err(e) => {
                self.plan = None;
                let used = std::mem::take(&mut self.report);
                self.report = JumpReport {
                    remembered_rate_bps: used.remembered_rate_bps,
                    remembered_rtt_ms: used.remembered_rtt_ms,
                    confirmations: used.confirmations,
                    not_used: Some(format!("cannot set the route metrics: {e}")),
                    ..JumpReport::default()
                };
            }
        }
    }

    /// The decision alone (no route is touched).
    pub(crate) fn decide(
        wish: &JumpWish,
        path: PathNow,
        streams: u16,
        record: Option<&PathRecord>,
    ) -> Result<JumpPlan, NoJump> {
        let inputs = JumpInputs {
            memory: record.map(|r| r.memory(now_unix())),
            rtt_now: path.rtt,
            streams,
            disabled: !wish.enabled,
            probing: wish.probing_at(path.rtt),
            privileged: longhaul_sys::socket::can_force_buffers(),
        };
        longhaul_policy::decide_jump(&inputs)
    }

    fn without(report: JumpReport) -> Self {
        Self {
            plan: None,
            report,
            route: None,
            route_setting: RouteSetting::default(),
        }
    }

    /// The request for the server, when jumping (within the protocol's bounds: a record's
    /// rate beyond them, which no path has, is asked for as the bound).
    pub fn ask(&self) -> Option<JumpAsk> {
        self.plan.map(|p| JumpAsk {
            start_bps: p.start_bps,
            remembered_bps: p
                .remembered_bps
                .max(p.start_bps)
                .min(longhaul_proto::limits::MAX_JUMP_RATE_BPS),
            init_cwnd: p.init_cwnd,
            init_rwnd: p.init_rwnd,
        })
    }

    /// Takes the server's answer: `sender_is_server` when the server sends (then its
    /// refusal ends the jump); otherwise a refusal only leaves the server's initial
    /// receive window at the kernel's default.
    pub fn server_answered(&mut self, sender_is_server: bool, start_bps: u64, note: &str) {
        if self.plan.is_none() {
            return;
        }
        if !note.is_empty() {
            self.report.server_note = Some(note.to_string());
        }
        if sender_is_server {
            if start_bps == 0 {
                self.plan = None;
                self.route = None;
                self.report.used = false;
                self.report.not_used = Some(format!("the server declined: {note}"));
            } else {
                self.report.start_rate_bps = Some(start_bps);
            }
        }
    }

    /// Ends the run's route metrics now (they are also removed on drop).
    pub fn restore_route(&mut self) {
        drop(self.route_setting.wait());
        self.route = None;
    }
}

/// Writes the path's record after a successful run that reached a steady rate (a path
/// shorter than a jump needs is not recorded). Errors are ignored: the cache only helps.
pub fn remember(peer: IpAddr, local: IpAddr, rate_bps: u64, min_rtt: Duration, mss: u32) {
    if min_rtt < jump_start::MIN_RTT || rate_bps < jump_start::MIN_RATE_BPS || mss == 0 {
        return;
    }
    if let Ok(cache) = PathCache::open_default() {
        let _ = cache.store(PathRecord {
            peer,
            local,
            rate_bps,
            min_rtt_us: min_rtt.as_micros() as u64,
            mss,
            written_unix: now_unix(),
            confirmations: 1,
        });
    }
}

/// A server's side of a client's jump: the bounded plan (when it sends) and the route guard.
pub struct ServerJump {
    /// The plan when the server sends and jumps.
    pub plan: Option<JumpPlan>,
    /// Start rate for the answer (0: no jump at the sending server).
    pub start_bps: u64,
    /// Why not, for the answer ("" when it followed the request).
    pub note: String,
    /// Data connections that started below the initial window, of all (`check_windows`).
    windows_short: Option<(usize, usize)>,
    _route: Option<InitialWindows>,
}

impl ServerJump {
    /// A session's answer to `ask` (bench and cp alike): this server's own view of the
    /// path from its `control` connection (its TCP_INFO minimum RTT and MSS, against the
    /// client's `client_rtt`) and the `buffer_bytes` each of its `streams` has, then
    /// [`ServerJump::apply`] on its route to the client. Each stream's buffer is the one the
    /// server chose (`chosen_bytes`), else its plan's window. Keep the value for the
    /// session: dropping it removes the route, also when the session fails.
    ///
    /// The route must exist when a data connection's handshake completes at this server
    /// (the kernel reads `initcwnd` from the route it looks up for the child socket at the
    /// client's ACK, not at its SYN): the client opens them right behind the request, so
    /// their ACKs arrive a round trip after it. [`ServerJump::check_windows`] says whether
    /// they got it.
    pub fn for_session(
        ask: &JumpAsk,
        control: &TcpStream,
        client_rtt: Duration,
        streams: u16,
        (chosen_bytes, window_bytes): (u64, u64),
        sends: bool,
    ) -> Self {
        let buffer_bytes = if chosen_bytes > 0 {
            chosen_bytes
        } else {
            window_bytes
        };
        let Ok(client) = control.peer_addr() else {
            return Self::declined("the control connection has no peer address".into());
        };
        let info = longhaul_sys::tcp_info::tcp_info(control).ok();
        let view = ServerView {
            rtt: info.map_or(client_rtt, |i| {
                Duration::from_micros(u64::from(i.min_rtt_us))
            }),
            client_rtt,
            mss: info.map_or(0, |i| i.snd_mss),
            streams,
            buffer_bytes,
            max_rate_bps: None,
            privileged: longhaul_sys::socket::can_force_buffers(),
        };
        Self::apply(ask, &view, sends, client.ip())
    }

    /// Bounds the client's request by this server's own view and sets the initial windows
    /// on its route to the client: `initcwnd` when it sends, `initrwnd` when it receives.
    pub fn apply(ask: &JumpAsk, view: &ServerView, sends: bool, client: IpAddr) -> Self {
        let req = JumpRequest {
            start_bps: ask.start_bps,
            remembered_bps: ask.remembered_bps,
            init_cwnd: if sends { ask.init_cwnd } else { ask.init_rwnd },
        };
        let plan = match bound_request(&req, view) {
            Ok(p) => p,
            Err(why) => return Self::declined(why.describe()),
        };
        match InitialWindows::set(client, plan.init_cwnd, plan.init_rwnd) {
            Ok(route) => Self {
                plan: sends.then_some(plan),
                start_bps: if sends { plan.start_bps } else { 0 },
                note: String::new(),
                windows_short: None,
                _route: Some(route),
            },
            Err(e) => Self::declined(format!("cannot set the route metrics: {e}")),
        }
    }

    /// No jump, and why (within the bound of a note on the wire).
    fn declined(mut note: String) -> Self {
        let end = longhaul_proto::cut_at_char(&note, longhaul_proto::limits::MAX_TEXT).len();
        note.truncate(end);
        Self {
            plan: None,
            start_bps: 0,
            note,
            windows_short: None,
            _route: None,
        }
    }

    /// The validator for this server's sender (`None` when it does not jump): its pacer
    /// starts at the bounded rate and validates over the RTT the server measured.
    pub fn validator(&self) -> Option<JumpValidator> {
        self.plan
            .map(|p| JumpValidator::new(p, Duration::from_micros(p.remembered_rtt_us)))
    }

    /// Counts the data connections whose congestion window is below the jump's initial
    /// window: made before the route was set (the client opened them too early, or this
    /// server was slow to set it). Those start from the kernel's 10 segments; the pacer
    /// still starts at the jump's rate, so the first round trips fall short of it.
    pub fn check_windows<'a>(&mut self, data: impl Iterator<Item = &'a TcpStream>) {
        let Some(plan) = self.plan else { return };
        let (mut short, mut total) = (0, 0);
        for tcp in data {
            total += 1;
            let cwnd = longhaul_sys::tcp_info::tcp_info(tcp).map_or(0, |i| i.snd_cwnd);
            if cwnd < plan.init_cwnd {
                short += 1;
            }
        }
        self.windows_short = (short > 0).then_some((short, total));
    }

    /// What the server's log line says about the jump: why it declined, or the verdict
    /// (`None`: no verdict yet), and data connections that missed its initial window;
    /// empty when it was not asked.
    pub fn log_note(jump: Option<&Self>, verdict: Option<JumpAction>) -> String {
        let missed = match jump.and_then(|j| j.windows_short) {
            Some((short, total)) => format!(
                " ({short} of {total} data connections started below its initial window: \
                 made before the route)"
            ),
            None => String::new(),
        };
        match (jump, verdict) {
            (Some(j), _) if !j.note.is_empty() => format!("; jump-start declined: {}", j.note),
            (Some(_), Some(v)) => format!("; jump-start {v:?}{missed}"),
            (Some(_), None) if !missed.is_empty() => format!("; jump-start{missed}"),
            _ => String::new(),
        }
    }
}

/// A validator's verdict as the wire carries it ([`longhaul_proto::Message::JumpVerdict`]).
pub fn outcome_of(action: JumpAction) -> JumpOutcome {
    match action {
        JumpAction::Confirm { .. } => JumpOutcome::Confirmed,
        JumpAction::Retreat { why, .. } => match why {
            Retreat::Loss => JumpOutcome::RetreatedOnLoss,
            Retreat::Queue => JumpOutcome::RetreatedOnQueue,
            Retreat::Shortfall => JumpOutcome::RetreatedOnShortfall,
        },
    }
}

/// The stream count and the jump of a client's run on `path`, from its `record` (bench
/// and cp alike). `opened` data connections are already on their way (made before any
/// route could be set: such a run does not jump, and their count stands); otherwise the
/// count is the user's, or the path's ([`longhaul_policy::streams_for_path`]), or, when
/// the run jumps, at most [`longhaul_policy::JUMP_STREAMS`] (the initial windows carry the
/// rate; on an emulated 436 ms path 64 streams' jumps fell short where 8 and 1 held it).
pub fn decide_client(
    wish: &JumpWish,
    opened: u16,
    path: PathNow,
    record: Option<PathRecord>,
    route: RouteWhen,
) -> (ClientJump, u16) {
    if opened > 0 {
        let report = match ClientJump::decide(wish, path, opened, record.as_ref()) {
            Ok(_) => JumpReport {
                not_used: Some("the data connections were made before the routes".into()),
                ..JumpReport::default()
            },
            Err(why) => JumpReport::not_used(&why, record.as_ref()),
        };
        return (ClientJump::without(report), opened);
    }
    let auto = wish
        .user_count()
        .unwrap_or_else(|| longhaul_policy::streams_for_path(path.rtt));
    let jump_streams = wish
        .user_count()
        .unwrap_or(longhaul_policy::JUMP_STREAMS.min(auto));
    let jump = match route {
        RouteWhen::Now => ClientJump::prepare(wish, path, jump_streams, record),
        RouteWhen::BehindRequest => ClientJump::planned(wish, path, jump_streams, record),
    };
    let streams = if jump.plan.is_some() {
        jump_streams
    } else {
        auto
    };
    (jump, streams)
}

/// When a jump's route is set: at once (the data connections may leave next), or once the
/// control connection is up, behind it (a receiving run: they leave behind the request;
/// [`ClientJump::set_route`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteWhen {
    /// Before the decision returns.
    Now,
    /// By [`ClientJump::set_route`], before the request.
    BehindRequest,
}
