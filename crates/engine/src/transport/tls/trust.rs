//! How a client decides to trust a server's certificate: a fingerprint pinned ahead
//! (ssh start-up carries it over the ssh channel), trust on first use recorded in a
//! known-servers file (ssh's `known_hosts` for longhaul daemons), or a CA (`--ca`).
//!
//! Whatever the rule, the server's handshake signature is checked against the
//! certificate's key, so presenting a copied certificate is not enough.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::identity::Fingerprint;
use super::TlsError;

/// Largest known-servers file read.
const MAX_KNOWN_SERVERS_BYTES: u64 = 4 << 20;

/// The rule a client trusts the server's certificate by.
#[derive(Debug, Clone)]
pub enum ServerTrust {
    /// Exactly this certificate (ssh start-up).
    Pinned(Fingerprint),
    /// The certificate recorded for the server (`host:port`) in `file`; on first
    /// contact, whatever the server shows, recorded then.
    KnownServers {
        /// The known-servers file.
        file: PathBuf,
    },
    /// A certificate chain to one of these roots, for this name.
    Ca {
        /// The roots (`--ca FILE`).
        roots: Arc<rustls::RootCertStore>,
    },
}

impl ServerTrust {
    /// Trust on first use in the default known-servers file.
    pub fn known_servers() -> Result<Self, TlsError> {
        Ok(Self::KnownServers {
            file: default_known_servers()?,
        })
    }

    /// Trust in the CA certificates of a PEM file.
    pub fn ca_file(path: &Path) -> Result<Self, TlsError> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| TlsError::Trust(format!("cannot read --ca {}: {e}", path.display())))?;
        for c in certs {
            let c = c.map_err(|e| {
                TlsError::Trust(format!(
                    "--ca {}: not a PEM certificate: {e}",
                    path.display()
                ))
            })?;
            roots.add(c).map_err(|e| {
                TlsError::Trust(format!(
                    "--ca {}: unusable certificate: {e}",
                    path.display()
                ))
            })?;
        }
        if roots.is_empty() {
            return Err(TlsError::Trust(format!(
                "--ca {} holds no certificate",
                path.display()
            )));
        }
        Ok(Self::Ca {
            roots: Arc::new(roots),
        })
    }
}

/// `$XDG_CONFIG_HOME/longhaul/known_servers` or `~/.config/longhaul/known_servers`.
pub fn default_known_servers() -> Result<PathBuf, TlsError> {
    let dir = match std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").ok_or_else(|| {
            TlsError::Trust("$HOME is not set: no known-servers file to pin servers in".into())
        })?)
        .join(".config"),
    };
    Ok(dir.join("longhaul").join("known_servers"))
}

/// A known-servers file's lines: `HOST:PORT sha256:HEX`; `#` starts a comment.
#[derive(Debug, Default, Clone)]
pub struct KnownServers {
    entries: Vec<(String, Fingerprint, usize)>,
}

impl KnownServers {
    /// Parses the file's text; a malformed line is an error naming it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(server), Some(fp), None) = (words.next(), words.next(), words.next()) else {
                return Err(format!("line {}: expected `HOST:PORT sha256:HEX`", i + 1));
            };
            let fp = Fingerprint::parse(fp).ok_or_else(|| {
                format!("line {}: `{fp}` is not sha256: and 64 hex digits", i + 1)
            })?;
            entries.push((server.to_string(), fp, i + 1));
        }
        Ok(Self { entries })
    }

    /// Reads `file` (missing = empty).
    pub fn load(file: &Path) -> Result<Self, TlsError> {
        let text = match std::fs::metadata(file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Ok(m) if m.len() > MAX_KNOWN_SERVERS_BYTES => {
                return Err(TlsError::Trust(format!(
                    "{} is larger than {} bytes: not a known-servers file",
                    file.display(),
                    MAX_KNOWN_SERVERS_BYTES
                )))
            }
            _ => std::fs::read_to_string(file)
                .map_err(|e| TlsError::Trust(format!("cannot read {}: {e}", file.display())))?,
        };
        Self::parse(&text).map_err(|e| TlsError::Trust(format!("{}: {e}", file.display())))
    }

    /// The fingerprint recorded for `server`, and its line number.
    pub fn lookup(&self, server: &str) -> Option<(Fingerprint, usize)> {
        self.entries
            .iter()
            .find(|(s, _, _)| s == server)
            .map(|(_, f, l)| (*f, *l))
    }
}

