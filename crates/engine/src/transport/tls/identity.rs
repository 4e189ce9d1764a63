//! A server's TLS identity: an ECDSA P-256 key and a self-signed certificate, made per
//! run for ssh start-up or kept on disk by a daemon; and the certificate's fingerprint,
//! which is what a client pins.

use std::fmt;
use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

use super::TlsError;

/// The name a self-signed longhaul certificate carries (clients that pin do not check names).
pub const CERT_NAME: &str = "longhaul";

/// SHA-256 of a certificate (DER): what a client pins.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of `cert`.
    pub fn of(cert: &[u8]) -> Self {
        Self(Sha256::digest(cert).into())
    }

    /// Reads `sha256:` and 64 hex digits (the form [`fmt::Display`] writes).
    pub fn parse(s: &str) -> Option<Self> {
        let hex = s.strip_prefix("sha256:")?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Self(out))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A certificate and its private key.
pub struct ServerIdentity {
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

impl Clone for ServerIdentity {
    fn clone(&self) -> Self {
        Self {
            cert: self.cert.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerIdentity({})", self.fingerprint())
    }
}

impl ServerIdentity {
    /// A new key and self-signed certificate, kept in memory only.
    pub fn generate() -> Result<Self, TlsError> {
        let made = rcgen::generate_simple_self_signed(vec![CERT_NAME.to_string()])
            .map_err(|e| TlsError::Identity(format!("cannot make a certificate: {e}")))?;
        let key = PrivateKeyDer::try_from(made.key_pair.serialize_der())
            .map_err(|e| TlsError::Identity(format!("cannot encode the key: {e}")))?;
        Ok(Self {
            cert: made.cert.der().clone(),
            key,
        })
    }

    /// Loads `server.crt` and `server.key` from `dir`, making them (key mode 0600) the
    /// first time; the second value says whether they were made now. Servers starting
    /// together agree on one identity: each file appears whole (written aside, then
    /// linked into place without replacing), the key first.
    pub fn load_or_create(dir: &Path) -> Result<(Self, bool), TlsError> {
        let (crt, key) = Self::paths(dir);
        if !key.exists() {
            let id = Self::generate()?;
            if id.save(dir)? {
                return Ok((id, true));
            }
        }
        // Another server made them; its certificate follows its key within moments.
        for _ in 0..50 {
            if crt.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let io = |p: &Path, e: &dyn fmt::Display| {
            TlsError::Identity(format!(
                "cannot read {}: {e} (remove {} and {} to make a new identity; clients \
                 that pinned the old one will then refuse this server until told)",
                p.display(),
                crt.display(),
                key.display()
            ))
        };
        let cert = CertificateDer::from_pem_file(&crt).map_err(|e| io(&crt, &e))?;
        let k = PrivateKeyDer::from_pem_file(&key).map_err(|e| io(&key, &e))?;
        Ok((Self { cert, key: k }, false))
    }

    fn paths(dir: &Path) -> (PathBuf, PathBuf) {
        (dir.join("server.crt"), dir.join("server.key"))
    }

    /// Writes the key, then the certificate; `false` if another process's key is
    /// already in place (nothing of ours is then left behind).
    fn save(&self, dir: &Path) -> Result<bool, TlsError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let (crt, key) = Self::paths(dir);
        let fail = |p: &Path, e: std::io::Error| {
            TlsError::Identity(format!("cannot write {}: {e}", p.display()))
        };
        std::fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
        // Written aside, synced, then linked into place (never over another's file).
        let place = |p: &Path, mode: u32, label: &str, der: &[u8]| -> std::io::Result<bool> {
            let tmp = p.with_extension(format!("tmp{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&tmp)?;
            f.write_all(pem(label, der).as_bytes())?;
            f.sync_all()?;
            let linked = std::fs::hard_link(&tmp, p);
            let _ = std::fs::remove_file(&tmp);
            match linked {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            }
        };
        if !place(&key, 0o600, "PRIVATE KEY", self.key.secret_der()).map_err(|e| fail(&key, e))? {
            return Ok(false);
        }
        place(&crt, 0o644, "CERTIFICATE", &self.cert).map_err(|e| fail(&crt, e))?;
        Ok(true)
    }

    /// The certificate's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.cert)
    }

    pub(super) fn cert(&self) -> CertificateDer<'static> {
        self.cert.clone()
    }

    pub(super) fn key(&self) -> PrivateKeyDer<'static> {
        self.key.clone_key()
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::with_capacity(der.len() * 4 / 3 + 4);
    for c in der.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                b64.push(B64[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                b64.push('=');
            }
        }
    }
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("ascii"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_read_back() {
        let id = ServerIdentity::generate().unwrap();
        let fp = id.fingerprint();
        assert_eq!(Fingerprint::parse(&fp.to_string()), Some(fp));
        assert_eq!(Fingerprint::parse("sha256:00"), None);
        assert_eq!(
            Fingerprint::parse(&fp.to_string().replace("sha256:", "md5:")),
            None
        );
    }

    #[test]
    fn servers_starting_together_agree_on_one_identity() {
        let dir = tempfile::tempdir().unwrap();
        let fps: Vec<_> = (0..6)
            .map(|_| {
                let d = dir.path().to_path_buf();
                std::thread::spawn(move || ServerIdentity::load_or_create(&d).unwrap())
            })
            .map(|h| h.join().unwrap())
            .collect();
        assert_eq!(fps.iter().filter(|(_, made)| *made).count(), 1);
        assert!(fps
            .iter()
            .all(|(id, _)| id.fingerprint() == fps[0].0.fingerprint()));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 2, "only server.key and server.crt remain");
    }

    #[test]
    fn a_saved_identity_loads_as_the_same_certificate_and_key_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (made, new) = ServerIdentity::load_or_create(dir.path()).unwrap();
        assert!(new);
        let (loaded, new) = ServerIdentity::load_or_create(dir.path()).unwrap();
        assert!(!new);
        assert_eq!(made.fingerprint(), loaded.fingerprint());
        assert_eq!(made.key.secret_der(), loaded.key.secret_der());
        let mode = std::fs::metadata(dir.path().join("server.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
