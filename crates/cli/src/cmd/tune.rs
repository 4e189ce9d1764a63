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
//! Notes go to stderr with `--json`.

use anyhow::{bail, Context};
use longhaul_model::units::{format_bytes, parse_duration, parse_rate_bps};
use longhaul_sys::{netdev, sysctl};
use longhaul_tune::{
    inspect, render_dropin, Finding, HostFacts, InterfaceFacts, PreviousState, Severity,
    SysctlChange, Target, DEFAULT_DROPIN_PATH, DEFAULT_STATE_PATH, SYSCTLS_INSPECTED,
};
use serde_json::json;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `longhaul tune`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rate one stream must reach: 1G, 10Gbit, 500M.
    #[arg(long, value_parser = parse_rate_bps, required_unless_present_any = ["revert", "peer"])]
    pub rate: Option<u64>,
    /// Round-trip time of the path: 180ms.
    #[arg(long, value_parser = parse_duration, required_unless_present_any = ["revert", "peer"])]
    pub rtt: Option<Duration>,
    /// Measure the RTT to a `longhaul serve` and ask it for its side's findings (not built yet).
    #[arg(long, value_name = "HOST", conflicts_with_all = ["rate", "rtt"])]
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
}

/// Runs `longhaul tune`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.peer.is_some() {
        bail!(
            "--peer needs the `longhaul serve` protocol, which tune does not speak yet; \
             give the path as --rate R --rtt T instead"
        );
    }
    let paths = Paths {
        dropin: path_from(
            args.dropin.clone(),
            "LONGHAUL_TUNE_DROPIN",
            DEFAULT_DROPIN_PATH,
        ),
        state: path_from(
            args.state.clone(),
            "LONGHAUL_TUNE_STATE",
            DEFAULT_STATE_PATH,
        ),
    };
    let out = Output { json: args.json };
    if args.revert {
        return revert(&paths, &out);
    }
    let (Some(rate_bps), Some(rtt)) = (args.rate, args.rtt) else {
        bail!("give the path as --rate R --rtt T, e.g. --rate 1G --rtt 180ms");
    };
    if rate_bps == 0 || rtt.is_zero() {
        bail!("--rate and --rtt must be above zero");
    }
    let target = Target { rate_bps, rtt };
    let facts = gather(args.dev.as_deref())?;
    let findings = inspect(&facts, &target);
    if !args.apply {
        out.header(&target);
        out.findings(&findings);
        let changes = changes_of(&findings);
        if !out.json && !changes.is_empty() {
            println!(
                "\n{} sysctl change(s) would fix this: run `longhaul tune --rate {} --rtt {} \
                 --apply` as root (writes {}).",
                changes.len(),
                rate_arg(rate_bps),
                rtt_arg(rtt),
                paths.dropin.display()
            );
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

struct Paths {
    dropin: PathBuf,
    state: PathBuf,
}

fn path_from(flag: Option<PathBuf>, env: &str, default: &str) -> PathBuf {
    flag.or_else(|| {
        std::env::var_os(env)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .unwrap_or_else(|| PathBuf::from(default))
}

/// Reads every fact `inspect` needs off this host.
fn gather(dev: Option<&str>) -> anyhow::Result<HostFacts> {
    let mut facts = HostFacts {
        page_size_bytes: sysctl::page_size_bytes(),
        cpu_governors: netdev::cpu_governors(),
        ..HostFacts::default()
    };
    for name in SYSCTLS_INSPECTED {
        if let Some(value) = sysctl::read(name)? {
            facts.sysctls.insert((*name).to_string(), value);
        }
    }
    let dev = match dev {
        Some(d) => Some(d.to_string()),
        None => netdev::routed_interface()?,
    };
    if let Some(name) = dev {
        let info = netdev::interface_info(&name)
            .with_context(|| format!("reading interface {name} (check --dev)"))?;
        facts.interface = Some(InterfaceFacts {
            name: info.name,
            mtu_bytes: info.mtu_bytes,
            txqueuelen: info.txqueuelen,
            offloads: info.offloads,
        });
    }
    Ok(facts)
}

fn changes_of(findings: &[Finding]) -> Vec<SysctlChange> {
    findings.iter().filter_map(|f| f.change.clone()).collect()
}

fn apply(
    target: &Target,
    facts: &HostFacts,
    findings: &[Finding],
    dev: Option<&str>,
    paths: &Paths,
    out: &Output,
) -> anyhow::Result<ExitCode> {
    out.header(target);
    let changes = changes_of(findings);
    if changes.is_empty() {
        out.note("nothing to apply: every sysctl longhaul checks is already right for this path");
        out.findings(findings);
        return Ok(out.end(findings, Some(0)).into());
    }
    let dropin_text = render_dropin(&changes, target);
    if !sysctl::running_as_root() {
        out.findings(findings);
        out.note(&format!(
            "not root: sysctls can only be changed by root (CAP_NET_ADMIN/CAP_SYS_ADMIN). \
             Nothing was changed. Run these commands as root instead:\n\n\
             tee {dropin} <<'EOF'\n{dropin_text}EOF\nsysctl -p {dropin}\n",
            dropin = paths.dropin.display()
        ));
        return Ok(out.end(findings, Some(0)).max_code(1));
    }

    let netns = sysctl::network_namespace_id().context("reading /proc/self/ns/net")?;
    let mut state = match read_state(&paths.state)? {
        Some(saved) => {
            if saved.netns != netns {
                bail!(
                    "{} holds values saved in network namespace {}, but this is {netns}: run \
                     --revert there first, or use another --state file here",
                    paths.state.display(),
                    saved.netns
                );
            }
            saved
        }
        None => PreviousState {
            netns: netns.clone(),
            dropin_path: paths.dropin.display().to_string(),
            dropin_previous: read_optional(&paths.dropin)?,
            values: Default::default(),
        },
    };

    // Save what will be replaced before replacing anything, so a failure half-way can be
    // reverted.
    let mut writable = Vec::new();
    for change in &changes {
        if sysctl::is_writable(&change.name)? {
            if let Some(current) = facts.get(&change.name) {
                state.remember(&change.name, current);
            }
            writable.push(change);
        } else {
            out.skipped(
                &change.name,
                &format!(
                    "global, read-only in this network namespace: it takes effect at boot from \
                     the drop-in, or run `sysctl -w {}=\"{}\"` in the host namespace",
                    change.name, change.value
                ),
            );
        }
    }
    write_creating_dirs(&paths.state, &state.to_json())?;
    write_creating_dirs(&paths.dropin, &dropin_text)?;
    out.note(&format!("wrote {}", paths.dropin.display()));

    let mut applied = 0;
    for change in writable {
        let previous = facts.get(&change.name).unwrap_or("absent");
        sysctl::write(&change.name, &change.value)
            .with_context(|| format!("applying {} = {}", change.name, change.value))?;
        out.changed("applied", &change.name, Some(previous), &change.value);
        applied += 1;
    }
    out.note(&format!(
        "saved the previous values in {} (`longhaul tune --revert` restores them)",
        paths.state.display()
    ));

    let after = inspect(&gather(dev)?, target);
    if !out.json {
        println!("\nAfter --apply:");
    }
    out.findings(&after);
    Ok(out.end(&after, Some(applied)).into())
}

fn revert(paths: &Paths, out: &Output) -> anyhow::Result<ExitCode> {
    let Some(state) = read_state(&paths.state)? else {
        bail!(
            "nothing to revert: no saved values at {} (only a `longhaul tune --apply` saves them)",
            paths.state.display()
        );
    };
    if !sysctl::running_as_root() {
        let mut commands = String::new();
        for (name, value) in &state.values {
            commands.push_str(&format!("sysctl -w {name}=\"{value}\"\n"));
        }
        match &state.dropin_previous {
            Some(_) => commands.push_str(&format!(
                "# and restore {} as it was (saved in {})\n",
                state.dropin_path,
                paths.state.display()
            )),
            None => commands.push_str(&format!("rm {}\n", state.dropin_path)),
        }
        commands.push_str(&format!("rm {}\n", paths.state.display()));
        out.note(&format!(
            "not root: only root can restore sysctls. Nothing was changed. Run as root:\n\n{commands}"
        ));
        return Ok(ExitCode::from(1));
    }
    let netns = sysctl::network_namespace_id().context("reading /proc/self/ns/net")?;
    if state.netns != netns {
        bail!(
            "{} holds values saved in network namespace {}, but this is {netns}: run --revert there",
            paths.state.display(),
            state.netns
        );
    }
    for (name, value) in &state.values {
        if sysctl::is_writable(name)? {
            sysctl::write(name, value).with_context(|| format!("restoring {name} = {value}"))?;
            out.changed("reverted", name, None, value);
        } else {
            out.skipped(name, "not writable in this network namespace");
        }
    }
    let dropin = Path::new(&state.dropin_path);
    match &state.dropin_previous {
        Some(text) => {
            write_creating_dirs(dropin, text)?;
            out.note(&format!("restored {}", dropin.display()));
        }
        None => match fs::remove_file(dropin) {
            Ok(()) => out.note(&format!("removed {}", dropin.display())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", dropin.display())),
        },
    }
    fs::remove_file(&paths.state).with_context(|| format!("removing {}", paths.state.display()))?;
    if out.json {
        println!(
            "{}",
            json!({"type": "end", "command": "tune", "reverted": state.values.len()})
        );
    } else {
        println!("reverted {} value(s)", state.values.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// Largest drop-in or state file read back, in bytes.
const MAX_FILE_BYTES: u64 = 1 << 20;

fn read_optional(path: &Path) -> anyhow::Result<Option<String>> {
    match fs::metadata(path) {
        Ok(meta) if meta.len() > MAX_FILE_BYTES => {
            bail!(
                "{} is larger than 1 MiB; not a longhaul file",
                path.display()
            )
        }
        Ok(_) => Ok(Some(
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn read_state(path: &Path) -> anyhow::Result<Option<PreviousState>> {
    let Some(text) = read_optional(path)? else {
        return Ok(None);
    };
    Ok(Some(
        PreviousState::from_json(&text).with_context(|| format!("reading {}", path.display()))?,
    ))
}

fn write_creating_dirs(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // Write beside and rename, so a crash never leaves half a file.
    let tmp = path.with_extension("tmp-longhaul");
    fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

/// Human text or JSON Lines.
struct Output {
    json: bool,
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
            return;
        }
        println!(
            "longhaul tune: {} at {} RTT needs socket buffers of {} per stream (2 x BDP of {})",
            longhaul_model::units::format_rate_bps(target.rate_bps as f64),
            longhaul_model::units::format_seconds(target.rtt.as_secs_f64()),
            format_bytes(target.socket_buffer_bytes() as f64),
            format_bytes(target.bdp_bytes() as f64),
        );
        if let Ok(ns) = sysctl::network_namespace_id() {
            println!("network namespace {ns}\n");
        }
    }

    fn findings(&self, findings: &[Finding]) {
        for f in findings {
            if self.json {
                println!(
                    "{}",
                    json!({
                        "type": "finding",
                        "key": f.key,
                        "severity": f.severity.as_str(),
                        "current": f.current,
                        "wanted": f.wanted,
                        "why": f.why,
                        "fix": f.fix,
                        "applies": f.change.is_some(),
                    })
                );
                continue;
            }
            let label = f.severity.as_str().to_uppercase();
            let wanted = f
                .wanted
                .as_deref()
                .map(|w| format!("  (wanted: {w})"))
                .unwrap_or_default();
            println!("{label:<8} {} = {}{wanted}", f.key, f.current);
            if f.severity > Severity::Ok {
                println!("         why: {}", f.why);
                if let Some(fix) = &f.fix {
                    println!("         fix: {fix}");
                }
            }
        }
    }

    fn note(&self, text: &str) {
        if self.json {
            eprintln!("longhaul tune: {text}");
        } else {
            println!("{text}");
        }
    }

    fn skipped(&self, key: &str, reason: &str) {
        if self.json {
            println!(
                "{}",
                json!({"type": "skipped", "key": key, "reason": reason})
            );
        } else {
            println!("skipped {key}: {reason}");
        }
    }

    fn changed(&self, kind: &str, key: &str, previous: Option<&str>, value: &str) {
        if self.json {
            println!(
                "{}",
                json!({"type": kind, "key": key, "previous": previous, "value": value})
            );
        } else {
            match previous {
                Some(p) => println!("{kind} {key} = {value} (was {p})"),
                None => println!("{kind} {key} = {value}"),
            }
        }
    }

    /// Prints the summary; the exit code is 1 when a warning or worse remains.
    fn end(&self, findings: &[Finding], applied: Option<usize>) -> Code {
        let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
        let (critical, warning, info, ok) = (
            count(Severity::Critical),
            count(Severity::Warning),
            count(Severity::Info),
            count(Severity::Ok),
        );
        if self.json {
            println!(
                "{}",
                json!({
                    "type": "end",
                    "command": "tune",
                    "critical": critical,
                    "warning": warning,
                    "info": info,
                    "ok": ok,
                    "applied": applied,
                })
            );
        } else {
            println!(
                "\n{critical} critical, {warning} warning(s), {info} info, {ok} ok{}",
                applied
                    .map(|n| format!("; {n} sysctl(s) applied"))
                    .unwrap_or_default()
            );
        }
        Code(u8::from(critical + warning > 0))
    }
}
