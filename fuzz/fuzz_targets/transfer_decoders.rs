//! Fuzzes the decoders of `longhaul cp` input from a peer or a disk: transfer frames,
//! chunk headers, resume manifests and peer paths. None may panic; what they accept must
//! stay within their bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::transfer::{decode_transfer_frame, ChunkHeader};
use longhaul_transfer::{parse_peer_path, ResumeManifest, MAX_PATH_BYTES};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((_, used))) = decode_transfer_frame(rest) {
        assert!(used <= rest.len() && used > 0);
        rest = &rest[used..];
    }
    if let Some(h) = data.first_chunk::<{ ChunkHeader::LEN }>() {
        let _ = ChunkHeader::decode(h);
    }
    if let Ok(loaded) = ResumeManifest::parse(data) {
        assert!(loaded.valid_len <= data.len());
        assert!(loaded.manifest.verified_count() <= loaded.manifest.chunk_count());
    }
    if let Ok(p) = parse_peer_path(data) {
        assert!(p.as_bytes().len() <= MAX_PATH_BYTES);
    }
});
