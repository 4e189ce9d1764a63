//! `longhaul clean DIR`: removes the work files (`.NAME.longhaul-part`,
//! `.NAME.longhaul-manifest`) that abandoned transfers left below DIR, once older than
//! `--older-than` (see `longhaul_engine::cp::clean`); `serve --clean-stale AGE` runs the
//! same over its root at start ([`clean_root`]).

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use longhaul_engine::cp::clean::{clean_stale, Found, WorkFile};
use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::session::recv::human_bytes;

use super::common::duration_long;

/// Arguments of `longhaul clean`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The directory to clean (walked below, never following a symlink).
    #[arg(value_name = "DIR")]
    pub dir: std::path::PathBuf,
    /// Remove only work files last changed longer ago than this (`7d`, `12h`): a younger
    /// one may belong to a transfer that will be rerun and resume from it.
    #[arg(long, value_name = "AGE", default_value = "7d", value_parser = duration_long)]
    pub older_than: Duration,
    /// List what would be removed; remove nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
}

/// Runs `longhaul clean`: exit 0 when every stale work file is gone (or would be), 1 when
/// some could not be removed.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = ServedRoot::open(&args.dir)
        .with_context(|| format!("cannot open {} (give a directory)", args.dir.display()))?;
    let failed = clean_root(&root, args.older_than, args.dry_run, &mut |line| {
        println!("{line}")
    })?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Cleans `root`, saying one line per work file and a summary; true if some could not be
/// removed.
pub fn clean_root(
    root: &ServedRoot,
    older_than: Duration,
    dry_run: bool,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<bool> {
    let (mut removed, mut freed, mut kept, mut failed) = (0u64, 0u64, 0u64, 0u64);
    let shown = |w: &WorkFile| root.path().join(&w.rel).display().to_string();
    let days = |d: Duration| format!("{:.1} days old", d.as_secs_f64() / 86_400.0);
    clean_stale(
        root,
        older_than,
        dry_run,
        SystemTime::now(),
        &mut |w| match &w.found {
            Found::Removed => {
                removed += 1;
                freed += w.allocated;
                say(&format!(
                    "{} {} ({}, {})",
                    if dry_run { "would remove" } else { "removed" },
                    shown(w),
                    human_bytes(w.allocated),
                    days(w.age)
                ));
            }
            Found::InUse => {
                kept += 1;
                say(&format!("kept {}: in use by another process", shown(w)));
            }
            Found::Recent => kept += 1,
            Found::Failed(why) => {
                failed += 1;
                say(&format!("could not remove {}: {why}", shown(w)));
            }
        },
    )
    .with_context(|| format!("cleaning {}", root.path().display()))?;
    say(&format!(
        "{} {removed} stale work files ({}) below {}; kept {kept} (younger than {} or in use){}",
        if dry_run { "would remove" } else { "removed" },
        human_bytes(freed),
        root.path().display(),
        humantime(older_than),
        if failed > 0 {
            format!("; {failed} could not be removed")
        } else {
            String::new()
        }
    ));
    Ok(failed > 0)
}

fn humantime(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s => format!("{s}s"),
    }
}
