//! A simulation of a run's set-up, from the control connection's SYN to the first data
//! byte (a copy's, on request, to its commit: [`copy`]), for cp and bench alike: both
//! ends' machines ([`client`], [`server`]) on a simulated link whose kernels and TLS are
//! modelled ([`net`], which states the model).
//! The machines are the real ones: when the data connections leave (the policy's
//! `DataSchedule`), the hellos, proofs and data hellos (proto's sessions and
//! `DataAttachments`), the copy's opening and answer (transfer's `CopyOpening` and
//! `CopyAnswering` with the request rules) and the transfer sessions that decide when a
//! chunk may leave. What is modelled: the wire, TCP's and TLS's flights, and the
//! drivers' glue (every frame a machine queued goes at once).

pub mod client;
pub mod copy;
pub mod net;
pub mod server;

use std::time::Instant;

use longhaul_policy::data_start::Leave;
use longhaul_proto::transfer::{EntryKind, FileEntry};
use longhaul_proto::{Token, Wait};
pub use longhaul_testkit::receiver::plain_answer;
use longhaul_transfer::session::RecvSession;

use client::Client;
use net::{rtts, Conn, Side, Wire, RTT};
use server::Server;

/// The server certificate's SHA-256.
pub const CERT: [u8; 32] = [5; 32];
/// The control connection's TLS exporter.
pub const CONTROL_EXPORTER: [u8; 32] = [1; 32];
/// The pulled or pushed source: one file of this size.
pub const SOURCE_BYTES: u64 = 64 << 20;

/// What the run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `cp` to the server.
    Push,
    /// `cp` from the server, the list answered after it arrives.
    Pull,
    /// `cp` from the server into a fresh destination: the list answered ahead.
    PullAhead,
    /// `bench`.
    Bench,
    /// `bench --reverse`.
    BenchReverse,
}

impl Mode {
    /// The client receives on the data connections.
    pub fn receiving(self) -> bool {
        matches!(self, Self::Pull | Self::PullAhead | Self::BenchReverse)
    }
}

/// What the client's path cache knows of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// Nothing (a first run).
    NotRemembered,
    /// A record whose run does not jump (the user fixed the rate, or this end may not set
    /// routes).
    Remembered,
    /// A record the run jumps from.
    RememberedJump,
}

