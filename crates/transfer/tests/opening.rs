//! The client's opening of a copy ([`CopyOpening`]) against the server's own machines on
//! a simulated link: proto's [`ServerSession`] checks the proof and welcomes, the server's
//! opening ([`CopyAnswering`]) takes the rules, keeps the client waiting through a long
//! walk and answers with the request rules of [`longhaul_transfer::request`]; every frame
//! goes through the wire codecs and crosses the link in half a round trip. The round trips from the client's
//! flight to the answer are counted exactly, and a message lost or out of order at each
//! step ends in the opening's documented error, never a hang.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use longhaul_proto::transfer::{
    decode_transfer_frame, encode_transfer_frame, CopyDirection, TransferMessage, TransferOptions,
    TransferParams,
};
use longhaul_proto::{
    decode_frame, encode_frame, ChannelBinding, ClientSession, Message, ServerSession, Token,
};
use longhaul_transfer::answering::{CopyAnswering, KEEPALIVE};
use longhaul_transfer::opening::{ControlFrame, CopyOpening, OpeningError};
use longhaul_transfer::request::{answer_chunk_size, check_request};

/// The round trip of the simulated link.
const RTT: Duration = Duration::from_millis(150);
/// The server certificate's SHA-256 in these tests.
const CERT: [u8; 32] = [5; 32];

fn token() -> Token {
    Token::new(b"9a6bc8cdba84f761976ff4030011e843").unwrap()
}

fn binding() -> ChannelBinding {
    ChannelBinding {
        cert: CERT,
        exporter: [1; 32],
    }
}

/// A pull of `data` on 8 streams, its chunks chosen from the path.
fn params() -> TransferParams {
    TransferParams {
        direction: CopyDirection::Pull,
        streams: 8,
        chunk_size: 1 << 24,
        rate_bps: 0,
        window_bytes: 0,
        rtt_us: RTT.as_micros() as u32,
        options: TransferOptions {
            auto_chunk: true,
            ..TransferOptions::default()
        },
        congestion: String::new(),
        path: b"data".to_vec(),
        jump: None,
    }
}

/// A client holding `token` whose dial is done, and the server it reached: the client's
/// hello went with its TLS handshake and the server took it, the server's 0.5-RTT hello
/// came back, and the client's proof is queued.
fn dialed(token: Token) -> Result<(ClientSession, Server), OpeningError> {
    let mut c = ClientSession::new(token, [7; 32], binding());
    let mut server = Server::new();
    while let Some(hello) = c.poll_transmit() {
        server.take(ControlFrame::Session(hello), Duration::ZERO);
    }
    for hello in ServerSession::hello(&self::token().into(), [9; 32], &CERT) {
        c.handle(hello)?;
    }
    Ok((c, server))
}

/// A frame through its wire codec, as the link carries it.
fn wire(frame: ControlFrame) -> ControlFrame {
    let mut buf = Vec::new();
    match frame {
        ControlFrame::Session(m) => {
            encode_frame(&m, &mut buf);
            ControlFrame::Session(decode_frame(&buf).unwrap().unwrap().0)
        }
        ControlFrame::Transfer(m) => {
            encode_transfer_frame(&m, &mut buf).unwrap();
            ControlFrame::Transfer(decode_transfer_frame(&buf).unwrap().unwrap().0)
        }
    }
}

/// The server's end of the opening: its control session, the opening's machine and the
/// request rules the daemon applies; its walk of the source (2 GiB) takes `walk`.
struct Server {
    session: ServerSession,
    answering: Option<CopyAnswering>,
    walk: Duration,
    /// When the walk ends (the rules came).
    walked_at: Option<Duration>,
}

impl Server {
    fn new() -> Self {
        Self {
            session: ServerSession::new(token().into(), [9; 32], binding()),
            answering: None,
            walk: Duration::ZERO,
            walked_at: None,
        }
    }

    /// Takes one frame at `now`; returns what leaves at once.
    fn take(&mut self, frame: ControlFrame, now: Duration) -> Vec<ControlFrame> {
        match (frame, self.answering.as_mut()) {
            (ControlFrame::Transfer(TransferMessage::TransferParams(p)), None) => {
                self.session.begin_transfer().unwrap();
                self.answering = Some(CopyAnswering::new(p));
            }
            (ControlFrame::Session(m), None) => {
                let _ = self.session.handle(m);
            }
            (ControlFrame::Transfer(other), None) => panic!("{} before the request", other.kind()),
            (frame, Some(answering)) => {
                if answering.handle(frame, epoch() + now).is_ok() {
                    let p = answering.params().clone();
                    match check_request(&p) {
                        Ok(()) => self.walked_at = Some(now + self.walk),
                        Err(why) => {
                            answering.refuse(why.to_string());
                        }
                    }
                }
            }
        }
        self.flight()
    }

