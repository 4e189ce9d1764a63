//! `longhaul sync`: keep a copy of a tree current, rsync `-a` style, sending only what
//! changed. It is `longhaul cp -r` (the same addressing, streams, TLS, checks, resume and
//! `--json` objects) with one difference at the receiver: a file that exists at both ends
//! but differs in size or mtime (every file with `--checksum`) is compared chunk by chunk
//! — the receiver hashes its copy, the sender its source, both on every core — and only
//! the chunks whose BLAKE3 differs cross the path; the others are taken from the old copy
//! (`copy_file_range`) into the part file, which is checked against the source's
//! whole-file BLAKE3 and renamed into place. A file unchanged by size and mtime is
//! skipped (the quick check). The end line counts unchanged and compared files and the
//! bytes taken from the old copies (`unchanged_files`, `compared_files`, `reused_bytes`).

use std::process::ExitCode;

use longhaul_transfer::session::recv::SyncRules;

use super::cp;

/// Chunks compared and sent when `--chunk` is not given: small enough that a few
/// changed blocks of a huge file cost little, large enough for a long path.
const SYNC_CHUNK: u64 = 4 << 20;

/// Arguments of `longhaul sync`: cp's, less those sync sets itself (`-r` is always on,
/// `--checksum-only` is cp's).
#[derive(clap::Args, Debug)]
// Both this and cp's flattened `Args` would name their argument group "Args" (clap's
// debug builds refuse the clash): sync's needs no group.
#[group(skip)]
#[command(
    mut_arg("recursive", |a| a.hide(true)),
    mut_arg("checksum_only", |a| a.hide(true))
)]
pub struct Args {
    /// Compare every file present at both ends chunk by chunk, also those whose size
    /// and mtime match (rsync's --checksum): finds changes that kept both.
    #[arg(short = 'c', long)]
    pub checksum: bool,
    /// Update changed files where they are: only their changed chunks are written, into
    /// the destination file itself (no second copy of a huge file, no full rewrite and
    /// flush). Until it ends, an interrupted file is a mix of old and new chunks under its
    /// old mtime; the next sync finishes it. Without it a changed file is rebuilt beside
    /// the old one and renamed into place, so it is always one version or the other.
    #[arg(long)]
    pub inplace: bool,
    /// Change nothing: list what would be sent, file by file, and how many bytes (the
    /// receiver hashes its copies and the sender its files to know).
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub copy: cp::Args,
}

/// Runs `longhaul sync`.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    if args.copy.checksum_only {
        anyhow::bail!(
            "--checksum-only compares without copying; use it with longhaul cp (sync's \
             --checksum compares every file and sends what differs)"
        );
    }
    // rsync's placement: `src/` is its contents, `src` goes inside DST; either way DST
    // is a directory, made if missing, and a second run lands in the same place.
    let (_, sources) = args
        .copy
        .paths
        .split_last()
        .ok_or_else(|| anyhow::anyhow!("give SRC... DST"))?;
    let contents = sources
        .iter()
        .any(|s| s.as_encoded_bytes().last() == Some(&b'/'));
    if contents && sources.len() > 1 {
        anyhow::bail!(
            "a source with a trailing slash syncs its contents into DST and must be the only \
             source; run one sync per source"
        );
    }
    args.copy.recursive = true;
    args.copy.delta = Some(SyncRules {
        checksum: args.checksum,
        contents,
        inplace: args.inplace,
        dry_run: args.dry_run,
    });
    args.copy.chunk = args.copy.chunk.or(Some(SYNC_CHUNK));
    cp::run(args.copy)
}
