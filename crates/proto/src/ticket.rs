//! Third-party copies: the ticket a source server issues for one path, and the relayed
//! pull a destination server runs from it on a client's behalf.
//!
//! ```text
//! client C, source server A, destination server B; each C connection authenticated
//! with that server's token as usual.
//!   C->A TicketRequest{path, lifetime}          (instead of parameters)
//!   A->C TicketIssued{id, secret, lifetime}     (the session ends)
//!   C->B RelayPull{A's address, A's certificate, the ticket, paths, options}
//!   B->A TLS pinned to A's certificate; ClientHello, then
//!        TicketProof{id, HMAC(secret, "client"|exporter|cert|nonces)} instead of ClientProof;
//!        then a pull of exactly the ticket's path, as any client's
//!   B->C RelayProgress{...} every second, then RelayDone{...}
//! ```
//!
//! A ticket is read-only, scoped to one path (and what lies below it), used once and
//! short-lived; its secret is 32 bytes from the source's random generator and crosses
//! only TLS connections the client authenticated. B knows A by the certificate C saw (not
//! by A's proof of a token, which B does not hold), and A knows B by the ticket.

use crate::auth::Token;
use crate::error::ProtoError;
use crate::limits::MAX_TEXT;
use crate::stripe::Share;
use crate::transfer::{TransferOptions, MAX_PATH_BYTES};
use crate::wire::{invalid, Reader, Writer};

/// Bytes of a ticket's id.
pub const TICKET_ID_LEN: usize = 16;
/// Bytes of a ticket's secret.
pub const TICKET_SECRET_LEN: usize = 32;
/// The longest a ticket may stay valid (one hour): long enough for any scheduler's queue
/// to reach it, short enough that a leaked ticket soon means nothing.
pub const MAX_TICKET_LIFETIME_SECS: u32 = 3600;
/// Longest source address a relayed pull may name (`HOST:PORT`; a DNS name is at most
/// 253 bytes).
pub const MAX_SOURCE_LEN: usize = 262;
/// Most failed files a [`RelayDone`] names (the count is always whole).
pub const MAX_RELAY_FAILURES: usize = 32;

/// A ticket's id: which ticket a [`crate::Message::TicketProof`] proves.
pub type TicketId = [u8; TICKET_ID_LEN];

/// What a source server grants: read access to one path, once, for a while.
#[derive(Clone, PartialEq, Eq)]
pub struct TicketGrant {
    /// Which ticket.
    pub id: TicketId,
    /// The secret its holder proves (never sent by the holder, only proved).
    pub secret: [u8; TICKET_SECRET_LEN],
    /// Seconds it stays valid from its issue.
    pub lifetime_secs: u32,
}

impl std::fmt::Debug for TicketGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TicketGrant(<hidden>, {} s)", self.lifetime_secs)
    }
}

impl TicketGrant {
    /// The secret as a token: both ends prove and derive with it as with a shared token.
    pub fn token(&self) -> Token {
        Token::from_secret(self.secret)
    }
}

/// What a client proves to a server: a shared token, or a ticket the server issued.
#[derive(Clone, Debug)]
pub enum Credential {
    /// A token both ends hold; the server proves it too.
    Token(Token),
    /// A ticket of the server's: the server is known by its pinned certificate alone.
    Ticket(TicketGrant),
}

impl Credential {
    /// The secret the proofs and the session's keys derive from.
    pub fn token(&self) -> Token {
        match self {
            Credential::Token(t) => t.clone(),
            Credential::Ticket(g) => g.token(),
        }
    }
}

impl From<Token> for Credential {
    fn from(t: Token) -> Self {
        Credential::Token(t)
    }
}

/// Client to destination server: pull a path from a source server with its ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayPull {
    /// `HOST:PORT` of the source as the destination should dial it.
    pub source: String,
    /// SHA-256 of the source's certificate, as the client saw it.
    pub certificate: [u8; 32],
    /// The ticket the source issued for `source_path`.
    pub ticket: TicketGrant,
    /// The path at the source (its wire form, as in a pull's request).
    pub source_path: Vec<u8>,
    /// The destination below this server's root or area (wire form).
    pub dest_path: Vec<u8>,
    /// The copy's flags (recursive, no-clobber, sync, ...), as a pull would ask them.
    pub options: TransferOptions,
    /// Data streams (0: the destination chooses from its RTT to the source).
    pub streams: u16,
    /// Total pacing rate, bit/s (0: none).
    pub rate_bps: u64,
    /// Fixed socket buffer per stream (0: from the path).
    pub window_bytes: u64,
    /// Chunk size (0: from the path).
    pub chunk_size: u64,
    /// Congestion control the source uses ("" its choice).
    pub congestion: String,
    /// The data streams between the servers go without TLS (chunks still carry a MAC).
    pub plain_data: bool,
    /// The destination may start at the rate it remembers for the path (jump-start).
    pub jump_start: bool,
    /// The source is a far end started over ssh (`longhaul ssh-server`): `source_path`
    /// is the ssh user's path (absolute or from the home), not one below a root.
    pub source_user_paths: bool,
    /// A striped copy: the destination moves only this share of the chunks, into part
    /// files the other pairs' destinations share ([`crate::stripe`]; needs
    /// [`crate::features::STRIPES`] at both servers, and a `chunk_size`).
    pub share: Option<Share>,
    /// Whether the destination is taken as a directory (the copy goes inside it) or as
    /// the new name, as the client found it; `None`: the destination looks. The pairs
    /// of a striped copy must all place alike while one of them is creating it.
    pub dest_is_dir: Option<bool>,
}

