//! Authentication over a shared token (HMAC-SHA256) bound to the TLS connection (the
//! server's certificate and the connection's exporter, so no challenge round trip is
//! needed), the per-session secret both ends derive, and the proof every data connection
//! carries.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// Length of a nonce in bytes.
pub const NONCE_LEN: usize = 32;
/// Length of an HMAC-SHA256 tag in bytes.
pub const MAC_LEN: usize = 32;

/// The fewest bits of secret a token may hold. A server's proof is an HMAC of the token
/// over public nonces, so anyone who connects once can test guesses offline at GPU speed:
/// the token must resist that on its own.
pub const MIN_TOKEN_BITS: u32 = 128;

/// A random challenge chosen by one end for one session.
pub type Nonce = [u8; NONCE_LEN];

/// The shared secret both ends hold. Never sent on the wire.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl Token {
    /// Wraps token bytes; surrounding whitespace is ignored so token files may end in a
    /// newline. Only the shapes random generators produce are taken ([`check_token`]);
    /// the error says why a token is refused and how to make one.
    pub fn new(bytes: &[u8]) -> Result<Self, crate::ProtoError> {
        let trimmed = trim_ascii(bytes);
        if let Err(why) = check_token(trimmed) {
            return Err(crate::ProtoError::InvalidField {
                field: "token",
                why: format!(
                    "{why}. A token must be at least {MIN_TOKEN_BITS} bits from a random source, \
                     since anyone who completes TLS with the server gets a proof to guess \
                     against offline: 32 or more hex digits (16 bytes), 22 or more base64 \
                     characters, or 16 or more raw random bytes. Make one with `longhaul token \
                     --out FILE` (or `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'`)"
                ),
            });
        }
        Ok(Self(trimmed.to_vec()))
    }

    /// A token of 32 bytes from a random generator (a ticket's secret): no shape to check.
    pub fn from_secret(secret: [u8; 32]) -> Self {
        Self(secret.to_vec())
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
        mac_with_key(&self.0, label, parts)
    }

    /// Whether two tokens are the same secret (constant time in their shared length).
    pub fn same(&self, other: &Token) -> bool {
        self.0.len() == other.0.len() && bool::from(self.0.ct_eq(&other.0))
    }

    /// The proof the server sends on every TLS connection, as 0.5-RTT data right behind
    /// its TLS Finished (before it has heard anything from the client): the token's
    /// holder vouches for the certificate `cert` (its SHA-256) that this TLS handshake
    /// proves the server holds the key of. A proof for another certificate, replayed by
    /// a man in the middle with his own, fails the client's check; no freshness is
    /// needed, since the handshake itself proves possession of the key.
    pub fn server_proof(&self, cert: &[u8; 32], server: &Nonce) -> [u8; MAC_LEN] {
        self.mac(b"longhaul/7 server proof", &[cert, server])
    }

    /// The proof the client sends after it has checked the server's, bound to this TLS
    /// connection by its exporter (RFC 8446 section 7.5): replayed on any other
    /// connection it fails, with no challenge round trip.
    pub fn client_proof(
        &self,
        binding: &ChannelBinding,
        client: &Nonce,
        server: &Nonce,
    ) -> [u8; MAC_LEN] {
        self.mac(
            b"longhaul/7 client proof",
            &[&binding.exporter, &binding.cert, client, server],
        )
    }

    /// The per-session secret both ends derive from the control connection's exporter;
    /// it authenticates data connections and chunk headers. Known to the client as soon
    /// as its TLS handshake ends, so data connections attach without waiting for the
    /// server.
    pub fn session_secret(&self, binding: &ChannelBinding) -> SessionSecret {
        SessionSecret(self.mac(b"longhaul/7 session secret", &[&binding.exporter]))
    }
}

/// The most tokens one server accepts (one per exported area or group of users, say): each
/// costs 32 bytes in the first flight of every connection, and an HMAC when a client
/// proves itself.
pub const MAX_TOKENS: usize = 64;

/// The tokens a server accepts, each naming what its holders may reach (a daemon's
/// exported areas). The server proves every one of them in its first flight
/// ([`Keyring::server_proofs`]); a client goes on when one proof is for its token, and the
/// server learns which from the client's proof ([`Keyring::prover`]). One token is the
/// common case, and then nothing differs from a single shared token.
#[derive(Clone, Debug)]
pub struct Keyring(std::sync::Arc<[Token]>);