/// Appends `server fp` to `file` (made with its directory if missing) unless `server`
/// is in it already (another client pinned it meanwhile). The look and the append hold
/// the file's lock, and the line goes in one write: clients pinning at once (the pairs of
/// a striped copy meeting their servers, or two processes) neither interleave their
/// lines nor pin one server twice.
pub fn remember(file: &Path, server: &str, fp: Fingerprint) -> Result<(), TlsError> {
    use std::io::{Read, Write};
    let fail = |e: std::io::Error| TlsError::Trust(format!("cannot write {}: {e}", file.display()));
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(file)
        .map_err(fail)?;
    let waited = std::time::Instant::now();
    while !longhaul_sys::file_io::try_lock_exclusive(&f).map_err(fail)? {
        if waited.elapsed() > std::time::Duration::from_secs(10) {
            return Err(fail(std::io::Error::other(
                "another process held its lock for 10 s",
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut text = String::new();
    (&mut f)
        .take(MAX_KNOWN_SERVERS_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(fail)?;
    let known = KnownServers::parse(&text)
        .map_err(|e| TlsError::Trust(format!("{}: {e}", file.display())))?;
    if known.lookup(server).is_some() {
        return Ok(());
    }
    let mut line = format!("{server} {fp}\n");
    if !text.is_empty() && !text.ends_with('\n') {
        line.insert(0, '\n');
    }
    f.write_all(line.as_bytes()).map_err(fail)
}

/// The warning for a certificate that changed, in ssh's words.
pub fn changed_warning(
    server: &str,
    seen: Fingerprint,
    known: Fingerprint,
    file: &Path,
    line: usize,
) -> String {
    format!(
        "\n@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
         @    WARNING: LONGHAUL SERVER IDENTITY HAS CHANGED!       @\n\
         @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
         IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\n\
         Someone could be eavesdropping on you right now (man-in-the-middle attack)!\n\
         It is also possible that the server's certificate was just replaced.\n\
         The certificate {server} presented is\n    {seen}\n\
         but line {line} of {} records\n    {known}\n\
         Nothing was sent. If the change is expected (ask the server's operator for the\n\
         fingerprint `longhaul serve` prints at start), remove line {line} of that file and\n\
         connect again.",
        file.display()
    )
}

/// Checks the certificate against a pin, or records it (trust on first use: `expect`
/// is `None`); the handshake signature is checked in every case.
#[derive(Debug)]
pub(super) struct PinVerifier {
    pub(super) expect: Option<Fingerprint>,
    pub(super) seen: Mutex<Option<Fingerprint>>,
    pub(super) algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let fp = Fingerprint::of(end_entity);
        if let Ok(mut s) = self.seen.lock() {
            *s = Some(fp);
        }
        match self.expect {
            Some(want) if want != fp => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            )),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // Only TLS 1.3 is configured.
        Err(rustls::Error::PeerIncompatible(
            rustls::PeerIncompatible::Tls13RequiredForQuic,
        ))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_servers_read_lines_and_refuse_garbage() {
        let fp = Fingerprint([7; 32]);
        let text = format!("# longhaul\n\nhost.example:5290 {fp}\n[::1]:5290 {fp}\n");
        let k = KnownServers::parse(&text).unwrap();
        assert_eq!(k.lookup("host.example:5290"), Some((fp, 3)));
        assert_eq!(k.lookup("[::1]:5290"), Some((fp, 4)));
        assert_eq!(k.lookup("other:5290"), None);
        assert!(KnownServers::parse("h:1 sha256:zz")
            .unwrap_err()
            .contains("line 1"));
        assert!(KnownServers::parse("h:1").is_err());
        assert!(KnownServers::parse(&format!("h:1 {fp} extra")).is_err());
    }

    #[test]
    fn remembered_servers_are_found_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub/known_servers");
        let fp = Fingerprint([9; 32]);
        remember(&file, "a:1", fp).unwrap();
        remember(&file, "b:2", Fingerprint([1; 32])).unwrap();
        let k = KnownServers::load(&file).unwrap();
        assert_eq!(k.lookup("a:1"), Some((fp, 1)));
        assert_eq!(k.lookup("b:2").map(|x| x.1), Some(2));
    }

    #[test]
    fn clients_pinning_at_once_write_whole_lines_once() {
        // A striped copy's pairs meet their servers at once; before the lock and the one
        // write, their lines came out interleaved ("sha256:sha256:adade9...").
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("known_servers");
        std::thread::scope(|scope| {
            for t in 0..8u8 {
                let file = &file;
                scope.spawn(move || {
                    for i in 0..20u8 {
                        remember(file, &format!("h{}:1", i % 10), Fingerprint([t; 32])).unwrap();
                    }
                });
            }
        });
        let k = KnownServers::load(&file).unwrap();
        assert_eq!(
            k.entries.len(),
            10,
            "each server pinned once: {:?}",
            k.entries
        );
        for i in 0..10 {
            assert!(k.lookup(&format!("h{i}:1")).is_some());
        }
    }
}
