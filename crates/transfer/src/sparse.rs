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
}
