//! TLS 1.3 on every control and data connection (rustls, in user space: this kernel has
//! no kTLS).
//!
//! - [`identity`]: the server's key and self-signed certificate, and its fingerprint.
//! - [`trust`]: how a client trusts a server (pinned fingerprint, known-servers file,
//!   CA), and the warning when a pinned certificate changed.
//!
//! The crypto provider is *ring*, measured faster than aws-lc-rs on this machine's CPU
//! (AES-NI and PCLMULQDQ, no VAES): AES-128-GCM sealed 16 KiB records at 2.4-3.0 GB/s
//! against 2.1-2.5 GB/s (docs/tls.md). Suites are offered AES-128-GCM first, then
//! AES-256-GCM, then ChaCha20-Poly1305 (for CPUs without AES instructions). Key exchange
//! is X25519 first; the server signs with ECDSA P-256. No session tickets: every
//! connection does a full handshake inside a session the token already authorised.

pub mod handover;
pub mod identity;
pub mod record_speed;
pub mod trust;

use std::io;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::ServerName;

pub use identity::{Fingerprint, ServerIdentity};
pub use trust::ServerTrust;

use super::secure::SecureStream;

/// The ALPN name of the protocol inside TLS.
const ALPN: &[u8] = b"longhaul";

/// Whether data connections are encrypted. The control connection always is; with
/// `Off` every chunk still carries a MAC under the session's key, so nothing altered
/// on the way is accepted (for trusted networks and CPU-bound hosts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encryption {
    /// TLS on every connection.
    #[default]
    On,
    /// TLS on the control connection only.
    Off,
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The server's key or certificate.
    #[error("TLS identity: {0}")]
    Identity(String),
    /// The client's trust settings (known-servers file, `--ca`).
    #[error("{0}")]
    Trust(String),
    /// The handshake failed.
    #[error("TLS handshake with {peer}: {why}")]
    Handshake {
        /// Who.
        peer: String,
        /// What went wrong.
        why: String,
    },
    /// The server closed the connection before anything of TLS came back: a server at
    /// its cap of connections that have not proved themselves closes the stalest, which
    /// under a flood may be a client's in the instant before its first bytes arrive
    /// (`dial` tries again).
    #[error(
        "TLS handshake with {peer}: the server closed the connection before answering \
         ({why}); a server at its limit of waiting connections closes the stalest: try again"
    )]
    Closed {
        /// Who.
        peer: String,
        /// How the connection ended.
        why: String,
    },
    /// A pinned certificate changed (the message is ssh's kind of warning).
    #[error("{0}")]
    Changed(String),
    /// The peer does not speak TLS: an older longhaul.
    #[error(
        "{peer} answered without TLS: it runs an older longhaul (protocol 4 or before{}), \
         and this one speaks protocol {}; install the same longhaul version at both ends",
        said.as_ref().map(|s| format!(", which said: {s}")).unwrap_or_default(),
        longhaul_proto::PROTOCOL_VERSION
    )]
    OldPeer {
        /// Who.
        peer: String,
        /// The old peer's error message, if it sent one.
        said: Option<String>,
    },
}

/// The crypto provider: ring, AES-GCM first (see the module docs).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::ring as r;
    let mut p = r::default_provider();
    p.cipher_suites = vec![
        r::cipher_suite::TLS13_AES_128_GCM_SHA256,
        r::cipher_suite::TLS13_AES_256_GCM_SHA384,
        r::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    Arc::new(p)
}

/// The server's TLS setup, shared by every connection it accepts.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
    fingerprint: Fingerprint,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerTls({})", self.fingerprint)
    }
}

impl ServerTls {
    /// A server presenting `id`.
    pub fn new(id: &ServerIdentity) -> Result<Self, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Identity(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(vec![id.cert()], id.key())
            .map_err(|e| TlsError::Identity(format!("unusable key or certificate: {e}")))?;
        config.send_tls13_tickets = 0;
        // The server's longhaul hello goes right behind its Finished (see
        // `ServerTls::accept`): it needs nothing from the client.
        config.send_half_rtt_data = true;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(Self {
            config: Arc::new(config),
            fingerprint: id.fingerprint(),
        })
    }

    /// A server with a new identity of its own, kept in memory only.
    pub fn ephemeral() -> Result<Self, TlsError> {
        Self::new(&ServerIdentity::generate()?)
    }

