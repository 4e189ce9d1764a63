//! TLS 1.3's record layer for a connection whose handshake rustls has done, with no I/O:
//! records sealed straight into the buffer the socket write takes and opened in place in
//! the buffer the socket read filled.
//!
//! rustls's buffered connection copies every byte three times on the way in and twice on
//! the way out: on a pulling client at 1 Gbit/s x 150 ms those copies were 23 % of the
//! process's CPU, three times the cipher's 8 % (`perf`, 2026-11-28). Here a byte is copied
//! once each way, and [`Sender::begin_record`] lets a sender read a file into the record.
//!
//! The handshake, the certificate checks and the key schedule stay rustls's (`tls`); this
//! takes over at the traffic secrets (RFC 8446 section 7.1) and does what a TLS 1.3
//! endpoint must do after the handshake:
//! - application data in records of at most 16 KiB, nonce = IV xor sequence number,
//!   the record header as additional data, the content type inside (section 5.2);
//! - close_notify sent and required: a stream that ends without it is cut short;
//! - KeyUpdate (section 4.6.3) received (the key changes after that record; a request for
//!   ours is answered before our next record) and sent before the AEAD's confidentiality
//!   limit ([`Suite::record_limit`]);
//! - anything else refused with an error that says what came: ChangeCipherSpec or
//!   plaintext records after the handshake, unknown content types, handshake messages
//!   other than KeyUpdate and NewSessionTicket (ignored: no resumption here), a handshake
//!   message split over records.

use std::ops::Range;

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf;

/// Largest plaintext of one record (2^14).
pub const MAX_PLAIN: usize = 16 * 1024;
/// Record header: type, legacy version, length.
pub const HEADER: usize = 5;
/// AEAD tag of every suite here.
const TAG: usize = 16;
/// Bytes a record adds to its content: header, inner content type, tag.
pub const OVERHEAD: usize = HEADER + 1 + TAG;
/// Largest ciphertext length a peer may announce (2^14 + 256).
const MAX_CIPHER: usize = MAX_PLAIN + 256;
/// Largest whole record.
pub const MAX_RECORD: usize = HEADER + MAX_CIPHER;

/// TLS content types (section 5.1).
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
/// Handshake message types that may follow the handshake (section 4.6).
const NEW_SESSION_TICKET: u8 = 4;
const KEY_UPDATE: u8 = 24;

/// What went wrong with the peer's records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A record failed authentication.
    #[error(
        "a TLS record failed authentication: the stream was altered in transit (tampering \
         or corruption), so nothing from it was accepted"
    )]
    Altered,
    /// The peer sent an alert other than close_notify.
    #[error("the peer ended TLS with alert {0}")]
    Alert(u8),
    /// Something a TLS 1.3 peer must not send after the handshake.
    #[error("TLS: {0}")]
    Protocol(String),
    /// The keys do not agree with rustls's (a bug, not the peer).
    #[error("TLS: the record keys do not match the handshake's")]
    Keys,
}

/// The AEAD suites the provider offers (see `tls::provider`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// TLS_AES_128_GCM_SHA256.
    Aes128Gcm,
    /// TLS_AES_256_GCM_SHA384.
    Aes256Gcm,
    /// TLS_CHACHA20_POLY1305_SHA256.
    Chacha20Poly1305,
}

impl Suite {
    fn aead(self) -> &'static aead::Algorithm {
        match self {
            Self::Aes128Gcm => &aead::AES_128_GCM,
            Self::Aes256Gcm => &aead::AES_256_GCM,
            Self::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }

    fn hkdf(self) -> hkdf::Algorithm {
        match self {
            Self::Aes256Gcm => hkdf::HKDF_SHA384,
            Self::Aes128Gcm | Self::Chacha20Poly1305 => hkdf::HKDF_SHA256,
        }
    }

