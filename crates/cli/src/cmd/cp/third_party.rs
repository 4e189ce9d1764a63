//! `longhaul cp longhaul://A/x longhaul://B/y` (or `HOST_A:x HOST_B:y` over ssh, or one of
//! each): a third-party copy. This host asks A for a
//! ticket to x (read-only, that path, once, short-lived), asks B to pull x from A with it
//! into y, and follows the pull to its end: the files go from A to B directly, with
//! B's streams, verification and resume. JSON Lines: a `start`, an `interval` per report,
//! an `end`.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use longhaul_engine::cp::third_party::{relay_with_ticket, Peer, PullShape};
use longhaul_engine::ssh::launch::FarEnd;
use longhaul_engine::transport::tls::Security;
use longhaul_model::units::{format_bytes, format_rate_bps};
use longhaul_proto::ticket::{RelayDone, RelayProgress};
use longhaul_proto::transfer::TransferOptions;
use longhaul_report::records::{RelayEnd, RelayInterval, RelayStart};
use longhaul_transfer::location::Location;
use longhaul_transfer::RequestedPath;

use super::super::common::{emit_record, say};
use super::{server_of, Args};

/// One end of a third-party copy as this host reaches it.
pub(super) struct Endpoint {
    /// `HOST:PORT` of its longhaul (the destination dials the source's).
    pub(super) target: String,
    /// What this host proves to it.
    pub(super) token: longhaul_proto::Token,
    /// How this host trusts it.
    pub(super) security: Security,
    /// The path there, as its requests carry it.
    pub(super) path: Vec<u8>,
    /// The argument as the user wrote it.
    pub(super) shown: String,
}

impl Endpoint {
    /// This end as the engine's third-party copy takes it.
    pub(super) fn peer(&self) -> Peer<'_> {
        Peer {
            target: &self.target,
            token: &self.token,
            security: &self.security,
            path: &self.path,
        }
    }
}

/// Flags a third-party copy does not take (yet).
pub(super) fn refuse_unsupported(args: &Args) -> anyhow::Result<()> {
    for (flag, given) in [
        ("--delete", args.filter.delete),
        (
            "--exclude/--include",
            !args.filter.filter()?.rules().is_empty(),
        ),
        ("--checksum-only", args.checksum_only),
    ] {
        if given {
            anyhow::bail!(
                "{flag} is not taken by a third-party copy yet; run it on one of the two hosts \
                 (longhaul cp there), or copy through this one"
            );
        }
    }
    Ok(())
}

/// Runs a copy from `src` to `dst`, each a daemon or a host over ssh: an ssh host's
/// longhaul is started as for any copy (a source's serves the ticket's session and then
/// the pull), and the destination dials the source directly.
pub(super) fn run(args: &Args, src: &Location, dst: &Location) -> anyhow::Result<ExitCode> {
    refuse_unsupported(args)?;
    if args.source_token_file.is_some() && !matches!(src, Location::Daemon(_)) {
        anyhow::bail!(
            "--source-token-file is for a daemon source; over ssh the far end makes its own token"
        );
    }
    let opts = args.ssh.options(args.streams);
    // The destination's far end starts while the source's does.
    let far_dst = match dst {
        Location::Ssh(spec) => {
            let (host, o) = (spec.host.clone(), opts.clone());
            Some(std::thread::spawn(move || FarEnd::start(&host, &o)))
        }
        _ => None,
    };
    let far_src = match src {
        Location::Ssh(spec) => Some(FarEnd::start(&spec.host, &opts)?),
        _ => None,
    };
    let far_dst = match far_dst {
        Some(h) => Some(
            h.join()
                .map_err(|_| anyhow::anyhow!("starting the destination's far end panicked"))??,
        ),
        None => None,
    };
    if far_src
        .iter()
        .chain(&far_dst)
        .any(|f| f.via_ssh().is_some() || f.via_connect_back().is_some())
    {
        anyhow::bail!(
            "a far end's port cannot be reached (a firewall lets only ssh in): the \
             destination could not dial the source; open the far ends' port (--port-range) \
             or copy in two steps through this host"
        );
    }
    let source = endpoint(args, src, far_src.as_ref(), true)?;
    let dest = endpoint(args, dst, far_dst.as_ref(), false)?;
    let outcome = copy(args, &source, &dest, far_src.is_some());
    // The orderly end of each far process (a guard dropped on an early return kills ssh).
    for far in far_dst.into_iter().chain(far_src) {
        far.finish();
    }
    outcome
}

/// One end as this host reaches it: a daemon with the token file (a source's own with
/// `--source-token-file`) and the trust of `--known-servers`/`--ca`, or a started far end
/// with its one-time token and certificate.
pub(super) fn endpoint(
    args: &Args,
    at: &Location,
    far: Option<&FarEnd>,
    source: bool,
) -> anyhow::Result<Endpoint> {
    match (at, far) {
        (Location::Daemon(spec), _) => {
            let token = match (&args.source_token_file, source) {
                (Some(file), true) => longhaul_engine::token::load_token(Some(file))?.0,
                _ => args.token.load()?,
            };
            // The canonical wire form a pull's request carries ("." the root, "dir/" a
            // directory): a ticket is for exactly that.
            let path = RequestedPath::from_typed(&spec.path)
                .map(|r| r.to_wire())
                .map_err(|e| anyhow::anyhow!("{spec}: {e}"))?;
            Ok(Endpoint {
                target: server_of(spec),
                token,
                security: args.security.security()?,
                path,
                shown: spec.to_string(),
            })
        }
        (Location::Ssh(spec), Some(far)) => Ok(Endpoint {
            target: far.target().to_string(),
            token: far.token(),
            security: args.security.pinned(far.fingerprint()),
            // The far end reads the path as typed (absolute or from the home).
            path: if spec.path.is_empty() {
                b".".to_vec()
            } else {
                spec.path.clone()
            },
            shown: spec.to_string(),
        }),
        _ => anyhow::bail!("a third-party copy is between two remote hosts"),
    }
}

