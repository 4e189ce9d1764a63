//! `longhaul cp`: copy files and trees to or from a host reached over ssh (`[user@]host:path`,
//! the far longhaul started through the user's ssh) or a `longhaul serve --root DIR`
//! (`longhaul://host[:port]/path`), verified (a BLAKE3 subtree hash per chunk, merged into
//! each file's BLAKE3) and resumable (run the same command again).
//!
//! `--json` prints JSON Lines (schema in the README): `{"type":"start",...}`, an
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

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use longhaul_engine::bench::report::IntervalView;
use longhaul_engine::bench::DEFAULT_PORT;
use longhaul_engine::cp::client::{run_cp, CpConfig, CpJob, CpReport, CpStart};
use longhaul_engine::cp::send::SendItem;
use longhaul_engine::cp::telemetry::{CpTelemetry, CpVerdict};
use longhaul_engine::cp::walk::walk_local_filtered;
use longhaul_engine::cp::Progress;
use longhaul_engine::ssh::launch::FarEnd;
use longhaul_engine::ssh::SshError;
use longhaul_model::units::{format_bytes, format_rate_bps};
use longhaul_transfer::location::{parse_location, remote_path, Location, RemoteSpec, SshSpec};
use serde_json::json;

use super::common::{duration, emit_json, rate, say, size, SecurityArgs, TokenArgs};
use super::ssh::SshArgs;
use longhaul_engine::transport::tls::Security;

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
    /// running daemon: longhaul://HOST[:PORT]/PATH, PATH below its --root.
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
    #[command(flatten)]
    pub security: SecurityArgs,
    #[command(flatten)]
    pub ssh: SshArgs,
    /// `longhaul sync` (not a cp flag): only the chunks of a changed file that differ
    /// from the destination's copy are sent, entries placed by rsync's rule.
    #[arg(skip)]
    pub delta: Option<longhaul_transfer::session::recv::SyncRules>,
}

/// `--exclude PATTERN`, `--include PATTERN` (repeatable; their order on the command line is
/// kept across both, as rsync's) and `--delete`, for any command that copies trees (`cp`,
/// `sync`): flatten it into the command's arguments.
#[derive(Debug, Clone, Default)]
pub struct FilterArgs {
    /// `(include, pattern)` in command-line order.
    pub rules: Vec<(bool, Vec<u8>)>,
    /// `--delete`.
    pub delete: bool,
}