    /// When the server acts next on its own: a keepalive, or the walk's end.
    fn next_timer(&self) -> Option<Duration> {
        let keepalive = self
            .answering
            .as_ref()
            .and_then(|a| a.poll_timeout())
            .map(|t| t - epoch());
        match (keepalive, self.walked_at) {
            (Some(k), Some(w)) => Some(k.min(w)),
            (k, w) => k.or(w),
        }
    }

    /// Its timers at `now`: the walk ends (the answer), or a keepalive is due.
    fn on_timer(&mut self, now: Duration) -> Vec<ControlFrame> {
        if let Some(answering) = self.answering.as_mut() {
            if self.walked_at.is_some_and(|w| now >= w) {
                self.walked_at = None;
                let chunk = answer_chunk_size(answering.params(), 2 << 30);
                answering.answer(chunk, 0, String::new());
            } else {
                answering.handle_timeout(epoch() + now);
            }
        }
        self.flight()
    }

    fn flight(&mut self) -> Vec<ControlFrame> {
        let mut out: Vec<ControlFrame> = std::iter::from_fn(|| self.session.poll_transmit())
            .map(ControlFrame::Session)
            .collect();
        if let Some(a) = self.answering.as_mut() {
            out.extend(std::iter::from_fn(|| a.poll_transmit()));
        }
        out
    }
}

/// The instant the simulation's time counts from (the machines take `Instant`s).
#[allow(clippy::disallowed_methods)] // Some instant to offset from; nothing reads the clock after.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// What became of an opening on the link.
#[derive(Debug)]
enum Outcome {
    /// The answer came this long after the client's flight left, with its chunk size,
    /// after this many keepalives.
    Answered(Duration, u64, usize),
    Failed(Duration, OpeningError),
    /// Nothing more in flight and no answer: the driver would wait on its socket's
    /// timeout (the simulation stops instead).
    Stuck,
}

/// Runs the opening with `server` from t = 0 on the link; `drop_to_client(n)` loses the
/// server's `n`th frame of the opening (from 0), `swap` delivers the server's frames that
/// arrive at the same moment last first.
fn run(
    (mut opening, mut server): (CopyOpening, Server),
    drop_to_client: impl Fn(usize) -> bool,
    swap: bool,
) -> Outcome {
    let half = RTT / 2;
    // (arrival, to the server?, frame)
    let mut link: VecDeque<(Duration, bool, ControlFrame)> = VecDeque::new();
    let mut sent_to_client = 0usize;
    let mut keepalives = 0usize;
    let mut now = Duration::ZERO;
    while let Some(f) = opening.poll_transmit() {
        link.push_back((now + half, true, wire(f)));
    }
    for _ in 0..1000 {
        let first = link.iter().map(|l| l.0).min();
        let flight = match (first, server.next_timer()) {
            (None, None) => return Outcome::Stuck,
            (Some(f), Some(t)) if t < f => {
                now = t;
                server.on_timer(now)
            }
            (None, Some(t)) => {
                now = t;
                server.on_timer(now)
            }
            (Some(first), _) => {
                // The first frame due (frames to the client that arrive together go
                // last first when swapping).
                let forward = |i: &usize| link[*i].0 == first && (!swap || link[*i].1);
                let i = match (0..link.len()).find(forward) {
                    Some(i) => i,
                    None => (0..link.len()).rfind(|&i| link[i].0 == first).unwrap(),
                };
                let (at, to_server, frame) = link.remove(i).unwrap();
                now = at;
                if to_server {
                    server.take(frame, now)
                } else {
                    if matches!(frame, ControlFrame::Session(Message::Pong { .. })) {
                        keepalives += 1;
                    }
                    if let Err(e) = opening.handle(frame) {
                        return Outcome::Failed(now, e);
                    }
                    if let Some(a) = opening.answer() {
                        return Outcome::Answered(now, a.chunk_size, keepalives);
                    }
                    while let Some(f) = opening.poll_transmit() {
                        link.push_back((now + half, true, wire(f)));
                    }
                    Vec::new()
                }
            }
        };
        for f in flight {
            if !drop_to_client(sent_to_client) {
                link.push_back((now + half, false, wire(f)));
            }
            sent_to_client += 1;
        }
    }
    panic!("the opening did not settle in 1000 events");
}