/// Asks `src` for a ticket and `dst` to pull with it; follows the pull to its end.
fn copy(args: &Args, src: &Endpoint, dst: &Endpoint, user_paths: bool) -> anyhow::Result<ExitCode> {
    let (src_peer, dst_peer) = (src.peer(), dst.peer());
    let ticket = src_peer
        .ticket()
        .with_context(|| format!("asking {} for a ticket", src.shown))?;
    let shape = pull_shape(args, user_paths)?;
    let json = args.json;
    let (shown_src, shown_dst) = (src.shown.clone(), dst.shown.clone());
    if json {
        emit_record(RelayStart {
            direction: THIRD_PARTY.into(),
            source: shown_src.clone(),
            destination: shown_dst.clone(),
        });
    }
    let live = !json && !args.no_progress && std::io::stderr().is_terminal();
    let mut on_progress = |p: &RelayProgress| {
        if json {
            emit_record(RelayInterval {
                elapsed: p.elapsed_ms as f64 / 1e3,
                files_done: p.files_done.into(),
                files_total: p.files_total.into(),
                bytes_done: p.bytes_done,
                bytes_total: p.bytes_total,
                moved_bytes: p.moved_bytes,
                streams: p.streams,
            });
        } else if live {
            eprint!(
                "\r{} of {} ({} of {} files) in {:.0} s   ",
                format_bytes(p.bytes_done as f64),
                format_bytes(p.bytes_total as f64),
                p.files_done,
                p.files_total,
                p.elapsed_ms as f64 / 1e3
            );
        }
    };
    let done = relay_with_ticket(ticket, &src_peer, &dst_peer, shape, &mut on_progress);
    if live {
        eprintln!();
    }
    let done = done.with_context(|| {
        format!(
            "{shown_dst} pulling {shown_src} (run the same command again: the destination resumes \
             from what it verified)"
        )
    })?;
    print_end(&done, (&shown_src, &shown_dst), json);
    Ok(ExitCode::from(u8::from(done.files_failed > 0)))
}

/// The destination's pull as the command line shapes it.
pub(super) fn pull_shape(args: &Args, user_paths: bool) -> anyhow::Result<PullShape> {
    Ok(PullShape {
        options: TransferOptions {
            recursive: args.recursive,
            no_clobber: args.no_clobber,
            preserve: true,
            auto_chunk: args.chunk.is_none(),
            sync: args.sync,
            window_fixed: false,
            hard_links: args.hard_links,
            ..TransferOptions::default()
        },
        streams: args.streams.unwrap_or(0),
        rate_bps: args.rate.unwrap_or(0),
        window_bytes: super::super::common::window(&args.window)?.unwrap_or(0),
        chunk_size: args.chunk.unwrap_or(0),
        congestion: args.congestion.clone().unwrap_or_default(),
        jump_start: !args.no_jump_start,
        source_user_paths: user_paths,
        share: None,
        dest_is_dir: None,
    })
}

/// The `direction` of a third-party copy's lines.
const THIRD_PARTY: &str = "third-party";

/// The end of a third-party copy: the `end` record (the keys of a two-party copy's end
/// line), or its text from the same record.
fn print_end(d: &RelayDone, (src, dst): (&str, &str), json: bool) {
    let seconds = d.elapsed_ms as f64 / 1e3;
    let end = RelayEnd {
        ok: d.files_failed == 0,
        direction: THIRD_PARTY.into(),
        source: src.into(),
        destination: dst.into(),
        files: d.files_ok.into(),
        bytes: d.bytes,
        seconds,
        bits_per_second: d.moved_bytes as f64 * 8.0 / seconds.max(1e-3),
        sent_bytes: d.moved_bytes,
        resumed_bytes: d.resumed_bytes,
        skipped_files: d.files_skipped.into(),
        failed_files: d.files_failed.into(),
        failures: d.failures.clone(),
        streams: d.streams,
        rtt_ms: f64::from(d.rtt_us) / 1e3,
        limited_by_text: d.limited_by.clone(),
    };
    if json {
        emit_record(end);
        return;
    }
    for f in &end.failures {
        eprintln!("longhaul cp: failed: {}", longhaul_proto::printable(f));
    }
    if end.failed_files > end.failures.len() as u64 {
        eprintln!(
            "longhaul cp: {} more failed (see the destination's log)",
            end.failed_files - end.failures.len() as u64
        );
    }
    say(&format!(
        "{dst} received {} files ({}) from {src} in {:.2} s = {}{}{}; {} streams, RTT {:.2} ms between them",
        end.files,
        format_bytes(end.sent_bytes as f64),
        end.seconds,
        format_rate_bps(end.bits_per_second),
        match end.resumed_bytes {
            0 => String::new(),
            r => format!(", {} already there (resumed)", format_bytes(r as f64)),
        },
        if end.skipped_files > 0 {
            format!(", {} skipped (exist)", end.skipped_files)
        } else {
            String::new()
        },
        end.streams,
        end.rtt_ms,
    ));
    if !end.limited_by_text.is_empty() {
        say(&format!("Limited by: {}", end.limited_by_text));
    }
}
