//! From rustls's handshake to longhaul's record layer (`transport::record`).
//!
//! rustls does the handshake on a connection of its own; then the traffic secrets (which
//! rustls logs through its `KeyLog` hook to a `SecretLog` of this connection only), the
//! sequence numbers and the keys it derived (`dangerous_extract_secrets`, checked against
//! the secrets') go to a [`Sender`] and a [`Receiver`], which carry the data with one
//! copy per byte instead of rustls's three.
//!
//! Nothing the peer sent may be lost in the handover: `OneRecordAtATime` gives rustls
//! the handshake's bytes record by record, never past the end of the record it is in, so
//! when the handshake ends rustls holds no partial record; what the socket read beyond it
//! stays in `OneRecordAtATime::ahead` and becomes the receiver's first ciphertext.

use std::io::{self, Read};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

use crate::transport::record::{self, Direction, Receiver, Sender, Suite};

use super::Fingerprint;

/// The traffic secrets rustls logged for one connection.
#[derive(Debug, Default)]
pub(crate) struct SecretLog(Mutex<Vec<(String, Vec<u8>)>>);

impl rustls::KeyLog for SecretLog {
    fn log(&self, label: &str, _client_random: &[u8], secret: &[u8]) {
        if let Ok(mut v) = self.0.lock() {
            v.push((label.to_string(), secret.to_vec()));
        }
    }

    fn will_log(&self, label: &str) -> bool {
        label.ends_with("_TRAFFIC_SECRET_0")
    }
}

impl SecretLog {
    fn get(&self, label: &str) -> Option<Vec<u8>> {
        let v = self.0.lock().ok()?;
        v.iter().find(|(l, _)| l == label).map(|(_, s)| s.clone())
    }
}

/// A client config of `base`'s whose secrets go to a new log.
pub(crate) fn client_config(
    base: &rustls::ClientConfig,
) -> (Arc<rustls::ClientConfig>, Arc<SecretLog>) {
    let log = Arc::new(SecretLog::default());
    let mut c = base.clone();
    c.key_log = log.clone();
    c.enable_secret_extraction = true;
    (Arc::new(c), log)
}

/// A server config of `base`'s whose secrets go to a new log.
pub(crate) fn server_config(
    base: &rustls::ServerConfig,
) -> (Arc<rustls::ServerConfig>, Arc<SecretLog>) {
    let log = Arc::new(SecretLog::default());
    let mut c = base.clone();
    c.key_log = log.clone();
    c.enable_secret_extraction = true;
    (Arc::new(c), log)
}

/// A connection's TLS once the handshake is over.
pub struct Handover {
    /// Seals what this end sends.
    pub sender: Sender,
    /// Opens what the peer sent, starting with what was read past the handshake.
    pub receiver: Receiver,
    /// 32 bytes of the TLS exporter (label `longhaul_proto::EXPORTER_LABEL`).
    pub exporter: Option<[u8; 32]>,
    /// The certificate the peer presented (a client's view of its server).
    pub peer_certificate: Option<Fingerprint>,
    /// The negotiated suite.
    pub suite: Suite,
}

/// Takes a connection whose handshake is complete from rustls; `ahead` is what was read
/// from the socket past the handshake; the receiver's buffer holds `capacity` bytes.
pub(crate) fn hand_over(
    mut conn: rustls::Connection,
    log: &SecretLog,
    ahead: &[u8],
    capacity: usize,
) -> io::Result<Handover> {
    let fail = |what: String| io::Error::other(format!("TLS handover: {what}"));
    // Plaintext rustls already opened (none when fed record by record, but never lost).
    let mut plain = Vec::new();
    match conn.reader().read_to_end(&mut plain) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    let exporter = conn
        .export_keying_material([0u8; 32], longhaul_proto::EXPORTER_LABEL, None)
        .ok();
    let peer_certificate = conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| Fingerprint::of(c.as_ref()));
    let (tx_label, rx_label) = match &conn {
        rustls::Connection::Client(_) => ("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"),
        rustls::Connection::Server(_) => ("SERVER_TRAFFIC_SECRET_0", "CLIENT_TRAFFIC_SECRET_0"),
    };
    let secrets = conn
        .dangerous_extract_secrets()
        .map_err(|e| fail(e.to_string()))?;
    let keys = |(seq, s): &(u64, rustls::ConnectionTrafficSecrets),
                label: &str|
     -> io::Result<Direction> {
        let (suite, key, iv) = match s {
            rustls::ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
                (Suite::Aes128Gcm, key.as_ref(), iv.as_ref())
            }
            rustls::ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
                (Suite::Aes256Gcm, key.as_ref(), iv.as_ref())
            }
            rustls::ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (Suite::Chacha20Poly1305, key.as_ref(), iv.as_ref())
            }
            _ => return Err(fail("a suite the record layer does not carry".into())),
        };
        let secret = log
            .get(label)
            .ok_or_else(|| fail(format!("rustls logged no {label}")))?;
        if !Direction::derives(suite, &secret, key, iv) {
            return Err(fail(record::RecordError::Keys.to_string()));
        }
        Ok(Direction::new(suite, &secret, *seq))
    };
    let tx = keys(&secrets.tx, tx_label)?;
    let rx = keys(&secrets.rx, rx_label)?;
    let suite = tx.suite();
    Ok(Handover {
        sender: Sender::new(tx),
        receiver: Receiver::new(rx, capacity, &plain, ahead),
        exporter,
        peer_certificate,
        suite,
    })
}

