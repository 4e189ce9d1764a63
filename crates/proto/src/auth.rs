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
    /// Wraps token bytes; surrounding whitespace is ignored so token files may end in a newline.
    pub fn new(bytes: &[u8]) -> Result<Self, crate::ProtoError> {
        let trimmed = trim_ascii(bytes);
        let bits = estimated_bits(trimmed);
        if bits < MIN_TOKEN_BITS {
            return Err(crate::ProtoError::InvalidField {
                field: "token",
                why: format!(
                    "{} bytes is too short or too regular to be a secret (about {bits} bits; at least {MIN_TOKEN_BITS} are needed, \
                     since anyone who sees one server proof can guess offline): use 32 or more random hex digits, \
                     e.g. `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'` (longhaul creates 64 by default)",
                    trimmed.len()
                ),
            });
        }
        Ok(Self(trimmed.to_vec()))
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
        mac_with_key(&self.0, label, parts)
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

impl SessionSecret {
    /// The session's name in data hellos and the server's table: derived from the secret
    /// (so both ends know it before any answer), and telling nothing about it.
    pub fn session_id(&self) -> u64 {
        let tag = mac_with_key(&self.0, b"longhaul/7 session id", &[]);
        let mut id = [0u8; 8];
        id.copy_from_slice(&tag[..8]);
        u64::from_be_bytes(id)
    }

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

/// A generous estimate of the secret bits in a token, from the smallest alphabet its
/// characters fit: decimal digits 3.3 bits a character, hex 4, the base64 alphabet 6, any
/// other text 6.5, and raw bytes 8; a token of fewer than 8 distinct bytes counts as none
/// (`aaaa...`, `abab...`). Only an upper bound: nothing can tell a random token from a
/// chosen one.
pub fn estimated_bits(token: &[u8]) -> u32 {
    let per_char_x10: u32 = if token.iter().all(u8::is_ascii_digit) {
        33
    } else if token.iter().all(u8::is_ascii_hexdigit) {
        40
    } else if token
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'-' | b'_' | b'='))
    {
        60
    } else if token.iter().all(|c| c.is_ascii_graphic() || *c == b' ') {
        65
    } else {
        80
    };
    let mut seen = [false; 256];
    token.iter().for_each(|&c| seen[c as usize] = true);
    if seen.iter().filter(|&&s| s).count() < 8 {
        return 0;
    }
    u32::try_from(token.len())
        .unwrap_or(u32::MAX)
        .saturating_mul(per_char_x10)
        / 10
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
        let t = token("0123456789abcdef0123456789abcdef");
        let other = token("0123456789abcdef0123456789abcdee");
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
        assert_ne!(
            t.session_secret(&binding(1)).session_id(),
            t.session_secret(&binding(2)).session_id()
        );
    }

    #[test]
    fn token_whitespace_is_ignored_and_short_tokens_refused() {
        let a = Token::new(b"  0123456789abcdef0123456789abcdef\n").unwrap();
        let b = token("0123456789abcdef0123456789abcdef");
        assert_eq!(
            a.server_proof(&[0; 32], &[0; 32]),
            b.server_proof(&[0; 32], &[0; 32])
        );
        assert!(Token::new(b"short\n").is_err());
    }

    #[test]
    fn tokens_under_128_bits_are_refused() {
        // 31 hex digits: 124 bits; 32: 128.
        assert!(Token::new(b"0123456789abcdef0123456789abcde").is_err());
        assert!(Token::new(b"0123456789abcdef0123456789abcdef").is_ok());
        // The old minimum, 16 characters, held 64 bits of hex.
        assert!(Token::new(b"0123456789abcdef").is_err());
        // Decimal digits: 39 needed.
        assert!(Token::new(b"12345678901234567890123456789012345678").is_err());
        assert!(Token::new(b"123456789012345678901234567890123456789").is_ok());
        // base64 of 16 random bytes (22 characters) passes; 21 does not.
        assert!(Token::new(b"q3Jx9VbL2mTz8RkW4yNcPd").is_ok());
        assert!(Token::new(b"q3Jx9VbL2mTz8RkW4yNcP").is_err());
        // Long but repetitive.
        assert!(Token::new(&[b'a'; 200]).is_err());
        assert!(Token::new(b"abababababababababababababababababababababababab").is_err());
        let err = Token::new(b"password-password").unwrap_err().to_string();
        assert!(err.contains("128") && err.contains("/dev/urandom"), "{err}");
    }

    #[test]
    fn data_mac_binds_session_stream_and_connection() {
        let t = token("0123456789abcdef0123456789abcdef");
        let secret = t.session_secret(&binding(1));
        let m = data_mac(&secret, 7, 0, b"conn");
        assert!(tags_equal(&m, &data_mac(&secret, 7, 0, b"conn")));
        assert!(!tags_equal(&m, &data_mac(&secret, 7, 1, b"conn")));
        assert!(!tags_equal(&m, &data_mac(&secret, 8, 0, b"conn")));
        assert!(!tags_equal(&m, &data_mac(&secret, 7, 0, b"other")));
    }
}
