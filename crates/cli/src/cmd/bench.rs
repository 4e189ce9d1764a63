//! `longhaul bench`: a memory-to-memory path test against a `longhaul serve` or a longhaul
//! started over ssh, with the window sized to the path and a verdict on what limited it.
//!
//! TARGET: `longhaul://HOST[:PORT]` or a bare `HOST[:PORT]` is a daemon (as iperf3);
//! `USER@HOST`, `ssh://[USER@]HOST[:PORT]`, or any target with `-e/--rsh` is started over
//! ssh.

use std::process::ExitCode;
use std::time::Duration;

use longhaul_engine::bench::report::{EndReport, IntervalView, StartReport};
use longhaul_engine::bench::{run_bench, BenchConfig, BenchObserver};
use longhaul_model::units::{format_bytes, format_rate_bps};
use longhaul_proto::SendMode;
use serde_json::json;

use super::common::{duration, emit_json, rate, say, size, EncryptionArg, SecurityArgs, TokenArgs};
use super::ssh::SshArgs;
use longhaul_engine::ssh::launch::FarEnd;
use longhaul_transfer::location::{
    parse_daemon, parse_ssh_host, parse_ssh_url, SshHost, DAEMON_SCHEME,
};

/// Arguments of `longhaul bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A daemon: HOST, HOST:PORT, [IPv6]:PORT or longhaul://HOST[:PORT] (default port
    /// 5290). Over ssh: USER@HOST, ssh://[USER@]HOST[:PORT], or any HOST with -e.
    pub target: String,
    /// Parallel TCP streams (default: from the RTT: 2 under 2 ms, else one per 14 ms
    /// rounded up to a power of two, 4 to 64; many streams reach a long path's rate sooner).
    #[arg(short = 'P', long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub streams: Option<u16>,
    /// Duration of the run.
    #[arg(short = 't', long, default_value = "10s", value_parser = duration, conflicts_with = "bytes")]
    pub time: Duration,
    /// Move this many bytes instead of running for a time (streams share them dynamically).
    #[arg(long, value_parser = size)]
    pub bytes: Option<u64>,
    /// The server sends and this end receives.
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Congestion control of the sender (reno, cubic, bbr; default: bbr where available).
    #[arg(short = 'C', long)]
    pub congestion: Option<String>,
    /// Pace all streams together to this rate (SO_MAX_PACING_RATE, rate / streams each).
    #[arg(long, value_parser = rate)]
    pub rate: Option<u64>,
    /// Socket buffer per stream: `auto` sizes it from the measured RTT and the rate, or a size.
    #[arg(long, default_value = "auto")]
    pub window: String,
    /// Receiver-side pacing: the receiver clamps its window to RATE / streams x RTT.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub rx_rate: Option<u64>,
    /// Make the receiving application read no faster than RATE (to see --rx-rate work).
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub read_rate: Option<u64>,
    /// Seconds between interval reports.
    #[arg(short = 'i', long, default_value = "1s", value_parser = duration)]
    pub interval: Duration,
    /// How the sender hands data to the kernel.
    #[arg(long, value_enum, default_value_t = Mode::Write)]
    pub send_mode: Mode,
    /// Do not start at the rate remembered for this path (jump-start; see docs/jump-start.md).
    #[arg(long)]
    pub no_jump_start: bool,
    /// Print JSON Lines (start, interval, end, error objects) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub token: TokenArgs,
    #[command(flatten)]
    pub security: SecurityArgs,
    #[command(flatten)]
    pub ssh: SshArgs,
}

/// Where a bench run goes.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A running daemon: the address as `dial` takes it.
    Daemon(String),
    /// A host reached over ssh.
    Ssh(SshHost),
}

/// Reads TARGET (see the module docs).
fn parse_target(target: &str, rsh_given: bool) -> anyhow::Result<Target> {
    let bytes = target.as_bytes();
    let err = |e: longhaul_transfer::Error| anyhow::anyhow!("{e}");
    if let Some(rest) = target.strip_prefix(DAEMON_SCHEME) {
        let spec = parse_daemon(rest.as_bytes(), bytes).map_err(err)?;
        if !spec.path.is_empty() {
            anyhow::bail!("{target:?}: bench takes no path; write longhaul://HOST[:PORT]");
        }
        let host = if spec.host.contains(':') {
            format!("[{}]", spec.host)
        } else {
            spec.host
        };
        return Ok(Target::Daemon(match spec.port {
            Some(p) => format!("{host}:{p}"),
            None => host,
        }));
    }
    if let Some(rest) = target.strip_prefix("ssh://") {
        return parse_ssh_url(rest.as_bytes(), bytes)
            .map(Target::Ssh)
            .map_err(err);
    }
    if target.contains('@') || rsh_given {
        return parse_ssh_host(bytes, bytes).map(Target::Ssh).map_err(err);
    }
    Ok(Target::Daemon(target.to_string()))
}

/// `--send-mode` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Mode {
    /// write(2) from a buffer.
    Write,
    /// sendfile(2) from an in-memory file (zero copy on send).
    Sendfile,
    /// send(2) with MSG_ZEROCOPY.
    Zerocopy,
}