    /// The fingerprint clients pin.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Runs the server's side of the handshake on an accepted connection; `early` (the
    /// server's longhaul hello, an encoded frame) leaves as 0.5-RTT data in the flight of
    /// the server's Finished.
    pub fn accept(
        &self,
        tcp: TcpStream,
        timeout: Duration,
        early: &[u8],
    ) -> io::Result<SecureStream> {
        let (config, log) = handover::server_config(&self.config);
        let conn = rustls::ServerConnection::new(config).map_err(io::Error::other)?;
        let mut conn = rustls::Connection::Server(conn);
        if !early.is_empty() {
            use std::io::Write as _;
            conn.writer().write_all(early)?;
        }
        let ahead = handshake(&tcp, &mut conn, timeout).map_err(|(e, _)| e)?;
        SecureStream::tls(tcp, conn, &log, &ahead)
    }
}

/// What a client asks of a connection's security.
#[derive(Debug, Clone)]
pub struct Security {
    /// How the server's certificate is trusted.
    pub trust: ServerTrust,
    /// Whether data connections are encrypted.
    pub encryption: Encryption,
}

impl Security {
    /// Exactly the certificate `fp`, data encrypted.
    pub fn pinned(fp: Fingerprint) -> Self {
        Self {
            trust: ServerTrust::Pinned(fp),
            encryption: Encryption::On,
        }
    }
}

/// The client's TLS setup for one server.
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    trust: ServerTrust,
    /// `host:port`: the server's line in a known-servers file.
    server: String,
    pin: Option<Arc<trust::PinVerifier>>,
}

impl ClientTls {
    /// The setup for reaching `host` at `port` under `trust`.
    pub fn new(host: &str, port: u16, trust: ServerTrust) -> Result<Self, TlsError> {
        let server = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Trust(e.to_string()))?;
        let (mut config, name, pin) = match &trust {
            ServerTrust::Ca { roots } => {
                let name = ServerName::try_from(host.to_string()).map_err(|_| {
                    TlsError::Trust(format!("`{host}` is not a name a certificate can carry"))
                })?;
                let c = builder
                    .with_root_certificates(roots.clone())
                    .with_no_client_auth();
                (c, name, None)
            }
            ServerTrust::Pinned(_) | ServerTrust::KnownServers { .. } => {
                let expect = match &trust {
                    ServerTrust::Pinned(fp) => Some(*fp),
                    ServerTrust::KnownServers { file } => trust::KnownServers::load(file)?
                        .lookup(&server)
                        .map(|x| x.0),
                    ServerTrust::Ca { .. } => None,
                };
                let pin = Arc::new(trust::PinVerifier {
                    expect,
                    seen: Mutex::new(None),
                    algs: provider().signature_verification_algorithms,
                });
                let c = builder
                    .dangerous()
                    .with_custom_certificate_verifier(pin.clone())
                    .with_no_client_auth();
                let name = ServerName::try_from(identity::CERT_NAME).expect("a valid DNS name");
                (c, name, Some(pin))
            }
        };
        config.alpn_protocols = vec![ALPN.to_vec()];
        config.resumption = rustls::client::Resumption::disabled();
        Ok(Self {
            config: Arc::new(config),
            name,
            trust,
            server,
            pin,
        })
    }

    /// The setup for a session's data connections: exactly the certificate the control
    /// connection accepted.
    pub fn for_data(&self) -> Result<Self, TlsError> {
        match self.seen() {
            Some(fp) if !matches!(self.trust, ServerTrust::Ca { .. }) => {
                Self::new(identity::CERT_NAME, 0, ServerTrust::Pinned(fp))
            }
            _ => Ok(self.clone()),
        }
    }

    /// The setup for a session's data connections when it is known before the control
    /// connection's handshake: a pinned certificate (ssh start-up, or one the
    /// known-servers file holds) or a CA. `None` on first contact with a server of the
    /// known-servers file: its data connections wait for [`ClientTls::for_data`].
    pub fn for_data_now(&self) -> Option<Self> {
        let pinned = match &self.trust {
            ServerTrust::Ca { .. } => return Some(self.clone()),
            ServerTrust::Pinned(fp) => *fp,
            ServerTrust::KnownServers { .. } => self.pin.as_ref()?.expect?,
        };
        Self::new(identity::CERT_NAME, 0, ServerTrust::Pinned(pinned)).ok()
    }

    /// The fingerprint the server presented on the last handshake.
    pub fn seen(&self) -> Option<Fingerprint> {
        self.pin.as_ref().and_then(|p| *p.seen.lock().ok()?)
    }

    /// Runs the client's side of the handshake. On first contact with a daemon of the
    /// known-servers file the certificate it presented is returned, not yet pinned: the
    /// caller pins it ([`ClientTls::pin`]) once the server has proved the token, so that
    /// whoever answers first at `host:port` without the token is never remembered.
    pub fn connect(
        &self,
        tcp: TcpStream,
        peer: &str,
        timeout: Duration,
    ) -> Result<(SecureStream, Option<FirstContact>), TlsError> {
        let (config, log) = handover::client_config(&self.config);
        let conn = rustls::ClientConnection::new(config, self.name.clone())
            .map_err(|e| TlsError::Trust(e.to_string()))?;
        let mut conn = rustls::Connection::Client(conn);
        let ahead = match handshake(&tcp, &mut conn, timeout) {
            Ok(ahead) => ahead,
            Err((e, first)) => return Err(self.explain(peer, e, &first)),
        };
        let mut first_contact = None;
        if let (ServerTrust::KnownServers { file }, Some(fp)) = (&self.trust, self.seen()) {
            if trust::KnownServers::load(file)?
                .lookup(&self.server)
                .is_none()
            {
                first_contact = Some(FirstContact {
                    server: self.server.clone(),
                    file: file.clone(),
                    seen: fp,
                });
            }
        }
        let stream =
            SecureStream::tls(tcp, conn, &log, &ahead).map_err(|e| TlsError::Handshake {
                peer: peer.to_string(),
                why: e.to_string(),
            })?;
        Ok((stream, first_contact))
    }

    /// Pins a first contact's certificate in the known-servers file, once its server has
    /// proved the token (unless another client pinned one for it meanwhile).
    pub fn pin(&self, first: &FirstContact) -> Result<(), TlsError> {
        trust::remember(&first.file, &first.server, first.seen)
    }

    fn explain(&self, peer: &str, e: io::Error, first: &[u8]) -> TlsError {
        if let Some(&b) = first.first() {
            // A TLS record starts with its content type: 20-23.
            if !(20..=23).contains(&b) {
                let said = match longhaul_proto::decode_frame(first) {
                    Ok(Some((longhaul_proto::Message::Error { message, .. }, _))) => Some(message),
                    _ => None,
                };
                return TlsError::OldPeer {
                    peer: peer.to_string(),
                    said,
                };
            }
        }
        let closed = matches!(
            e.kind(),
            io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
        );
        if first.is_empty() && closed {
            return TlsError::Closed {
                peer: peer.to_string(),
                why: e.to_string(),
            };
        }
        if let (ServerTrust::KnownServers { file }, Some(seen)) = (&self.trust, self.seen()) {
            if let Ok(Some((known, line))) =
                trust::KnownServers::load(file).map(|k| k.lookup(&self.server))
            {
                if known != seen {
                    return TlsError::Changed(trust::changed_warning(
                        &self.server,
                        seen,
                        known,
                        file,
                        line,
                    ));
                }
            }
        }
        if let (ServerTrust::Pinned(want), Some(seen)) = (&self.trust, self.seen()) {
            if *want != seen {
                return TlsError::Changed(format!(
                    "{peer} presented certificate {seen}, not the {want} its ssh channel \
                     announced: something between the hosts answered in its place; nothing \
                     was sent"
                ));
            }
        }
        TlsError::Handshake {
            peer: peer.to_string(),
            why: e.to_string(),
        }
    }
}