    /// The suite's name as IANA writes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Aes128Gcm => "TLS13_AES_128_GCM_SHA256",
            Self::Aes256Gcm => "TLS13_AES_256_GCM_SHA384",
            Self::Chacha20Poly1305 => "TLS13_CHACHA20_POLY1305_SHA256",
        }
    }

    /// Records one key may seal before a KeyUpdate: 2^24 for AES-GCM (under RFC 9147's
    /// 2^24.5 confidentiality limit, with a margin; 256 GiB of full records), no practical
    /// limit for ChaCha20-Poly1305.
    pub fn record_limit(self) -> u64 {
        match self {
            Self::Aes128Gcm | Self::Aes256Gcm => 1 << 24,
            Self::Chacha20Poly1305 => 1 << 60,
        }
    }
}

/// HKDF-Expand-Label (section 7.1) with an empty context.
fn expand_label(suite: Suite, secret: &[u8], label: &str, out: &mut [u8]) {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let full = 6 + label.len();
    let length = (out.len() as u16).to_be_bytes();
    let info: [&[u8]; 5] = [&length, &[full as u8], b"tls13 ", label.as_bytes(), &[0]];
    hkdf::Prk::new_less_safe(suite.hkdf(), secret)
        .expand(&info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("HKDF-Expand-Label of a traffic secret: lengths within the hash's limit");
}

/// The key and IV a traffic secret gives (section 7.3).
fn key_and_iv(suite: Suite, secret: &[u8]) -> (Vec<u8>, [u8; 12]) {
    let mut key = vec![0u8; suite.aead().key_len()];
    expand_label(suite, secret, "key", &mut key);
    let mut iv = [0u8; 12];
    expand_label(suite, secret, "iv", &mut iv);
    (key, iv)
}

/// One direction's keys: the traffic secret, the key and IV derived from it, the sequence
/// number.
pub struct Direction {
    suite: Suite,
    secret: Vec<u8>,
    key: LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl Direction {
    /// The direction whose traffic secret is `secret`, at sequence number `seq`.
    pub fn new(suite: Suite, secret: &[u8], seq: u64) -> Self {
        let (key, iv) = Self::derive(suite, secret);
        Self {
            suite,
            secret: secret.to_vec(),
            key,
            iv,
            seq,
        }
    }

    fn derive(suite: Suite, secret: &[u8]) -> (LessSafeKey, [u8; 12]) {
        let (key, iv) = key_and_iv(suite, secret);
        let key = UnboundKey::new(suite.aead(), &key).expect("a key of the algorithm's length");
        (LessSafeKey::new(key), iv)
    }

    /// Whether `key` and `iv` are the ones this secret gives (checked against the keys
    /// rustls derived, before the first record).
    pub fn derives(suite: Suite, secret: &[u8], key: &[u8], iv: &[u8]) -> bool {
        let (k, i) = key_and_iv(suite, secret);
        k == key && i == iv
    }

    /// The suite these keys are for.
    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// The next nonce; the sequence number moves on.
    fn next_nonce(&mut self) -> Nonce {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        self.seq += 1;
        Nonce::assume_unique_for_key(n)
    }

    /// The next generation of keys (section 7.2), from sequence number 0.
    fn update(&mut self) {
        let mut next = vec![0u8; self.secret.len()];
        expand_label(self.suite, &self.secret, "traffic upd", &mut next);
        *self = Self::new(self.suite, &next, 0);
    }
}

/// The sending half: seals records into a buffer the caller writes to the socket.
pub struct Sender {
    keys: Direction,
    /// Records sealed and not yet taken by [`Sender::take`].
    out: Vec<u8>,
    /// The peer asked for our KeyUpdate: it goes before our next record.
    update_owed: bool,
    /// Where the record begun by [`Sender::begin_record`] starts in `out`.
    open: Option<usize>,
    /// Records one key seals before it is updated.
    limit: u64,
}

impl Sender {
    /// A sender with these keys.
    pub fn new(keys: Direction) -> Self {
        let limit = keys.suite.record_limit();
        Self {
            keys,
            out: Vec::new(),
            update_owed: false,
            open: None,
            limit,
        }
    }

    /// The same sender, updating its key every `records` records (tests cross the limit
    /// without sealing 2^24 records).
    pub fn with_record_limit(mut self, records: u64) -> Self {
        self.limit = records.max(2);
        self
    }

    /// The peer asked for a KeyUpdate ([`Receiver::take_update_request`]).
    pub fn owe_update(&mut self) {
        self.update_owed = true;
    }

    /// Seals records of `data`, at most `max` bytes of it, into the buffer; returns how
    /// many bytes were taken.
    pub fn seal(&mut self, data: &[u8], max: usize) -> usize {
        let n = data.len().min(max);
        for piece in data[..n].chunks(MAX_PLAIN) {
            self.begin_record(piece.len()).copy_from_slice(piece);
            self.end_record();
        }
        n
    }

    /// Begins a record of application data whose `len` bytes of plaintext (at most
    /// [`MAX_PLAIN`]) the caller writes into the slot returned (a file read straight into
    /// the record); [`Sender::end_record`] seals it, [`Sender::abandon_record`] drops it.
    pub fn begin_record(&mut self, len: usize) -> &mut [u8] {
        self.abandon_record();
        self.before_record();
        let start = self.out.len();
        self.out.resize(start + HEADER + len.min(MAX_PLAIN), 0);
        self.open = Some(start);
        &mut self.out[start + HEADER..]
    }

    /// Seals the record begun.
    pub fn end_record(&mut self) {
        if let Some(start) = self.open.take() {
            self.finish_record(start, APPLICATION_DATA);
        }
    }

    /// Drops the record begun (its plaintext could not be had): nothing of it is sent and
    /// no sequence number is spent.
    pub fn abandon_record(&mut self) {
        if let Some(start) = self.open.take() {
            self.out.truncate(start);
        }
    }

    /// Seals a KeyUpdate owed to the peer or due, if any, with nothing after it.
    pub fn settle(&mut self) {
        self.before_record();
    }

    /// Seals the fatal alert that tells the peer why its records were refused.
    pub fn alert_for(&mut self, e: &RecordError) {
        let what = match e {
            RecordError::Altered => 20,      // bad_record_mac
            RecordError::Alert(_) => return, // it ended the connection itself
            RecordError::Protocol(_) => 10,  // unexpected_message
            RecordError::Keys => 80,         // internal_error
        };
        self.sealed(ALERT, &[2, what]);
    }

    /// Seals a close_notify alert (the data ended here, not cut short).
    pub fn close_notify(&mut self) {
        self.sealed(ALERT, &[1, 0]);
    }

    /// The sealed records, for the socket; the buffer is emptied for the next ones.
    pub fn take(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Records sealed so far with the current key.
    pub fn records_on_key(&self) -> u64 {
        self.keys.seq
    }

    fn sealed(&mut self, kind: u8, content: &[u8]) {
        self.abandon_record();
        self.before_record();
        let start = self.out.len();
        self.out.extend_from_slice(&[0; HEADER]);
        self.out.extend_from_slice(content);
        self.finish_record(start, kind);
    }

    /// A KeyUpdate owed to the peer, or due because this key nears its limit, goes first.
    fn before_record(&mut self) {
        let due = self.keys.seq + 1 >= self.limit;
        if self.update_owed || due {
            self.update_owed = false;
            let start = self.out.len();
            // KeyUpdate(update_not_requested): the peer's own limit is its business.
            self.out.extend_from_slice(&[0; HEADER]);
            self.out.extend_from_slice(&[KEY_UPDATE, 0, 0, 1, 0]);
            self.finish_record(start, HANDSHAKE);
            self.keys.update();
        }
    }

    /// Seals `inner` as one record's inner plaintext as given (content, type, padding):
    /// records a hostile peer would send, for the receiver's fuzz target.
    #[cfg(feature = "fuzzing")]
    pub fn seal_inner(&mut self, inner: &[u8]) {
        self.abandon_record();
        self.before_record();
        let start = self.out.len();
        self.out.extend_from_slice(&[0; HEADER]);
        self.out.extend_from_slice(inner);
        self.seal_from(start);
    }

    /// Seals `out[start + HEADER..]` (the content) as a record of `kind`.
    fn finish_record(&mut self, start: usize, kind: u8) {
        self.out.push(kind);
        self.seal_from(start);
    }

    /// Seals `out[start + HEADER..]` (the inner plaintext) as a record.
    fn seal_from(&mut self, start: usize) {
        let len = self.out.len() - start - HEADER + TAG;
        let header = [APPLICATION_DATA, 3, 3, (len >> 8) as u8, len as u8];
        self.out[start..start + HEADER].copy_from_slice(&header);
        let nonce = self.keys.next_nonce();
        let tag = self
            .keys
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(header), &mut self.out[start + HEADER..])
            .expect("a record within the AEAD's length limit");
        self.out.extend_from_slice(tag.as_ref());
    }
}

/// What a [`Receiver::read`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// This many bytes of plaintext were copied out.
    Plain(usize),
    /// No whole record is buffered: read the socket into [`Receiver::space`].
    NeedMore,
    /// The peer's close_notify: the data ended here.
    Closed,
}

/// The receiving half: the socket reads into its buffer, where records are opened in
/// place and their plaintext is copied out once.
pub struct Receiver {
    keys: Direction,
    buf: Vec<u8>,
    /// Opened plaintext not yet copied out.
    plain: Range<usize>,
    /// Ciphertext not yet opened: `buf[next..filled]`.
    next: usize,
    filled: usize,
    closed: bool,
    update_requested: bool,
    /// The first error: every read after it fails with it too (nothing after a refused
    /// record is ever delivered).
    failed: Option<RecordError>,
}

impl Receiver {
    /// A receiver with these keys, a buffer of `capacity` bytes (at least one record),
    /// and what came past the handshake: `plain` (opened by rustls) and `cipher` (records
    /// not yet opened).
    pub fn new(keys: Direction, capacity: usize, plain: &[u8], cipher: &[u8]) -> Self {
        let ahead = plain.len() + cipher.len();
        let mut buf = vec![0u8; capacity.max(MAX_RECORD).max(ahead + MAX_RECORD)];
        buf[..plain.len()].copy_from_slice(plain);
        buf[plain.len()..ahead].copy_from_slice(cipher);
        Self {
            keys,
            buf,
            plain: 0..plain.len(),
            next: plain.len(),
            filled: ahead,
            closed: false,
            update_requested: false,
            failed: None,
        }
    }

    /// Whether the peer asked for our KeyUpdate since the last call.
    pub fn take_update_request(&mut self) -> bool {
        std::mem::take(&mut self.update_requested)
    }

    /// Bytes of ciphertext buffered and not opened: a partial record (what a socket read
    /// may leave in user space).
    pub fn buffered(&self) -> usize {
        self.filled - self.next
    }

    /// Where the next socket read goes; moves a partial record to the front when less
    /// than half the buffer is left behind it (a copy of at most one record, so that
    /// socket reads stay large).
    pub fn space(&mut self) -> &mut [u8] {
        if self.plain.is_empty() && self.next == self.filled {
            (self.next, self.filled) = (0, 0);
        } else if self.plain.is_empty()
            && self.buf.len() - self.filled < (self.buf.len() / 2).max(MAX_RECORD)
        {
            self.buf.copy_within(self.next..self.filled, 0);
            (self.filled, self.next) = (self.filled - self.next, 0);
            self.plain = 0..0;
        }
        &mut self.buf[self.filled..]
    }

    /// `n` bytes were read into [`Receiver::space`].
    pub fn filled(&mut self, n: usize) {
        self.filled = (self.filled + n).min(self.buf.len());
    }

    /// Copies plaintext into `out`: what an opened record still holds, else the next whole
    /// record's once it is opened.
    pub fn read(&mut self, out: &mut [u8]) -> Result<Step, RecordError> {
        self.unless_failed(|rx| rx.step(out))
    }

    /// Runs `f` unless an error came before; its error, if any, is kept for every call
    /// after.
    fn unless_failed<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, RecordError>,
    ) -> Result<T, RecordError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = f(self);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn step(&mut self, out: &mut [u8]) -> Result<Step, RecordError> {
        loop {
            if !self.plain.is_empty() || out.is_empty() {
                let n = self.plain.len().min(out.len());
                out[..n].copy_from_slice(&self.buf[self.plain.start..self.plain.start + n]);
                self.plain.start += n;
                return Ok(Step::Plain(n));
            }
            if self.closed {
                return Ok(Step::Closed);
            }
            let Some(len) = whole_record(&self.buf[self.next..self.filled])? else {
                return Ok(Step::NeedMore);
            };
            let at = self.next;
            self.next += len;
            self.open(at, len)?;
        }
    }

    /// Opens the record at `buf[at..at + len]`.
    fn open(&mut self, at: usize, len: usize) -> Result<(), RecordError> {
        let (kind, n) = open_within(&mut self.keys, &mut self.buf[at..at + len], 0)?;
        if kind == APPLICATION_DATA {
            self.plain = at..at + n;
            return Ok(());
        }
        let content = self.buf[at..at + n].to_vec();
        self.control(kind, &content)
    }

    /// Whether nothing is buffered, so the next socket read may go straight into the
    /// reader's own buffer ([`Receiver::open_in`]).
    pub fn is_empty(&self) -> bool {
        self.plain.is_empty() && self.next == self.filled && !self.closed && self.failed.is_none()
    }

    /// How many more bytes complete the partial record buffered here (nothing else
    /// buffered); `None` when there is plaintext or a whole record to read, or nothing.
    pub fn wanted(&self) -> Option<usize> {
        if !self.plain.is_empty() || self.closed || self.failed.is_some() {
            return None;
        }
        let have = &self.buf[self.next..self.filled];
        match whole_record(have) {
            Ok(None) if have.is_empty() => None,
            Ok(None) if have.len() < HEADER => Some(HEADER - have.len()),
            Ok(None) => Some(HEADER + announced_len(have) - have.len()),
            _ => None,
        }
    }

    /// Opens, where they lie, the records that socket reads put straight into the
    /// reader's buffer `dst` (when [`Receiver::is_empty`]): `dst[..plain]` is plaintext
    /// already, `dst[cipher..end]` ciphertext read since. Each record's plaintext moves
    /// down to follow the plaintext before it, so the bytes are decrypted where the reader
    /// wants them and never copied (a record's plaintext is shorter than its ciphertext,
    /// so it always fits). Returns the new `(plain, cipher)`: a partial record left at
    /// `dst[cipher..end]` is completed by the next read into `dst[end..]` if it fits
    /// there, else it moves to this receiver's own buffer (then `cipher == end`, and the
    /// receiver is no longer empty).
    pub fn open_in(
        &mut self,
        dst: &mut [u8],
        plain: usize,
        cipher: usize,
        end: usize,
    ) -> Result<(usize, usize), RecordError> {
        self.unless_failed(|rx| rx.open_where_they_lie(dst, plain, cipher, end))
    }

    fn open_where_they_lie(
        &mut self,
        dst: &mut [u8],
        mut plain: usize,
        mut cipher: usize,
        end: usize,
    ) -> Result<(usize, usize), RecordError> {
        while !self.closed {
            let Some(len) = whole_record(&dst[cipher..end])? else {
                break;
            };
            let (kind, n) = open_within(
                &mut self.keys,
                &mut dst[plain..cipher + len],
                cipher - plain,
            )?;
            cipher += len;
            if kind == APPLICATION_DATA {
                plain += n;
            } else {
                let content = dst[plain..plain + n].to_vec();
                self.control(kind, &content)?;
            }
        }
        if self.closed {
            // Nothing after a close_notify counts.
            return Ok((plain, end));
        }
        let part = &dst[cipher..end];
        let whole = if part.len() >= HEADER {
            HEADER + announced_len(part)
        } else {
            MAX_RECORD
        };
        if part.is_empty() || cipher + whole <= dst.len() {
            return Ok((plain, cipher));
        }
        // The record will not fit where it lies: it completes in this buffer.
        if self.buf.len() < part.len() + MAX_RECORD {
            self.buf.resize(part.len() + MAX_RECORD, 0);
        }
        self.buf[..part.len()].copy_from_slice(part);
        (self.plain, self.next, self.filled) = (0..0, 0, part.len());
        Ok((plain, end))
    }

    /// A record that is not application data: an alert or handshake messages.
    fn control(&mut self, kind: u8, content: &[u8]) -> Result<(), RecordError> {
        match kind {
            ALERT => match content {
                [_, 0] => self.closed = true,
                [_, what] => return Err(RecordError::Alert(*what)),
                _ => return Err(RecordError::Protocol("a malformed alert".into())),
            },
            HANDSHAKE => self.handshake(content)?,
            other => {
                return Err(RecordError::Protocol(format!(
                    "a record of content type {other} after the handshake"
                )))
            }
        }
        Ok(())
    }

    /// Handshake messages after the handshake: KeyUpdate (the key changes after it) and
    /// NewSessionTicket (ignored).
    fn handshake(&mut self, content: &[u8]) -> Result<(), RecordError> {
        let mut rest = content;
        let mut update = None;
        while !rest.is_empty() {
            if update.is_some() {
                return Err(RecordError::Protocol(
                    "a message after a KeyUpdate in the same record".into(),
                ));
            }
            let [kind, a, b, c, ..] = *rest else {
                return Err(RecordError::Protocol(
                    "a handshake message split over records".into(),
                ));
            };
            let len = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
            let Some(body) = rest.get(4..4 + len) else {
                return Err(RecordError::Protocol(
                    "a handshake message split over records".into(),
                ));
            };
            match (kind, body) {
                (KEY_UPDATE, [r @ (0 | 1)]) => update = Some(*r == 1),
                (NEW_SESSION_TICKET, _) => {}
                (kind, _) => {
                    return Err(RecordError::Protocol(format!(
                        "handshake message {kind} after the handshake"
                    )))
                }
            }
            rest = &rest[4 + len..];
        }
        if let Some(requested) = update {
            self.keys.update();
            self.update_requested |= requested;
        }
        Ok(())
    }
}

