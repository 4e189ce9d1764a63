//! The client end of `longhaul bench`: control session, RTT measurement, window plan,
//! data connections, the run loop with its intervals, and the end summary.

use std::time::{Duration, Instant};

use longhaul_proto::{
    BenchParams, ClientEvent, ClientSession, Direction, ErrorCode, ProtoError, Results, SendMode,
    Token,
};

use super::report::*;
use crate::datarun::run::{chrono_of, DataRun, Role, SenderPlan};
use crate::host;
use crate::telemetry::Sampled;
use crate::transport::control::{ControlLink, Incoming};
use crate::transport::dial::flush;
use crate::transport::setup::read_until;
use crate::transport::sockopts;
use crate::transport::tls::Security;
use longhaul_policy::steady_rate::SteadyRate;
use longhaul_policy::{judge, BufferCaps, JumpValidator, TransportRequest, Window};

pub use crate::telemetry::view::view;
pub use crate::transport::dial::{resolve, DEFAULT_PORT};
pub use crate::transport::BenchError;

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address.
    pub target: String,
    /// Parallel streams (`None`: from the path, [`longhaul_policy::streams_for_path`]).
    pub streams: Option<u16>,
    /// Duration of a timed run.
    pub duration: Duration,
    /// Bytes to move instead of a duration.
    pub bytes: Option<u64>,
    /// The server sends.
    pub reverse: bool,
    /// Congestion control for the sender (None: BBR if available, else the default).
    pub congestion: Option<String>,
    /// Total pacing rate, bit/s.
    pub rate_bps: Option<u64>,
    /// Fixed socket buffer per stream (None: auto).
    pub window: Option<u64>,
    /// Receiver-side pacing rate, bit/s.
    pub rx_rate_bps: Option<u64>,
    /// Reporting interval.
    pub interval: Duration,
    /// How the sender hands data to the kernel.
    pub send_mode: SendMode,
    /// Throttle the reading application (to demonstrate receiver-side pacing), bit/s.
    pub read_rate_bps: Option<u64>,
    /// Shared token.
    pub token: Token,
    /// How the server is trusted, and whether the data streams are encrypted.
    pub security: Security,
    /// Jump-start to a path seen before (false: `--no-jump-start`).
    pub jump_start: bool,
}

/// Receives what a run reports as it goes.
pub trait BenchObserver {
    /// The run is set up.
    fn start(&mut self, report: &StartReport);
    /// One interval.
    fn interval(&mut self, view: &IntervalView);
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let what = what.into();
    move |cause| BenchError::Io { what, cause }
}

/// Runs a bench against a `longhaul serve`.
pub fn run_bench(cfg: &BenchConfig, obs: &mut dyn BenchObserver) -> Result<EndReport, BenchError> {
    let mut running = set_up(cfg, obs)?;
    let mut heard = run_loop(cfg, obs, &mut running)?;
    let own = exchange_results(&mut running, &mut heard)?;
    Ok(end_report(cfg, running, heard, own))
}

/// A bench run set up: the data streams running, the control link shared.
struct Running {
    session: ClientSession,
    link: ControlLink,
    run: DataRun,
    role: Role,
    rtt: Duration,
    jump: crate::jump::ClientJump,
    /// The server's address that answered, this end's, and the control connection's
    /// MSS: the path's record.
    addr: std::net::SocketAddr,
    local_ip: std::net::IpAddr,
    mss: u32,
}

/// What the client heard from the server during and after the run, and the steady rate.
#[derive(Default)]
struct Heard {
    peer_results: Option<Results>,
    peer_verdict: Option<longhaul_proto::JumpOutcome>,
    steady: SteadyRate,
}

