//! `longhaul cp`: copy files and trees to or from a host reached over ssh (`[user@]host:path`,
//! the far longhaul started through the user's ssh) or a `longhaul serve --root DIR`
//! (`longhaul://host[:port]/path`), verified (a BLAKE3 subtree hash per chunk, merged into
//! each file's BLAKE3) and resumable (run the same command again).
//!
//! `--json` prints JSON Lines (schema in the README, types in `longhaul_report::records`,
//! built in `records`): `{"type":"start",...}`, an
//! `{"type":"interval",...}` every `--interval` (bench's per-stream TCP_INFO figures and
//! `limited_by`, plus the transfer's progress), `{"type":"warning","message"}`, over ssh
//! `{"type":"far_start",...}` (the far end's start, apart from the transfer), and
//! `{"type":"end",...}` with the transfer's figures and bench's verdict (`limited_by`,
//! `limited_by_text`, `advice`, `balance`, `stream_summaries`). Without `--json` a progress
//! bar (indicatif) goes to stderr when it is a terminal, and the end prints bench's
//! `Limited by:` line. Exit 0: every file in place (or equal); 1: some file failed or
//! differs; 2: an error stopped the transfer.
//!
//! A pull of several remote sources (`cp -r HOST:a HOST:b DIR`, DIR an existing
//! directory) runs one transfer per source, one after another, each with its own start and
//! end lines; an error in one is reported (`{"type":"error","source","error"}`) and the
//! others still go; the exit status is the worst of them.

mod filter;
mod output;
mod progress;
mod records;
mod stripes;
mod third_party;

use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use longhaul_engine::bench::DEFAULT_PORT;
use longhaul_engine::cp::client::{run_cp, CpConfig, CpJob, CpReport, CpStart};
use longhaul_engine::cp::hash_ahead::HashedAhead;
use longhaul_engine::cp::send::SendItem;
use longhaul_engine::cp::telemetry::CpTelemetry;
use longhaul_engine::cp::walk::walk_local_filtered;
use longhaul_engine::cp::Progress;
use longhaul_engine::ssh::launch::FarEnd;
use longhaul_engine::ssh::SshError;
use longhaul_report::records::RunError;
use longhaul_transfer::location::{
    parse_location, parse_striped, remote_path, Location, RemoteSpec, SshSpec,
};
use longhaul_transfer::RequestedPath;

use super::common::{duration, emit_record, rate, size, SecurityArgs, TokenArgs};
use super::ssh::SshArgs;
use longhaul_engine::transport::tls::Security;

pub use filter::FilterArgs;
use output::{print_dry_run, print_end, print_far_started, print_hashed_ahead, warn};
use progress::{emit_interval, emit_start, ticker, Reporting};

/// The fewest files' bytes over which a copy reports CPU seconds per GB
/// (`cpu_seconds_per_gb`; below it the figure is left out, `null` in JSON): over less,
/// start-up and the handshake dominate and the figure means nothing.
pub const PER_GB_MIN_BYTES: u64 = 64 << 20;

