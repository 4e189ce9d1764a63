//! Reading and hashing chunk bytes from a file in cache-sized pieces, shared by both ends
//! (the sender before it sends a chunk, either end re-hashing chunks already on disk).

use std::fs::File;
use std::io;

use longhaul_sys::aligned::AlignedBuf;
use longhaul_sys::file_io;
use longhaul_transfer::{ChunkHash, ChunkHasher};

/// Bytes read and hashed at a time: small enough to stay in the L2 cache between the
/// copy and the hash.
pub const PIECE: usize = 256 * 1024;

/// Hashes `len` bytes of `file` at `off` with `hasher`, reading [`PIECE`]s through `buf`.
pub fn hash_range(
    file: &File,
    mut hasher: ChunkHasher,
    off: u64,
    len: u64,
    buf: &mut AlignedBuf,
) -> io::Result<ChunkHash> {
    let mut at = 0;
    while at < len {
        let n = (PIECE as u64).min(len - at) as usize;
        buf.resize(n);
        file_io::read_exact_at(file, buf, off + at)?;
        hasher.update(buf);
        at += n as u64;
    }
    Ok(hasher.finish())
}
