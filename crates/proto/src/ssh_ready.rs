//! The one line `longhaul ssh-server` prints on its stdout when it is ready for the client
//! that started it over ssh: where to connect, the one-time token, and (once TLS is there)
//! the fingerprint of its certificate.
//!
//! ```text
//! LONGHAUL-READY proto=6 port=40123 addr=10.0.0.2 token=<64 hex> cert=sha256:<64 hex>
//! LONGHAUL-READY proto=6 port=40123 addr=- token=<64 hex> cert=-   (refused by a client: no TLS to pin)
//! ```
//!
//! `proto` comes first and is checked before anything else, so that a far end of another
//! protocol version is named as such even when its line carries keys this build does not
//! know. `addr` is the far host's address of the ssh connection (from `SSH_CONNECTION`),
//! `-` when unknown. The line is at most [`MAX_READY_LINE`] bytes; every other key, a
//! repeated or missing key, and hex that is not exactly 64 lowercase or uppercase digits
//! are refused: the line comes from a remote program and is parsed as hostile input.

use std::fmt::Write as _;
use std::net::IpAddr;

use crate::{ProtoError, PROTOCOL_VERSION};

/// The first word of the line.
pub const READY_TAG: &str = "LONGHAUL-READY";
/// Longest line accepted, newline included.
pub const MAX_READY_LINE: usize = 1024;

/// What the far end of an ssh start-up announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshReady {
    /// The far end's protocol version.
    pub proto: u16,
    /// The TCP port it listens on (both control and data connections).
    pub port: u16,
    /// Its address on the ssh connection, when known.
    pub addr: Option<IpAddr>,
    /// The one-time token of this session (32 random bytes).
    pub token: [u8; 32],
    /// SHA-256 of its TLS certificate (the client pins it; `cert=-`, which this build never
    /// sends, is refused by its client).
    pub cert: Option<[u8; 32]>,
}

impl SshReady {
    /// The line, newline included.
    pub fn encode(&self) -> String {
        let mut s = format!("{READY_TAG} proto={} port={} addr=", self.proto, self.port);
        match self.addr {
            Some(a) => {
                let _ = write!(s, "{a}");
            }
            None => s.push('-'),
        }
        let _ = write!(s, " token={} cert=", hex(&self.token));
        match &self.cert {
            Some(c) => {
                let _ = write!(s, "sha256:{}", hex(c));
            }
            None => s.push('-'),
        }
        s.push('\n');
        s
    }

    /// The token as the 64 hex digits both ends feed to [`crate::Token::new`].
    pub fn token_hex(&self) -> String {
        hex(&self.token)
    }

    /// Whether `line` is meant to be a ready line (starts with [`READY_TAG`] and a space):
    /// anything else on the far end's stdout (a chatty login script) is not.
    pub fn is_ready_line(line: &[u8]) -> bool {
        line.strip_prefix(READY_TAG.as_bytes())
            .is_some_and(|rest| rest.first() == Some(&b' '))
    }

    /// Parses one line (a trailing `\n` or `\r\n` is allowed). A `proto` other than
    /// [`PROTOCOL_VERSION`] is [`ProtoError::VersionMismatch`], reported before the rest
    /// of the line is looked at.
    pub fn parse(line: &[u8]) -> Result<Self, ProtoError> {
        if line.len() > MAX_READY_LINE {
            return Err(bad(format!(
                "{} bytes, more than {MAX_READY_LINE}",
                line.len()
            )));
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = std::str::from_utf8(line).map_err(|_| bad("not UTF-8".into()))?;
        let mut words = text.split(' ');
        if words.next() != Some(READY_TAG) {
            return Err(bad(format!("does not start with {READY_TAG}")));
        }
        let mut next = |key: &str| -> Result<&str, ProtoError> {
            let word = words
                .next()
                .ok_or_else(|| bad(format!("{key}= is missing")))?;
            match word.split_once('=') {
                Some((k, v)) if k == key => Ok(v),
                Some((k, _)) => Err(bad(format!("key {k:?} where {key}= belongs"))),
                None => Err(bad(format!("{word:?} is not KEY=VALUE"))),
            }
        };
        let proto: u16 = number(next("proto")?, "proto")?;
        if proto != PROTOCOL_VERSION {
            return Err(ProtoError::VersionMismatch {
                ours_min: crate::MIN_PROTOCOL_VERSION,
                ours_max: PROTOCOL_VERSION,
                theirs: proto,
            });
        }
        let port: u16 = number(next("port")?, "port")?;
        if port == 0 {
            return Err(bad("port 0".into()));
        }
        let addr = match next("addr")? {
            "-" => None,
            a => Some(
                a.parse::<IpAddr>()
                    .map_err(|_| bad(format!("addr {a:?} is not an IP address")))?,
            ),
        };
        let token = unhex(next("token")?, "token")?;
        let cert = match next("cert")? {
            "-" => None,
            c => match c.strip_prefix("sha256:") {
                Some(h) => Some(unhex(h, "cert")?),
                None => return Err(bad(format!("cert {c:?} is neither - nor sha256:HEX"))),
            },
        };
        if let Some(extra) = words.next() {
            return Err(bad(format!("unexpected {extra:?} after cert=")));
        }
        Ok(SshReady {
            proto,
            port,
            addr,
            token,
            cert,
        })
    }
}

fn bad(why: String) -> ProtoError {
    ProtoError::InvalidField {
        field: "ready line",
        why,
    }
}

fn number<T: std::str::FromStr>(v: &str, key: &str) -> Result<T, ProtoError> {
    // Digits only: `+5` or ` 5` would parse, but no longhaul prints them.
    if v.is_empty() || v.len() > 5 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!("{key}={v:?} is not a number")));
    }
    v.parse()
        .map_err(|_| bad(format!("{key}={v} is out of range")))
}