/// The opening of [`params`] on a dialed client, and its server.
fn opening_of(params: TransferParams) -> (CopyOpening, Server) {
    let (client, server) = dialed(token()).unwrap();
    let rules = TransferMessage::FilterRules { rules: Vec::new() };
    (CopyOpening::new(client, params, rules).unwrap(), server)
}

fn opening() -> (CopyOpening, Server) {
    opening_of(params())
}

#[test]
fn the_answer_comes_one_round_trip_after_the_flight() {
    match run(opening(), |_| false, false) {
        Outcome::Answered(at, chunk, 0) => {
            assert_eq!(at, RTT, "the answer came at {at:?}");
            // The server's own rule, from the path and the 2 GiB source.
            assert_eq!(chunk, answer_chunk_size(&params(), 2 << 30));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_flight_is_the_proof_the_request_and_the_rules_in_that_order() {
    let (mut o, _) = opening();
    o.queue(TransferMessage::FileListEnd {
        files: 0,
        bytes: 0,
        deleted: 0,
    });
    let kinds: Vec<&str> = std::iter::from_fn(|| o.poll_transmit())
        .map(|f| match f {
            ControlFrame::Session(m) => m.kind(),
            ControlFrame::Transfer(m) => m.kind(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "ClientProof",
            "TransferParams",
            "FilterRules",
            "FileListEnd"
        ]
    );
}

#[test]
fn a_lost_welcome_is_an_error_at_the_answer_not_a_hang() {
    // The server's flight is its welcome, then its answer: the welcome lost.
    match run(opening(), |n| n == 0, false) {
        Outcome::Failed(at, OpeningError::ReadyBeforeWelcome) => assert_eq!(at, RTT),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_answer_before_the_welcome_is_refused() {
    match run(opening(), |_| false, true) {
        Outcome::Failed(_, OpeningError::ReadyBeforeWelcome) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_lost_answer_leaves_the_driver_on_its_timeout() {
    // No hang in the machine: nothing to send, nothing to wait for but the socket.
    match run(opening(), |n| n == 1, false) {
        Outcome::Stuck => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_refused_request_is_the_server_s_words() {
    let push_ahead = TransferParams {
        direction: CopyDirection::Push,
        options: TransferOptions {
            answered_ahead: true,
            ..params().options
        },
        ..params()
    };
    match run(opening_of(push_ahead), |_| false, false) {
        Outcome::Failed(at, OpeningError::Refused(why)) => {
            assert_eq!(at, RTT);
            assert!(why.contains("cannot be answered ahead"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_server_that_proves_another_token_is_refused_before_anything_is_sent() {
    let other = Token::new(b"3f8a1c2e9b7d4e6f0a5c8b1d2e3f4a5b").unwrap();
    match dialed(other) {
        Err(OpeningError::Session(_)) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a server proving another token was taken"),
    }
}

/// A pull whose source takes 12 s to walk: keepalives every [`KEEPALIVE`] keep the client
/// waiting, and the answer leaves when the walk ends.
#[test]
fn a_long_walk_keeps_the_client_waiting_and_answers_at_its_end() {
    let (opening, mut server) = opening();
    server.walk = Duration::from_secs(12);
    match run((opening, server), |_| false, false) {
        Outcome::Answered(at, _, keepalives) => {
            // The rules arrive at RTT/2, the walk ends 12 s later, the answer lands at RTT.
            assert_eq!(at, RTT + Duration::from_secs(12));
            assert_eq!(keepalives, (12 / KEEPALIVE.as_secs()) as usize);
        }
        other => panic!("{other:?}"),
    }
}

/// A request whose rules do not follow it is refused in the server's words.
#[test]
fn a_request_without_its_rules_is_refused() {
    let (client, server) = dialed(token()).unwrap();
    let not_rules = TransferMessage::FileListEnd {
        files: 0,
        bytes: 0,
        deleted: 0,
    };
    let opening = CopyOpening::new(client, params(), not_rules).unwrap();
    match run((opening, server), |_| false, false) {
        Outcome::Failed(at, OpeningError::Refused(why)) => {
            assert_eq!(at, RTT);
            assert!(why.contains("expected FilterRules"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}
