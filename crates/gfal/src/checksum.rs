//! Checksums as gfal2 names, prints and compares them. The daemon computes two:
//! `ADLER32` (what FTS3 and Rucio compare by default; 8 lowercase hex digits, as gfal2
//! prints it) and `BLAKE3` (the digest longhaul verifies every copy with; 64 hex digits).
//! Names are matched without regard to case; any other algorithm is refused with ENOSYS,
//! the code gfal2's plugin interface asks for "algorithm not supported" (its callers also
//! accept ENOTSUP). Two values are equal as gfal2 compares them: case and leading zeros
//! aside.

use longhaul_proto::namespace::ChecksumKind;

use crate::error::PluginError;

/// The algorithm gfal2 asks for by `name` (`adler32`, `ADLER32`, `blake3`, ...).
pub fn algorithm(name: &str) -> Result<ChecksumKind, PluginError> {
    if name.eq_ignore_ascii_case("adler32") {
        Ok(ChecksumKind::Adler32)
    } else if name.eq_ignore_ascii_case("blake3") {
        Ok(ChecksumKind::Blake3)
    } else {
        Err(PluginError::new(
            libc::ENOSYS,
            format!(
                "checksum type {name:?} is not supported by longhaul:// (it computes ADLER32 \
                 and BLAKE3); ask for one of those"
            ),
        ))
    }
}

/// The value as gfal2 prints it: lowercase hex of the daemon's bytes (ADLER32: its 4 bytes
/// big-endian, so 8 digits with leading zeros; BLAKE3: 64 digits).
pub fn to_hex(kind: ChecksumKind, bytes: &[u8]) -> Result<String, PluginError> {
    let want = match kind {
        ChecksumKind::Adler32 => 4,
        ChecksumKind::Blake3 => 32,
    };
    if bytes.len() != want {
        return Err(PluginError::new(
            libc::EIO,
            format!(
                "the daemon answered a {kind:?} checksum of {} bytes, not {want}",
                bytes.len()
            ),
        ));
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether two printed checksums are the same, as gfal2 compares them
/// (`gfal_compare_checksums`): without regard to case or to leading zeros.
pub fn same(a: &str, b: &str) -> bool {
    let strip = |s: &str| s.trim().trim_start_matches('0').to_ascii_lowercase();
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_matched_without_regard_to_case() {
        for n in ["ADLER32", "adler32", "Adler32"] {
            assert_eq!(algorithm(n).unwrap(), ChecksumKind::Adler32);
        }
        for n in ["BLAKE3", "blake3"] {
            assert_eq!(algorithm(n).unwrap(), ChecksumKind::Blake3);
        }
    }

    #[test]
    fn other_algorithms_are_refused_with_enosys_naming_what_is_supported() {
        for n in ["MD5", "crc32", "sha1", "", "adler"] {
            let e = algorithm(n).unwrap_err();
            assert_eq!(e.errno, libc::ENOSYS, "{n}");
            assert!(e.message.contains("ADLER32"), "{}", e.message);
        }
    }

    #[test]
    fn adler32_prints_as_eight_lowercase_hex_digits_with_leading_zeros() {
        // adler32("abc") = 0x024d0127.
        let mut a = longhaul_transfer::adler32::Adler32::default();
        a.update(b"abc");
        let v = a.value();
        assert_eq!(v, 0x024d_0127);
        assert_eq!(
            to_hex(ChecksumKind::Adler32, &v.to_be_bytes()).unwrap(),
            "024d0127"
        );
        assert_eq!(
            to_hex(ChecksumKind::Adler32, &[0xAB, 0xCD, 0xEF, 0x01]).unwrap(),
            "abcdef01"
        );
    }

    #[test]
    fn blake3_prints_as_sixty_four_hex_digits() {
        let d = *blake3::hash(b"").as_bytes();
        let hex = to_hex(ChecksumKind::Blake3, &d).unwrap();
        assert_eq!(
            hex,
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
    }

    #[test]
    fn a_value_of_the_wrong_length_is_an_error() {
        assert_eq!(
            to_hex(ChecksumKind::Adler32, &[1, 2, 3]).unwrap_err().errno,
            libc::EIO
        );
        assert!(to_hex(ChecksumKind::Blake3, &[0; 4]).is_err());
    }

    #[test]
    fn values_compare_as_gfal2_compares_them() {
        assert!(same("024d0127", "24d0127"));
        assert!(same("024D0127", "024d0127"));
        assert!(same("0", "00000000"));
        assert!(!same("024d0127", "024d0128"));
        assert!(!same("124d0127", "24d0127"));
    }
}