/// One simulated set-up.
#[derive(Debug, Clone)]
pub struct Case {
    /// What runs.
    pub mode: Mode,
    /// The path cache.
    pub path: Path,
    /// The first contact with a server of the known-servers file: the data connections'
    /// TLS waits for the control connection's to pin the certificate.
    pub first_contact: bool,
    /// `-P`.
    pub user_streams: Option<u16>,
    /// TLS on the data connections (`--encryption`): cp's default; bench's data goes
    /// without it (each data hello is still bound to the session's secret).
    pub encrypted_data: bool,
    /// Packets the link loses: `(to, connection, name)`, each once.
    pub lose: Vec<(Side, Option<Conn>, &'static str)>,
    /// A copy runs on to its commit, not only to its first byte.
    pub to_commit: bool,
}

impl Case {
    /// `mode` on `path`, a known server, nothing lost.
    pub fn new(mode: Mode, path: Path) -> Self {
        Self {
            mode,
            path,
            first_contact: false,
            user_streams: None,
            encrypted_data: !matches!(mode, Mode::Bench | Mode::BenchReverse),
            lose: Vec::new(),
            to_commit: false,
        }
    }
}

/// What a simulated set-up did, in round trips from the control connection's SYN.
#[derive(Debug)]
pub struct Timeline {
    /// The first data byte: sent by a pushing or benching client, received by a pulling
    /// one or `bench -R`'s.
    pub first_byte: Option<f64>,
    /// A copy's end at the client (with [`Case::to_commit`]): a push's sender heard every
    /// file committed, a pull's receiver committed them and heard the sender's end.
    pub committed: Option<f64>,
    /// Files the copy put in place, as the client's session counts them.
    pub files_ok: u64,
    /// When the run's data connections were dialed (each generation).
    pub data_dialed: Vec<f64>,
    /// When they left, as the schedule says.
    pub leave: Option<Leave>,
    /// When the server set a jump's route.
    pub server_route: Option<f64>,
    /// When the client set a jump's route.
    pub client_route: Option<f64>,
    /// When each data connection's handshake completed at the server.
    pub accepted: Vec<f64>,
    /// The first machine error at either end.
    pub error: Option<String>,
    /// When the wire fell silent with neither a first byte nor an error: what each end's
    /// set-up machines then waited for (a driver waits at most the wait's limit, then
    /// ends the run with an error naming it).
    pub waits: Vec<(Side, Wait)>,
    /// What was lost.
    pub lost: Vec<String>,
    /// Every delivery.
    pub trace: Vec<String>,
}

/// Runs `case` until the first data byte (or with [`Case::to_commit`] the copy's end), an
/// error, or nothing left on the wire (then a driver's timeout would end the run; the
/// simulation stops).
pub fn run(case: Case) -> Timeline {
    let mut wire = Wire::new(case.lose.clone());
    let mut server = Server::new(case.encrypted_data);
    let to_commit = case.to_commit;
    let mut client = Client::new(case);
    client.start(&mut wire);
    let ended = |c: &Client| match to_commit {
        true => c.committed.is_some(),
        false => c.first_byte.is_some(),
    };
    while !ended(&client) && client.error.is_none() && server.error.is_none() {
        let Some((to, conn, packet)) = wire.next() else {
            break;
        };
        assert!(
            wire.now() < 60 * RTT,
            "a set-up of a minute: {:#?}",
            wire.trace
        );
        match to {
            Side::Client => client.on(conn, packet, &mut wire),
            Side::Server => server.on(conn, packet, &mut wire),
        }
    }
    let silent = !ended(&client) && client.error.is_none() && server.error.is_none();
    let waits = [
        (Side::Client, client.waiting()),
        (Side::Server, server.waiting()),
    ]
    .into_iter()
    .filter_map(|(side, w)| Some((side, w?)))
    .filter(|_| silent)
    .collect();
    Timeline {
        waits,
        first_byte: client.first_byte.map(rtts),
        committed: client.committed.map(rtts),
        files_ok: client.files_ok(),
        data_dialed: client.data_dialed.iter().copied().map(rtts).collect(),
        leave: client.leave(),
        server_route: server.route_set_at.map(rtts),
        client_route: client.route_set_at.map(rtts),
        accepted: server.accepted.iter().map(|(_, t)| rtts(*t)).collect(),
        error: client.error.or(server.error),
        lost: wire
            .lost
            .iter()
            .map(|(t, to, c, n)| format!("{n} to {to:?} on {c:?} at {:.2} RTT", rtts(*t)))
            .collect(),
        trace: wire.trace,
    }
}

/// The token both ends hold.
pub fn token() -> Token {
    Token::new(b"9a6bc8cdba84f761976ff4030011e843").unwrap()
}

/// A connection's TLS exporter (each connection its own; empty without TLS).
pub fn exporter(conn: Conn, tls: bool) -> Vec<u8> {
    if !tls {
        return Vec::new();
    }
    let mut e = vec![0; 32];
    match conn {
        Conn::Control => return CONTROL_EXPORTER.to_vec(),
        Conn::Data(g, s) => {
            e[0] = 2;
            e[1..3].copy_from_slice(&g.to_le_bytes());
            e[3..5].copy_from_slice(&s.to_le_bytes());
        }
    }
    e
}

/// The instant the simulation's time counts from (the machines take `Instant`s).
#[allow(clippy::disallowed_methods)] // Some instant to offset from; nothing reads the clock after.
pub fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The source: one file.
pub fn source() -> Vec<FileEntry> {
    vec![FileEntry {
        path: b"data".to_vec(),
        kind: EntryKind::File,
        size: SOURCE_BYTES,
        mtime_secs: 1_700_000_000,
        mtime_nanos: 0,
        mode: 0o644,
        fingerprint: 0,
        link_target: Vec::new(),
    }]
}

/// Answers what a receiver asks of an empty destination at once: nothing there, every
/// open intact, directories made, commits placed.
pub fn empty_destination(recv: &mut RecvSession) {
    while let Some(ev) = recv.poll_event() {
        if let Some(answer) = plain_answer(&ev) {
            recv.handle(answer).expect("an empty destination's answer");
        }
    }
}
