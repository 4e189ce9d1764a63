//! Unit tests of the scheduler: the chunk size from the path, chunks and small-file
//! batches, acks, retries and giving up, dropped files, resume and overdue chunks.

// One Instant to offset from; the scheduler never reads a clock.
#![allow(clippy::disallowed_methods)]

use super::*;

const K4: u64 = 4096;

#[test]
fn chunk_size_from_path() {
    // 1 Gbit/s x 180 ms = 22.5 MB; 4 streams -> 5.6 MB each -> 8 MiB.
    assert_eq!(chunk_size_for(22_500_000, 4, 100 << 30), 8 << 20);
    // Tiny BDP: the floor.
    assert_eq!(chunk_size_for(1000, 1, 100 << 30), 4 << 20);
    // Huge BDP: the ceiling.
    assert_eq!(chunk_size_for(1 << 40, 1, 1 << 50), 64 << 20);
    // A 200 MiB file over 4 streams wants >= 16 chunks: 8 MiB, not 64.
    assert_eq!(chunk_size_for(1 << 40, 4, 200 << 20), 8 << 20);
    assert_eq!(chunk_size_for(0, 0, 0), 4 << 20);
}

#[test]
fn a_dropped_file_is_neither_sent_nor_waited_for() {
    let cfg = SchedulerConfig::for_chunk_size(4 * K4);
    let mut s = ChunkScheduler::new(&[12 * K4, 8 * K4], cfg).unwrap();
    let now = Instant::now();
    let a = s.next_work(StreamId(0), now).unwrap().chunks[0].id;
    let b = s.next_work(StreamId(1), now).unwrap().chunks[0].id;
    assert_eq!((a.file, b.file), (FileId(0), FileId(0)));
    assert_eq!(
        s.drop_file(FileId(0)).unwrap(),
        1,
        "one chunk of file 0 was pending"
    );
    // What was in flight: one lands verified, the other fails and is not sent again.
    s.chunk_verified(StreamId(0), a).unwrap();
    assert_eq!(s.chunk_failed(StreamId(1), b).unwrap(), Retry::Dropped);
    let rest: Vec<ChunkId> = std::iter::from_fn(|| s.next_work(StreamId(2), now))
        .flat_map(|w| w.chunks)
        .map(|c| c.id)
        .collect();
    assert!(rest.iter().all(|c| c.file == FileId(1)), "{rest:?}");
    assert_eq!(rest.len(), 2);
    for id in rest {
        s.chunk_verified(StreamId(2), id).unwrap();
    }
    assert!(s.is_finished());
    assert!(!s.is_complete(), "file 0 was dropped");
    assert!(s.drop_file(FileId(5)).is_err());
}

#[test]
fn holder_names_the_stream_a_chunk_is_in_flight_on() {
    let mut s = ChunkScheduler::new(&[40 * K4], SchedulerConfig::for_chunk_size(4 * K4)).unwrap();
    let now = Instant::now();
    let a = s.next_work(StreamId(0), now).unwrap().chunks[0].id;
    let b = s.next_work(StreamId(7), now).unwrap().chunks[0].id;
    assert_eq!(s.holder(a), Some(StreamId(0)));
    assert_eq!(s.holder(b), Some(StreamId(7)));
    s.chunk_verified(StreamId(7), b).unwrap();
    assert_eq!(s.holder(b), None, "verified: no longer in flight");
    assert_eq!(
        s.holder(ChunkId {
            file: FileId(0),
            index: 9
        }),
        None,
        "never sent"
    );
}

#[test]
fn big_file_chunks_and_small_file_batches() {
    let cfg = SchedulerConfig {
        batch_max_files: 3,
        ..SchedulerConfig::for_chunk_size(4 * K4)
    };
    // file 0: 2.5 chunks; files 1..=5 small; file 6 empty.
    let mut s = ChunkScheduler::new(&[10 * K4, 100, 200, 300, 400, 500, 0], cfg).unwrap();
    let now = Instant::now();
    let u = s.next_work(StreamId(0), now).unwrap();
    assert_eq!(u.chunks.len(), 1);
    assert_eq!((u.chunks[0].offset, u.chunks[0].len), (0, 4 * K4));
    assert_eq!(
        s.next_work(StreamId(1), now).unwrap().chunks[0].offset,
        4 * K4
    );
    assert_eq!(s.next_work(StreamId(0), now).unwrap().chunks[0].len, 2 * K4);
    let b = s.next_work(StreamId(1), now).unwrap();
    let files: Vec<_> = b.chunks.iter().map(|c| c.id.file.0).collect();
    assert_eq!(files, vec![1, 2, 3]);
    let b = s.next_work(StreamId(1), now).unwrap();
    assert_eq!(
        b.chunks.iter().map(|c| c.id.file.0).collect::<Vec<_>>(),
        vec![4, 5, 6]
    );
    assert!(s.next_work(StreamId(0), now).is_none());
    assert_eq!(s.in_flight_on(StreamId(1)).len(), 7);
    // Stream 1 dies: its chunks come back first, in order.
    let back = s.stream_failed(StreamId(1));
    assert_eq!(back.len(), 7);
    assert!(back
        .iter()
        .all(|(_, r)| *r == Retry::Requeued { attempts: 1 }));
    let again = s.next_work(StreamId(0), now).unwrap();
    assert_eq!(
        again.chunks[0].id,
        ChunkId {
            file: FileId(0),
            index: 1
        }
    );
    assert!(!s.is_finished());
}

