//! `longhaul tune --peer`: the client measures the RTT to a `longhaul serve` and asks it for
//! its own host findings for the path; the server answers with its findings as bounded JSON
//! and ends the session (the daemon's side is `crate::daemon::host_report`).

use std::net::SocketAddr;
use std::time::Duration;

use longhaul_proto::{ClientEvent, ProtoError, Token};
use longhaul_tune::{report_from_json, HostReport};

use super::client::BenchError;
use crate::transport::dial::{dial, flush, recv};

/// What the peer said about itself.
#[derive(Debug, Clone)]
pub struct PeerReport {
    /// The server's address that answered.
    pub addr: SocketAddr,
    /// Smallest RTT over a few pings on the control connection.
    pub rtt: Duration,
    /// The peer's findings for the path asked about.
    pub report: HostReport,
}

/// Connects to the `longhaul serve` at `target`, measures the RTT and asks for the server's
/// findings for a path of `rate_bps` and `rtt` (the measured RTT when `None`).
pub fn peer_report(
    target: &str,
    token: &Token,
    security: &crate::transport::tls::Security,
    rate_bps: u64,
    rtt: Option<Duration>,
) -> Result<PeerReport, BenchError> {
    let mut control = dial(
        target,
        token,
        security,
        crate::transport::dial::DataPlan {
            streams: 0,
            receiving: false,
        },
    )?;
    control.authenticate()?;
    let measured = control.measure_rtt(5)?;
    let rtt_us = rtt
        .unwrap_or(measured)
        .as_micros()
        .clamp(1, u128::from(u32::MAX)) as u32;
    let conn = &mut control.conn;
    let session = &mut control.session;
    session.request_host_report(rate_bps, rtt_us)?;
    flush(session, conn)?;
    let findings_json = loop {
        let msg = recv(conn, "waiting for the server's host report")?;
        session.handle(msg)?;
        if let Some(ClientEvent::HostReport { findings_json }) = session.poll_event() {
            break findings_json;
        }
    };
    let report = report_from_json(&findings_json).map_err(|e| {
        BenchError::Proto(ProtoError::InvalidField {
            field: "host report",
            why: e.to_string(),
        })
    })?;
    Ok(PeerReport {
        addr: control.addr,
        rtt: measured,
        report,
    })
}
