//! `longhaul tune`: inspect this host for a long fat path, print each finding with its
//! severity, why it matters and the fix; `--apply` writes one sysctl drop-in file and applies
//! it in the current network namespace; `--revert` restores the values `--apply` replaced.
//!
//! Exit code 0 when nothing at warning or critical level remains, 1 when something does (or
//! when not root and changes were only printed), 2 on errors.
//!
//! The drop-in and state paths can be moved with `--dropin`/`--state` or the environment
//! variables `LONGHAUL_TUNE_DROPIN`/`LONGHAUL_TUNE_STATE` (tests write into a temp dir).
//!
//! `--json` prints JSON Lines:
//! - `{"type":"finding","key","severity":"ok|info|warning|critical","current","wanted","why",
//!   "fix","applies"}`, one per check (`fix` is a shell command or null; `applies` says
//!   whether `--apply` changes it);
//! - with `--apply`: `{"type":"applied","key","previous","value"}` per sysctl written,
//!   `{"type":"skipped","key","reason"}` per global sysctl not writable in this namespace,
//!   then the findings after the change;
//! - with `--revert`: `{"type":"reverted","key","previous":null,"value"}` per sysctl;
//! - last, `{"type":"end","command":"tune","critical","warning","info","ok","applied"}`
//!   (`{"type":"end","command":"tune","reverted"}` for `--revert`).
//!
//! With `--peer HOST[:PORT]` tune first measures the RTT to a `longhaul serve` there (the
//! smallest of a few pings; it stands in for `--rtt` when that is not given) and asks the
//! server for its own findings for the same rate and RTT. The text output then has this
//! host's findings, then the peer's under their own heading; `--json` adds, before the
//! findings, `{"type":"peer","address","host","rtt_ms","rtt_source":"measured|given"}` and,
//! after this host's findings, one `{"type":"peer_finding",...}` per peer finding (the fields
//! of `finding`); the `end` object then also has `peer_critical`, `peer_warning`,
//! `peer_info`, `peer_ok` and `peer_omitted`. The exit code counts both hosts' findings.
//!
//! Notes go to stderr with `--json`.

use super::common::{emit_json, say, SecurityArgs, TokenArgs};
use anyhow::{bail, Context};
use longhaul_engine::bench::{peer_report, PeerReport};
use longhaul_engine::tune_apply::{self, ApplyOutcome, RevertOutcome, TuneEvent, TunePaths};
use longhaul_model::units::{format_bytes, parse_duration, parse_rate_bps};
use longhaul_tune::{changes_of, inspect, Finding, HostFacts, Severity, Target};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `longhaul tune`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rate one stream must reach: 1G, 10Gbit, 500M.
    #[arg(long, value_parser = parse_rate_bps, required_unless_present = "revert")]
    pub rate: Option<u64>,
    /// Round-trip time of the path: 180ms (with --peer: measured when not given).
    #[arg(long, value_parser = parse_duration, required_unless_present_any = ["revert", "peer"])]
    pub rtt: Option<Duration>,
    /// Measure the RTT to the `longhaul serve` at HOST[:PORT] and ask it for its own
    /// findings for the same path (needs the shared token, as `bench` does).
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "revert")]
    pub peer: Option<String>,
    /// Interface to check (default: the one of the default route, else the first routed one).
    #[arg(long, value_name = "NAME")]
    pub dev: Option<String>,
    /// Write the sysctl drop-in file and apply it in this network namespace (root).
    #[arg(long, conflicts_with = "revert")]
    pub apply: bool,
    /// Restore the values the last --apply replaced, and the drop-in file's previous state.
    #[arg(long)]
    pub revert: bool,
    /// The drop-in file [env: LONGHAUL_TUNE_DROPIN; default /etc/sysctl.d/90-longhaul.conf].
    #[arg(long, value_name = "PATH")]
    pub dropin: Option<PathBuf>,
    /// Where the replaced values are saved [env: LONGHAUL_TUNE_STATE;
    /// default /var/lib/longhaul/tune-previous.json].
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// Print JSON Lines (`finding`, `applied`, `reverted`, `skipped`, `end`) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub token: TokenArgs,
    #[command(flatten)]
    pub security: SecurityArgs,
}

