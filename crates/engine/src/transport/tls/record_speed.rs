//! What TLS costs the data connections on this host: a client and a server connection
//! of this module's own setups ([`ServerTls`], [`ClientTls`]) joined in memory, the
//! client writing 64 KiB application writes (as the data streams do) and the server
//! reading them, each end's work timed apart: the records sealed and framed at the
//! sender, read, opened and copied out at the receiver. No socket, so the figure is the
//! record layer's (cipher and copies), per core and per end.
//!
//! `longhaul bench` sends its data unencrypted by default (its bytes are random and need
//! no secrecy) so that its result is the network's; this figure tells the user what an
//! encrypted `longhaul cp` can reach per core at each end.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{ClientTls, ServerTls, ServerTrust};

/// One application write of the data streams.
const WRITE: usize = 64 * 1024;
/// At most this much is carried in one measurement, whatever the budget.
const MAX_BYTES: u64 = 1 << 30;

/// What a bench run says about the data connections' protection.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DataProtection {
    /// Whether the data connections ran TLS (`--encryption on`).
    pub encrypted: bool,
    /// The suite the figures were measured with (empty: not measured).
    pub cipher: String,
    /// Plaintext one core seals into TLS records per second at a sending end, bit/s
    /// (0: not measured).
    pub seal_bps_per_core: u64,
    /// Plaintext one core takes out of TLS records per second at a receiving end, bit/s.
    pub open_bps_per_core: u64,
}

impl DataProtection {
    /// The protection of a run, with this host's TLS record speed measured now (about
    /// 50 ms; zeros if the in-memory pair cannot be set up).
    pub fn measure(encrypted: bool) -> Self {
        let mut p =
            record_speed(Duration::from_millis(50)).unwrap_or_else(|| Self::unmeasured(encrypted));
        p.encrypted = encrypted;
        p
    }

    /// Not measured.
    pub fn unmeasured(encrypted: bool) -> Self {
        Self {
            encrypted,
            cipher: String::new(),
            seal_bps_per_core: 0,
            open_bps_per_core: 0,
        }
    }
}

/// Moves whatever `from` has to send into `to`; false when something failed.
fn pass(from: &mut rustls::Connection, to: &mut rustls::Connection, wire: &mut Vec<u8>) -> bool {
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

/// The record layer's speed at each end, measured for about `budget`.
fn record_speed(budget: Duration) -> Option<DataProtection> {
    let server_tls = ServerTls::ephemeral().ok()?;
    let client_tls = ClientTls::new(
        super::identity::CERT_NAME,
        0,
        ServerTrust::Pinned(server_tls.fingerprint()),
    )
    .ok()?;
    let mut client = rustls::Connection::Client(
        rustls::ClientConnection::new(client_tls.config.clone(), client_tls.name.clone()).ok()?,
    );
    let mut server =
        rustls::Connection::Server(rustls::ServerConnection::new(server_tls.config.clone()).ok()?);
    let mut wire = Vec::with_capacity(WRITE + 4096);
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
    let cipher = client
        .negotiated_cipher_suite()
        .map(|s| format!("{:?}", s.suite()))
        .unwrap_or_default();
    let data = vec![0x33u8; WRITE];
    let mut out = vec![0u8; WRITE];
    let (mut seal, mut open) = (Duration::ZERO, Duration::ZERO);
    let mut moved = 0u64;
    let start = Instant::now();
    while moved < MAX_BYTES && start.elapsed() < budget {
        let t = Instant::now();
        client.writer().write_all(&data).ok()?;
        wire.clear();
        while client.wants_write() {
            client.write_tls(&mut wire).ok()?;
        }
        let t2 = Instant::now();
        seal += t2 - t;
        let mut rd: &[u8] = &wire;
        let mut got = 0;
        while !rd.is_empty() {
            server.read_tls(&mut rd).ok()?;
            server.process_new_packets().ok()?;
            loop {
                match server.reader().read(&mut out) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => return None,
                }
            }
        }
        open += t2.elapsed();
        if got != WRITE {
            return None;
        }
        moved += WRITE as u64;
    }
    let bps = |d: Duration| (moved as f64 * 8.0 / d.as_secs_f64().max(1e-9)) as u64;
    Some(DataProtection {
        encrypted: false,
        cipher,
        seal_bps_per_core: bps(seal),
        open_bps_per_core: bps(open),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ends_are_measured_through_a_real_tls_session() {
        let p = record_speed(Duration::from_millis(5)).expect("an in-memory TLS pair");
        // Any host that runs TLS at all moves more than a megabit per second per end.
        assert!(p.seal_bps_per_core > 1_000_000, "{p:?}");
        assert!(p.open_bps_per_core > 1_000_000, "{p:?}");
        assert!(
            p.cipher.contains("AES_128_GCM"),
            "the preferred suite: {p:?}"
        );
        let m = DataProtection::measure(true);
        assert!(m.encrypted);
    }
}
