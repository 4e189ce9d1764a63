//! Pieces several subcommands share: the token options, human-unit value parsers, and the
//! one way to print to stdout ([`say`], [`say_text`], [`emit_json`], [`emit_text`]), which
//! ends quietly when the reader has gone (`longhaul ... | head -1`).

use std::path::PathBuf;

use longhaul_engine::transport::tls::{Encryption, Fingerprint, Security, ServerTrust};
use longhaul_model::units;
use longhaul_report::records::{Record, RecordKind, RunError};
use serde::Serialize;

/// Where the shared token comes from (see `longhaul serve --help`).
#[derive(clap::Args, Debug, Clone)]
pub struct TokenArgs {
    /// File holding the shared token (default: $LONGHAUL_TOKEN, else
    /// ~/.config/longhaul/token, created with mode 0600 on first use).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

impl TokenArgs {
    /// Loads the token.
    pub fn load(&self) -> anyhow::Result<longhaul_proto::Token> {
        let (token, _origin) = longhaul_engine::token::load_token(self.token_file.as_deref())?;
        Ok(token)
    }
}

/// How a client trusts the server and whether its data is encrypted.
#[derive(clap::Args, Debug, Clone)]
pub struct SecurityArgs {
    /// `on`: TLS 1.3 on every connection. `off`: TLS on the control connection only (the
    /// session is still authenticated), for trusted networks and CPU-bound hosts; every
    /// file chunk still carries a MAC under the session's key, so nothing altered on the
    /// way is accepted. Default: `on` for cp, sync and tune; `off` for bench, whose
    /// random bytes need no secrecy (its result is then the network's, and it reports
    /// what the cipher would allow per core).
    #[arg(long, value_enum)]
    pub encryption: Option<EncryptionArg>,
    /// Verify the server's certificate against the CA certificates in FILE (PEM) instead
    /// of pinning it on first use.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Where daemons' certificates are pinned on first use (default:
    /// ~/.config/longhaul/known_servers). A changed certificate is refused with a warning.
    #[arg(long, value_name = "FILE")]
    pub known_servers: Option<PathBuf>,
}

/// `--encryption`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncryptionArg {
    /// Every connection.
    On,
    /// The control connection only (chunks still authenticated).
    Off,
}

impl SecurityArgs {
    /// Over ssh: exactly the certificate the far end announced on the ssh channel
    /// (`--ca` and the known-servers file play no part).
    pub fn pinned(&self, fp: Fingerprint) -> Security {
        Security {
            trust: ServerTrust::Pinned(fp),
            encryption: self.encryption(),
        }
    }

    fn encryption(&self) -> Encryption {
        match self.encryption.unwrap_or(EncryptionArg::On) {
            EncryptionArg::On => Encryption::On,
            EncryptionArg::Off => Encryption::Off,
        }
    }

    /// These arguments with `default` where `--encryption` was not given.
    pub fn with_default_encryption(&self, default: EncryptionArg) -> Self {
        Self {
            encryption: Some(self.encryption.unwrap_or(default)),
            ..self.clone()
        }
    }

    /// The engine's form.
    pub fn security(&self) -> anyhow::Result<Security> {
        let trust = match (&self.ca, &self.known_servers) {
            (Some(ca), _) => ServerTrust::ca_file(ca)?,
            (None, Some(file)) => ServerTrust::KnownServers { file: file.clone() },
            (None, None) => ServerTrust::known_servers()?,
        };
        Ok(Security {
            trust,
            encryption: self.encryption(),
        })
    }
}

/// clap value parser for rates (`1G`, `500M`).
pub fn rate(s: &str) -> Result<u64, String> {
    units::parse_rate_bps(s).map_err(|e| e.to_string())
}

/// clap value parser for sizes (`64MiB`, `10GB`).
pub fn size(s: &str) -> Result<u64, String> {
    units::parse_bytes(s).map_err(|e| e.to_string())
}

/// clap value parser for durations (`30s`, `250ms`); a bare number is seconds, as in iperf3.
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    if let Ok(secs) = s.parse::<f64>() {
        if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 {
            return Ok(std::time::Duration::from_secs_f64(secs));
        }
    }
    units::parse_duration(s).map_err(|e| e.to_string())
}

/// clap value parser for long durations (`7d`, `12h`, `30m`; a bare number is seconds),
/// without [`duration`]'s one-day cap on bare numbers.
pub fn duration_long(s: &str) -> Result<std::time::Duration, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(std::time::Duration::from_secs(secs));
    }
    units::parse_duration(s).map_err(|e| e.to_string())
}

/// Prints one JSON Lines object to stdout; a closed pipe ends the program quietly.
pub fn emit_json(value: &serde_json::Value) {
    say(&value.to_string());
}

/// Prints one record of `--json` output (`{"type": ..., fields}`, see
/// [`longhaul_report::records`]) to stdout; a closed pipe ends the program quietly.
pub fn emit_record<T: RecordKind + Serialize>(record: T) {
    say(&Record::new(record).to_line());
}

/// Prints one line of human output; a closed pipe ends the program quietly.
pub fn say(line: &str) {
    say_text(&format!("{line}\n"));
}

/// Prints `text` as it is (several lines, or none ending it); a closed pipe (or any other
/// failed write to stdout) ends the program quietly with exit code 0, as `longhaul ... |
/// head` expects. Every command prints to stdout through this or the functions above, never
/// `println!`, which panics on a closed pipe.
pub fn say_text(text: &str) {
    if write_stdout(text).is_err() {
        std::process::exit(0);
    }
}

/// Writes `text` to stdout for a command that must carry on when nobody reads it (the
/// emulator, which cleans up its namespaces on the way out): a closed pipe is not an error
/// and is ignored; any other failure is returned.
pub fn emit_text(text: &str) -> std::io::Result<()> {
    match write_stdout(text) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush())
}

/// Runs a command body; with `--json`, an error becomes a `{"type":"error"}` line and
/// exit code 2 instead of text on stderr.
pub fn with_json_errors(
    json: bool,
    body: impl FnOnce() -> anyhow::Result<std::process::ExitCode>,
) -> anyhow::Result<std::process::ExitCode> {
    match body() {
        Err(e) if json => {
            emit_record(RunError {
                source: None,
                error: format!("{e:#}"),
            });
            Ok(std::process::ExitCode::from(2))
        }
        other => other,
    }
}

/// `--window auto|SIZE`: `None` for auto.
pub fn window(s: &str) -> anyhow::Result<Option<u64>> {
    match s {
        "auto" => Ok(None),
        s => Ok(Some(size(s).map_err(|e| {
            anyhow::anyhow!("--window {s:?}: {e}; or use auto")
        })?)),
    }
}