/// Runs `longhaul bench`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::common::with_json_errors(args.json, || run_inner(args))
}

fn run_inner(args: Args) -> anyhow::Result<ExitCode> {
    let window = super::common::window(&args.window)?;
    if args.interval < Duration::from_millis(10) {
        anyhow::bail!("--interval must be at least 10ms");
    }
    if args.time.is_zero() || args.time > Duration::from_secs(86_400) {
        anyhow::bail!("--time must be between 1 ms and one day");
    }
    let target = parse_target(&args.target, args.ssh.rsh.is_some())?;
    // Over ssh the far longhaul is started first; its guard ends it on every path.
    // bench measures the path: its data goes unencrypted unless asked (see --encryption).
    let security_args = args.security.with_default_encryption(EncryptionArg::Off);
    let (target, token, security, far) = match target {
        Target::Daemon(t) => (t, args.token.load()?, security_args.security()?, None),
        Target::Ssh(host) => {
            let end = FarEnd::start(&host, &args.ssh.options(args.streams))?;
            let security = security_args.pinned(end.fingerprint());
            (end.target().to_string(), end.token(), security, Some(end))
        }
    };
    let via_ssh = far.as_ref().is_some_and(|e| e.via_ssh().is_some());
    let (streams, jump_start) =
        FarEnd::session_shape(far.as_ref(), args.streams, !args.no_jump_start);
    let cfg = BenchConfig {
        target,
        streams,
        duration: args.time,
        bytes: args.bytes,
        reverse: args.reverse,
        congestion: args.congestion.clone(),
        rate_bps: args.rate,
        window,
        rx_rate_bps: args.rx_rate,
        interval: args.interval,
        send_mode: match args.send_mode {
            Mode::Write => SendMode::Write,
            Mode::Sendfile => SendMode::Sendfile,
            Mode::Zerocopy => SendMode::MsgZerocopy,
        },
        read_rate_bps: args.read_rate,
        token,
        security,
        jump_start,
    };
    let mut out: Box<dyn Printer> = if args.json {
        Box::new(JsonPrinter)
    } else {
        Box::new(TextPrinter::default())
    };
    let end = run_bench(&cfg, &mut Observer(out.as_mut()));
    if let Some(far) = far {
        far.finish();
    }
    let mut end = end?;
    if via_ssh {
        end.summary.carried_through_ssh();
    }
    out.end(&end);
    Ok(ExitCode::SUCCESS)
}

trait Printer {
    fn start(&mut self, s: &StartReport);
    fn interval(&mut self, v: &IntervalView);
    fn end(&mut self, e: &EndReport);
}

struct Observer<'a>(&'a mut dyn Printer);

impl BenchObserver for Observer<'_> {
    fn start(&mut self, report: &StartReport) {
        self.0.start(report);
    }
    fn interval(&mut self, view: &IntervalView) {
        self.0.interval(view);
    }
}

struct JsonPrinter;

/// A JSON object with `"type"` first, then the fields of `value`.
fn typed(kind: &str, value: &impl serde::Serialize) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    map.insert("type".into(), json!(kind));
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(value) {
        map.extend(fields);
    }
    serde_json::Value::Object(map)
}

impl Printer for JsonPrinter {
    fn start(&mut self, s: &StartReport) {
        emit_json(&typed("start", s));
    }
    fn interval(&mut self, i: &IntervalView) {
        emit_json(&typed("interval", i));
    }
    fn end(&mut self, e: &EndReport) {
        emit_json(&typed("end", e));
    }
}

#[derive(Default)]
struct TextPrinter {
    streams: u16,
}

fn rate_text(bps: f64) -> String {
    format_rate_bps(bps)
}

impl Printer for TextPrinter {
    fn start(&mut self, s: &StartReport) {
        self.streams = s.streams;
        let what = match (s.duration_seconds, s.bytes) {
            (_, Some(b)) => format_bytes(b as f64),
            (Some(d), None) => format!("{d} s"),
            _ => String::new(),
        };
        say(&format!(
            "longhaul bench {} {}: {} stream{}, {what}, {} sends with {}, {}",
            if s.reverse { "<-" } else { "->" },
            s.server,
            s.streams,
            if s.streams == 1 { "" } else { "s" },
            if s.reverse { "server" } else { "client" },
            s.congestion,
            s.send_mode,
        ));
        let rate = s
            .rate_bps
            .map(|r| format!(", paced to {}", rate_text(r as f64)))
            .unwrap_or_default();
        say(&format!(
            "RTT {:.3} ms; window {} ({} per stream needed{rate}); this end: {}; server: send {} / receive {}",
            s.rtt_ms,
            s.window_mode,
            format_bytes(s.window_needed_bytes as f64),
            s.local_buffer,
            buf(s.server_sndbuf_bytes),
            buf(s.server_rcvbuf_bytes),
        ));
        if let Some(r) = s.rx_rate_bps {
            say(&format!(
                "receiver-side pacing: window clamped for {}",
                rate_text(r as f64)
            ));
        }
        for w in &s.warnings {
            say(&format!("warning: {w}"));
        }
        say(&s.jump_start.describe());
        say("[ ID] Interval          Transfer     Bitrate          Retr  Cwnd        RTT        Limited by");
    }