/// The set-up, from the dial to the data streams' start (see the module docs).
fn set_up(cfg: &BenchConfig, obs: &mut dyn BenchObserver) -> Result<Running, BenchError> {
    // Handshake, with the data connections opened at the same moment (docs/startup.md):
    // the RTT is the control connection's connect time; the stream count and the jump
    // as `crate::client_start` decides them.
    let probing = cfg.rate_bps.is_none() && cfg.window.is_none();
    let started = crate::client_start::start_session(&crate::client_start::StartPlan {
        target: &cfg.target,
        token: &longhaul_proto::Credential::Token(cfg.token.clone()),
        security: &cfg.security,
        user_streams: cfg.streams,
        jump_start: cfg.jump_start,
        probing,
        receiving: cfg.reverse,
    })?;
    let crate::client_start::Started {
        mut conn,
        mut session,
        addr,
        rtt,
        pinned_now,
        ends,
        mss,
        mut jump,
        streams,
        data,
    } = started;
    let local_ip = ends
        .map(|(_, local)| local)
        .ok_or_else(|| BenchError::Refused("the control connection has no address".into()))?;
    // Window plan.
    let role = if cfg.reverse {
        Role::Receiver
    } else {
        Role::Sender
    };
    let (plan, local) = host::plan_transport_here(
        &TransportRequest {
            role,
            streams,
            rate_bps: cfg.rate_bps,
            window: cfg.window.map_or(Window::Auto, Window::Fixed),
            congestion: cfg.congestion.clone(),
        },
        rtt,
    )
    .map_err(|e| BenchError::Refused(e.to_string()))?;
    let congestion = plan.congestion.clone().unwrap_or_default();
    let needed = plan.window_bytes;
    let side = plan.side;
    let local_choice = plan.buffer.clone();
    let mut warnings = plan.warnings.clone();

    if let Some(needs) = &jump.report.needs {
        warnings.push(format!("jump-start not used: it needs {needs}"));
    }

    let params = bench_params(cfg, (streams, rtt), (&congestion, needed), jump.ask());
    let rx_rate = if cfg.reverse { cfg.rx_rate_bps } else { None };
    // One flight: our proof, the parameters, and every data stream's hello.
    session.request(params.clone())?;
    flush(&mut session, &mut conn)?;
    let rx_clamp = rx_rate.map(|r| (r, streams, rtt));
    // A jumping --reverse's connections leave now, right behind the request: the server
    // sets its route as it reads the request, a round trip before their handshakes
    // complete there.
    let sockets = data
        .after_request()
        .attach(&session, side, &local_choice, rx_clamp)?;
    let mut ready = None;
    read_until(&mut conn, &mut session, |s| {
        while let Some(ev) = s.poll_event() {
            if let ClientEvent::Ready(r) = ev {
                ready.get_or_insert(r);
            }
        }
        ready.is_some()
    })?;
    let ready = ready.ok_or_else(|| BenchError::Refused("no BenchReady was read".into()))?;
    warnings.extend(plan.peer_warning(&BufferCaps::from(&ready.facts)));
    jump.server_answered(cfg.reverse, ready.jump_start_bps, &ready.jump_note);
    if let Some(fp) = pinned_now {
        warnings.push(format!(
            "first contact with {}: its certificate {fp} is now pinned in the known-servers \
             file; a different one will be refused",
            cfg.target
        ));
    }
    let sender_congestion = if cfg.reverse {
        cfg.congestion
            .clone()
            .unwrap_or_else(|| "server's choice".into())
    } else {
        congestion.clone()
    };

    for s in &sockets {
        let cc = (role == Role::Sender).then_some(congestion.as_str());
        sockopts::tune_connected(s.tcp(), cc).map_err(io_err("setting up a data connection"))?;
    }

    // Start.
    let mut started = false;
    read_until(&mut conn, &mut session, |s| {
        while let Some(ev) = s.poll_event() {
            started |= ev == ClientEvent::Started;
        }
        started
    })?;

    let start = StartReport {
        server: addr.to_string(),
        streams,
        reverse: cfg.reverse,
        duration_seconds: cfg.bytes.is_none().then_some(cfg.duration.as_secs_f64()),
        bytes: cfg.bytes,
        congestion: sender_congestion,
        rtt_ms: rtt.as_secs_f64() * 1e3,
        rate_bps: cfg.rate_bps,
        window_mode: if cfg.window.is_some() {
            "fixed"
        } else {
            "auto"
        },
        window_needed_bytes: needed,
        local_buffer: longhaul_policy::describe(&local_choice),
        server_sndbuf_bytes: ready.sndbuf_bytes,
        server_rcvbuf_bytes: ready.rcvbuf_bytes,
        send_mode: match cfg.send_mode {
            SendMode::Write => "write",
            SendMode::Sendfile => "sendfile",
            SendMode::MsgZerocopy => "msg_zerocopy",
        },
        rx_rate_bps: if cfg.reverse {
            cfg.rx_rate_bps
        } else {
            (ready.rx_rate_bps > 0).then_some(ready.rx_rate_bps)
        },
        client_host: HostView::from(&local),
        server_host: HostView::from(&ready.facts),
        warnings,
        jump_start: jump.report.clone(),
    };
    obs.start(&start);

    let sender_plan = (role == Role::Sender).then(|| SenderPlan {
        mode: cfg.send_mode,
        pacing_bps: plan.pacing_bps,
        probe: plan.probe.clone(),
        bytes: cfg.bytes,
        jump: jump
            .plan
            .filter(|_| plan.probe.is_some())
            .map(|p| JumpValidator::new(p, rtt)),
    });
    let run = DataRun::start(role, sockets, sender_plan, cfg.read_rate_bps.unwrap_or(0))
        .map_err(io_err("starting the data streams"))?;

    // The shared control link: a reader thread (so the run loop can wait with a
    // timeout), one coalescing writer, keepalives and a user timeout.
    let link = ControlLink::start(conn).map_err(io_err("control connection"))?;
    Ok(Running {
        session,
        link,
        run,
        role,
        rtt,
        jump,
        addr,
        local_ip,
        mss,
    })
}

