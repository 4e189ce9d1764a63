//! Fuzzes the TLS record layer's receiver (`longhaul_engine::transport::record`), which
//! opens every record a peer sends after the handshake. The input is a script: records
//! sealed with the right key (application data, alerts, handshake messages, any inner
//! plaintext at all, key updates), then bytes flipped or appended on the wire, then the
//! sizes of the socket reads. The wire goes through both ways of reading — through the
//! receiver's own buffer (`Receiver::read`) and straight into the reader's buffer
//! (`Receiver::open_in`) — which must deliver the same bytes and agree on the outcome;
//! what they deliver is always a prefix of the application data sealed; an untouched wire
//! of well-formed records is delivered whole; and after a refusal nothing more is.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_engine::transport::record::{Direction, Receiver, Sender, Step, Suite};
use longhaul_fuzz::take;

const SECRET: [u8; 32] = [7; 32];
const APPLICATION_DATA: u8 = 23;

/// What a read of the whole wire came to.
#[derive(Debug, PartialEq)]
struct Outcome {
    delivered: Vec<u8>,
    closed: bool,
    failed: bool,
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let [suite] = take::<1>(&mut data);
    let suite =
        [Suite::Aes128Gcm, Suite::Aes256Gcm, Suite::Chacha20Poly1305][usize::from(suite % 3)];
    let [limit] = take::<1>(&mut data);
    let mut tx = Sender::new(Direction::new(suite, &SECRET, 0)).with_record_limit(u64::from(limit));
    // The application data sealed before the first close_notify (nothing after it counts).
    let mut sent = Vec::new();
    // Only records a correct peer sends: the whole of `sent` must arrive.
    let mut well_formed = true;
    let mut close_sealed = false;
    let [ops] = take::<1>(&mut data);
    for _ in 0..ops % 24 {
        let [op, a, b] = take::<3>(&mut data);
        let len = (usize::from(a) << 8 | usize::from(b)) % 17_100;
        let len = len.min(data.len());
        let (body, rest) = data.split_at(len);
        data = rest;
        match op % 6 {
            0 => {
                tx.seal(body, usize::MAX);
                if !close_sealed {
                    sent.extend_from_slice(body);
                }
            }
            1 => {
                // Any inner plaintext: content, a content type, padding.
                if body.iter().rposition(|&x| x != 0).map(|end| body[end]) == Some(APPLICATION_DATA)
                    && body.len() <= 16_385
                {
                    let end = body.iter().rposition(|&x| x != 0).unwrap_or(0);
                    if !close_sealed {
                        sent.extend_from_slice(&body[..end]);
                    }
                } else {
                    well_formed = false;
                }
                tx.seal_inner(body);
            }
            2 => tx.owe_update(),
            3 => {
                tx.close_notify();
                close_sealed = true;
            }
            4 => {
                // A NewSessionTicket (ignored), or a KeyUpdate that this sender does not
                // follow (its records after it then fail: not well formed).
                let msg: &[u8] = if a & 1 == 0 {
                    well_formed = false;
                    &[24, 0, 0, 1, 1, 22]
                } else {
                    &[4, 0, 0, 2, 9, 9, 22]
                };
                tx.seal_inner(msg);
            }
            _ => tx.settle(),
        }
    }
    let mut wire = std::mem::take(tx.take());
    // Tampering: flips, then junk after the records.
    let [flips] = take::<1>(&mut data);
    for _ in 0..flips % 4 {
        let [a, b, c, x] = take::<4>(&mut data);
        let at = (usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c)) % wire.len().max(1);
        if x != 0 && at < wire.len() {
            wire[at] ^= x;
            well_formed = false;
        }
    }
    let [junk] = take::<1>(&mut data);
    if junk % 5 == 0 && !data.is_empty() {
        wire.extend_from_slice(&data[..data.len().min(64)]);
        well_formed = false;
    }
    let [p1, p2] = take::<2>(&mut data);
    let piece = (usize::from(p1) << 8 | usize::from(p2)) % 40_000 + 1;

    let buffered = through_own_buffer(suite, &wire, piece);
    let direct = straight_into_reader(suite, &wire, piece);
    for got in [&buffered, &direct] {
        assert!(
            sent.starts_with(&got.delivered),
            "delivered what was never sealed as data"
        );
    }
    // A refused read delivers nothing of its own (the stream fails), so what came before
    // the refusal may differ; the verdict may not, nor a whole read.
    assert_eq!(
        buffered.failed, direct.failed,
        "one way refused, the other did not"
    );
    if !buffered.failed {
        assert_eq!(buffered, direct, "the two ways of reading disagree");
    }
    if well_formed {
        assert!(!buffered.failed, "a well-formed wire was refused");
        assert_eq!(buffered.delivered, sent);
        assert_eq!(buffered.closed, close_sealed);
    }
});