impl Keyring {
    /// A keyring of `tokens`, in order (the first is the one a server's hello proves;
    /// duplicates are kept once, at their first place): 1 to [`MAX_TOKENS`] of them.
    pub fn new(tokens: Vec<Token>) -> Result<Self, crate::ProtoError> {
        let mut kept: Vec<Token> = Vec::with_capacity(tokens.len());
        for t in tokens {
            if !kept.iter().any(|k| k.same(&t)) {
                kept.push(t);
            }
        }
        if kept.is_empty() || kept.len() > MAX_TOKENS {
            return Err(crate::ProtoError::InvalidField {
                field: "tokens",
                why: format!(
                    "{} distinct tokens: a server takes 1 to {MAX_TOKENS}",
                    kept.len()
                ),
            });
        }
        Ok(Self(kept.into()))
    }

    /// The tokens, without duplicates, in the order given.
    pub fn tokens(&self) -> &[Token] {
        &self.0
    }

    /// Where `token` is in the keyring.
    pub fn position(&self, token: &Token) -> Option<usize> {
        self.0.iter().position(|t| t.same(token))
    }

    /// The server's proofs of every token for its certificate `cert` and `nonce`, in the
    /// keyring's order.
    pub fn server_proofs(&self, cert: &[u8; 32], nonce: &Nonce) -> Vec<[u8; MAC_LEN]> {
        self.0.iter().map(|t| t.server_proof(cert, nonce)).collect()
    }

    /// Which token a client's `proof` (on the connection `binding`, with both nonces)
    /// was made with, if any. Every token is tried, so the time taken says nothing about
    /// which matched.
    pub fn prover(
        &self,
        proof: &[u8; MAC_LEN],
        binding: &ChannelBinding,
        client: &Nonce,
        server: &Nonce,
    ) -> Option<usize> {
        let mut found = None;
        for (i, t) in self.0.iter().enumerate() {
            if tags_equal(proof, &t.client_proof(binding, client, server)) && found.is_none() {
                found = Some(i);
            }
        }
        found
    }
}

impl From<Token> for Keyring {
    fn from(token: Token) -> Self {
        Self(vec![token].into())
    }
}

/// What ties a control session to its TLS connection: the server certificate's SHA-256
/// and 32 bytes of the connection's keying-material exporter (label
/// [`EXPORTER_LABEL`]), the same at both ends of one connection and unpredictable for
/// any other.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ChannelBinding {
    /// SHA-256 of the server's certificate (DER).
    pub cert: [u8; 32],
    /// The connection's exporter output.
    pub exporter: [u8; 32],
}

impl std::fmt::Debug for ChannelBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChannelBinding(<hidden>)")
    }
}

/// The TLS exporter label of a connection's binding.
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-longhaul/7 channel binding";

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(<{} bytes>)", self.0.len())
    }
}

/// The secret of one session, known to both ends and never sent.
#[derive(Clone)]
pub struct SessionSecret([u8; MAC_LEN]);

impl std::fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionSecret(<hidden>)")
    }
}

impl ChannelBinding {
    /// The session's name in data hellos and the server's table: derived from the
    /// connection's exporter (so both ends know it before any answer, and a server with
    /// several tokens knows it before the client said which it holds), and telling
    /// nothing about it.
    pub fn session_id(&self) -> u64 {
        let tag = mac_with_key(&self.exporter, b"longhaul/9 session id", &[&self.cert]);
        let mut id = [0u8; 8];
        id.copy_from_slice(&tag[..8]);
        u64::from_be_bytes(id)
    }
}

impl SessionSecret {
    /// The key that authenticates this session's chunk headers (and through their BLAKE3
    /// hashes, the chunks' bytes), whether or not the data stream is encrypted.
    pub fn chunk_key(&self) -> ChunkKey {
        ChunkKey(mac_with_key(&self.0, b"longhaul/5 chunk key", &[]))
    }
}

/// Length of a chunk header's MAC.
pub const CHUNK_MAC_LEN: usize = 16;

/// A session's key for chunk MACs (keyed BLAKE3).
#[derive(Clone)]
pub struct ChunkKey([u8; 32]);

impl ChunkKey {
    /// A key from raw bytes (tests, fuzzing).
    pub fn from_bytes(key: [u8; 32]) -> Self {
        Self(key)
    }

    /// The MAC of `bytes`.
    pub fn mac(&self, bytes: &[u8]) -> [u8; CHUNK_MAC_LEN] {
        let full = blake3::keyed_hash(&self.0, bytes);
        let mut out = [0u8; CHUNK_MAC_LEN];
        out.copy_from_slice(&full.as_bytes()[..CHUNK_MAC_LEN]);
        out
    }

