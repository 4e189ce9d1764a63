//! `longhaul plot`: the graphs of a run log (throughput per stream and in total, cwnd and RTT
//! over time, retransmissions marked) written as SVG, or PNG when the file name ends in
//! `.png`.

use anyhow::{bail, Context as _};
use longhaul_report::charts::run_figure_svg;
use std::path::PathBuf;

use super::common::say;
use std::process::ExitCode;

/// Arguments of `longhaul plot`.
#[derive(clap::Args)]
pub struct Args {
    /// Run log: the JSON Lines printed by `longhaul bench --json` or `longhaul cp --json`.
    #[arg(value_name = "RUN.jsonl")]
    pub log: PathBuf,
    /// Output file: .svg, or .png.
    #[arg(short = 'o', long = "output", value_name = "FILE.svg|png")]
    pub output: PathBuf,
}

/// Runs `longhaul plot`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let log = super::record::read_run_log(&args.log)?;
    if log.intervals.is_empty() {
        bail!(
            "run log {} has no \"interval\" records to plot (run bench or cp with --json)",
            args.log.display()
        );
    }
    let svg = run_figure_svg(&log);
    let ext = args
        .output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let bytes = match ext.as_deref() {
        Some("svg") => svg.into_bytes(),
        Some("png") => super::png::svg_to_png(&svg)?,
        _ => bail!("output {} must end in .svg or .png", args.output.display()),
    };
    std::fs::write(&args.output, bytes)
        .with_context(|| format!("writing {}", args.output.display()))?;
    say(&format!(
        "wrote {} ({} intervals, {} streams)",
        args.output.display(),
        log.intervals.len(),
        log.streams().unwrap_or(0)
    ));
    Ok(ExitCode::SUCCESS)
}
