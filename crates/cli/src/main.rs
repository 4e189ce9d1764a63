//! The `longhaul` binary: argument parsing, human and JSON output, exit codes.
//! Every subcommand lives in a module of its own under `cmd/`.
#![forbid(unsafe_code)]
// The arguments' doc comments are clap's help text, which writes optional parts of an
// address as `[USER@]HOST[:PORT]`: rustdoc would read those brackets as links.
#![allow(rustdoc::broken_intra_doc_links)]

mod cmd;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Move data across long fat networks at close to line rate, measure such paths and
/// emulate them in the lab.
#[derive(Parser)]
#[command(name = "longhaul", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the figures a path needs: BDP, buffers, loss tolerance, recovery times.
    Plan(cmd::plan::Args),
    /// Memory-to-memory path test against a `longhaul serve` or a host reached over ssh,
    /// window sized to the path.
    Bench(cmd::bench::Args),
    /// Serve bench runs and (with --root DIR) file transfers to longhaul clients.
    Serve(cmd::serve::Args),
    /// Copy files and trees to or from a host over ssh or a `longhaul serve --root`,
    /// verified and resumable.
    #[command(override_usage = "longhaul cp [OPTIONS] SOURCE... DEST")]
    Cp(cmd::cp::Args),
    /// Bring a copy of files and trees up to date (rsync -a style): only new files and the
    /// chunks of changed files that differ cross the path.
    #[command(override_usage = "longhaul sync [OPTIONS] SOURCE... DEST")]
    Sync(cmd::sync::Args),
    /// Remove the work files (.NAME.longhaul-part, .NAME.longhaul-manifest) abandoned
    /// transfers left below a directory.
    Clean(cmd::clean::Args),
    /// Print a fresh random token for --token-file (or write it: --out FILE, mode 0600).
    Token(cmd::token::Args),
    /// Emulate a long fat path (rate, buffer, RTT, loss) between two network namespaces.
    Emulate(cmd::emulate::Args),
    /// Check this host's TCP settings for a path; --apply fixes them, --revert undoes that.
    Tune(cmd::tune::Args),
    /// Measure a run as the Internet2 Land Speed Record did: bit-meters/second over the
    /// route's great-circle legs, the contest's rules, the record to beat.
    Record(cmd::record::Args),
    /// Draw a run log's graphs: throughput per stream and in total, cwnd, RTT, retransmits.
    Plot(cmd::plot::Args),
    /// Re-enact a Land Speed Record on this machine: an emulated path with the record's RTT,
    /// stock TCP then longhaul side by side, an HTML report (root; about three minutes).
    Demo(cmd::demo::Args),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions(cmd::completions::Args),
    /// Print longhaul's manual page, or write one per command (--out DIR).
    Man(cmd::man::Args),
    /// The far end that `cp` and `bench` start over ssh (not for direct use).
    #[command(hide = true)]
    SshServer(cmd::ssh_server::Args),
    /// One stream of a copy carried through ssh, on the far host (not for direct use).
    #[command(hide = true)]
    SshBridge(cmd::ssh_bridge::Args),
}

fn main() -> ExitCode {
    longhaul_engine::startup::mark_command_start();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(args) => cmd::plan::run(args),
        Command::Emulate(args) => cmd::emulate::run(args),
        Command::Tune(args) => cmd::tune::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Clean(args) => cmd::clean::run(args),
        Command::Token(args) => cmd::token::run(args),
        Command::Cp(args) => cmd::cp::run(args),
        Command::Sync(args) => cmd::sync::run(args),
        Command::Record(args) => cmd::record::run(args),
        Command::Plot(args) => cmd::plot::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Completions(args) => cmd::completions::run(args, Cli::command()),
        Command::Man(args) => cmd::man::run(args, Cli::command()),
        Command::SshServer(args) => cmd::ssh_server::run(args),
        Command::SshBridge(args) => cmd::ssh_bridge::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // Errors can quote a peer's words and file names: never raw to the terminal.
            let text = format!("{err:#}");
            eprintln!("longhaul: error: {}", longhaul_proto::printable(&text));
            ExitCode::from(2)
        }
    }
}