/// Reads `wire` in socket reads of `piece` bytes through the receiver's buffer.
fn through_own_buffer(suite: Suite, wire: &[u8], piece: usize) -> Outcome {
    let mut rx = Receiver::new(Direction::new(suite, &SECRET, 0), 0, &[], &[]);
    read_buffered(&mut rx, wire, piece)
}

/// Feeds `wire` to `rx` in socket reads of `piece` bytes and reads it out, as
/// `SecureStream`'s small reads do.
fn read_buffered(rx: &mut Receiver, wire: &[u8], piece: usize) -> Outcome {
    let mut out = Outcome {
        delivered: Vec::new(),
        closed: false,
        failed: false,
    };
    let mut fed = 0;
    let mut buf = vec![0u8; 20_000];
    loop {
        match rx.read(&mut buf) {
            Ok(Step::Plain(0)) | Ok(Step::NeedMore) => {
                if fed == wire.len() {
                    return out;
                }
                let space = rx.space();
                let n = space.len().min(piece).min(wire.len() - fed);
                space[..n].copy_from_slice(&wire[fed..fed + n]);
                rx.filled(n);
                fed += n;
            }
            Ok(Step::Plain(n)) => out.delivered.extend_from_slice(&buf[..n]),
            Ok(Step::Closed) => {
                out.closed = true;
                return out;
            }
            Err(_) => {
                out.failed = true;
                assert!(rx.read(&mut buf).is_err(), "a refused stream read on");
                return out;
            }
        }
    }
}

/// Reads `wire` as a cp stream's whole reads do: socket reads of `piece` bytes straight
/// into the reader's buffer, opened where they lie, through the receiver's buffer only
/// for what does not fit.
fn straight_into_reader(suite: Suite, wire: &[u8], piece: usize) -> Outcome {
    let mut rx = Receiver::new(Direction::new(suite, &SECRET, 0), 0, &[], &[]);
    let mut out = Outcome {
        delivered: Vec::new(),
        closed: false,
        failed: false,
    };
    let mut fed = 0;
    let mut dst = vec![0u8; 64 * 1024];
    let (mut plain, mut cipher, mut end) = (0, 0, 0);
    loop {
        if !rx.is_empty() {
            // Something left in the receiver's own buffer: read it the buffered way.
            let rest = read_buffered(&mut rx, &wire[fed..], piece);
            out.delivered.extend_from_slice(&dst[..plain]);
            out.delivered.extend_from_slice(&rest.delivered);
            out.closed = rest.closed;
            out.failed = rest.failed;
            return out;
        }
        if end == dst.len() || fed == wire.len() {
            out.delivered.extend_from_slice(&dst[..plain]);
            if fed == wire.len() {
                // Whatever the receiver took in: a close_notify it saw ends it.
                let mut tail = [0u8; 1];
                out.closed = matches!(rx.read(&mut tail), Ok(Step::Closed));
                return out;
            }
            // The reader's buffer is full: the next one starts with what is left.
            let left = end - cipher;
            dst.copy_within(cipher..end, 0);
            (plain, cipher, end) = (0, 0, left);
            continue;
        }
        let n = (dst.len() - end).min(piece).min(wire.len() - fed);
        dst[end..end + n].copy_from_slice(&wire[fed..fed + n]);
        fed += n;
        end += n;
        match rx.open_in(&mut dst, plain, cipher, end) {
            Ok((p, c)) => (plain, cipher) = (p, c),
            Err(_) => {
                out.delivered.extend_from_slice(&dst[..plain]);
                out.failed = true;
                return out;
            }
        }
    }
}