/// Moves whatever `from` has to send into `to` through `wire`; false when something
/// failed.
pub(crate) fn pass(
    from: &mut rustls::Connection,
    to: &mut rustls::Connection,
    wire: &mut Vec<u8>,
) -> bool {
    wire.clear();
    while from.wants_write() {
        if from.write_tls(wire).is_err() {
            return false;
        }
    }
    let mut rd: &[u8] = wire;
    while !rd.is_empty() {
        if to.read_tls(&mut rd).is_err() || to.process_new_packets().is_err() {
            return false;
        }
    }
    true
}

/// One end of a connection whose handshake ran in memory.
pub(crate) struct MemoryEnd {
    pub conn: rustls::Connection,
    pub log: Arc<SecretLog>,
}

/// A client and a server of these setups, their handshake done in memory (no socket):
/// for measuring and testing the record layer against rustls itself.
pub(crate) fn in_memory(
    client_tls: &super::ClientTls,
    server_tls: &super::ServerTls,
) -> Option<(MemoryEnd, MemoryEnd)> {
    let (cc, clog) = client_config(&client_tls.config);
    let (sc, slog) = server_config(&server_tls.config);
    let mut client = rustls::Connection::Client(
        rustls::ClientConnection::new(cc, client_tls.name.clone()).ok()?,
    );
    let mut server = rustls::Connection::Server(rustls::ServerConnection::new(sc).ok()?);
    let mut wire = Vec::new();
    for _ in 0..8 {
        if !client.is_handshaking() && !server.is_handshaking() {
            break;
        }
        if !pass(&mut client, &mut server, &mut wire) || !pass(&mut server, &mut client, &mut wire)
        {
            return None;
        }
    }
    if client.is_handshaking() || server.is_handshaking() {
        return None;
    }
    Some((
        MemoryEnd {
            conn: client,
            log: clog,
        },
        MemoryEnd {
            conn: server,
            log: slog,
        },
    ))
}

/// The socket as rustls reads it during the handshake: never past the end of the record
/// being read, so that rustls holds no part of a record after its last one. Also keeps
/// the first bytes the peer sent (to recognise a peer that does not speak TLS).
pub(crate) struct OneRecordAtATime<'a> {
    pub tcp: &'a TcpStream,
    /// Read from the socket, not yet given to rustls.
    pub ahead: Vec<u8>,
    /// Bytes of the current record rustls has not been given yet (0: at a header).
    left_in_record: usize,
    /// The peer's first bytes (up to 512).
    pub first: Vec<u8>,
}

impl<'a> OneRecordAtATime<'a> {
    pub fn new(tcp: &'a TcpStream) -> Self {
        Self {
            tcp,
            ahead: Vec::new(),
            left_in_record: 0,
            first: Vec::new(),
        }
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut b = [0u8; 16 * 1024];
        let n = (&*self.tcp).read(&mut b)?;
        let keep = n.min(512usize.saturating_sub(self.first.len()));
        self.first.extend_from_slice(&b[..keep]);
        self.ahead.extend_from_slice(&b[..n]);
        Ok(n)
    }
}

impl Read for OneRecordAtATime<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left_in_record == 0 {
            while self.ahead.len() < record::HEADER {
                if self.fill()? == 0 {
                    // The end (or a short non-TLS answer): whatever there is, then EOF.
                    let n = self.ahead.len().min(buf.len());
                    buf[..n].copy_from_slice(&self.ahead[..n]);
                    self.ahead.drain(..n);
                    return Ok(n);
                }
            }
            self.left_in_record = record::HEADER + record::announced_len(&self.ahead);
        }
        if self.ahead.is_empty() && self.fill()? == 0 {
            return Ok(0);
        }
        let n = self.left_in_record.min(self.ahead.len()).min(buf.len());
        buf[..n].copy_from_slice(&self.ahead[..n]);
        self.ahead.drain(..n);
        self.left_in_record -= n;
        Ok(n)
    }
}

impl io::Write for OneRecordAtATime<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.tcp).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
