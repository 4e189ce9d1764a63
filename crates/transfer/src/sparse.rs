//! Keeping holes: which parts of a received chunk hold data and must be written, and
//! which are all zeros and can be left as holes of a part file that was sized with
//! `set_len` (reads of a hole return zeros, so the file's bytes are the same).

/// Block size for zero detection: small enough to find holes, large enough that the scan
/// costs little next to the write (file systems allocate in 4 KiB blocks).
pub const ZERO_BLOCK_BYTES: usize = 4096;

/// The ranges of `chunk` (offsets within it) that must be written: every block of
/// `block` bytes that is not all zeros, neighbours merged. A chunk of zeros yields none.
/// `block` is clamped to at least 1.
pub fn data_ranges(chunk: &[u8], block: usize) -> Vec<std::ops::Range<usize>> {
    let block = block.max(1);
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (n, b) in chunk.chunks(block).enumerate() {
        if b.iter().all(|&x| x == 0) {
            continue;
        }
        let start = n * block;
        let end = start + b.len();
        match out.last_mut() {
            Some(r) if r.end == start => r.end = end,
            _ => out.push(start..end),
        }
    }
    out
}

/// Whether the chunk covering `chunk` (file offsets) lies wholly in a hole, given the
/// file's data segments (sorted, disjoint, as `longhaul-sys`'s `data_segments` returns
/// them): then the sender sends it as a hole chunk, with no payload.
pub fn chunk_in_hole(data: &[std::ops::Range<u64>], chunk: std::ops::Range<u64>) -> bool {
    if chunk.is_empty() {
        return false; // an empty file's chunk carries no bytes either way; send it plainly
    }
    // First segment that ends after the chunk starts.
    let i = data.partition_point(|s| s.end <= chunk.start);
    match data.get(i) {
        None => true,
        Some(s) => s.start >= chunk.end,
    }
}

/// The hash of a hole chunk: `len` zero bytes at `offset` (see
/// [`crate::integrity::chunk_hash`]), without allocating `len` bytes.
pub fn hole_chunk_hash(offset: u64, len: u64, whole_file: bool) -> crate::integrity::ChunkHash {
    let mut h = crate::integrity::ChunkHasher::new(offset, whole_file);
    h.update_zeros(len);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_data_blocks() {
        let mut c = vec![0u8; 5 * 4096 + 100];
        assert!(data_ranges(&c, 4096).is_empty());
        c[10] = 1;
        c[4096 * 2 + 5] = 1;
        c[4096 * 3] = 1;
        c[5 * 4096 + 99] = 1;
        assert_eq!(
            data_ranges(&c, 4096),
            vec![0..4096, 2 * 4096..4 * 4096, 5 * 4096..5 * 4096 + 100]
        );
        assert_eq!(data_ranges(&[], 4096), vec![]);
        assert_eq!(data_ranges(&[1, 0, 1], 0), vec![0..1, 2..3]);
    }

    #[test]
    fn holes_and_their_hash() {
        let data = [10..20, 40..50];
        assert!(chunk_in_hole(&data, 0..10));
        assert!(!chunk_in_hole(&data, 0..11));
        assert!(!chunk_in_hole(&data, 15..16));
        assert!(chunk_in_hole(&data, 20..40));
        assert!(!chunk_in_hole(&data, 39..41));
        assert!(chunk_in_hole(&data, 50..1000));
        assert!(chunk_in_hole(&[], 0..1000));
        assert!(!chunk_in_hole(&[], 0..0));
        for len in [0u64, 1, 4096, 65536, 65537, 200_000] {
            assert_eq!(
                hole_chunk_hash(0, len, true),
                crate::integrity::chunk_hash(&vec![0; len as usize], 0, true)
            );
        }
        assert_eq!(
            hole_chunk_hash(1 << 18, 1 << 18, false),
            crate::integrity::chunk_hash(&vec![0; 1 << 18], 1 << 18, false)
        );
    }
}
