//! Fuzzes the reader of a receiver's resume manifest (`.NAME.longhaul-manifest`, which a
//! crash may leave torn): raw bytes never panic and what parses stays within its bounds;
//! a manifest built from the input's fields encodes and parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fuzz::take;
use longhaul_transfer::{ResumeManifest, SourceIdentity};

fuzz_target!(|data: &[u8]| {
    if let Ok(loaded) = ResumeManifest::parse(data) {
        assert!(loaded.valid_len <= data.len());
        let m = &loaded.manifest;
        assert!(m.verified_count() <= m.chunk_count());
        let back = ResumeManifest::parse(&m.encode()).expect("an encoded manifest parses");
        assert_eq!(&back.manifest, m);
    }
    let mut rest = data;
    let source = SourceIdentity {
        size: u64::from_be_bytes(take(&mut rest)) >> (take::<1>(&mut rest)[0] % 64),
        mtime_secs: i64::from_be_bytes(take(&mut rest)),
        mtime_nanos: u32::from_be_bytes(take(&mut rest)),
        fingerprint: u64::from_be_bytes(take(&mut rest)),
    };
    let chunk_size = 1u64 << (take::<1>(&mut rest)[0] % 40);
    let Ok(mut m) = ResumeManifest::new(source, chunk_size) else {
        return;
    };
    while !rest.is_empty() {
        let index = u32::from_be_bytes(take(&mut rest));
        let _ = m.record_verified(index, take(&mut rest));
    }
    let bytes = m.encode();
    let back = ResumeManifest::parse(&bytes).expect("an encoded manifest parses");
    assert_eq!(back.valid_len, bytes.len());
    assert_eq!(back.manifest, m);
});
