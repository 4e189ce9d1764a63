//! Field encoding shared by every message family: big-endian integers, fixed arrays,
//! length-prefixed bounded strings and counts. Reads never go past the body they are given.

use crate::error::ProtoError;

/// An out-of-range field.
pub(crate) fn invalid(field: &'static str, why: String) -> ProtoError {
    ProtoError::InvalidField { field, why }
}

/// A character that must not reach a terminal or a log from a peer: C0 and C1 controls
/// (escape sequences, newlines that forge log lines, carriage returns that overwrite
/// them) and the bidirectional overrides and isolates (text that displays reordered).
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every [`is_unsafe_char`] written as a Rust escape (`\u{1b}`), for
/// printing what may hold a peer's words or file names to a terminal or a log.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The longest prefix of `text` within `max` bytes that ends on a character boundary:
/// what a bounded text field of a message holds of a longer text.
pub fn cut_at_char(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Appends big-endian fields to a frame body.
pub(crate) struct Writer<'a>(pub(crate) &'a mut Vec<u8>);

impl Writer<'_> {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.0.extend_from_slice(v);
    }
    /// Text a person will read (an error, a reason, a name): characters that could steer
    /// a terminal or forge a log line are sent as a space (newlines and tabs) or `?`
    /// (see [`is_unsafe_char`]).
    pub(crate) fn text(&mut self, s: &str, max: usize) {
        if s.chars().any(is_unsafe_char) {
            let clean: String = s
                .chars()
                .map(|c| match c {
                    '\n' | '\t' | '\r' => ' ',
                    c if is_unsafe_char(c) => '?',
                    c => c,
                })
                .collect();
            self.str(&clean, max);
        } else {
            self.str(s, max);
        }
    }
    pub(crate) fn str(&mut self, s: &str, max: usize) {
        let s = cut_at_char(s, max);
        self.u16(s.len() as u16);
        self.bytes(s.as_bytes());
    }
}

/// Takes big-endian fields from a frame body; every read is bounds-checked.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl Reader<'_> {
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], ProtoError> {
        if self.0.len() < n {
            return Err(ProtoError::Truncated { what });
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    pub(crate) fn array<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<[u8; N], ProtoError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, ProtoError> {
        Ok(self.array::<1>(what)?[0])
    }
    pub(crate) fn bool(&mut self, what: &'static str) -> Result<bool, ProtoError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(invalid(what, format!("{v} is not a boolean"))),
        }
    }
    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, ProtoError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, ProtoError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, ProtoError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }
    /// A u16 count of entries that follow, refused above `max`.
    pub(crate) fn count(&mut self, what: &'static str, max: usize) -> Result<usize, ProtoError> {
        let n = self.u16(what)? as usize;
        if n > max {
            return Err(invalid(
                what,
                format!("{n} entries exceed the limit of {max}"),
            ));
        }
        Ok(n)
    }
    pub(crate) fn str(&mut self, what: &'static str, max: usize) -> Result<String, ProtoError> {
        let n = self.u16(what)? as usize;
        if n > max {
            return Err(invalid(
                what,
                format!("{n} bytes exceed the limit of {max}"),
            ));
        }
        let raw = self.take(n, what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| invalid(what, "not valid UTF-8".into()))
    }
    /// Text a person will read, from a peer that may be hostile: refused if it holds a
    /// control or bidirectional-override character (terminal escapes, forged log lines,
    /// text that reads other than it is), which longhaul's own writer never sends.
    pub(crate) fn text(&mut self, what: &'static str, max: usize) -> Result<String, ProtoError> {
        let s = self.str(what, max)?;
        match s.chars().find(|&c| is_unsafe_char(c)) {
            Some(c) => Err(invalid(
                what,
                format!("holds the control character U+{:04X}", c as u32),
            )),
            None => Ok(s),
        }
    }
}