/// The run: intervals, probe steps and the server's messages until the run ends, fails
/// or stalls.
fn run_loop(
    cfg: &BenchConfig,
    obs: &mut dyn BenchObserver,
    r: &mut Running,
) -> Result<Heard, BenchError> {
    let (session, link, run) = (&mut r.session, &r.link, &mut r.run);
    let (role, rtt) = (r.role, r.rtt);

    let deadline = cfg.bytes.is_none().then(|| run.started_at() + cfg.duration);
    let mut watchdog =
        longhaul_policy::Watchdog::new(run.started_at(), cfg.duration, cfg.bytes.is_some());
    let probe_every = run.probe_every(rtt);
    let mut next_interval = run.started_at() + cfg.interval;
    let mut next_probe = run.started_at() + probe_every;
    let mut peer_results: Option<Results> = None;
    let mut peer_verdict = None;
    let mut steady = SteadyRate::default();
    let mut stopped = false;
    let mut failure: Option<BenchError> = None;
    loop {
        let now = Instant::now();
        if let Some(d) = deadline {
            if now >= d && !stopped {
                run.stop();
                stopped = true;
            }
        }
        if now >= next_probe && role == Role::Sender {
            run.probe_step();
            next_probe += probe_every;
        }
        if now >= next_interval {
            let own = run.sample();
            if role == Role::Sender {
                let v = view(&own, cfg.rate_bps, run.held_bps());
                steady.push(v.bits_per_second);
                obs.interval(&v);
            }
            next_interval += cfg.interval;
        }
        if run.finished() {
            break;
        }
        if watchdog.check(now, run.bytes_moved()).is_some() {
            failure = Some(BenchError::Timeout("running"));
            break;
        }
        let mut wake = next_interval;
        if role == Role::Sender {
            wake = wake.min(next_probe);
        }
        if let (Some(d), false) = (deadline, stopped) {
            wake = wake.min(d);
        }
        // Poll the stream threads at least every 50 ms.
        let wait = wake
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        match link.recv_timeout(wait) {
            Some(Incoming::Bench(msg)) => {
                if let Err(e) = session.handle(msg) {
                    failure = Some(e.into());
                    break;
                }
                while let Some(ev) = session.poll_event() {
                    match ev {
                        ClientEvent::PeerInterval(r) if role == Role::Receiver => {
                            let v = view(&Sampled::from_sender(r), cfg.rate_bps, None);
                            steady.push(v.bits_per_second);
                            obs.interval(&v);
                        }
                        ClientEvent::PeerResults(r) => peer_results = Some(r),
                        ClientEvent::PeerJumpVerdict(o) => peer_verdict = Some(o),
                        _ => {}
                    }
                }
            }
            Some(Incoming::PeerError(message)) => {
                failure = Some(
                    ProtoError::Peer {
                        code: ErrorCode::Aborted,
                        message,
                    }
                    .into(),
                );
                break;
            }
            Some(Incoming::Msg(m)) => {
                failure = Some(
                    ProtoError::Unexpected {
                        got: m.kind(),
                        state: "a bench run",
                    }
                    .into(),
                );
                break;
            }
            Some(Incoming::Lost(e)) if !run.finished() => {
                failure = Some(BenchError::Io {
                    what: format!("{e} mid-run"),
                    cause: std::io::ErrorKind::ConnectionAborted.into(),
                });
                break;
            }
            Some(Incoming::Lost(_)) => {}
            None => {}
        }
    }
    if let Some(e) = failure {
        run.stop();
        session.abort(ErrorCode::Aborted, e.to_string());
        let _ = send_queued(session, link);
        return Err(e);
    }
    if let Some((stream, e)) = run.first_error() {
        let msg = format!("data stream {stream} failed mid-run: {e}");
        session.abort(ErrorCode::Aborted, msg.clone());
        let _ = send_queued(session, link);
        // Prefer the server's own explanation if it sent one.
        if let Some(Incoming::PeerError(message)) = link.recv_timeout(Duration::from_millis(200)) {
            return Err(BenchError::Refused(format!(
                "{msg}; the server reported: {message}"
            )));
        }
        return Err(BenchError::Refused(format!(
            "{msg}; did the server stop or the path go down?"
        )));
    }
    Ok(Heard {
        peer_results,
        peer_verdict,
        steady,
    })
}

