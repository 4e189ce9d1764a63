//! `longhaul serve --config FILE`: a TOML file whose settings are the flags' defaults, so a
//! site runs `serve` as a service from one file it keeps under configuration management.
//! Each key is a flag's long name with `_` for `-` (`token_file`, `max_bytes`), and takes
//! the flag's value in the same words (`memory = "8GiB"`, `clean_stale = "7d"`); a flag
//! given on the command line wins over the file. An unknown key, or a value the flag would
//! refuse, is an error that names the file, the key and what was wrong.
//!
//! Instead of one `root` and `token_file`, a site may export several areas, each a table
//! `[areas.NAME]` with its `root`, the `token_files` that open it, `read_only`, and its
//! own `max_bytes` and `max_files` (the top-level ones are their defaults). Clients then
//! name the area as the first part of a path (`HOST:NAME/dir/file`).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::common::{duration_long, rate, size};
use super::serve::Args;

/// The file as written: every value optional, sizes, rates and ages as text.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    listen: Option<IpAddr>,
    port: Option<u16>,
    root: Option<PathBuf>,
    identity_dir: Option<PathBuf>,
    token_file: Option<PathBuf>,
    rx_rate: Option<String>,
    keep_setuid: Option<bool>,
    memory: Option<String>,
    max_bytes: Option<String>,
    max_files: Option<u64>,
    clean_stale: Option<String>,
    max_pending: Option<u32>,
    metrics: Option<SocketAddr>,
    log_json: Option<bool>,
    relay_from: Option<String>,
    areas: Option<BTreeMap<String, AreaFile>>,
}

/// One `[areas.NAME]` table as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AreaFile {
    root: PathBuf,
    token_files: Vec<PathBuf>,
    #[serde(default)]
    read_only: bool,
    max_bytes: Option<String>,
    max_files: Option<u64>,
    user: Option<String>,
}

/// One exported area, as the config file gives it (paths taken from the file's
/// directory, sizes parsed; the top-level caps are its defaults).
#[derive(Debug, Clone)]
pub struct AreaConfig {
    /// What clients call it.
    pub name: String,
    /// Its directory.
    pub root: PathBuf,
    /// The files of the tokens that open it.
    pub token_files: Vec<PathBuf>,
    /// Pulls only.
    pub read_only: bool,
    /// Most bytes one push may write into it.
    pub max_bytes: Option<u64>,
    /// Most files and directories one push may name in it.
    pub max_files: Option<u64>,
    /// The local user its sessions run as (a name or a number).
    pub user: Option<String>,
}

/// Reads `path` and fills every setting of `args` that the command line left unset.
/// Relative paths in the file are taken from the file's directory.
pub fn apply(args: &mut Args, path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --config {}", path.display()))?;
    let file: File = toml::from_str(&text).map_err(|e| {
        // The line, and its text: toml's message alone may not name the key.
        let at = e.span().map(|at| {
            let start = at.start.min(text.len());
            let number = text[..start].matches('\n').count() + 1;
            let line = text.lines().nth(number - 1).unwrap_or("").trim();
            let line: String = line.chars().take(80).collect();
            format!(", line {number} ({})", longhaul_proto::printable(&line))
        });
        anyhow::anyhow!(
            "--config {}{}: {}",
            path.display(),
            at.unwrap_or_default(),
            e.message()
        )
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let local = |p: PathBuf| if p.is_relative() { base.join(p) } else { p };
    let value = |key, text, parse| parsed(path, key, text, parse);
    args.listen = args.listen.or(file.listen);
    args.port = args.port.or(file.port);
    args.root = args.root.take().or(file.root.map(local));
    args.identity_dir = args.identity_dir.take().or(file.identity_dir.map(local));
    args.token.token_file = args.token.token_file.take().or(file.token_file.map(local));
    args.rx_rate = args.rx_rate.or(value("rx_rate", &file.rx_rate, rate)?);
    args.keep_setuid |= file.keep_setuid.unwrap_or(false);
    args.memory = args.memory.or(value("memory", &file.memory, size)?);
    args.max_bytes = args
        .max_bytes
        .or(value("max_bytes", &file.max_bytes, size)?);
    args.max_files = args.max_files.or(file.max_files);
    if args.clean_stale.is_none() {
        args.clean_stale = parsed(path, "clean_stale", &file.clean_stale, duration_long)?;
    }
    if let Some(n) = file.max_pending {
        if !(1..=65536).contains(&n) {
            bail!(
                "--config {}: max_pending = {n}: must be 1 to 65536",
                path.display()
            );
        }
    }
    args.max_pending = args.max_pending.or(file.max_pending);
    args.metrics = args.metrics.or(file.metrics);
    args.log_json |= file.log_json.unwrap_or(false);
    if args.relay_from.is_none() {
        args.relay_from = parsed(path, "relay_from", &file.relay_from, |s: &str| {
            s.parse::<longhaul_policy::RelayFrom>()
        })?;
    }
    for (name, area) in file.areas.unwrap_or_default() {
        let key = format!("areas.{name}.max_bytes");
        let max_bytes = parsed(path, &key, &area.max_bytes, size)?;
        longhaul_engine::daemon::areas::check_name(&name)
            .map_err(|e| anyhow::anyhow!("--config {}: [areas.{name}]: {e}", path.display()))?;
        if area.token_files.is_empty() {
            bail!(
                "--config {}: [areas.{name}]: token_files is empty: name at least one token \
                 file (make one with `longhaul token --out FILE`)",
                path.display()
            );
        }
        args.areas.push(AreaConfig {
            name,
            root: local(area.root),
            token_files: area.token_files.into_iter().map(local).collect(),
            read_only: area.read_only,
            max_bytes: max_bytes.or(args.max_bytes),
            max_files: area.max_files.or(args.max_files),
            user: area.user,
        });
    }
    Ok(())
}

/// The settings that only mean something with a served root, refused without one (after
/// the command line and the file are merged, so either may give the root).
pub fn check_root(args: &Args) -> anyhow::Result<()> {
    if !args.areas.is_empty() {
        if args.root.is_some() {
            bail!(
                "--root and the config's [areas] cannot both be given: serve one root, or \
                 several areas (move the root into an area of its own)"
            );
        }
        if args.token.token_file.is_some() {
            bail!(
                "--token-file and the config's [areas] cannot both be given: with areas, \
                 each area names the token_files that open it"
            );
        }
        return Ok(());
    }
    if args.root.is_some() {
        return Ok(());
    }
    let needs_root = [
        ("keep_setuid", args.keep_setuid),
        ("max_bytes", args.max_bytes.is_some()),
        ("max_files", args.max_files.is_some()),
        ("clean_stale", args.clean_stale.is_some()),
    ];
    if let Some((name, _)) = needs_root.iter().find(|(_, set)| *set) {
        bail!(
            "--{} needs a root to serve: give --root DIR (or root in the --config file)",
            name.replace('_', "-")
        );
    }
    Ok(())
}

/// The value of `key` in the file at `path`, read with the flag's own `parse`; an error
/// names the file, the key and the value.
fn parsed<T>(
    path: &Path,
    key: &str,
    text: &Option<String>,
    parse: fn(&str) -> Result<T, String>,
) -> anyhow::Result<Option<T>> {
    text.as_deref()
        .map(|t| {
            parse(t).map_err(|e| anyhow::anyhow!("--config {}: {key} = {t:?}: {e}", path.display()))
        })
        .transpose()
}