fn hex(bytes: &[u8; 32]) -> String {
    let mut s = String::with_capacity(64);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex(v: &str, key: &str) -> Result<[u8; 32], ProtoError> {
    let digits = v.as_bytes();
    if digits.len() != 64 {
        return Err(bad(format!(
            "{key} has {} characters, not 64 hex digits",
            digits.len()
        )));
    }
    let mut out = [0u8; 32];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        let nib = |c: u8| (c as char).to_digit(16);
        match (nib(pair[0]), nib(pair[1])) {
            (Some(h), Some(l)) => out[i] = (h * 16 + l) as u8,
            _ => return Err(bad(format!("{key} is not hex"))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SshReady {
        SshReady {
            proto: PROTOCOL_VERSION,
            port: 40123,
            addr: Some("10.233.0.2".parse().unwrap()),
            token: [0xab; 32],
            cert: None,
        }
    }

    #[test]
    fn round_trips() {
        let mut with_cert = sample();
        with_cert.cert = Some([7; 32]);
        let mut v6 = sample();
        v6.addr = Some("2001:db8::1".parse().unwrap());
        let mut no_addr = sample();
        no_addr.addr = None;
        for r in [sample(), with_cert, v6, no_addr] {
            let line = r.encode();
            assert!(
                line.ends_with('\n') && line.len() <= MAX_READY_LINE,
                "{line}"
            );
            assert!(SshReady::is_ready_line(line.as_bytes()));
            assert_eq!(SshReady::parse(line.as_bytes()).unwrap(), r);
        }
        let line = sample().encode();
        assert!(line.contains(" cert=-\n"), "{line}");
        assert!(
            line.contains(&format!("token={}", "ab".repeat(32))),
            "{line}"
        );
        // CRLF from a far end that is not quite Unix is fine.
        let crlf = line.replace('\n', "\r\n");
        assert_eq!(SshReady::parse(crlf.as_bytes()).unwrap(), sample());
    }

    #[test]
    fn another_version_is_named_before_the_rest() {
        let line = format!("{READY_TAG} proto=999 newkey=1 whatever");
        match SshReady::parse(line.as_bytes()) {
            Err(ProtoError::VersionMismatch { theirs: 999, .. }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn refuses_what_is_not_exactly_a_ready_line() {
        let good = sample().encode();
        let tok = "ab".repeat(32);
        let cases = [
            "hello world".to_string(),
            READY_TAG.to_string(),
            format!("{READY_TAG}  proto=4"),
            good.replace("port=40123", "port=0"),
            good.replace("port=40123", "port=65536"),
            good.replace("port=40123", "port=+123"),
            good.replace("addr=10.233.0.2", "addr=host.example"),
            good.replace(&tok, &"ab".repeat(31)),
            good.replace(&tok, &format!("{}zz", "ab".repeat(31))),
            good.replace("cert=-", "cert=md5:00"),
            good.replace("cert=-", &format!("cert=sha256:{}", "0".repeat(63))),
            good.replace("cert=-\n", "cert=- extra=1\n"),
            good.replace("port=", "prt="),
            good.replace(" addr=10.233.0.2", ""),
            format!("{}{}", good.trim_end(), " ".repeat(MAX_READY_LINE)),
        ];
        for c in cases {
            assert!(SshReady::parse(c.as_bytes()).is_err(), "accepted {c:?}");
        }
        assert!(SshReady::parse(b"LONGHAUL-READY proto=4 \xff").is_err());
        assert!(!SshReady::is_ready_line(b"LONGHAUL-READYX"));
        assert!(!SshReady::is_ready_line(b"Welcome to host"));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let good = sample().encode().into_bytes();
        // Every prefix and every single-byte change of a good line.
        for n in 0..good.len() {
            let _ = SshReady::parse(&good[..n]);
            for b in [0u8, b' ', b'=', b'9', 0xff] {
                let mut m = good.clone();
                m[n] = b;
                let _ = SshReady::parse(&m);
            }
        }
    }
}