#[test]
fn completion_only_when_all_verified() {
    let mut s = ChunkScheduler::new(&[8 * K4], SchedulerConfig::for_chunk_size(4 * K4)).unwrap();
    let now = Instant::now();
    let a = s.next_work(StreamId(0), now).unwrap().chunks[0].id;
    let b = s.next_work(StreamId(1), now).unwrap().chunks[0].id;
    assert!(
        s.chunk_verified(StreamId(0), b).is_err(),
        "b is on stream 1, not 0"
    );
    assert_eq!(s.chunk_verified(StreamId(1), b).unwrap(), None);
    assert!(s.chunk_verified(StreamId(1), b).is_err(), "verified twice");
    assert_eq!(
        s.chunk_failed(StreamId(0), a).unwrap(),
        Retry::Requeued { attempts: 1 }
    );
    assert!(!s.is_file_complete(FileId(0)));
    let a2 = s.next_work(StreamId(1), now).unwrap().chunks[0].id;
    assert_eq!(a2, a);
    assert_eq!(
        s.chunk_verified(StreamId(1), a).unwrap(),
        Some(FileCompleted {
            file: FileId(0),
            size: 8 * K4
        })
    );
    assert!(s.is_complete());
    assert_eq!(s.verified_bytes(), 8 * K4);
}

#[test]
fn no_duplicates_when_nothing_is_pending() {
    let mut s = ChunkScheduler::new(&[8 * K4], SchedulerConfig::for_chunk_size(4 * K4)).unwrap();
    let now = Instant::now();
    let slow = s.next_work(StreamId(0), now).unwrap().chunks[0].id;
    let fast = s.next_work(StreamId(1), now).unwrap().chunks[0].id;
    assert_eq!(s.chunk_verified(StreamId(1), fast).unwrap(), None);
    // The queue is dry: the free stream waits for stream 0 instead of duplicating.
    assert!(s.next_work(StreamId(1), now).is_none());
    assert_eq!(s.in_flight_chunks(), 1);
    assert_eq!(s.holder(slow), Some(StreamId(0)));
    // A failure requeues the chunk for any stream.
    assert_eq!(
        s.chunk_failed(StreamId(0), slow).unwrap(),
        Retry::Requeued { attempts: 1 }
    );
    assert_eq!(s.next_work(StreamId(1), now).unwrap().chunks[0].id, slow);
    assert!(
        s.chunk_verified(StreamId(0), slow).is_err(),
        "now on stream 1"
    );
    assert!(s.chunk_verified(StreamId(1), slow).unwrap().is_some());
    assert!(s.is_complete());
}

#[test]
fn gives_up_after_max_attempts() {
    let cfg = SchedulerConfig {
        max_attempts: 2,
        ..SchedulerConfig::for_chunk_size(4 * K4)
    };
    let mut s = ChunkScheduler::new(&[K4], cfg).unwrap();
    let now = Instant::now();
    let id = s.next_work(StreamId(0), now).unwrap().chunks[0].id;
    assert_eq!(
        s.chunk_failed(StreamId(0), id).unwrap(),
        Retry::Requeued { attempts: 1 }
    );
    s.next_work(StreamId(0), now).unwrap();
    assert_eq!(
        s.chunk_failed(StreamId(0), id).unwrap(),
        Retry::GaveUp { attempts: 2 }
    );
    assert!(s.next_work(StreamId(0), now).is_none());
    assert!(s.is_finished() && !s.is_complete());
    assert_eq!(s.given_up_chunks(), 1);
}

#[test]
fn resume_skips_verified_and_overdue_reports() {
    let mut s =
        ChunkScheduler::new(&[12 * K4, K4], SchedulerConfig::for_chunk_size(4 * K4)).unwrap();
    assert_eq!(
        s.mark_already_verified(ChunkId {
            file: FileId(0),
            index: 1
        })
        .unwrap(),
        None
    );
    assert_eq!(
        s.mark_already_verified(ChunkId {
            file: FileId(1),
            index: 0
        })
        .unwrap(),
        Some(FileCompleted {
            file: FileId(1),
            size: K4
        })
    );
    assert!(s
        .mark_already_verified(ChunkId {
            file: FileId(1),
            index: 1
        })
        .is_err());
    let t0 = Instant::now();
    let ids: Vec<_> = std::iter::from_fn(|| s.next_work(StreamId(0), t0))
        .map(|u| u.chunks[0].id.index)
        .collect();
    assert_eq!(ids, vec![0, 2]);
    let t1 = t0 + Duration::from_secs(10);
    assert_eq!(s.overdue(t1, Duration::from_secs(5)).len(), 2);
    assert!(s.overdue(t1, Duration::from_secs(20)).is_empty());
}

#[test]
fn bounds_refused() {
    assert!(ChunkScheduler::new(&[1], SchedulerConfig::for_chunk_size(10)).is_err());
    assert!(ChunkScheduler::new(&[u64::MAX], SchedulerConfig::for_chunk_size(4096)).is_err());
    let cfg = SchedulerConfig {
        max_attempts: 0,
        ..SchedulerConfig::for_chunk_size(4096)
    };
    assert!(ChunkScheduler::new(&[1], cfg).is_err());
}
