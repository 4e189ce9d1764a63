//! Challenge-response authentication over a shared token (HMAC-SHA256), the per-session
//! secret both ends derive, and the proof every data connection carries.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Length of a nonce in bytes.
pub const NONCE_LEN: usize = 32;
/// Length of an HMAC-SHA256 tag in bytes.
pub const MAC_LEN: usize = 32;

/// A random challenge chosen by one end for one session.
pub type Nonce = [u8; NONCE_LEN];

/// The shared secret both ends hold. Never sent on the wire.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl Token {
    /// Wraps token bytes; surrounding whitespace is ignored so token files may end in a newline.
    pub fn new(bytes: &[u8]) -> Result<Self, crate::ProtoError> {
        let trimmed = trim_ascii(bytes);
        if trimmed.len() < 16 {
            return Err(crate::ProtoError::InvalidField {
                field: "token",
                why: format!(
                    "{} bytes is too short to be a secret; use at least 16 (longhaul creates 64 hex digits by default)",
                    trimmed.len()
                ),
            });
        }
        Ok(Self(trimmed.to_vec()))
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
        mac_with_key(&self.0, label, parts)
    }

    /// The proof the server sends: it knows the token and saw the client's nonce.
    pub fn server_proof(&self, client: &Nonce, server: &Nonce) -> [u8; MAC_LEN] {
        self.mac(b"longhaul/1 server proof", &[client, server])
    }

    /// The proof the client sends after it has checked the server's.
    pub fn client_proof(&self, client: &Nonce, server: &Nonce) -> [u8; MAC_LEN] {
        self.mac(b"longhaul/1 client proof", &[client, server])
    }

    /// The per-session secret both ends derive; it authenticates data connections.
    pub fn session_secret(&self, client: &Nonce, server: &Nonce) -> SessionSecret {
        SessionSecret(self.mac(b"longhaul/1 session secret", &[client, server]))
    }
}

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

/// The tag a data connection presents for `stream` of session `session_id`.
pub fn data_mac(secret: &SessionSecret, session_id: u64, stream: u16) -> [u8; MAC_LEN] {
    mac_with_key(
        &secret.0,
        b"longhaul/1 data stream",
        &[&session_id.to_be_bytes(), &stream.to_be_bytes()],
    )
}

/// Compares two tags in constant time.
pub(crate) fn tags_equal(a: &[u8; MAC_LEN], b: &[u8; MAC_LEN]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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

    #[test]
    fn proofs_differ_by_role_and_token() {
        let (c, s) = ([1u8; 32], [2u8; 32]);
        let t = token("0123456789abcdef0123");
        assert_ne!(t.server_proof(&c, &s), t.client_proof(&c, &s));
        assert_ne!(
            t.server_proof(&c, &s),
            token("0123456789abcdef0124").server_proof(&c, &s)
        );
        assert_ne!(t.server_proof(&c, &s), t.server_proof(&s, &c));
    }

    #[test]
    fn token_whitespace_is_ignored_and_short_tokens_refused() {
        let a = Token::new(b"  0123456789abcdef\n").unwrap();
        let b = token("0123456789abcdef");
        assert_eq!(
            a.server_proof(&[0; 32], &[0; 32]),
            b.server_proof(&[0; 32], &[0; 32])
        );
        assert!(Token::new(b"short\n").is_err());
    }

    #[test]
    fn data_mac_binds_session_and_stream() {
        let t = token("0123456789abcdef0123");
        let secret = t.session_secret(&[1; 32], &[2; 32]);
        let m = data_mac(&secret, 7, 0);
        assert!(tags_equal(&m, &data_mac(&secret, 7, 0)));
        assert!(!tags_equal(&m, &data_mac(&secret, 7, 1)));
        assert!(!tags_equal(&m, &data_mac(&secret, 8, 0)));
    }
}