/// Opens the record at `in_out[from..]` (header first) with `keys`, moving its plaintext
/// to the start of `in_out`; returns its content type and the content's length.
fn open_within(
    keys: &mut Direction,
    in_out: &mut [u8],
    from: usize,
) -> Result<(u8, usize), RecordError> {
    let mut header = [0u8; HEADER];
    header.copy_from_slice(&in_out[from..from + HEADER]);
    let nonce = keys.next_nonce();
    let inner = keys
        .key
        .open_within(nonce, Aad::from(header), in_out, from + HEADER..)
        .map_err(|_| RecordError::Altered)?;
    // RFC 8446 bounds the inner plaintext (content, type, padding) at 2^14 + 1.
    if inner.len() > MAX_PLAIN + 1 {
        return Err(RecordError::Protocol(format!(
            "a record of {} bytes, over TLS's 2^14 (record_overflow)",
            inner.len()
        )));
    }
    // The content type is the last non-zero byte; zeros after it are padding.
    let end = inner.iter().rposition(|&b| b != 0).ok_or_else(|| {
        RecordError::Protocol("a record with no content type (all padding)".into())
    })?;
    Ok((inner[end], end))
}

/// The ciphertext length the record header at the start of `header` announces (at least
/// [`HEADER`] bytes).
pub fn announced_len(header: &[u8]) -> usize {
    usize::from(header[3]) << 8 | usize::from(header[4])
}

/// The length of the whole record at the start of `buf`, if it is all there; an error if
/// its header is not one of an encrypted TLS 1.3 record.
fn whole_record(buf: &[u8]) -> Result<Option<usize>, RecordError> {
    let [kind, major, minor, _, _, ..] = *buf else {
        return Ok(None);
    };
    let len = announced_len(buf);
    if kind != APPLICATION_DATA {
        return Err(RecordError::Protocol(format!(
            "an unencrypted record (content type {kind}) after the handshake"
        )));
    }
    if (major, minor) != (3, 3) || !(TAG + 1..=MAX_CIPHER).contains(&len) {
        return Err(RecordError::Protocol(format!(
            "a record header that is not TLS 1.3's (version {major}.{minor}, length {len})"
        )));
    }
    Ok((buf.len() >= HEADER + len).then_some(HEADER + len))
}

#[cfg(test)]
mod tests;
