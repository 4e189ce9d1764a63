//! What TLS costs the data connections on this host: a client and a server connection
//! of this module's own setups ([`ServerTls`], [`ClientTls`]) whose handshake ran in
//! memory, handed over to the record layer the data streams use
//! (`transport::record`), the client sealing 64 KiB application writes (as the data
//! streams do) and the server opening them, each end's work timed apart: the records
//! sealed at the sender, opened and copied out at the receiver. No socket, so the figure
//! is the record layer's (cipher and copies), per core and per end.
//!
//! `longhaul bench` sends its data unencrypted by default (its bytes are random and need
//! no secrecy) so that its result is the network's; this figure tells the user what an
//! encrypted `longhaul cp` can reach per core at each end.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{ClientTls, ServerTls, ServerTrust};
use crate::transport::record::Step;

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

/// The record layer's speed at each end, measured for about `budget`.
fn record_speed(budget: Duration) -> Option<DataProtection> {
    let server_tls = ServerTls::ephemeral().ok()?;
    let client_tls = ClientTls::new(
        super::identity::CERT_NAME,
        0,
        ServerTrust::Pinned(server_tls.fingerprint()),
    )
    .ok()?;
    let (client, server) = super::handover::in_memory(&client_tls, &server_tls)?;
    let mut tx = super::handover::hand_over(client.conn, &client.log, &[], 0)
        .ok()?
        .sender;
    let server = super::handover::hand_over(server.conn, &server.log, &[], 2 * WRITE).ok()?;
    let cipher = server.suite.name().to_string();
    let mut rx = server.receiver;
    let data = vec![0x33u8; WRITE];
    let mut out = vec![0u8; WRITE];
    let (mut seal, mut open) = (Duration::ZERO, Duration::ZERO);
    let mut moved = 0u64;
    let start = Instant::now();
    while moved < MAX_BYTES && start.elapsed() < budget {
        let t = Instant::now();
        tx.seal(&data, WRITE);
        let t2 = Instant::now();
        seal += t2 - t;
        let wire = tx.take();
        let space = rx.space();
        if space.len() < wire.len() {
            return None;
        }
        space[..wire.len()].copy_from_slice(wire);
        rx.filled(wire.len());
        wire.clear();
        let t3 = Instant::now();
        let mut got = 0;
        while let Ok(Step::Plain(n)) = rx.read(&mut out[got..]) {
            if n == 0 {
                break;
            }
            got += n;
        }
        open += t3.elapsed();
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