/// Arguments of `longhaul cp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sources then the destination; exactly one side is remote. Over ssh:
    /// [USER@]HOST:PATH or [USER@][IPv6]:PATH, PATH absolute or relative to the remote
    /// home (empty: the home; a ':' after the first '/' makes an argument local). A
    /// running daemon: longhaul://HOST[:PORT]/PATH, PATH below its --root. Between two
    /// daemons (longhaul://A/x longhaul://B/y) or two ssh hosts (A:x B:y), a third-party
    /// copy: B pulls x from A directly with a one-time ticket this host asks A for.
    #[arg(required = true, num_args = 2.., value_name = "PATH")]
    pub paths: Vec<std::ffi::OsString>,
    /// Copy directories and their contents.
    #[arg(short = 'r', long)]
    pub recursive: bool,
    /// Parallel TCP streams (default: from the RTT: 2 under 2 ms, else one per 14 ms rounded
    /// up to a power of two, 4 to 64; many streams reach a long path's rate sooner).
    #[arg(short = 'P', long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub streams: Option<u16>,
    /// Do not start at the rate remembered for this path (jump-start, pushes and pulls;
    /// see docs/jump-start.md).
    #[arg(long)]
    pub no_jump_start: bool,
    /// Pace all streams together to this rate.
    #[arg(long, value_parser = rate)]
    pub rate: Option<u64>,
    /// Socket buffer per stream: `auto` (from the RTT and rate) or a size.
    #[arg(long, default_value = "auto")]
    pub window: String,
    /// Congestion control of the sender: this host on a push, the server on a pull
    /// (default: bbr where available).
    #[arg(short = 'C', long, value_parser = congestion_name)]
    pub congestion: Option<String>,
    /// Chunk size, a power of two from 4KiB to 1GiB (default: from the path, 4..64 MiB).
    #[arg(long, value_parser = chunk_size)]
    pub chunk: Option<u64>,
    /// Never replace an existing destination file.
    #[arg(long)]
    pub no_clobber: bool,
    /// Keep hard links (rsync's -H): names of one file in the source arrive as names of
    /// one file at the destination, its data sent once. Without it each name arrives as
    /// its own file.
    #[arg(short = 'H', long)]
    pub hard_links: bool,
    /// Also keep an unfinished transfer's progress through a power cut: the receiver
    /// flushes written chunks and their resume records every 2 s, and each directory
    /// right after a file is renamed into it. Without it every file is still flushed to
    /// disk before it is renamed into place, and the directories before the transfer
    /// reports success, so a finished transfer survives a power cut either way.
    #[arg(long)]
    pub sync: bool,
    /// Send nothing: compare BLAKE3 digests of the sources and an existing copy.
    #[arg(long)]
    pub checksum_only: bool,
    /// On a pull, keep the set-user-ID, set-group-ID and sticky bits the server names
    /// (dropped by default, as an rsync daemon does: a server could otherwise place a
    /// setuid program here). Only for a server trusted as much as this user. A push's
    /// bits are the server's choice: `longhaul serve --keep-setuid`.
    #[arg(long)]
    pub keep_setuid: bool,
    /// Time between interval reports (`interval` lines with --json), at least 10ms.
    #[arg(short = 'i', long, default_value = "1s", value_parser = duration)]
    pub interval: Duration,
    /// Print JSON Lines instead of text.
    #[arg(long)]
    pub json: bool,
    /// Never draw the progress bar (it is drawn only when stderr is a terminal).
    #[arg(long)]
    pub no_progress: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub token: TokenArgs,
    /// A third-party copy (longhaul://A/x longhaul://B/y): the source daemon's token
    /// file, when it is not the destination's (--token-file or its default).
    #[arg(long, value_name = "FILE")]
    pub source_token_file: Option<PathBuf>,
    #[command(flatten)]
    pub security: SecurityArgs,
    #[command(flatten)]
    pub ssh: SshArgs,
    /// `longhaul sync` (not a cp flag): only the chunks of a changed file that differ
    /// from the destination's copy are sent, entries placed by rsync's rule.
    #[arg(skip)]
    pub delta: Option<longhaul_transfer::session::recv::SyncRules>,
}

/// The far side of one transfer.
#[derive(Debug, Clone)]
enum Far {
    /// A running `longhaul serve --root`.
    Daemon(RemoteSpec),
    /// A host reached over ssh, its longhaul started for this transfer.
    Ssh(SshSpec),
}

impl Far {
    fn of(location: &Location) -> Option<Far> {
        match location {
            Location::Local(_) => None,
            Location::Daemon(spec) => Some(Far::Daemon(spec.clone())),
            Location::Ssh(spec) => Some(Far::Ssh(spec.clone())),
        }
    }

    fn path(&self) -> &[u8] {
        match self {
            Far::Daemon(spec) => &spec.path,
            Far::Ssh(spec) => &spec.path,
        }
    }