/// A first contact with a server of the known-servers file: the certificate it presented,
/// to pin once it has proved the token.
#[derive(Debug, Clone)]
pub struct FirstContact {
    /// `host:port` as recorded in the file.
    pub server: String,
    /// The known-servers file.
    pub file: std::path::PathBuf,
    /// The certificate the server presented.
    pub seen: Fingerprint,
}

/// Whether a connection's first byte starts a TLS handshake record (a plain longhaul
/// frame starts with its length's high byte, 0).
pub fn starts_tls(first: u8) -> bool {
    first == 22
}

/// Completes the handshake within `timeout`; on failure also returns the first bytes
/// the peer sent (to recognise an older longhaul that does not speak TLS).
fn handshake(
    tcp: &TcpStream,
    conn: &mut rustls::Connection,
    timeout: Duration,
) -> Result<Vec<u8>, (io::Error, Vec<u8>)> {
    let old_r = tcp.read_timeout().ok().flatten();
    let old_w = tcp.write_timeout().ok().flatten();
    let _ = tcp.set_read_timeout(Some(timeout));
    let _ = tcp.set_write_timeout(Some(timeout));
    let mut io = handover::OneRecordAtATime::new(tcp);
    let mut result = Ok(());
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut io) {
            result = Err(e);
            break;
        }
    }
    if result.is_ok() {
        // The client's Finished may still be queued.
        while conn.wants_write() {
            if let Err(e) = conn.write_tls(&mut io) {
                result = Err(e);
                break;
            }
        }
    }
    let _ = tcp.set_read_timeout(old_r);
    let _ = tcp.set_write_timeout(old_w);
    match result {
        Ok(()) => Ok(io.ahead),
        Err(e) => {
            let e = if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {} s", timeout.as_secs()),
                )
            } else {
                e
            };
            Err((e, io.first))
        }
    }
}