    fn interval(&mut self, v: &IntervalView) {
        for st in &v.streams {
            say(&format!(
                "[{:>3}] {:>6.2}-{:<6.2} s  {:>10}  {:>15}  {:>4}  {:>10}  {:>8.2} ms  {}",
                st.id,
                v.start,
                v.end,
                format_bytes(st.bytes as f64),
                rate_text(st.bits_per_second),
                st.retransmits,
                format_bytes(st.cwnd_bytes as f64),
                st.rtt_ms,
                st.limited_by.describe(),
            ));
        }
        if v.streams.len() > 1 {
            say(&format!(
                "[SUM] {:>6.2}-{:<6.2} s  {:>10}  {:>15}  {:>4}",
                v.start,
                v.end,
                format_bytes(v.bytes as f64),
                rate_text(v.bits_per_second),
                v.retransmits
            ));
        }
    }

    fn end(&mut self, e: &EndReport) {
        let s = &e.summary;
        say("- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -");
        for st in &e.streams {
            say(&format!(
                "[{:>3}] total {:>10}  {:>15}  {:>5} retransmits  min RTT {:.2} ms  {}",
                st.id,
                format_bytes(st.bytes as f64),
                rate_text(st.bits_per_second),
                st.retransmits,
                st.min_rtt_ms,
                st.limited_by.describe(),
            ));
        }
        say(&format!(
            "Total: {} in {:.2} s = {}, {} retransmits{}",
            format_bytes(s.bytes as f64),
            s.seconds,
            rate_text(s.bits_per_second),
            s.retransmits,
            if e.streams.len() > 1 {
                format!(", slowest stream {:.0} % of the fastest", s.balance * 100.0)
            } else {
                String::new()
            }
        ));
        if let Some(h) = s.held_rate_bps {
            let cruise = s
                .cruise_congestion
                .as_deref()
                .map(|c| format!(", then ran on {c}"))
                .unwrap_or_default();
            say(&format!(
                "Bottleneck probe: held pacing at {} once the rate stopped growing{cruise}",
                rate_text(h as f64)
            ));
        }
        say(&format!(
            "CPU: sender {:.2} s ({:.3} s/GB, {:.0} % of a core), receiver {:.2} s ({:.3} s/GB, {:.0} %)",
            s.sender.cpu_seconds,
            s.sender.cpu_seconds_per_gb,
            s.sender.cpu_percent,
            s.receiver.cpu_seconds,
            s.receiver.cpu_seconds_per_gb,
            s.receiver.cpu_percent
        ));
        if e.jump_start.used {
            say(&e.jump_start.describe());
        }
        say(&data_protection_text(&e.data_protection));
        say(&format!("Limited by: {}: {}", s.limited_by_text, s.advice));
    }
}

/// The line on the data connections' protection and what TLS costs here.
fn data_protection_text(
    p: &longhaul_engine::transport::tls::record_speed::DataProtection,
) -> String {
    let how = if p.encrypted {
        "encrypted (TLS 1.3)"
    } else {
        "unencrypted, the session authenticated over TLS (--encryption on measures with TLS)"
    };
    if p.seal_bps_per_core == 0 {
        return format!("Data: {how}");
    }
    format!(
        "Data: {how}; TLS here ({}) seals {} and opens {} per core: what an encrypted cp can reach per core at each end",
        p.cipher,
        rate_text(p.seal_bps_per_core as f64),
        rate_text(p.open_bps_per_core as f64),
    )
}

fn buf(b: u64) -> String {
    if b == 0 {
        "autotuning".into()
    } else {
        format_bytes(b as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daemon(t: &str) -> String {
        match parse_target(t, false).unwrap() {
            Target::Daemon(a) => a,
            other => panic!("{t}: {other:?}"),
        }
    }

    fn ssh(t: &str, rsh: bool) -> SshHost {
        match parse_target(t, rsh).unwrap() {
            Target::Ssh(h) => h,
            other => panic!("{t}: {other:?}"),
        }
    }

    #[test]
    fn targets() {
        assert_eq!(daemon("far.example"), "far.example");
        assert_eq!(daemon("far.example:5291"), "far.example:5291");
        assert_eq!(daemon("[::1]:7"), "[::1]:7");
        assert_eq!(daemon("longhaul://h"), "h");
        assert_eq!(daemon("longhaul://h:9/"), "h:9");
        assert_eq!(daemon("longhaul://[::1]:9"), "[::1]:9");
        assert!(parse_target("longhaul://h/x", false).is_err());
        let h = ssh("me@h", false);
        assert_eq!((h.user.as_deref(), h.host.as_str()), (Some("me"), "h"));
        let h = ssh("ssh://me@h:2222", false);
        assert_eq!((h.host.as_str(), h.port), ("h", Some(2222)));
        let h = ssh("h", true);
        assert_eq!((h.user, h.host.as_str()), (None, "h"));
        assert!(parse_target("-oProxyCommand=x@h", false).is_err());
    }
}
