//! The invoking client's side of a third-party copy (see `longhaul_proto::ticket`): it
//! asks the source daemon for a ticket to the path, then asks the destination daemon to
//! pull it with that ticket, and follows the pull's progress to its end. No file byte
//! passes through this host.

use longhaul_proto::ticket::{RelayDone, RelayProgress, RelayPull};
use longhaul_proto::{ClientEvent, TicketGrant, Token};

use crate::transport::dial::{dial, flush, recv, DataPlan, Dialed};
use crate::transport::tls::{Fingerprint, Security};
use crate::transport::BenchError;

/// No data connections: these sessions only ask and answer.
const NO_DATA: DataPlan = DataPlan {
    streams: 0,
    receiving: false,
};

/// A ticket from the daemon at `source` for `path` (wire form), valid `lifetime_secs`,
/// and the certificate that daemon showed (the destination pins it).
pub fn ask_ticket(
    source: &str,
    token: &Token,
    security: &Security,
    path: &[u8],
    lifetime_secs: u32,
) -> Result<(TicketGrant, Fingerprint), BenchError> {
    let mut control = dial(source, token, security, NO_DATA)?;
    let certificate =
        control.conn.stream().peer_certificate().ok_or_else(|| {
            BenchError::Refused("the source's connection has no certificate".into())
        })?;
    let Dialed { conn, session, .. } = &mut control;
    session.request_ticket(path.to_vec(), lifetime_secs)?;
    flush(session, conn)?;
    loop {
        let msg = recv(conn, "waiting for the source's ticket")?;
        session.handle(msg)?;
        while let Some(ev) = session.poll_event() {
            if let ClientEvent::TicketIssued(grant) = ev {
                return Ok((grant, certificate));
            }
        }
    }
}

/// Asks the daemon at `dest` to run `pull`, calling `on_progress` with each report, and
/// returns its end.
pub fn relay(
    dest: &str,
    token: &Token,
    security: &Security,
    pull: RelayPull,
    on_progress: &mut dyn FnMut(&RelayProgress),
) -> Result<RelayDone, BenchError> {
    let mut control = dial(dest, token, security, NO_DATA)?;
    let Dialed { conn, session, .. } = &mut control;
    session.request_relay(pull)?;
    flush(session, conn)?;
    loop {
        let msg = recv(conn, "following the destination's pull")?;
        session.handle(msg)?;
        while let Some(ev) = session.poll_event() {
            match ev {
                ClientEvent::RelayProgress(p) => on_progress(&p),
                ClientEvent::RelayDone(done) => return Ok(done),
                _ => {}
            }
        }
    }
}