impl FilterArgs {
    /// The compiled rules (a bad pattern is refused, naming it).
    pub fn filter(&self) -> anyhow::Result<longhaul_transfer::Filter> {
        longhaul_transfer::Filter::new(self.rules.iter().map(|(i, p)| (*i, p.as_slice())))
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

impl clap::FromArgMatches for FilterArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        use std::os::unix::ffi::OsStrExt;
        let mut rules: Vec<(usize, bool, Vec<u8>)> = Vec::new();
        for (id, include) in [("exclude", false), ("include", true)] {
            if let (Some(values), Some(at)) =
                (m.get_many::<std::ffi::OsString>(id), m.indices_of(id))
            {
                rules.extend(
                    values
                        .zip(at)
                        .map(|(v, i)| (i, include, v.as_bytes().to_vec())),
                );
            }
        }
        rules.sort_by_key(|r| r.0);
        Ok(Self {
            rules: rules.into_iter().map(|(_, i, p)| (i, p)).collect(),
            delete: m.get_flag("delete"),
        })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for FilterArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        use clap::{Arg, ArgAction};
        let rule = |id: &'static str, help: &'static str| {
            Arg::new(id)
                .long(id)
                .value_name("PATTERN")
                .action(ArgAction::Append)
                .allow_hyphen_values(true)
                .value_parser(clap::value_parser!(std::ffi::OsString))
                .help(help)
        };
        cmd.arg(rule(
            "exclude",
            "Leave out what PATTERN matches (rsync's rules: `*.o`, `/build`, `cache/`, \
             `dir/**`; first matching --exclude/--include wins; a leading / anchors at the \
             top of each source directory). Repeatable.",
        ))
        .arg(rule(
            "include",
            "Keep what PATTERN matches even if a later --exclude would leave it out \
             (`--include '*/' --include '*.c' --exclude '*'`). Repeatable.",
        ))
        .arg(
            Arg::new("delete")
                .long("delete")
                .action(ArgAction::SetTrue)
                .help(
                    "Remove from the destination what the source lacks, inside the \
                     directories the copy sends (needs -r); what --exclude leaves out is \
                     kept.",
                ),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
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
                let (host, opts) = (spec.host.clone(), args.ssh.options());
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
        (None, [src]) if is_remote(src) => vec![(
            Far::of(src).context("a remote source")?,
            CpJob::Pull {
                dest: dst_path(&dst)?,
            },
        )],
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
        let report = run_one(&args, &far, job, token, window, started)?;
        return Ok(ExitCode::from(status_of(&report)));
    }
    // Several sources: an error in one is reported and the others still go, as cp does;
    // the exit status is the worst.
    let mut worst = 0;
    for (far, job) in jobs {
        match run_one(&args, &far, job, token.clone(), window, None) {
            Ok(report) => worst = worst.max(status_of(&report)),
            Err(e) => {
                worst = 2;
                let what = far.shown();
                if json {
                    emit_json(&json!({"type": "error", "source": what, "error": format!("{e:#}")}));
                } else {
                    eprintln!("longhaul cp: {what}: {e:#}");
                }
            }
        }
    }
    Ok(ExitCode::from(worst))
}

/// The local destination of a pull.
fn dst_path(dst: &Location) -> anyhow::Result<PathBuf> {
    match dst {
        Location::Local(p) => Ok(p.clone()),
        _ => bail!("both sides are remote; one side of longhaul cp must be a local path"),
    }
}

fn warn(json: bool, w: String) {
    if json {
        emit_json(&json!({"type": "warning", "message": w}));
    } else {
        eprintln!("longhaul cp: warning: {w}");
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
    started: Option<FarEnd>,
) -> anyhow::Result<CpReport> {
    let (server, token, security, ssh) = match far {
        Far::Daemon(spec) => (
            server_of(spec),
            token.context("a daemon needs the shared token")?,
            args.security.security()?,
            None,
        ),
        Far::Ssh(spec) => {
            let end = match started {
                Some(end) => end,
                None => FarEnd::start(&spec.host, &args.ssh.options())?,
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
        job,
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
    job: CpJob,
    window: Option<u64>,
    far_end: Option<&FarEnd>,
) -> anyhow::Result<CpReport> {
    let json = args.json;
    let cpu_before = {
        let (user, sys) = longhaul_sys::cpu::process_cpu_times();
        user + sys
    };
    let cfg = CpConfig {
        server,
        remote_path: far.path().to_vec(),
        user_paths: matches!(far, Far::Ssh(_)),
        job,
        token,
        security,
        recursive: args.recursive,
        no_clobber: args.no_clobber,
        hard_links: args.hard_links,
        sync: args.sync,
        checksum_only: args.checksum_only,
        keep_setuid: args.keep_setuid,
        streams: args.streams,
        jump_start: !args.no_jump_start,
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
    let report = result.map_err(|e| anyhow::anyhow!("{e}{}", e.rerun_hint()))?;
    let (user, sys) = longhaul_sys::cpu::process_cpu_times();
    let cpu = (user + sys).saturating_sub(cpu_before).as_secs_f64();
    // The last, partial interval, then the verdict over the whole transfer.
    let verdict = match shared.lock() {
        Ok(mut l) => {
            let last = l.telemetry.as_mut().map(CpTelemetry::interval);
            if let (true, Some(v)) = (json, last) {
                if v.end > v.start || v.bytes > 0 {
                    emit_json(&interval_line(&v, &progress));
                }
            }
            // Dropping the telemetry closes this end's clones of the data sockets.
            l.telemetry.take().map(|t| t.verdict())
        }
        Err(_) => None,
    };
    // Before the end line, which is the last.
    if let Some(end) = far_end {
        print_far_started(end, json);
    }
    if args.delta.is_some_and(|r| r.dry_run) {
        print_dry_run(&report, json);
    } else {
        print_end(&report, cpu, verdict.as_ref(), json, args.filter.delete);
    }
    Ok(report)
}

/// The far end's start over ssh, apart from the transfer (whose seconds start at its
/// first data stream): a line before the end line (`far_start` in JSON).
fn print_far_started(end: &FarEnd, json: bool) {
    let up = end.uploaded();
    if json {
        emit_json(&json!({
            "type": "far_start",
            "seconds": end.took().as_secs_f64(),
            "uploaded_bytes": up.map(|u| u.sent_bytes),
            "upload_seconds": up.map(|u| u.took.as_secs_f64()),
        }));
        return;
    }
    say(&format!(
        "Far end: started over ssh in {:.2} s (login and start-up, not in the transfer's time){}",
        end.took().as_secs_f64(),
        match up {
            Some(u) => format!(
                ", of which {:.2} s uploading this longhaul ({:.1} MB)",
                u.took.as_secs_f64(),
                u.sent_bytes as f64 / 1e6
            ),
            None => String::new(),
        }
    ));
}

fn print_end(r: &CpReport, cpu: f64, verdict: Option<&CpVerdict>, json: bool, delete: bool) {
    let secs = r.seconds.max(1e-6);
    let moved = r.moved_bytes;
    let bps = moved as f64 * 8.0 / secs;
    // CPU per GB of the files' bytes (stable across resumes and --checksum-only), only
    // over enough of them to mean something: a few bytes give a figure of millions.
    let per_gb = (r.bytes >= PER_GB_MIN_BYTES).then(|| cpu / (r.bytes as f64 / 1e9));
    if r.rejected_chunks > 0 {
        warn(
            json,
            format!(
                "{} chunk(s) failed the receiver's BLAKE3 check and were sent again: the \
                 source changed while it was read, or the bytes were altered on the way \
                 (nothing wrong was written; the files' digests matched)",
                r.rejected_chunks
            ),
        );
    }
    if json {
        let mut end = json!({
            "type": "end", "ok": r.failed.is_empty(),
            "files": r.files_ok, "bytes": r.bytes, "seconds": r.seconds,
            "bits_per_second": bps, "sent_bytes": moved, "resumed_bytes": r.resumed_bytes,
            "skipped_files": r.files_skipped, "failed_files": r.failed.len(),
            "failures": r.failed, "rejected_chunks": r.rejected_chunks,
            "cpu_seconds": cpu, "cpu_seconds_per_gb": per_gb,
            "cpu_by_stage": {
                "cipher_seconds": r.stages.cipher.as_secs_f64(),
                "hash_seconds": r.stages.hash.as_secs_f64(),
                "disk_seconds": r.stages.disk.as_secs_f64(),
                "socket_and_rest_seconds": r.stages.rest(Duration::from_secs_f64(cpu)).as_secs_f64(),
            },
            "streams": r.start.streams, "chunk_bytes": r.start.chunk_bytes,
            "direction": r.start.direction, "deleted_files": r.deleted,
            "unchanged_files": r.files_unchanged, "unchanged_bytes": r.unchanged_bytes,
            "compared_files": r.files_compared,
            "created_files": r.files_ok.saturating_sub(r.files_unchanged + r.files_compared),
            "reused_bytes": r.reused_bytes,
            "first_byte_ms": longhaul_engine::startup::first_data_after_start()
                .map(|t| t.as_secs_f64() * 1e3),
            "first_byte_rtts": longhaul_engine::startup::first_data_rtts(r.start.rtt),
            "data_dialed_rtts": longhaul_engine::startup::data_dialed_rtts(r.start.rtt),
            "warmup_bytes": longhaul_engine::startup::warmup_bytes(),
            "answered_ahead": r.start.answered_ahead,
            "jump_start": r.jump_start,
        });
        if let (Some(v), Some(obj)) = (verdict, end.as_object_mut()) {
            obj.insert("limited_by".into(), json!(v.limited_by));
            obj.insert("limited_by_text".into(), json!(v.limited_by_text));
            obj.insert("advice".into(), json!(v.advice));
            obj.insert("balance".into(), json!(v.balance));
            obj.insert("retransmits".into(), json!(v.retransmits));
            // `streams` is the stream count (as before); bench's per-stream array is here.
            obj.insert("stream_summaries".into(), json!(v.streams));
        }
        emit_json(&end);
        return;
    }
    for f in &r.failed {
        eprintln!("longhaul cp: failed: {f}");
    }
    say(&format!(
        "{} {} files ({}) in {:.2} s = {}{}{}{}{}; {} streams, {} chunks, RTT {:.2} ms; CPU {:.2} s ({})",
        if r.start.direction == "push" { "sent" } else { "received" },
        r.files_ok,
        format_bytes(moved as f64),
        r.seconds,
        format_rate_bps(bps),
        // Files found unchanged are counted below, not as resumed.
        match r.resumed_bytes.saturating_sub(r.unchanged_bytes) {
            0 => String::new(),
            resumed => format!(", {} already there (resumed)", format_bytes(resumed as f64)),
        },
        if r.files_skipped > 0 {
            format!(", {} skipped (exist)", r.files_skipped)
        } else {
            String::new()
        },
        if r.files_unchanged > 0 {
            format!(
                ", {} unchanged ({})",
                r.files_unchanged,
                format_bytes(r.unchanged_bytes as f64)
            )
        } else {
            String::new()
        } + &if r.files_compared > 0 {
            format!(
                ", {} compared chunk by chunk ({} kept from the old copies)",
                r.files_compared,
                format_bytes(r.reused_bytes as f64)
            )
        } else {
            String::new()
        },
        if delete {
            format!(", deleted {}", r.deleted)
        } else {
            String::new()
        },
        r.start.streams,
        format_bytes(r.start.chunk_bytes as f64),
        r.start.rtt.as_secs_f64() * 1e3,
        cpu,
        match per_gb {
            Some(s) => format!("{s:.2} s/GB"),
            None => "too little data for a per-GB figure".into(),
        },
    ));
    if per_gb.is_some() {
        say(&format!(
            "CPU by stage: {}",
            r.stages.per_gb_text(Duration::from_secs_f64(cpu), r.bytes)
        ));
    }
    if let Some(v) = verdict {
        if v.streams.len() > 1 || v.retransmits > 0 {
            let (balance, carried) = v.carrying_balance();
            say(&format!(
                "Streams: {} retransmits, slowest stream {:.0} % of the fastest{}",
                v.retransmits,
                balance * 100.0,
                if carried < v.streams.len() {
                    format!(
                        " ({carried} of {} streams carried data: fewer chunks than streams)",
                        v.streams.len()
                    )
                } else {
                    String::new()
                }
            ));
        }
        say(&format!("Limited by: {}: {}", v.limited_by_text, v.advice));
    }
}

/// `sync -n`: what a real run would send, file by file, then the totals (`would_send`
/// lines and an `end` with `dry_run: true` in JSON).
fn print_dry_run(r: &CpReport, json: bool) {
    let total: u64 = r.would_send.iter().map(|w| w.bytes).sum();
    let mut lines = r.would_send.clone();
    lines.sort_by(|a, b| a.path.cmp(&b.path));
    for w in &lines {
        let path = String::from_utf8_lossy(&w.path);
        let action = if w.compared { "update" } else { "create" };
        if json {
            emit_json(&json!({
                "type": "would_send", "path": path, "action": action,
                "size": w.size, "bytes": w.bytes,
            }));
        } else if w.compared {
            say(&format!(
                "would update {}: {} of {} differ",
                longhaul_proto::printable(&path),
                format_bytes(w.bytes as f64),
                format_bytes(w.size as f64)
            ));
        } else {
            say(&format!(
                "would create {} ({})",
                longhaul_proto::printable(&path),
                format_bytes(w.size as f64)
            ));
        }
    }
    for path in &r.would_delete {
        let path = path.to_string_lossy();
        if json {
            emit_json(&json!({"type": "would_delete", "path": path}));
        } else {
            say(&format!(
                "would delete {}",
                longhaul_proto::printable(&path)
            ));
        }
    }
    if json {
        emit_json(&json!({
            "type": "end", "ok": r.failed.is_empty(), "dry_run": true,
            "would_delete": r.deleted,
            "files": lines.len(), "would_send_bytes": total,
            "unchanged_files": r.files_unchanged, "compared_files": r.files_compared,
            "failures": r.failed, "direction": r.start.direction,
        }));
    } else {
        say(&format!(
            "dry run: {} files would be sent or updated, {} would cross; {} unchanged; {} would be deleted; nothing was changed",
            lines.len(),
            format_bytes(total as f64),
            r.files_unchanged,
            r.deleted
        ));
    }
}

/// What the ticker and the end share: the set-up once known, whether its `start` line is
/// out, and the sampler of the data streams.
#[derive(Default)]
struct Reporting {
    start: Option<CpStart>,
    printed: bool,
    telemetry: Option<CpTelemetry>,
}

/// Prints the JSON `start` line once the set-up and the file list are known.
fn emit_start(shared: &Mutex<Reporting>, progress: &Progress, interval: Duration) -> bool {
    let Ok(mut l) = shared.lock() else {
        return false;
    };
    if l.printed {
        return true;
    }
    let Some(s) = &l.start else {
        return false;
    };
    let (_, bytes, _, files) = progress.snapshot();
    emit_json(&json!({
        "type": "start", "direction": s.direction, "streams": s.streams,
        "chunk_bytes": s.chunk_bytes, "rtt_ms": s.rtt.as_secs_f64() * 1e3,
        "window_bytes": s.window_bytes, "congestion": s.congestion,
        "files": files, "bytes": bytes, "interval_s": interval.as_secs_f64(),
    }));
    l.printed = true;
    true
}

/// An `interval` line: bench's interval object, then the transfer's progress.
fn interval_line(v: &IntervalView, progress: &Progress) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    map.insert("type".into(), json!("interval"));
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(v) {
        map.extend(fields);
    }
    let (done, total, files, files_total) = progress.snapshot();
    map.insert("seconds".into(), json!(v.end));
    map.insert("done_bytes".into(), json!(done));
    map.insert("total_bytes".into(), json!(total));
    map.insert("files".into(), json!(files));
    map.insert("total_files".into(), json!(files_total));
    serde_json::Value::Object(map)
}

/// The progress bar on stderr (when asked for) and, with `--json`, the `start` line and
/// an `interval` line every `every`, until `done`'s sender is dropped.
fn ticker(
    progress: &Progress,
    done: &std::sync::mpsc::Receiver<()>,
    json: bool,
    bar: bool,
    every: Duration,
    shared: &Mutex<Reporting>,
) {
    let pb = if bar {
        ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    pb.set_style(
        ProgressStyle::with_template(
            "[{bar:30}] {percent:>3}% {bytes} / {total_bytes}  {msg}  ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("#> "),
    );
    let mut next = Instant::now() + every;
    let mut rate = 0.0f64;
    // Wake for the next interval, and at least every 200 ms for the bar.
    let tick = |next: Instant| {
        next.saturating_duration_since(Instant::now())
            .min(Duration::from_millis(200))
    };
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(tick(next)) {
        let (bytes, total, files, files_total) = progress.snapshot();
        // Intervals start once the file list is settled (and, with --json, the start line
        // is out); the first one runs from the set-up.
        let ready = progress.is_listed() && (!json || emit_start(shared, progress, every));
        if ready && Instant::now() >= next {
            next += every;
            let view = shared
                .lock()
                .ok()
                .and_then(|mut l| l.telemetry.as_mut().map(CpTelemetry::interval));
            if let Some(v) = view {
                rate = v.bits_per_second;
                if json {
                    emit_json(&interval_line(&v, progress));
                }
            }
        }
        if bar && total > 0 {
            pb.set_length(total);
            pb.set_position(bytes.min(total));
            pb.set_message(format!(
                "{}  files {files}/{files_total}",
                format_rate_bps(rate)
            ));
        }
    }
    pb.finish_and_clear();
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
