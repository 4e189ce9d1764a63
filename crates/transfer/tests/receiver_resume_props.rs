//! Property test of resume at the receiver core: a file received over several sessions,
//! each ended by a crash at a random point (possibly mid-way through appending a manifest
//! record), finishes complete, and re-sends at most one chunk per crash (the one in flight
//! when it happened). Corrupt chunks are refused and never recorded.

use longhaul_transfer::manifest::RECORD_LEN;
use longhaul_transfer::{chunk_hash, ChunkCheck, FileReceiver, PartStart, SourceIdentity};
use proptest::prelude::*;

const CS: u64 = 4096;

#[derive(Debug, Clone)]
struct Session {
    /// Order in which the sender sends the chunks it believes missing (a permutation seed).
    rotate: usize,
    /// Chunks processed before the crash (None: no crash, run to the end).
    crash_after: Option<usize>,
    /// How many bytes of the in-flight record reach the disk at the crash (0..RECORD_LEN).
    torn_bytes: usize,
    /// Every n-th chunk arrives corrupted once.
    corrupt_every: usize,
}

fn arb_session() -> impl Strategy<Value = Session> {
    (
        any::<usize>(),
        prop::option::of(0usize..6),
        0..RECORD_LEN,
        2usize..7,
    )
        .prop_map(|(rotate, crash_after, torn_bytes, corrupt_every)| Session {
            rotate,
            crash_after,
            torn_bytes,
            corrupt_every,
        })
}

proptest! {
    #[test]
    fn crashes_resend_at_most_one_chunk_each(
        size in 0u64..12 * CS,
        sessions in proptest::collection::vec(arb_session(), 1..8),
    ) {
        let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        let source = SourceIdentity { size, mtime_secs: 1, mtime_nanos: 2, fingerprint: 3 };
        let chunk = |i: u32| {
            let a = (u64::from(i) * CS) as usize;
            &data[a..(a + CS as usize).min(data.len())]
        };
        let mut disk: Option<Vec<u8>> = None;
        let mut writes = 0u64;
        let mut crashes = 0u64;
        let mut plan = sessions.clone();
        // After the scripted sessions, one clean session finishes the file.
        plan.push(Session { rotate: 0, crash_after: None, torn_bytes: 0, corrupt_every: usize::MAX });
        let mut complete = false;
        for s in plan {
            let o = FileReceiver::open(source, CS, disk.as_deref()).unwrap();
            let mut manifest = match o.start {
                PartStart::Resume { manifest_len } => disk.take().unwrap()[..manifest_len].to_vec(),
                PartStart::Fresh { manifest_header, .. } => manifest_header.to_vec(),
            };
            let mut r = o.receiver;
            let count = r.manifest().chunk_count();
            let have: Vec<u32> = o.have.iter().flat_map(|&(a, n)| a..a + n).collect();
            let mut missing: Vec<u32> = (0..count).filter(|i| !have.contains(i)).collect();
            if !missing.is_empty() {
                let k = s.rotate % missing.len();
                missing.rotate_left(k);
            }
            let mut crashed = false;
            for (n, &i) in missing.iter().enumerate() {
                let c = chunk(i);
                let h = chunk_hash(c, u64::from(i) * CS, count == 1);
                let off = u64::from(i) * CS;
                if n % s.corrupt_every == 1 {
                    let mut bad = c.to_vec();
                    bad.push(1);
                    prop_assert!(r.check_chunk(i, off, c.len() as u64, h, chunk_hash(&bad, off, count == 1)).is_err());
                }
                prop_assert_eq!(r.check_chunk(i, off, c.len() as u64, h, h).unwrap(), ChunkCheck::Write);
                writes += 1;
                let rec = r.chunk_durable(i, h).unwrap().unwrap();
                if s.crash_after == Some(n) {
                    manifest.extend_from_slice(&rec[..s.torn_bytes]);
                    crashed = true;
                    break;
                }
                manifest.extend_from_slice(&rec);
            }
            disk = Some(manifest);
            if crashed {
                crashes += 1;
            } else {
                prop_assert!(r.is_complete());
                complete = true;
                break;
            }
        }
        prop_assert!(complete);
        let count = size.div_ceil(CS).max(1);
        prop_assert!(writes <= count + crashes, "writes {} > chunks {} + crashes {}", writes, count, crashes);
    }
}
