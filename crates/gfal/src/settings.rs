//! Where the plugin finds its token and how it trusts daemons, as `longhaul cp` does by
//! default, with overrides for a service user such as FTS3's. Each setting comes from the
//! process environment, else from gfal2's configuration (group `[LONGHAUL]` in a file of
//! `/etc/gfal2.d/`, or `set_opt_string("LONGHAUL", KEY, ...)`), else the default:
//!
//! | gfal2 key       | environment              | default                                   |
//! |-----------------|--------------------------|-------------------------------------------|
//! | `TOKEN_DIR`     | `LONGHAUL_TOKEN_DIR`     | none: a file per daemon, `HOST:PORT` or `HOST` |
//! | `TOKEN_FILE`    | `LONGHAUL_TOKEN_FILE`    | `$LONGHAUL_TOKEN`, else `~/.config/longhaul/token` |
//! | `KNOWN_SERVERS` | `LONGHAUL_KNOWN_SERVERS` | `~/.config/longhaul/known_servers` (pinned on first use) |
//! | `CA_FILE`       | `LONGHAUL_CA_FILE`       | none (a CA instead of pinning, as `cp --ca`) |
//! | `ENCRYPTION`    | `LONGHAUL_ENCRYPTION`    | `on` (`off`: TLS on the control connection only) |
//!
//! A daemon's token is the first of: its file in the token directory, the token file,
//! `$LONGHAUL_TOKEN`, the default file. Unlike `longhaul cp`, the plugin never creates the
//! default file: a token made up here could only fail to authenticate.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use longhaul_engine::token::{default_token_path, load_token, TOKEN_ENV};
use longhaul_engine::transport::tls::{Encryption, Security, ServerTrust};
use longhaul_proto::Token;

use crate::error::PluginError;
use crate::url::Endpoint;

/// Settings: (gfal2 key in group `LONGHAUL`, environment variable).
pub const TOKEN_DIR: (&str, &str) = ("TOKEN_DIR", "LONGHAUL_TOKEN_DIR");
/// See [`TOKEN_DIR`].
pub const TOKEN_FILE: (&str, &str) = ("TOKEN_FILE", "LONGHAUL_TOKEN_FILE");
/// See [`TOKEN_DIR`].
pub const KNOWN_SERVERS: (&str, &str) = ("KNOWN_SERVERS", "LONGHAUL_KNOWN_SERVERS");
/// See [`TOKEN_DIR`].
pub const CA_FILE: (&str, &str) = ("CA_FILE", "LONGHAUL_CA_FILE");
/// See [`TOKEN_DIR`].
pub const ENCRYPTION: (&str, &str) = ("ENCRYPTION", "LONGHAUL_ENCRYPTION");

/// What the plugin was told (none of it checked yet but the encryption's value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// A directory of token files named after daemons.
    pub token_dir: Option<PathBuf>,
    /// The token file for every daemon without its own.
    pub token_file: Option<PathBuf>,
    /// Where daemons' certificates are pinned.
    pub known_servers: Option<PathBuf>,
    /// CA certificates (PEM) to verify daemons by, instead of pinning.
    pub ca_file: Option<PathBuf>,
    /// Whether data connections are encrypted.
    pub encryption: Encryption,
}

/// Where a daemon's token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// This file.
    File(PathBuf),
    /// `$LONGHAUL_TOKEN`, else the default file (as `longhaul cp`).
    Default,
}

