//! Fuzzes the reader of a chunk-hash cache record (a file under the user's cache
//! directory, which another process or a crash may have left in any state): raw bytes
//! never panic, and hashes come back only for a record of exactly the expected identity
//! and chunk size; a record built from the input's fields decodes back to its hashes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fuzz::take;
use longhaul_transfer::hash_cache::{decode, encode, CachedHashes};
use longhaul_transfer::FileIdentity;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    let identity = FileIdentity {
        dev: u64::from_be_bytes(take(&mut rest)),
        ino: u64::from_be_bytes(take(&mut rest)),
        size: u64::from_be_bytes(take(&mut rest)) >> (take::<1>(&mut rest)[0] % 64),
        mtime_secs: i64::from_be_bytes(take(&mut rest)),
        mtime_nanos: u32::from_be_bytes(take(&mut rest)),
        ctime_secs: i64::from_be_bytes(take(&mut rest)),
        ctime_nanos: u32::from_be_bytes(take(&mut rest)),
    };
    let chunk_size = 1u64 << (take::<1>(&mut rest)[0] % 40);
    // Arbitrary bytes as a record: never a panic; hashes only of a size that fits.
    if let Some(h) = decode(rest, &identity, chunk_size) {
        assert!(h.len() as u64 <= identity.size.div_ceil(chunk_size).max(1));
    }
    // A record made from the fields decodes back, and not under another identity.
    let hashes: Vec<[u8; 32]> = rest
        .chunks_exact(32)
        .map(|c| c.try_into().unwrap())
        .collect();
    if let Ok(record) = CachedHashes::new(identity, chunk_size, hashes.clone()) {
        let bytes = encode(&record);
        assert_eq!(decode(&bytes, &identity, chunk_size), Some(hashes));
        let mut other = identity;
        other.ino ^= 1;
        assert_eq!(decode(&bytes, &other, chunk_size), None);
    }
});