/// Destination to client while a relayed pull runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RelayProgress {
    /// Milliseconds since the pull began.
    pub elapsed_ms: u64,
    /// Files listed (0 until the list is in).
    pub files_total: u32,
    /// Files finished.
    pub files_done: u32,
    /// Bytes of all listed files.
    pub bytes_total: u64,
    /// Bytes in place (received and verified, or already there).
    pub bytes_done: u64,
    /// Bytes that crossed the path so far.
    pub moved_bytes: u64,
    /// Data streams.
    pub streams: u16,
}

/// Destination to client: the relayed pull's end.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RelayDone {
    /// Seconds of the transfer, in milliseconds.
    pub elapsed_ms: u64,
    /// Files copied and verified.
    pub files_ok: u32,
    /// Files skipped (already in place).
    pub files_skipped: u32,
    /// Files that failed (all of them, while `failures` names at most
    /// [`MAX_RELAY_FAILURES`]).
    pub files_failed: u32,
    /// Bytes of all files.
    pub bytes: u64,
    /// Bytes that crossed the path.
    pub moved_bytes: u64,
    /// Bytes a rerun did not send again.
    pub resumed_bytes: u64,
    /// Data streams.
    pub streams: u16,
    /// RTT between the servers, microseconds.
    pub rtt_us: u32,
    /// The failed files with why (`path: reason`).
    pub failures: Vec<String>,
    /// What limited the pull, in words (the destination's verdict).
    pub limited_by: String,
}

impl Writer<'_> {
    fn blob(&mut self, b: &[u8]) {
        self.u16(b.len() as u16);
        self.bytes(b);
    }
}

impl Reader<'_> {
    fn blob(&mut self, what: &'static str, max: usize) -> Result<Vec<u8>, ProtoError> {
        let n = self.u16(what)? as usize;
        if n == 0 || n > max {
            return Err(invalid(what, format!("{n} bytes is outside 1..={max}")));
        }
        Ok(self.take(n, what)?.to_vec())
    }
}

/// A ticket's lifetime must be 1..=[`MAX_TICKET_LIFETIME_SECS`] seconds.
pub fn validate_lifetime(secs: u32) -> Result<(), ProtoError> {
    if (1..=MAX_TICKET_LIFETIME_SECS).contains(&secs) {
        Ok(())
    } else {
        Err(invalid(
            "ticket lifetime",
            format!("{secs} s is outside 1..={MAX_TICKET_LIFETIME_SECS}"),
        ))
    }
}

pub(crate) fn put_path(w: &mut Writer<'_>, p: &[u8]) {
    w.blob(&p[..p.len().min(MAX_PATH_BYTES)]);
}