/// Sends this end's results and waits for the server's; returns this end's.
fn exchange_results(r: &mut Running, heard: &mut Heard) -> Result<Results, BenchError> {
    let (session, link, run, rtt) = (&mut r.session, &r.link, &mut r.run, r.rtt);
    let (peer_results, peer_verdict) = (&mut heard.peer_results, &mut heard.peer_verdict);
    let own = run.results();
    session.send_results(own.clone());
    send_queued(session, link)?;
    let wait_until = Instant::now() + Duration::from_secs(30) + rtt * 4;
    while peer_results.is_none() {
        let left = wait_until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(BenchError::Timeout("exchanging results"));
        }
        match link.recv_timeout(left) {
            Some(Incoming::Bench(msg)) => {
                session.handle(msg)?;
                while let Some(ev) = session.poll_event() {
                    match ev {
                        ClientEvent::PeerResults(r) => *peer_results = Some(r),
                        ClientEvent::PeerJumpVerdict(o) => *peer_verdict = Some(o),
                        _ => {}
                    }
                }
            }
            Some(Incoming::PeerError(message)) => {
                return Err(ProtoError::Peer {
                    code: ErrorCode::Aborted,
                    message,
                }
                .into())
            }
            _ => return Err(BenchError::Timeout("exchanging results")),
        }
    }
    Ok(own)
}

/// The end report from both ends' results; the path's record for the next run.
fn end_report(cfg: &BenchConfig, r: Running, heard: Heard, own: Results) -> EndReport {
    let Running {
        link,
        run,
        role,
        rtt,
        mut jump,
        addr,
        local_ip,
        mss,
        ..
    } = r;
    let Heard {
        peer_results,
        peer_verdict,
        steady,
    } = heard;
    // Both ends have what they need: close without waiting for the server's close.
    link.mark_finished();
    let peer = peer_results.unwrap_or_default();
    let (sender, receiver) = match role {
        Role::Sender => (&own, &peer),
        Role::Receiver => (&peer, &own),
    };
    let mut end = summarize(sender, receiver, cfg.rate_bps, run.held_bps());
    end.summary.cruise_congestion = run.cruise().map(str::to_string);
    jump.restore_route();
    if role == Role::Sender {
        jump.report.set_verdict(run.jump_verdict());
    } else {
        jump.report.set_peer_outcome(peer_verdict);
    }
    end.jump_start = jump.report;
    // The path's record for the next run: the steady delivered rate (the second half of
    // the intervals), the smallest RTT any stream saw.
    let min_rtt = sender
        .streams
        .iter()
        .map(|s| s.min_rtt_us)
        .filter(|&us| us > 0)
        .min()
        .map_or(rtt, |us| Duration::from_micros(us as u64));
    if let Some(rate) = steady.rate().or(run.held_bps()) {
        let rate = end.jump_start.rate_to_remember(rate);
        crate::jump::remember(addr.ip(), local_ip, rate, min_rtt, mss);
    }
    end.summary.first_byte_ms =
        crate::startup::first_data_after_start().map(|t| t.as_secs_f64() * 1e3);
    end.summary.first_byte_rtts = crate::startup::first_data_rtts(rtt);
    end.summary.data_dialed_rtts = crate::startup::data_dialed_rtts(rtt);
    // Measured after the run, so it takes nothing from it.
    end.data_protection = crate::transport::tls::record_speed::DataProtection::measure(
        cfg.security.encryption == crate::transport::tls::Encryption::On,
    );
    end
}