    /// Whether `tag` is the MAC of `bytes` (constant time).
    pub fn verify(&self, bytes: &[u8], tag: &[u8]) -> bool {
        let want = self.mac(bytes);
        tag.len() == CHUNK_MAC_LEN && want.iter().zip(tag).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0
    }
}

impl std::fmt::Debug for ChunkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChunkKey(<hidden>)")
    }
}

/// The tag a data connection presents for `stream` of session `session_id`; `conn` is
/// the data connection's own exporter (empty without TLS), so over TLS a hello replayed
/// on another connection fails.
pub fn data_mac(
    secret: &SessionSecret,
    session_id: u64,
    stream: u16,
    conn: &[u8],
) -> [u8; MAC_LEN] {
    mac_with_key(
        &secret.0,
        b"longhaul/7 data stream",
        &[&session_id.to_be_bytes(), &stream.to_be_bytes(), conn],
    )
}

impl SessionSecret {
    /// Whether a data connection's hello (`mac` for `stream` of `session_id`, on the
    /// connection with exporter `conn`) holds under this secret, compared in constant
    /// time. What the server checks first, to tell the proven session's data connections
    /// from strangers while they wait for the session to take them.
    pub fn vouches_for(
        &self,
        session_id: u64,
        stream: u16,
        mac: &[u8; MAC_LEN],
        conn: &[u8],
    ) -> bool {
        tags_equal(mac, &data_mac(self, session_id, stream, conn))
    }
}

/// Compares two tags in constant time (`subtle`, which keeps the compiler from turning the
/// comparison into an early exit).
pub(crate) fn tags_equal(a: &[u8; MAC_LEN], b: &[u8; MAC_LEN]) -> bool {
    a.ct_eq(b).into()
}

/// Whether `token` (trimmed) has the shape of at least `MIN_TOKEN_BITS` bits from a
/// random source; the error says what is wrong with it. Nothing can tell a random token
/// from a chosen one, so this takes only what generators print and refuses what looks
/// like text:
/// - hex: at least 32 digits, one case, with both digits and letters;
/// - base64 or base64url (one alphabet, `=` padding at the end only): at least 22
///   characters (16 bytes), with both upper- and lower-case letters;
/// - raw bytes (not UTF-8 text): at least 16.
///
/// In every shape at least 8 distinct characters, and no block repeated end to end
/// (`0123456789abcdef0123456789abcdef`). A random token fails these with a probability
/// below 1 in 40 000 (22 base64 characters without an upper- or a lower-case letter),
/// far below for the 64 hex digits longhaul makes.
pub fn check_token(token: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(token) else {
        if token.len() < MIN_TOKEN_BITS as usize / 8 {
            return Err(format!(
                "{} raw bytes are too few: at least {} are needed",
                token.len(),
                MIN_TOKEN_BITS / 8
            ));
        }
        return regular(token);
    };
    if text.is_empty() {
        return Err("the token is empty".into());
    }
    let has = |f: fn(&u8) -> bool| token.iter().any(f);
    if token.iter().all(u8::is_ascii_hexdigit) {
        let need = MIN_TOKEN_BITS as usize / 4;
        if token.len() < need {
            return Err(format!(
                "{} hex digits carry {} bits: at least {need} are needed",
                token.len(),
                token.len() * 4
            ));
        }
        if !has(u8::is_ascii_digit) || !has(|c| c.is_ascii_alphabetic()) {
            return Err("it is all digits or all letters, which random hex almost never is".into());
        }
        if has(u8::is_ascii_uppercase) && has(u8::is_ascii_lowercase) {
            return Err(
                "it mixes upper- and lower-case hex digits, which no generator prints".into(),
            );
        }
        return regular(token);
    }
    let standard = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/');
    let url = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_');
    let body = text.trim_end_matches('=').as_bytes();
    let padding = token.len() - body.len();
    if padding <= 2 && (body.iter().all(standard) || body.iter().all(url)) {
        let need = (MIN_TOKEN_BITS as usize).div_ceil(6);
        if body.len() < need {
            return Err(format!(
                "{} base64 characters carry {} bits: at least {need} are needed",
                body.len(),
                body.len() * 6
            ));
        }
        if !has(u8::is_ascii_uppercase) || !has(u8::is_ascii_lowercase) {
            return Err(
                "it has the shape of text (letters of one case, like words or a passphrase), \
                 not of random base64, which mixes upper- and lower-case letters"
                    .into(),
            );
        }
        return regular(body);
    }
    Err(
        "it has the shape of text (spaces, punctuation or letters outside hex and base64), \
         not of a random token"
            .into(),
    )
}

