//! The daemon's answer to `longhaul tune --peer`: this host's findings for the path the
//! client named, as bounded JSON, and the session ends.

use std::time::Duration;

use longhaul_proto::{limits, ErrorCode, ServerSession};
use longhaul_tune::{inspect, report_to_json, Target};

use super::ServeError;
use crate::tune_host;

/// The server's side: judges this host for the path the client named and queues the
/// report (or an error the client can act on). Returns a line for the server's log.
pub(super) fn answer_host_report(
    session: &mut ServerSession,
    rate_bps: u64,
    rtt_us: u32,
) -> Result<String, ServeError> {
    let target = Target {
        rate_bps,
        rtt: Duration::from_micros(u64::from(rtt_us)),
    };
    let facts = match tune_host::gather(None) {
        Ok(f) => f,
        Err(e) => {
            let e = ServeError::HostFacts(e);
            session.abort(ErrorCode::Internal, e.to_string());
            return Err(e);
        }
    };
    let findings = inspect(&facts, &target);
    let json = report_to_json(&tune_host::host_name(), &findings, limits::MAX_HOST_REPORT);
    session.send_host_report(json);
    Ok(format!(
        "host report for {rate_bps} bit/s at {rtt_us} us RTT: {} finding(s)",
        findings.len()
    ))
}