impl Settings {
    /// Reads the settings: `env(VAR)` first, then `option(KEY)` (gfal2's); empty values
    /// count as unset.
    pub fn read(
        option: &dyn Fn(&str) -> Option<String>,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<Self, PluginError> {
        let get = |(key, var): (&str, &str)| -> Option<OsString> {
            env(var)
                .filter(|v| !v.is_empty())
                .or_else(|| option(key).filter(|v| !v.is_empty()).map(OsString::from))
        };
        let path = |setting| get(setting).map(PathBuf::from);
        let encryption = match get(ENCRYPTION) {
            None => Encryption::On,
            Some(v) if v.eq_ignore_ascii_case("on") => Encryption::On,
            Some(v) if v.eq_ignore_ascii_case("off") => Encryption::Off,
            Some(v) => {
                return Err(PluginError::new(
                    libc::EINVAL,
                    format!(
                        "{} (or gfal2's LONGHAUL:{}) is {:?}; give on or off",
                        ENCRYPTION.1, ENCRYPTION.0, v
                    ),
                ))
            }
        };
        Ok(Self {
            token_dir: path(TOKEN_DIR),
            token_file: path(TOKEN_FILE),
            known_servers: path(KNOWN_SERVERS),
            ca_file: path(CA_FILE),
            encryption,
        })
    }

    /// Where `endpoint`'s token comes from; `exists` says whether a file is there.
    pub fn token_source(&self, endpoint: &Endpoint, exists: &dyn Fn(&Path) -> bool) -> TokenSource {
        if let Some(dir) = &self.token_dir {
            for name in [endpoint.target(), endpoint.host.clone()] {
                let file = dir.join(name);
                if exists(&file) {
                    return TokenSource::File(file);
                }
            }
        }
        match &self.token_file {
            Some(file) => TokenSource::File(file.clone()),
            None => TokenSource::Default,
        }
    }

    /// `endpoint`'s token, read.
    pub fn token(&self, endpoint: &Endpoint) -> Result<Token, PluginError> {
        let denied = |e: String| {
            PluginError::new(
                libc::EACCES,
                format!("no token for {}: {e}", endpoint.target()),
            )
        };
        match self.token_source(endpoint, &|p| p.is_file()) {
            TokenSource::File(file) => load_token(Some(&file))
                .map(|(t, _)| t)
                .map_err(|e| denied(e.to_string())),
            TokenSource::Default => {
                let default = default_token_path().map_err(|e| denied(e.to_string()))?;
                if std::env::var_os(TOKEN_ENV).is_none() && !default.exists() {
                    return Err(denied(format!(
                        "{} does not exist and ${TOKEN_ENV} is not set; copy the daemon's \
                         token there (mode 0600), or name a file with ${} or a directory of \
                         per-daemon files with ${}",
                        default.display(),
                        TOKEN_FILE.1,
                        TOKEN_DIR.1
                    )));
                }
                load_token(None)
                    .map(|(t, _)| t)
                    .map_err(|e| denied(e.to_string()))
            }
        }
    }

    /// How daemons' certificates are trusted, and whether data is encrypted.
    pub fn security(&self) -> Result<Security, PluginError> {
        let trust = match (&self.ca_file, &self.known_servers) {
            (Some(ca), _) => ServerTrust::ca_file(ca),
            (None, Some(file)) => Ok(ServerTrust::KnownServers { file: file.clone() }),
            (None, None) => ServerTrust::known_servers(),
        }
        .map_err(|e| PluginError::new(libc::EACCES, e.to_string()))?;
        Ok(Security {
            trust,
            encryption: self.encryption,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(options: &[(&str, &str)], env: &[(&str, &str)]) -> Result<Settings, PluginError> {
        let options: HashMap<String, String> = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let env: HashMap<String, OsString> = env
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Settings::read(&|k| options.get(k).cloned(), &|k| env.get(k).cloned())
    }

    #[test]
    fn nothing_set_is_longhaul_cps_defaults() {
        assert_eq!(read(&[], &[]).unwrap(), Settings::default());
    }

    #[test]
    fn the_environment_wins_over_gfal2s_configuration() {
        let s = read(
            &[
                ("TOKEN_FILE", "/etc/longhaul/token"),
                ("KNOWN_SERVERS", "/k"),
            ],
            &[
                ("LONGHAUL_TOKEN_FILE", "/home/fts3/token"),
                ("LONGHAUL_CA_FILE", ""),
            ],
        )
        .unwrap();
        assert_eq!(s.token_file, Some(PathBuf::from("/home/fts3/token")));
        assert_eq!(s.known_servers, Some(PathBuf::from("/k")));
        assert_eq!(s.ca_file, None, "an empty value is unset");
    }

    #[test]
    fn encryption_is_on_or_off_and_anything_else_is_refused() {
        assert_eq!(
            read(&[("ENCRYPTION", "OFF")], &[]).unwrap().encryption,
            Encryption::Off
        );
        assert_eq!(
            read(&[], &[("LONGHAUL_ENCRYPTION", "on")])
                .unwrap()
                .encryption,
            Encryption::On
        );
        let e = read(&[("ENCRYPTION", "maybe")], &[]).unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert!(e.message.contains("maybe"), "{}", e.message);
    }

    #[test]
    fn a_daemons_own_token_file_comes_first_then_the_shared_one() {
        let ep = Endpoint {
            host: "se.example.org".into(),
            port: 5290,
        };
        let s = Settings {
            token_dir: Some("/tokens".into()),
            token_file: Some("/shared".into()),
            ..Settings::default()
        };
        let only = |names: &'static [&'static str]| {
            move |p: &Path| names.iter().any(|n| p == Path::new(n))
        };
        assert_eq!(
            s.token_source(
                &ep,
                &only(&["/tokens/se.example.org:5290", "/tokens/se.example.org"])
            ),
            TokenSource::File("/tokens/se.example.org:5290".into())
        );
        assert_eq!(
            s.token_source(&ep, &only(&["/tokens/se.example.org"])),
            TokenSource::File("/tokens/se.example.org".into())
        );
        assert_eq!(
            s.token_source(&ep, &only(&[])),
            TokenSource::File("/shared".into())
        );
        let bare = Settings::default();
        assert_eq!(bare.token_source(&ep, &only(&[])), TokenSource::Default);
    }

    #[test]
    fn an_ipv6_daemons_token_file_is_named_with_brackets() {
        let ep = Endpoint {
            host: "::1".into(),
            port: 7000,
        };
        let s = Settings {
            token_dir: Some("/t".into()),
            ..Settings::default()
        };
        assert_eq!(
            s.token_source(&ep, &|p| p == Path::new("/t/[::1]:7000")),
            TokenSource::File("/t/[::1]:7000".into())
        );
    }
}
