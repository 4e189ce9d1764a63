//! The invoking client's side of a third-party copy (see `longhaul_proto::ticket`): it
//! asks the source daemon for a ticket to the path, then asks the destination daemon to
//! pull it with that ticket, and follows the pull's progress to its end. No file byte
//! passes through this host.

use longhaul_proto::stripe::Share;
use longhaul_proto::ticket::{RelayDone, RelayProgress, RelayPull};
use longhaul_proto::transfer::TransferOptions;
use longhaul_proto::{ClientEvent, TicketGrant, Token};

use crate::transport::dial::{dial, flush, recv, DataPlan, Dialed};
use crate::transport::tls::{Encryption, Fingerprint, Security};
use crate::transport::BenchError;

/// How long a copy's ticket stays valid: the destination presents it within a round trip
/// or two of the asking.
pub const TICKET_LIFETIME_SECS: u32 = 120;

/// One end of a third-party copy as the invoking host reaches it.
pub struct Peer<'a> {
    /// `HOST:PORT` of its longhaul (the destination dials the source's).
    pub target: &'a str,
    /// What the invoking host proves to it.
    pub token: &'a Token,
    /// How the invoking host trusts it (the destination's `encryption` is the pull's).
    pub security: &'a Security,
    /// The path there, as its requests carry it.
    pub path: &'a [u8],
}

/// The destination's pull as the caller shapes it (the rest of [`RelayPull`] comes from
/// the two ends and the ticket).
#[derive(Debug, Clone, Default)]
pub struct PullShape {
    /// The copy's flags.
    pub options: TransferOptions,
    /// Data streams (0: the destination's choice).
    pub streams: u16,
    /// Total pacing rate, bit/s (0: none).
    pub rate_bps: u64,
    /// Fixed socket buffer per stream (0: from the path).
    pub window_bytes: u64,
    /// Chunk size (0: from the path).
    pub chunk_size: u64,
    /// The source's congestion control ("": its choice).
    pub congestion: String,
    /// Jump-start allowed.
    pub jump_start: bool,
    /// The source is a far end started over ssh (its path is the ssh user's).
    pub source_user_paths: bool,
    /// A striped copy: the share of the chunks this pair moves.
    pub share: Option<Share>,
    /// Whether the destination is a directory, as the caller found it (`None`: the
    /// destination looks).
    pub dest_is_dir: Option<bool>,
}

impl Peer<'_> {
    /// A ticket from this end (the source) for its path, valid
    /// [`TICKET_LIFETIME_SECS`], and the certificate it showed.
    pub fn ticket(&self) -> Result<(TicketGrant, Fingerprint), BenchError> {
        ask_ticket(
            self.target,
            self.token,
            self.security,
            self.path,
            TICKET_LIFETIME_SECS,
        )
    }
}

/// Asks `dst` to pull `src`'s path with `ticket` (which `src` showed `certificate` with),
/// shaped as `shape`; `on_progress` is called with each report. Returns the pull's end.
pub fn relay_with_ticket(
    (ticket, certificate): (TicketGrant, Fingerprint),
    src: &Peer,
    dst: &Peer,
    shape: PullShape,
    on_progress: &mut dyn FnMut(&RelayProgress),
) -> Result<RelayDone, BenchError> {
    let pull = RelayPull {
        source: src.target.to_string(),
        certificate: certificate.0,
        ticket,
        source_path: src.path.to_vec(),
        dest_path: dst.path.to_vec(),
        options: shape.options,
        streams: shape.streams,
        rate_bps: shape.rate_bps,
        window_bytes: shape.window_bytes,
        chunk_size: shape.chunk_size,
        congestion: shape.congestion,
        plain_data: dst.security.encryption == Encryption::Off,
        jump_start: shape.jump_start,
        source_user_paths: shape.source_user_paths,
        share: shape.share,
        dest_is_dir: shape.dest_is_dir,
    };
    relay(dst.target, dst.token, dst.security, pull, on_progress)
}

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
