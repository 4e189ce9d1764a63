//! Reading and hashing chunk bytes from a file in cache-sized pieces, shared by both ends:
//! the sender before it sends a chunk ([`hash_range`]), and every end hashing chunks that
//! are on disk ([`hash_chunks`] on a file's [`ChunkGrid`], on as many threads as asked).

use std::fs::File;
use std::io;

use longhaul_sys::aligned::AlignedBuf;
use longhaul_sys::file_io;
use longhaul_transfer::{ChunkGrid, ChunkHash, ChunkHasher};

use crate::stage_cpu::{timed, Stage};

/// Bytes read and hashed at a time: small enough to stay in the L2 cache between the
/// copy and the hash.
pub const PIECE: usize = 256 * 1024;

/// Bytes read and hashed at a time by [`hash_chunks`], which only hashes (nothing is
/// sent from the buffer): 1 MiB `pread`s cost fewer calls (1 GiB warm, 2 threads on this
/// class of machine: 0.26-0.28 CPU s/GB against 0.28-0.30 with [`PIECE`]).
pub const HASH_PIECE: usize = 1024 * 1024;

/// Hashes `len` bytes of `file` at `off` with `hasher`, reading [`PIECE`]s through `buf`.
pub fn hash_range(
    file: &File,
    hasher: ChunkHasher,
    off: u64,
    len: u64,
    buf: &mut AlignedBuf,
) -> io::Result<ChunkHash> {
    hash_range_in(file, hasher, off, len, buf, PIECE)
}

/// Hashes chunks `indices` of `file`, cut by `grid`, on `threads` threads that each take
/// the next (one thread hashes in this one): each with its place in the file's BLAKE3
/// tree, as `(index, hash)` in the order asked. The one way every end hashes chunks that
/// are on disk: the sender's chunks already at the receiver, the store's chunks of a
/// resumed part file, both ends of a sync hashing whole files on every core
/// ([`hash_all_chunks`]). A file shorter than the grid is an error (`UnexpectedEof`): it
/// changed while it was read; so is a chunk size that is not a power of two.
pub fn hash_chunks(
    file: &File,
    grid: &ChunkGrid,
    indices: &[u32],
    threads: usize,
) -> io::Result<Vec<(u32, ChunkHash)>> {
    hash_chunks_in(file, grid, indices, threads, HASH_PIECE)
}

/// Every chunk's hash of `file` cut by `grid`, in file order ([`hash_chunks`] of all):
/// [`longhaul_transfer::file_digest`] of them is the file's BLAKE3.
pub fn hash_all_chunks(
    file: &File,
    grid: &ChunkGrid,
    threads: usize,
) -> io::Result<Vec<ChunkHash>> {
    let all: Vec<u32> = (0..grid.chunks()).collect();
    let hashed = hash_chunks(file, grid, &all, threads)?;
    Ok(hashed.into_iter().map(|(_, h)| h).collect())
}

fn hash_chunks_in(
    file: &File,
    grid: &ChunkGrid,
    indices: &[u32],
    threads: usize,
    piece: usize,
) -> io::Result<Vec<(u32, ChunkHash)>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    let chunk_size = grid.chunk_size();
    if chunk_size == 0 || !chunk_size.is_power_of_two() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("chunk size {chunk_size} is not a power of two"),
        ));
    }
    let one = |i: u32, buf: &mut AlignedBuf| {
        let (off, len) = grid.chunk_range(i);
        hash_range_in(file, grid.hasher(i), off, len, buf, piece).map(|h| (i, h))
    };
    let threads = threads.clamp(1, indices.len().clamp(1, 256));
    if threads == 1 {
        // Grown to the first read (a small file's size, at most a piece), as the workers'.
        let mut buf = AlignedBuf::new();
        return indices.iter().map(|&i| one(i, &mut buf)).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<io::Error>> = Mutex::new(None);
    let parts: Vec<Vec<(usize, (u32, ChunkHash))>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut buf = AlignedBuf::new();
                    let mut done = Vec::new();
                    while !failed.load(Ordering::Relaxed) {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&i) = indices.get(k) else { break };
                        match one(i, &mut buf) {
                            Ok(h) => done.push((k, h)),
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                let mut slot =
                                    first_error.lock().unwrap_or_else(|p| p.into_inner());
                                slot.get_or_insert(e);
                            }
                        }
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            // A worker panics only on a bug in the hashing; pass the panic on.
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let mut hashed: Vec<(usize, (u32, ChunkHash))> = parts.into_iter().flatten().collect();
    hashed.sort_unstable_by_key(|&(k, _)| k);
    Ok(hashed.into_iter().map(|(_, h)| h).collect())
}