/// The parameters a bench run asks for: `cfg`'s, on `streams` data connections over a
/// path of `rtt`, with this end's congestion control and window (`needed`) when it sends,
/// and the jump's ask.
fn bench_params(
    cfg: &BenchConfig,
    (streams, rtt): (u16, Duration),
    (congestion, needed): (&str, u64),
    jump: Option<longhaul_proto::JumpAsk>,
) -> BenchParams {
    BenchParams {
        streams,
        duration_ms: if cfg.bytes.is_some() {
            0
        } else {
            cfg.duration.as_millis() as u64
        },
        bytes: cfg.bytes.unwrap_or(0),
        direction: if cfg.reverse {
            Direction::ServerToClient
        } else {
            Direction::ClientToServer
        },
        congestion: if cfg.reverse {
            cfg.congestion.clone().unwrap_or_default()
        } else {
            congestion.to_string()
        },
        rate_bps: cfg.rate_bps.unwrap_or(0),
        window_bytes: needed,
        window_fixed: cfg.window.is_some(),
        rx_rate_bps: if cfg.reverse {
            0
        } else {
            cfg.rx_rate_bps.unwrap_or(0)
        },
        read_rate_bps: if cfg.reverse {
            0
        } else {
            cfg.read_rate_bps.unwrap_or(0)
        },
        rtt_us: rtt.as_micros().min(u32::MAX as u128) as u32,
        interval_ms: cfg.interval.as_millis().clamp(10, u32::MAX as u128) as u32,
        send_mode: cfg.send_mode,
        jump,
    }
}

/// Sends what the session queued through the control link's writer.
fn send_queued(session: &mut ClientSession, link: &ControlLink) -> Result<(), BenchError> {
    while let Some(m) = session.poll_transmit() {
        link.tx
            .send_bench(&m)
            .map_err(io_err("control connection"))?;
    }
    Ok(())
}

/// The end summary from both ends' totals.
pub fn summarize(
    sender: &Results,
    receiver: &Results,
    rate_bps: Option<u64>,
    held: Option<u64>,
) -> EndReport {
    let bytes: u64 = receiver.streams.iter().map(|s| s.bytes).sum();
    let seconds = receiver
        .streams
        .iter()
        .map(|s| s.elapsed_us)
        .max()
        .unwrap_or(receiver.wall_us) as f64
        / 1e6;
    let seconds = seconds.max(1e-6);
    let bps = bytes as f64 * 8.0 / seconds;
    let n = sender.streams.len().max(1) as f64;
    let mut total = longhaul_policy::Chrono::default();
    let streams: Vec<StreamSummary> = sender
        .streams
        .iter()
        .map(|s| {
            let rx = receiver.streams.iter().find(|r| r.stream == s.stream);
            let rx_bytes = rx.map_or(s.bytes, |r| r.bytes);
            let rx_secs = rx.map_or(seconds, |r| (r.elapsed_us as f64 / 1e6).max(1e-6));
            let c = chrono_of(s);
            total.elapsed_us += c.elapsed_us;
            total.busy_us += c.busy_us;
            total.rwnd_limited_us += c.rwnd_limited_us;
            total.sndbuf_limited_us += c.sndbuf_limited_us;
            let stream_bps = rx_bytes as f64 * 8.0 / rx_secs;
            StreamSummary {
                id: s.stream,
                bytes: rx_bytes,
                bits_per_second: stream_bps,
                retransmits: s.retransmits,
                min_rtt_ms: s.min_rtt_us as f64 / 1e3,
                cwnd_bytes: s.cwnd_bytes,
                limited_by: judge(c, rate_bps.map(|r| stream_bps / (r as f64 / n))),
            }
        })
        .collect();
    let limited_by = judge(total, rate_bps.map(|r| bps / r as f64));
    let max = streams.iter().map(|s| s.bytes).max().unwrap_or(0).max(1) as f64;
    let min = streams.iter().map(|s| s.bytes).min().unwrap_or(0) as f64;
    let cost = |r: &Results| {
        let cpu = (r.cpu_user_us + r.cpu_system_us) as f64 / 1e6;
        EndCost {
            cpu_seconds: cpu,
            cpu_seconds_per_gb: if bytes > 0 {
                cpu / (bytes as f64 / 1e9)
            } else {
                0.0
            },
            cpu_percent: 100.0 * cpu / (r.wall_us.max(1) as f64 / 1e6),
        }
    };
    EndReport {
        summary: Summary {
            bytes,
            seconds,
            bits_per_second: bps,
            retransmits: sender.streams.iter().map(|s| s.retransmits).sum(),
            limited_by,
            limited_by_text: limited_by.describe(),
            advice: limited_by.advice(),
            balance: min / max,
            held_rate_bps: held,
            cruise_congestion: None,
            sender: cost(sender),
            receiver: cost(receiver),
            first_byte_ms: None,
            first_byte_rtts: None,
            data_dialed_rtts: None,
        },
        streams,
        jump_start: crate::jump::JumpReport::default(),
        data_protection: crate::transport::tls::record_speed::DataProtection::unmeasured(true),
    }
}