/// Refuses a token of few distinct characters (`aaaa…`, `abab…`) or that repeats a block
/// end to end.
fn regular(token: &[u8]) -> Result<(), String> {
    let mut seen = [false; 256];
    token.iter().for_each(|&c| seen[c as usize] = true);
    let distinct = seen.iter().filter(|&&s| s).count();
    if distinct < 8 {
        return Err(format!(
            "it uses only {distinct} distinct characters, which a random token never does"
        ));
    }
    let n = token.len();
    if let Some(p) = (1..=n / 2).find(|&p| n % p == 0 && token.chunks(p).all(|c| c == &token[..p]))
    {
        return Err(format!(
            "it repeats a block of {p} characters {} times, which a random token never does",
            n / p
        ));
    }
    Ok(())
}

fn mac_with_key(key: &[u8], label: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    // HMAC accepts keys of any length, so construction cannot fail.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(&(label.len() as u32).to_be_bytes());
    mac.update(label);
    for p in parts {
        mac.update(&(p.len() as u32).to_be_bytes());
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

fn trim_ascii(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b {
        if first.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if last.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(s: &str) -> Token {
        Token::new(s.as_bytes()).unwrap()
    }

    fn binding(e: u8) -> ChannelBinding {
        ChannelBinding {
            cert: [9; 32],
            exporter: [e; 32],
        }
    }

    #[test]
    fn proofs_differ_by_role_token_and_connection() {
        let (c, s) = ([1u8; 32], [2u8; 32]);
        let t = token("22028884e920bde9a9867497f16bee30");
        let other = token("22028884e920bde9a9867497f16bee31");
        assert_ne!(
            t.server_proof(&[9; 32], &s),
            other.server_proof(&[9; 32], &s)
        );
        // Another certificate: a man in the middle's.
        assert_ne!(t.server_proof(&[9; 32], &s), t.server_proof(&[8; 32], &s));
        // Another TLS connection: a replay.
        assert_ne!(
            t.client_proof(&binding(1), &c, &s),
            t.client_proof(&binding(2), &c, &s)
        );
        assert_ne!(
            t.client_proof(&binding(1), &c, &s),
            other.client_proof(&binding(1), &c, &s)
        );
        assert_ne!(binding(1).session_id(), binding(2).session_id());
    }

    #[test]
    fn a_keyring_proves_each_token_and_names_the_clients() {
        let a = token("22028884e920bde9a9867497f16bee30");
        let b = token("9f1c0d2e7a6b5843c1d0e9f8a7b6c5d4");
        let stranger = token("0a1b2c3d4e5f60718293a4b5c6d7e8f9");
        // A duplicate is kept once, at its first place.
        let ring = Keyring::new(vec![a.clone(), b.clone(), a.clone()]).unwrap();
        assert_eq!(ring.tokens().len(), 2);
        assert_eq!(ring.position(&b), Some(1));
        assert_eq!(ring.position(&stranger), None);
        let (c, s) = ([1; 32], [2; 32]);
        let proofs = ring.server_proofs(&[9; 32], &s);
        assert_eq!(
            proofs,
            vec![a.server_proof(&[9; 32], &s), b.server_proof(&[9; 32], &s)]
        );
        let prover =
            |t: &Token| ring.prover(&t.client_proof(&binding(1), &c, &s), &binding(1), &c, &s);
        assert_eq!(prover(&a), Some(0));
        assert_eq!(prover(&b), Some(1));
        assert_eq!(prover(&stranger), None);
        // A proof made on another connection names nobody.
        let replayed = b.client_proof(&binding(2), &c, &s);
        assert_eq!(ring.prover(&replayed, &binding(1), &c, &s), None);
        assert!(Keyring::new(Vec::new()).is_err());
        let many: Vec<Token> = (0..=MAX_TOKENS)
            .map(|i| {
                Token::new(format!("{i:04x}0123456789abcdef0123456789abcdef").as_bytes()).unwrap()
            })
            .collect();
        assert!(Keyring::new(many).is_err());
    }

    #[test]
    fn token_whitespace_is_ignored_and_short_tokens_refused() {
        let a = Token::new(b"  22028884e920bde9a9867497f16bee30\n").unwrap();
        let b = token("22028884e920bde9a9867497f16bee30");
        assert_eq!(
            a.server_proof(&[0; 32], &[0; 32]),
            b.server_proof(&[0; 32], &[0; 32])
        );
        assert!(Token::new(b"short\n").is_err());
    }

    #[test]
    fn tokens_under_128_bits_are_refused() {
        // 31 hex digits: 124 bits; 32: 128.
        assert!(Token::new(b"22028884e920bde9a9867497f16bee3").is_err());
        assert!(Token::new(b"22028884e920bde9a9867497f16bee30").is_ok());
        // The old minimum, 16 characters, held 64 bits of hex.
        assert!(Token::new(b"9a6bc8cdba84f761").is_err());
        // base64 of 16 random bytes (22 characters, padded or not) passes; 21 does not.
        assert!(Token::new(b"fcYKYviBd4ySSDK9NhJkZg==").is_ok());
        assert!(Token::new(b"fcYKYviBd4ySSDK9NhJkZg").is_ok());
        assert!(Token::new(b"fcYKYviBd4ySSDK9NhJkZ").is_err());
        // base64url of 32 bytes, as `base64 | tr '+/' '-_'` prints it.
        assert!(Token::new(b"9n5hPBe_7tZcXcfku7duhlN6w3Q-x5ycZsjfQcC75jE=").is_ok());
        // 16 raw random bytes (not UTF-8 text) pass; 15 do not.
        let raw = [
            0x9f, 0x86, 0xd0, 0x81, 0x88, 0x4c, 0x7d, 0x65, 0x9a, 0x2f, 0xea, 0xa0, 0xc5, 0x5a,
            0xd0, 0x15,
        ];
        assert!(Token::new(&raw).is_ok());
        assert!(Token::new(&raw[..15]).is_err());
    }

    /// Issue 28: character classes counted `correcthorsebatterystaple` as 150 bits; four
    /// dictionary words are about 44. Only the shapes of random tokens pass now, and the
    /// refusal says why and how to make one.
    #[test]
    fn tokens_shaped_like_text_are_refused_with_how_to_make_one() {
        let refused = |t: &[u8]| Token::new(t).map(|_| ()).unwrap_err().to_string();
        let err = refused(b"correcthorsebatterystaple");
        assert!(
            err.contains("shape of text") && err.contains("longhaul token"),
            "{err}"
        );
        for weak in [
            &b"correct horse battery staple"[..],
            b"CorrectHorseBatteryStaple!",
            b"password-password-password",
            b"abuse-test-token-0123456789abcdef",
            // Digits only, letters only, regular, mixed-case hex.
            b"123456789012345678901234567890123456789",
            b"deadbeefdeadbeefcafebabecafebabefeedface",
            b"0123456789abcdef0123456789abcdef",
            b"22028884E920bde9a9867497f16bee30",
            b"abababababababababababababababababababababababab",
            &[b'a'; 200],
            b"",
        ] {
            assert!(
                Token::new(weak).is_err(),
                "{:?} was accepted",
                String::from_utf8_lossy(weak)
            );
        }
        let err = refused(b"0123456789abcdef0123456789abcdef");
        assert!(err.contains("repeats a block of 16"), "{err}");
        assert!(refused(b"9a6bc8cdba84f761").contains("16 hex digits carry 64 bits"));
    }

    /// Tokens as longhaul and the usual tools make them pass (64 hex digits is what
    /// `longhaul token` and the default token file hold).
    #[test]
    fn random_tokens_pass() {
        for t in [
            &b"9a6bc8cdba84f761976ff4030011e8438cf257be99bba4bc4fcc77328756fa20\n"[..],
            b"4E1228910AE89955D385D7659D09CD9C",
            b"fcYKYviBd4ySSDK9NhJkZg==",
        ] {
            assert!(Token::new(t).is_ok(), "{:?}", String::from_utf8_lossy(t));
        }
    }

    #[test]
    fn data_mac_binds_session_stream_and_connection() {
        let t = token("22028884e920bde9a9867497f16bee30");
        let secret = t.session_secret(&binding(1));
        let m = data_mac(&secret, 7, 0, b"conn");
        assert!(tags_equal(&m, &data_mac(&secret, 7, 0, b"conn")));
        assert!(!tags_equal(&m, &data_mac(&secret, 7, 1, b"conn")));
        assert!(!tags_equal(&m, &data_mac(&secret, 8, 0, b"conn")));
        assert!(!tags_equal(&m, &data_mac(&secret, 7, 0, b"other")));
    }
}