    /// The argument as the user would write it (for messages).
    fn shown(&self) -> String {
        match self {
            Far::Daemon(spec) => spec.to_string(),
            Far::Ssh(spec) => spec.to_string(),
        }
    }
}

/// Runs `longhaul cp`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::common::with_json_errors(args.json, || run_inner(args))
}

fn server_of(spec: &RemoteSpec) -> String {
    let port = spec.port.unwrap_or(DEFAULT_PORT);
    if spec.host.contains(':') {
        format!("[{}]:{port}", spec.host)
    } else {
        format!("{}:{port}", spec.host)
    }
}

fn run_inner(args: Args) -> anyhow::Result<ExitCode> {
    let (dst_arg, src_args) = args.paths.split_last().context("give SRC... DST")?;
    // Several hosts at each end: one copy striped over them.
    let striped = |a: &std::ffi::OsString| parse_striped(a).map_err(|e| anyhow::anyhow!("{e}"));
    match (striped(dst_arg)?, src_args) {
        (Some(dsts), [src]) => match striped(src)? {
            Some(srcs) => return stripes::run(&args, &srcs, &dsts),
            None => bail!(
                "a striped copy names several hosts at both ends \
                 (longhaul://A1,A2/x longhaul://B1,B2/y)"
            ),
        },
        (Some(_), _) => bail!("a striped copy takes one source (longhaul://A1,A2/x)"),
        (None, srcs) => {
            for s in srcs {
                if striped(s)?.is_some() {
                    bail!(
                        "a striped copy names several hosts at both ends \
                         (longhaul://A1,A2/x longhaul://B1,B2/y)"
                    );
                }
            }
        }
    }
    let dst = parse_location(dst_arg).map_err(|e| anyhow::anyhow!("{e}"))?;
    let srcs = src_args
        .iter()
        .map(|a| parse_location(a).map_err(|e| anyhow::anyhow!("{e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let json = args.json;
    if args.interval < Duration::from_millis(10) {
        bail!("--interval must be at least 10ms");
    }
    if args.filter.delete && !args.recursive {
        bail!("--delete needs -r: it removes what the source lacks from the directories the copy sends");
    }
    if args.filter.delete && args.checksum_only {
        bail!("--delete and --checksum-only do not go together: --checksum-only changes nothing");
    }
    let filter = args.filter.filter()?;
    let is_remote = |l: &Location| !matches!(l, Location::Local(_));
    // A push over ssh starts the far end (ssh's login, maybe an upload) while this end
    // walks its sources. Should the walk fail, the thread is left to finish: the far end
    // it started is dropped there (its guard kills ssh), or, if this process has exited
    // first, the far process ends on its ssh channel's close.
    let mut early: Option<std::thread::JoinHandle<Result<FarEnd, SshError>>> = None;
    // A single `sync --checksum` pull hashes the destination's old copies meanwhile.
    let mut hashed_ahead = None;
    // Between two daemons: a third-party copy, the data from one to the other directly.
    if let (
        Location::Daemon(_) | Location::Ssh(_),
        [from @ (Location::Daemon(_) | Location::Ssh(_))],
    ) = (&dst, srcs.as_slice())
    {
        return third_party::run(&args, from, &dst);
    }
    if args.source_token_file.is_some() {
        bail!(
            "--source-token-file is for a copy between two daemons (longhaul://A/x longhaul://B/y)"
        );
    }
    let jobs: Vec<(Far, CpJob)> = match (Far::of(&dst), srcs.as_slice()) {
        (Some(far), srcs) => {
            let mut locals = Vec::new();
            for s in srcs {
                match s {
                    Location::Local(p) => locals.push(p.clone()),
                    _ => {
                        bail!("both sides are remote; one side of longhaul cp must be a local path")
                    }
                }
            }
            if let Far::Ssh(spec) = &far {
                let (host, opts) = (spec.host.clone(), args.ssh.options(args.streams));
                early = Some(std::thread::spawn(move || FarEnd::start(&host, &opts)));
            }
            let listed = walk_local_filtered(
                &locals,
                args.recursive,
                &filter,
                args.hard_links,
                &mut |w| warn(json, w),
            )?;
            let items = listed
                .into_iter()
                .map(|s| SendItem {
                    entry: s.entry,
                    origin: s.origin,
                })
                .collect();
            vec![(far, CpJob::Push { items })]
        }
        (None, [src]) if is_remote(src) => {
            let far = Far::of(src).context("a remote source")?;
            let dest = dst_path(&dst)?;
            hashed_ahead = hash_ahead(&args, &far, &dest);
            vec![(far, CpJob::Pull { dest })]
        }
        (None, srcs) if srcs.iter().all(is_remote) => {
            // Several remote sources, as cp: into an existing directory, one transfer
            // after another.
            let dest = dst_path(&dst)?;
            if !dest.is_dir() {
                bail!(
                    "{} is not an existing directory; several sources are copied into one (create it first)",
                    dest.display()
                );
            }
            srcs.iter()
                .filter_map(Far::of)
                .map(|far| (far, CpJob::Pull { dest: dest.clone() }))
                .collect()
        }
        (None, srcs) if srcs.iter().any(is_remote) => {
            bail!("the sources mix local and remote paths; copy from a host (all sources HOST:PATH) or to one (DST HOST:PATH), one command each")
        }
        (None, _) => {
            bail!("no side is remote; name the far side as [USER@]HOST:PATH (over ssh) or longhaul://HOST/PATH (a daemon); for local copies use cp")
        }
    };
    for (far, _) in &jobs {
        if let Far::Daemon(spec) = far {
            remote_path(spec).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    if args.keep_setuid && matches!(dst, Location::Daemon(_) | Location::Ssh(_)) {
        warn(
            json,
            "--keep-setuid applies to pulls only: on a push the server drops set-user-ID \
             and set-group-ID bits unless it runs with `longhaul serve --keep-setuid`"
                .into(),
        );
    }
    let window = super::common::window(&args.window)?;
    // Only a daemon needs the shared token; an ssh start-up makes a one-time one.
    let token = if jobs.iter().any(|(far, _)| matches!(far, Far::Daemon(_))) {
        Some(args.token.load()?)
    } else {
        None
    };
    if jobs.len() == 1 {
        let (far, job) = jobs.into_iter().next().context("no transfer")?;
        let started = match early.take() {
            Some(h) => Some(
                h.join()
                    .map_err(|_| anyhow::anyhow!("starting the far end panicked"))??,
            ),
            None => None,
        };
        let begun = Begun {
            far_end: started,
            hashed_ahead,
        };
        let report = run_one(&args, &far, job, token, window, begun)?;
        return Ok(ExitCode::from(status_of(&report)));
    }
    // Several sources: an error in one is reported and the others still go, as cp does;
    // the exit status is the worst.
    let mut worst = 0;
    for (far, job) in jobs {
        match run_one(&args, &far, job, token.clone(), window, Begun::default()) {
            Ok(report) => worst = worst.max(status_of(&report)),
            Err(e) => {
                worst = 2;
                let what = far.shown();
                if json {
                    emit_record(RunError {
                        source: Some(what.to_string()),
                        error: format!("{e:#}"),
                    });
                } else {
                    eprintln!("longhaul cp: {what}: {e:#}");
                }
            }
        }
    }
    Ok(ExitCode::from(worst))
}

/// What the command began for its single transfer before the transfer itself.
#[derive(Default)]
struct Begun {
    /// The far end over ssh, started while a push walked its sources.
    far_end: Option<FarEnd>,
    /// A `sync --checksum` pull's old copies, hashed while the far end starts.
    hashed_ahead: Option<Arc<HashedAhead>>,
}

/// Starts hashing the destination's old copies for a `sync --checksum` pull (or its dry
/// run): the receiver hashes each of them once the list names it, certain work that can
/// be done while the far end starts. Only where the pulled source lands is looked at:
/// DEST itself for `SRC/` (its contents) or a DEST that is not a directory, else
/// DEST/NAME (rsync's placement, and cp's for a single file).
fn hash_ahead(args: &Args, far: &Far, dest: &std::path::Path) -> Option<Arc<HashedAhead>> {
    let rules = args.delta.filter(|r| r.checksum)?;
    let chunk = args.chunk?;
    let at = if rules.contents || !dest.is_dir() {
        dest.to_path_buf()
    } else {
        // The source's base name, by the rule the client checks the list with (none for
        // the served root: only the server knows its name).
        let name = match far {
            Far::Ssh(_) => longhaul_transfer::location::ssh_top(far.path())?,
            Far::Daemon(_) => RequestedPath::from_typed(far.path())
                .ok()?
                .path?
                .file_name()
                .to_vec(),
        };
        dest.join(std::ffi::OsStr::from_bytes(&name))
    };
    Some(HashedAhead::start(&at, chunk))
}

/// The local destination of a pull.
fn dst_path(dst: &Location) -> anyhow::Result<PathBuf> {
    match dst {
        Location::Local(p) => Ok(p.clone()),
        _ => bail!("both sides are remote; one side of longhaul cp must be a local path"),
    }
}

/// Exit status of a finished transfer: 0, or 1 when some file failed or differs.
fn status_of(report: &CpReport) -> u8 {
    u8::from(!report.failed.is_empty())
}

/// One transfer with one far side: over ssh its longhaul is started first (and closed
/// after); then progress while it runs, then its end line.
fn run_one(
    args: &Args,
    far: &Far,
    job: CpJob,
    token: Option<longhaul_proto::Token>,
    window: Option<u64>,
    begun: Begun,
) -> anyhow::Result<CpReport> {
    let (server, token, security, ssh) = match far {
        Far::Daemon(spec) => (
            server_of(spec),
            token.context("a daemon needs the shared token")?,
            args.security.security()?,
            None,
        ),
        Far::Ssh(spec) => {
            let end = match begun.far_end {
                Some(end) => end,
                None => FarEnd::start(&spec.host, &args.ssh.options(args.streams))?,
            };
            let security = args.security.pinned(end.fingerprint());
            (end.target().to_string(), end.token(), security, Some(end))
        }
    };
    let report = transfer(
        args,
        far,
        server,
        (token, security),
        (job, begun.hashed_ahead),
        window,
        ssh.as_ref(),
    );
    // The orderly end of the far process, after success or failure alike (an early
    // return or a panic drops the guard instead, which kills ssh and so ends it too).
    if let Some(end) = ssh {
        end.finish();
    }
    report
}

fn transfer(
    args: &Args,
    far: &Far,
    server: String,
    (token, security): (longhaul_proto::Token, Security),
    (job, hashed_ahead): (CpJob, Option<Arc<HashedAhead>>),
    window: Option<u64>,
    far_end: Option<&FarEnd>,
) -> anyhow::Result<CpReport> {
    let json = args.json;
    let via_ssh = far_end.is_some_and(|e| e.via_ssh().is_some());
    let (streams, jump_start) = FarEnd::session_shape(far_end, args.streams, !args.no_jump_start);
    let cpu_before = {
        let (user, sys) = longhaul_sys::cpu::process_cpu_times();
        user + sys
    };
    let cfg = CpConfig {
        server,
        remote_path: far.path().to_vec(),
        user_paths: matches!(far, Far::Ssh(_)),
        job,
        credential: token.into(),
        security,
        recursive: args.recursive,
        no_clobber: args.no_clobber,
        hard_links: args.hard_links,
        memory_gate: None,
        hashed_ahead: hashed_ahead.clone(),
        sync: args.sync,
        checksum_only: args.checksum_only,
        keep_setuid: args.keep_setuid,
        streams,
        jump_start,
        rate_bps: args.rate,
        window,
        congestion: args.congestion.clone(),
        chunk_size: args.chunk,
        delta: args.delta,
        filter: args.filter.filter()?,
        delete: args.filter.delete,
    };

    let progress = Arc::new(Progress::default());
    // Dropping `done` ends the ticker at once (a sleeping ticker would hold the exit).
    let (done, done_rx) = std::sync::mpsc::channel::<()>();
    let draw_bar = !json && !args.no_progress && std::io::stderr().is_terminal();
    // The start line waits for the file list to settle (its totals); the ticker prints it,
    // then an interval line every --interval.
    let shared: Arc<Mutex<Reporting>> = Arc::default();
    let ticker = {
        let (progress, shared, every) = (progress.clone(), shared.clone(), args.interval);
        std::thread::spawn(move || ticker(&progress, &done_rx, json, draw_bar, every, &shared))
    };
    let mut on_start = |s: &CpStart| {
        for w in &s.warnings {
            warn(json, w.clone());
        }
        if let Ok(mut l) = shared.lock() {
            l.telemetry = CpTelemetry::start(s, &progress, args.rate);
            l.start = Some(s.clone());
        }
    };
    let result = run_cp(cfg, progress.clone(), &mut on_start);
    drop(done);
    let _ = ticker.join();
    if json {
        emit_start(&shared, &progress, args.interval);
    }
    // A transfer that ended before its list leaves nothing for the old copies' hashes.
    if let Some(ahead) = &hashed_ahead {
        ahead.stop();
    }
    let report = result.map_err(|e| anyhow::anyhow!("{e}{}", e.rerun_hint()))?;
    let (user, sys) = longhaul_sys::cpu::process_cpu_times();
    let cpu = (user + sys).saturating_sub(cpu_before).as_secs_f64();
    // The last, partial interval, then the verdict over the whole transfer.
    let verdict = match shared.lock() {
        Ok(mut l) => {
            let last = l.telemetry.as_mut().map(CpTelemetry::interval);
            if let (true, Some(v)) = (json, last) {
                if v.end > v.start || v.bytes > 0 {
                    emit_interval(&v, &progress);
                }
            }
            // Dropping the telemetry closes this end's clones of the data sockets.
            l.telemetry.take().map(|t| t.verdict())
        }
        Err(_) => None,
    };
    // Through ssh, this end's sockets reach only the relay on its loopback: their
    // counters say nothing of the path, and the ssh connections set the pace.
    let verdict = verdict.map(|v| if via_ssh { v.carried_through_ssh() } else { v });
    // Before the end line, which is the last.
    if let Some(end) = far_end {
        print_far_started(end, json);
    }
    if let Some(ahead) = &hashed_ahead {
        print_hashed_ahead(ahead.counts(), json);
    }
    if args.delta.is_some_and(|r| r.dry_run) {
        print_dry_run(&report, json);
    } else {
        print_end(&report, cpu, verdict.as_ref(), json, args.filter.delete);
    }
    Ok(report)
}

/// `-C`: a name the kernel could know (letters, digits, `_`, `-`; at most 16 bytes).
/// Whether it is available is checked by the sender's host.
fn congestion_name(s: &str) -> Result<String, String> {
    if !s.is_empty() && longhaul_proto::limits::is_congestion_name(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a congestion-control name (e.g. bbr, cubic, reno; see /proc/sys/net/ipv4/tcp_available_congestion_control)"
        ))
    }
}

/// `--chunk`: a size that is a power of two in 4 KiB..=1 GiB (each chunk is a whole
/// subtree of the file's BLAKE3 tree).
fn chunk_size(s: &str) -> Result<u64, String> {
    let c = size(s)?;
    if longhaul_proto::transfer::valid_chunk_size(c) {
        Ok(c)
    } else {
        Err(format!(
            "{c} bytes is not a power of two from 4KiB to 1GiB (e.g. 4MiB, 16MiB)"
        ))
    }
}