/// Runs `longhaul tune`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let paths = TunePaths::resolve(args.dropin.clone(), args.state.clone());
    let mut out = Output {
        json: args.json,
        peer: None,
    };
    if args.revert {
        return revert(&paths, &out);
    }
    let Some(rate_bps) = args.rate else {
        bail!("give the path as --rate R --rtt T, e.g. --rate 1G --rtt 180ms");
    };
    if rate_bps == 0 || args.rtt.is_some_and(|rtt| rtt.is_zero()) {
        bail!("--rate and --rtt must be above zero");
    }
    if let Some(host) = &args.peer {
        let token = args.token.load()?;
        // The engine's error already names its cause; chaining it would print it twice.
        let peer = peer_report(host, &token, &args.security.security()?, rate_bps, args.rtt)
            .map_err(|e| {
                anyhow::anyhow!("asking the longhaul serve at {host} for its findings: {e}")
            })?;
        out.peer = Some(Peer {
            report: peer,
            rtt_given: args.rtt.is_some(),
        });
    }
    let rtt = match (args.rtt, &out.peer) {
        (Some(rtt), _) => rtt,
        // Whole microseconds, as sent to the peer; never zero.
        (None, Some(p)) => Duration::from_micros(p.report.rtt.as_micros().max(1) as u64),
        (None, None) => bail!("give the path as --rate R --rtt T, e.g. --rate 1G --rtt 180ms"),
    };
    let target = Target { rate_bps, rtt };
    let facts = gather(args.dev.as_deref())?;
    let findings = inspect(&facts, &target);
    if !args.apply {
        out.header(&target);
        out.findings(&findings);
        let changes = changes_of(&findings);
        if !out.json && !changes.is_empty() {
            say(&format!(
                "\n{} sysctl change(s) would fix this: run `longhaul tune --rate {} --rtt {} \
                 --apply` as root (writes {}).",
                changes.len(),
                rate_arg(rate_bps),
                rtt_arg(rtt),
                paths.dropin.display()
            ));
        }
        return Ok(out.end(&findings, None).into());
    }
    apply(
        &target,
        &facts,
        &findings,
        args.dev.as_deref(),
        &paths,
        &out,
    )
}

/// A rate as the shortest `--rate` argument that means it exactly: 1000000000 -> "1G".
fn rate_arg(rate_bps: u64) -> String {
    for (unit, prefix) in [
        (1_000_000_000_000, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1000, "k"),
    ] {
        if rate_bps % unit == 0 {
            return format!("{}{prefix}", rate_bps / unit);
        }
    }
    rate_bps.to_string()
}

/// A duration as an exact `--rtt` argument: "180ms", or "180500us".
fn rtt_arg(rtt: Duration) -> String {
    if rtt.as_nanos() % 1_000_000 == 0 {
        format!("{}ms", rtt.as_millis())
    } else {
        format!("{}us", rtt.as_micros())
    }
}

/// Reads every fact `inspect` needs off this host.
fn gather(dev: Option<&str>) -> anyhow::Result<HostFacts> {
    longhaul_engine::tune_host::gather(dev).context("reading this host's network settings")
}

fn apply(
    target: &Target,
    facts: &HostFacts,
    findings: &[Finding],
    dev: Option<&str>,
    paths: &TunePaths,
    out: &Output,
) -> anyhow::Result<ExitCode> {
    out.header(target);
    let outcome = tune_apply::apply(target, facts, findings, paths, |event| out.event(event))?;
    match outcome {
        ApplyOutcome::NothingToApply => {
            out.note(
                "nothing to apply: every sysctl longhaul checks is already right for this path",
            );
            out.findings(findings);
            Ok(out.end(findings, Some(0)).into())
        }
        ApplyOutcome::NotRoot { commands } => {
            out.findings(findings);
            out.note(&format!(
                "not root: sysctls can only be changed by root (CAP_NET_ADMIN/CAP_SYS_ADMIN). \
                 Nothing was changed. Run these commands as root instead:\n\n{commands}"
            ));
            Ok(out.end(findings, Some(0)).max_code(1))
        }
        ApplyOutcome::Applied { applied } => {
            let after = inspect(&gather(dev)?, target);
            if !out.json {
                say("\nAfter --apply:");
            }
            out.findings(&after);
            Ok(out.end(&after, Some(applied)).into())
        }
    }
}