fn hash_range_in(
    file: &File,
    mut hasher: ChunkHasher,
    off: u64,
    len: u64,
    buf: &mut AlignedBuf,
    piece: usize,
) -> io::Result<ChunkHash> {
    let mut at = 0;
    while at < len {
        let n = (piece as u64).min(len - at) as usize;
        buf.resize(n);
        timed(Stage::Disk, || file_io::read_exact_at(file, buf, off + at))?;
        timed(Stage::Hash, || hasher.update(buf));
        at += n as u64;
    }
    Ok(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_transfer::{chunk_hash, file_digest};
    use std::io::Write;

    fn file_of(data: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(data).unwrap();
        f
    }

    #[test]
    fn parallel_chunk_hashes_equal_chunk_hash_and_merge_to_blake3() {
        let data: Vec<u8> = (0..(1u32 << 20) + 12_345)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let f = file_of(&data);
        let size = data.len() as u64;
        for (chunk, threads) in [(4096u64, 1usize), (65536, 3), (1 << 18, 8), (1 << 22, 2)] {
            let grid = ChunkGrid::new(size, chunk);
            let got = hash_all_chunks(&f, &grid, threads).unwrap();
            let n = data.len().div_ceil(chunk as usize);
            assert_eq!(got.len(), n);
            for (i, h) in got.iter().enumerate() {
                let a = i * chunk as usize;
                let b = (a + chunk as usize).min(data.len());
                assert_eq!(*h, chunk_hash(&data[a..b], a as u64, n == 1), "chunk {i}");
            }
            assert_eq!(file_digest(&got), *blake3::hash(&data).as_bytes());
        }
        let grid = ChunkGrid::new(size, 65536);
        let all = hash_all_chunks(&f, &grid, 2).unwrap();
        // Pieces smaller than a chunk, and not dividing it: the same hashes.
        let every: Vec<u32> = (0..grid.chunks()).collect();
        let odd = hash_chunks_in(&f, &grid, &every, 2, 10_000).unwrap();
        assert!(odd.iter().map(|&(_, h)| h).eq(all.iter().copied()));
        // Chunks named in any order come back in that order, on one thread or several.
        let some = [7u32, 2, 15, 0, 2];
        for threads in [1, 3] {
            let got = hash_chunks(&f, &grid, &some, threads).unwrap();
            let want: Vec<(u32, ChunkHash)> = some.iter().map(|&i| (i, all[i as usize])).collect();
            assert_eq!(got, want, "{threads} thread(s)");
        }
        let empty = file_of(b"");
        let got = hash_all_chunks(&empty, &ChunkGrid::new(0, 4096), 4).unwrap();
        assert_eq!(file_digest(&got), *blake3::hash(b"").as_bytes());
        // A file shorter than claimed changed while it was read: an error, not a hash.
        let err = hash_all_chunks(&f, &ChunkGrid::new(size + 1, 4096), 2).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(hash_all_chunks(&f, &ChunkGrid::new(10, 3000), 1).is_err());
    }

    /// Hashing speed on a page-cache-warm file: `LONGHAUL_HASH_BENCH_FILE=PATH` (1 GiB
    /// of random bytes: `head -c 1G /dev/urandom > PATH`), run with
    /// `cargo test --release -p longhaul-engine --lib hash_speed -- --ignored --nocapture`.
    /// Prints GB/s and CPU s/GB for 1 and all threads and both piece sizes.
    #[test]
    #[ignore = "a measurement, not a test: needs LONGHAUL_HASH_BENCH_FILE"]
    fn hash_speed() {
        let path = std::env::var("LONGHAUL_HASH_BENCH_FILE").expect("LONGHAUL_HASH_BENCH_FILE");
        let f = File::open(&path).unwrap();
        let size = f.metadata().unwrap().len();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk = 8 << 20;
        let grid = ChunkGrid::new(size, chunk);
        let every: Vec<u32> = (0..grid.chunks()).collect();
        let _ = hash_all_chunks(&f, &grid, cores).unwrap(); // warm the page cache
        for piece in [PIECE, HASH_PIECE] {
            for threads in [1, cores] {
                let cpu0 = cpu_seconds();
                let t0 = std::time::Instant::now();
                let h = hash_chunks_in(&f, &grid, &every, threads, piece).unwrap();
                let wall = t0.elapsed().as_secs_f64();
                let cpu = cpu_seconds() - cpu0;
                let gb = size as f64 / 1e9;
                println!(
                    "piece {:4} KiB, {threads} thread(s): {:.2} GB/s, {:.3} CPU s/GB ({} chunks of {} MiB, {:.3} s)",
                    piece >> 10,
                    gb / wall,
                    cpu / gb,
                    h.len(),
                    chunk >> 20,
                    wall
                );
            }
        }
    }

    fn cpu_seconds() -> f64 {
        // utime + stime of this process, in clock ticks (100 per second on Linux).
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let after = stat.rsplit_once(')').unwrap().1;
        let f: Vec<&str> = after.split_whitespace().collect();
        (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
    }
}
