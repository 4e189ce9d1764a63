//! Fuzzes the 80-byte chunk header of a data stream (`ChunkHeader::decode` under a
//! session's chunk key): raw bytes
//! (what a peer sends) decode only to a header that encodes back to the same bytes, and
//! headers built from the input's fields (so their check is right, which random bytes
//! almost never are) decode back exactly when they are within the protocol's bounds (a
//! chunk's, a hash-after chunk's or its trailer's, or a warm-up run's exact shape), and
//! never under another session's key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fuzz::take;
use longhaul_proto::transfer::{
    ChunkHeader, EntryId, CHUNK_FLAG_HASH_AFTER, CHUNK_FLAG_HOLE, CHUNK_FLAG_SAME,
    CHUNK_FLAG_TRAILER, MAX_CHUNK_BYTES, MAX_FILE_ID, MAX_WARMUP_BYTES,
};
use longhaul_proto::ChunkKey;

fuzz_target!(|data: &[u8]| {
    let key = ChunkKey::from_bytes([0x42; 32]);
    if let Some(raw) = data.first_chunk::<{ ChunkHeader::LEN }>() {
        if let Ok(h) = ChunkHeader::decode(raw, &key) {
            assert_eq!(&h.encode(&key), raw, "{h:?} has two encodings");
            assert!(h.payload_len() <= MAX_CHUNK_BYTES);
        }
    }
    let mut rest = data;
    let h = ChunkHeader {
        file: EntryId(u32::from_be_bytes(take(&mut rest))),
        index: u32::from_be_bytes(take(&mut rest)),
        flags: u32::from_be_bytes(take(&mut rest)),
        offset: u64::from_be_bytes(take(&mut rest)),
        len: u32::from_be_bytes(take(&mut rest)),
        hash: take(&mut rest),
    };
    let warmup = h == ChunkHeader::warmup(h.len) && h.len <= MAX_WARMUP_BYTES;
    // Hole and same (not both), or hash-after (its hash zeros) or trailer alone.
    let flags_ok = (h.flags & !(CHUNK_FLAG_HOLE | CHUNK_FLAG_SAME) == 0
        && h.flags != CHUNK_FLAG_HOLE | CHUNK_FLAG_SAME)
        || (h.flags == CHUNK_FLAG_HASH_AFTER && h.hash == [0; 32])
        || h.flags == CHUNK_FLAG_TRAILER;
    let in_bounds = warmup
        || h.file.0 <= MAX_FILE_ID
            && flags_ok
            && u64::from(h.len) <= MAX_CHUNK_BYTES
            && h.offset.checked_add(u64::from(h.len)).is_some();
    let bytes = h.encode(&key);
    match ChunkHeader::decode(&bytes, &key) {
        Ok(back) => assert!(in_bounds && back == h, "{h:?} decoded as {back:?}"),
        Err(e) => assert!(!in_bounds, "{h:?} refused: {e}"),
    }
    assert!(
        ChunkHeader::decode(&bytes, &ChunkKey::from_bytes([0x43; 32])).is_err(),
        "{h:?} passed under another session's key"
    );
});