pub(crate) fn get_path(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<u8>, ProtoError> {
    let p = r.blob(what, MAX_PATH_BYTES)?;
    if p.contains(&0) {
        return Err(invalid(what, "holds a NUL byte".into()));
    }
    Ok(p)
}

pub(crate) fn put_grant(w: &mut Writer<'_>, g: &TicketGrant) {
    w.bytes(&g.id);
    w.bytes(&g.secret);
    w.u32(g.lifetime_secs);
}

pub(crate) fn get_grant(r: &mut Reader<'_>) -> Result<TicketGrant, ProtoError> {
    let g = TicketGrant {
        id: r.array("ticket id")?,
        secret: r.array("ticket secret")?,
        lifetime_secs: r.u32("ticket lifetime")?,
    };
    validate_lifetime(g.lifetime_secs)?;
    Ok(g)
}

pub(crate) fn put_relay(w: &mut Writer<'_>, p: &RelayPull) {
    w.str(&p.source, MAX_SOURCE_LEN);
    w.bytes(&p.certificate);
    put_grant(w, &p.ticket);
    put_path(w, &p.source_path);
    put_path(w, &p.dest_path);
    w.u32(p.options.bits());
    w.u16(p.streams);
    w.u64(p.rate_bps);
    w.u64(p.window_bytes);
    w.u64(p.chunk_size);
    w.str(&p.congestion, crate::limits::MAX_CONGESTION_NAME);
    w.u8(u8::from(p.plain_data));
    w.u8(u8::from(p.jump_start));
    w.u8(u8::from(p.source_user_paths));
    match p.share {
        Some(s) => {
            w.u16(s.count());
            w.u16(s.index());
        }
        None => {
            w.u16(0);
            w.u16(0);
        }
    }
    w.u8(match p.dest_is_dir {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    });
}

pub(crate) fn get_relay(r: &mut Reader<'_>) -> Result<RelayPull, ProtoError> {
    let source = r.text("relay source", MAX_SOURCE_LEN)?;
    if source.is_empty() {
        return Err(invalid("relay source", "empty".into()));
    }
    let p = RelayPull {
        source,
        certificate: r.array("source certificate")?,
        ticket: get_grant(r)?,
        source_path: get_path(r, "source path")?,
        dest_path: get_path(r, "destination path")?,
        options: TransferOptions::from_bits(r.u32("relay options")?)?,
        streams: r.u16("relay streams")?,
        rate_bps: r.u64("relay rate")?,
        window_bytes: r.u64("relay window")?,
        chunk_size: r.u64("relay chunk")?,
        congestion: r.str("relay congestion", crate::limits::MAX_CONGESTION_NAME)?,
        plain_data: r.bool("relay plain data")?,
        jump_start: r.bool("relay jump start")?,
        source_user_paths: r.bool("relay user paths")?,
        share: match (r.u16("relay share count")?, r.u16("relay share index")?) {
            (0, 0) => None,
            (count, index) => Some(Share::new(index, count)?),
        },
        dest_is_dir: match r.u8("relay placement")? {
            0 => None,
            1 => Some(false),
            2 => Some(true),
            v => return Err(invalid("relay placement", format!("unknown value {v}"))),
        },
    };
    if p.share.is_some() && p.chunk_size == 0 {
        return Err(invalid(
            "relay chunk",
            "a share of a striped copy needs the chunk size every pair uses".into(),
        ));
    }
    if p.streams > crate::limits::MAX_STREAMS {
        return Err(invalid(
            "relay streams",
            format!("{} is above {}", p.streams, crate::limits::MAX_STREAMS),
        ));
    }
    if p.window_bytes > crate::limits::MAX_WINDOW_BYTES {
        return Err(invalid(
            "relay window",
            format!("{} bytes is above 2 GiB", p.window_bytes),
        ));
    }
    if p.chunk_size != 0 && !crate::transfer::valid_chunk_size(p.chunk_size) {
        return Err(invalid(
            "relay chunk",
            format!("{} is not a power of two in 4 KiB..=1 GiB", p.chunk_size),
        ));
    }
    if !crate::limits::is_congestion_name(&p.congestion) {
        return Err(invalid(
            "relay congestion",
            "not a congestion-control name".into(),
        ));
    }
    Ok(p)
}

pub(crate) fn put_progress(w: &mut Writer<'_>, p: &RelayProgress) {
    w.u64(p.elapsed_ms);
    w.u32(p.files_total);
    w.u32(p.files_done);
    w.u64(p.bytes_total);
    w.u64(p.bytes_done);
    w.u64(p.moved_bytes);
    w.u16(p.streams);
}

pub(crate) fn get_progress(r: &mut Reader<'_>) -> Result<RelayProgress, ProtoError> {
    Ok(RelayProgress {
        elapsed_ms: r.u64("elapsed")?,
        files_total: r.u32("files total")?,
        files_done: r.u32("files done")?,
        bytes_total: r.u64("bytes total")?,
        bytes_done: r.u64("bytes done")?,
        moved_bytes: r.u64("moved bytes")?,
        streams: r.u16("streams")?,
    })
}

pub(crate) fn put_done(w: &mut Writer<'_>, d: &RelayDone) {
    w.u64(d.elapsed_ms);
    w.u32(d.files_ok);
    w.u32(d.files_skipped);
    w.u32(d.files_failed);
    w.u64(d.bytes);
    w.u64(d.moved_bytes);
    w.u64(d.resumed_bytes);
    w.u16(d.streams);
    w.u32(d.rtt_us);
    let n = d.failures.len().min(MAX_RELAY_FAILURES);
    w.u16(n as u16);
    for f in &d.failures[..n] {
        w.text(f, MAX_TEXT);
    }
    w.text(&d.limited_by, MAX_TEXT);
}

pub(crate) fn get_done(r: &mut Reader<'_>) -> Result<RelayDone, ProtoError> {
    let mut d = RelayDone {
        elapsed_ms: r.u64("elapsed")?,
        files_ok: r.u32("files ok")?,
        files_skipped: r.u32("files skipped")?,
        files_failed: r.u32("files failed")?,
        bytes: r.u64("bytes")?,
        moved_bytes: r.u64("moved bytes")?,
        resumed_bytes: r.u64("resumed bytes")?,
        streams: r.u16("streams")?,
        rtt_us: r.u32("rtt")?,
        ..RelayDone::default()
    };
    let n = r.count("failures", MAX_RELAY_FAILURES)?;
    for _ in 0..n {
        d.failures.push(r.text("failure", MAX_TEXT)?);
    }
    d.limited_by = r.text("limited by", MAX_TEXT)?;
    Ok(d)
}