fn revert(paths: &TunePaths, out: &Output) -> anyhow::Result<ExitCode> {
    match tune_apply::revert(paths, |event| out.event(event))? {
        RevertOutcome::NotRoot { commands } => {
            out.note(&format!(
                "not root: only root can restore sysctls. Nothing was changed. Run as root:\n\n{commands}"
            ));
            Ok(ExitCode::from(1))
        }
        RevertOutcome::Reverted { values } => {
            if out.json {
                emit_json(&json!({"type": "end", "command": "tune", "reverted": values}));
            } else {
                say(&format!("reverted {values} value(s)"));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Human text or JSON Lines.
struct Output {
    json: bool,
    /// With `--peer`: what the peer said, printed after this host's findings.
    peer: Option<Peer>,
}

/// The peer's answer to `--peer`.
struct Peer {
    report: PeerReport,
    /// Whether `--rtt` was given (else the measured RTT is the path's).
    rtt_given: bool,
}

/// An exit code that can only get worse.
struct Code(u8);

impl Code {
    fn max_code(self, other: u8) -> ExitCode {
        ExitCode::from(self.0.max(other))
    }
}

impl From<Code> for ExitCode {
    fn from(code: Code) -> ExitCode {
        ExitCode::from(code.0)
    }
}

impl Output {
    fn header(&self, target: &Target) {
        if self.json {
            self.peer_line();
            return;
        }
        say(&format!(
            "longhaul tune: {} at {} RTT needs socket buffers of {} per stream (2 x BDP of {})",
            longhaul_model::units::format_rate_bps(target.rate_bps as f64),
            longhaul_model::units::format_seconds(target.rtt.as_secs_f64()),
            format_bytes(target.socket_buffer_bytes() as f64),
            format_bytes(target.bdp_bytes() as f64),
        ));
        if let Some(peer) = &self.peer {
            let rtt_ms = peer.report.rtt.as_secs_f64() * 1e3;
            say(&format!(
                "peer {} ({}): RTT {rtt_ms:.3} ms measured (smallest of the control-connection \
                 pings){}",
                peer.report.addr,
                peer_name(&peer.report),
                if peer.rtt_given {
                    "; the path uses the --rtt given"
                } else {
                    ", used as the path's RTT"
                }
            ));
        }
        if let Ok(ns) = tune_apply::network_namespace() {
            say(&format!("network namespace {ns}"));
        }
        if self.peer.is_some() {
            say("\n== This host ==");
        } else {
            say("");
        }
    }

    /// With `--json` and `--peer`, the object that says which peer answered.
    fn peer_line(&self) {
        if let (true, Some(peer)) = (self.json, &self.peer) {
            emit_json(&json!({
                "type": "peer",
                "address": peer.report.addr.to_string(),
                "host": peer.report.report.host,
                "rtt_ms": peer.report.rtt.as_secs_f64() * 1e3,
                "rtt_source": if peer.rtt_given { "given" } else { "measured" },
            }));
        }
    }

    fn findings(&self, findings: &[Finding]) {
        self.findings_of("finding", findings);
    }

    fn findings_of(&self, kind: &str, findings: &[Finding]) {
        for f in findings {
            if self.json {
                emit_json(&json!({
                    "type": kind,
                    "key": f.key,
                    "severity": f.severity.as_str(),
                    "current": f.current,
                    "wanted": f.wanted,
                    "why": f.why,
                    "fix": f.fix,
                    "applies": f.change.is_some(),
                }));
                continue;
            }
            let label = f.severity.as_str().to_uppercase();
            let wanted = f
                .wanted
                .as_deref()
                .map(|w| format!("  (wanted: {w})"))
                .unwrap_or_default();
            say(&format!("{label:<8} {} = {}{wanted}", f.key, f.current));
            if f.severity > Severity::Ok {
                say(&format!("         why: {}", f.why));
                if let Some(fix) = &f.fix {
                    say(&format!("         fix: {fix}"));
                }
            }
        }
    }

    fn note(&self, text: &str) {
        if self.json {
            eprintln!("longhaul tune: {text}");
        } else {
            say(text);
        }
    }

    fn skipped(&self, key: &str, reason: &str) {
        if self.json {
            emit_json(&json!({"type": "skipped", "key": key, "reason": reason}));
        } else {
            say(&format!("skipped {key}: {reason}"));
        }
    }

    /// Prints one step of `--apply`/`--revert` as it happens.
    fn event(&self, event: TuneEvent<'_>) {
        match event {
            TuneEvent::Skipped { key, reason } => self.skipped(key, reason),
            TuneEvent::WroteDropin(path) => self.note(&format!("wrote {}", path.display())),
            TuneEvent::Applied {
                key,
                previous,
                value,
            } => self.changed("applied", key, Some(previous), value),
            TuneEvent::SavedState(path) => self.note(&format!(
                "saved the previous values in {} (`longhaul tune --revert` restores them)",
                path.display()
            )),
            TuneEvent::Reverted { key, value } => self.changed("reverted", key, None, value),
            TuneEvent::RestoredDropin(path) => self.note(&format!("restored {}", path.display())),
            TuneEvent::RemovedDropin(path) => self.note(&format!("removed {}", path.display())),
        }
    }

    fn changed(&self, kind: &str, key: &str, previous: Option<&str>, value: &str) {
        if self.json {
            emit_json(&json!({"type": kind, "key": key, "previous": previous, "value": value}));
        } else {
            match previous {
                Some(p) => say(&format!("{kind} {key} = {value} (was {p})")),
                None => say(&format!("{kind} {key} = {value}")),
            }
        }
    }

    /// Prints the peer's findings (with `--peer`) and the summary; the exit code is 1 when a
    /// warning or worse remains on either host.
    fn end(&self, findings: &[Finding], applied: Option<usize>) -> Code {
        let counts = |findings: &[Finding]| {
            let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
            (
                count(Severity::Critical),
                count(Severity::Warning),
                count(Severity::Info),
                count(Severity::Ok),
            )
        };
        let (critical, warning, info, ok) = counts(findings);
        if let Some(peer) = &self.peer {
            let report = &peer.report.report;
            let (pc, pw, pi, po) = counts(&report.findings);
            if !self.json {
                say(&format!(
                    "\n{critical} critical, {warning} warning(s), {info} info, {ok} ok on this host"
                ));
                say(&format!(
                    "\n== Peer {} ({}) — fixes apply there ==",
                    peer.report.addr,
                    peer_name(&peer.report)
                ));
            }
            self.findings_of("peer_finding", &report.findings);
            if self.json {
                emit_json(&json!({
                    "type": "end",
                    "command": "tune",
                    "critical": critical,
                    "warning": warning,
                    "info": info,
                    "ok": ok,
                    "applied": applied,
                    "peer_critical": pc,
                    "peer_warning": pw,
                    "peer_info": pi,
                    "peer_ok": po,
                    "peer_omitted": report.omitted,
                }));
            } else {
                if report.omitted > 0 {
                    say(&format!(
                        "({} less severe finding(s) of the peer left out to fit the report)",
                        report.omitted
                    ));
                }
                say(&format!(
                    "\n{pc} critical, {pw} warning(s), {pi} info, {po} ok on the peer"
                ));
            }
            return Code(u8::from(critical + warning + pc + pw > 0));
        }
        if self.json {
            emit_json(&json!({
                "type": "end",
                "command": "tune",
                "critical": critical,
                "warning": warning,
                "info": info,
                "ok": ok,
                "applied": applied,
            }));
        } else {
            say(&format!(
                "\n{critical} critical, {warning} warning(s), {info} info, {ok} ok{}",
                applied
                    .map(|n| format!("; {n} sysctl(s) applied"))
                    .unwrap_or_default()
            ));
        }
        Code(u8::from(critical + warning > 0))
    }
}

/// The peer's host name, or "name unknown".
fn peer_name(peer: &PeerReport) -> &str {
    if peer.report.host.is_empty() {
        "name unknown"
    } else {
        &peer.report.host
    }
}
