//! The receiving side of one file, without I/O: what to do with the part file and the
//! manifest when the file is announced, whether an arriving chunk is accepted, when its
//! manifest record may be written, and whether the finished file may be put in place.
//!
//! The engine drives it like this, per file:
//! 1. [`FileReceiver::open`] with the source identity, the chunk size and the stored
//!    manifest bytes (if any). [`PartStart::Resume`]: keep the part file, truncate the
//!    manifest file to `manifest_len`, tell the sender [`Opened::have`].
//!    [`PartStart::Fresh`]: recreate the part file (`set_len(size)`, so holes stay holes)
//!    and write `manifest_header` as a new manifest.
//! 2. Per chunk: hash the payload, then [`FileReceiver::check_chunk`]. On
//!    [`ChunkCheck::Write`] write it (only [`crate::sparse::data_ranges`]), then
//!    [`FileReceiver::chunk_durable`] and append the returned record to the manifest, then
//!    ack. A record is never written before its data; records are re-hashed on resume,
//!    so a power cut that kept a record but not its data only costs that chunk again.
//! 3. When [`FileReceiver::is_complete`], merge the chunk hashes into the file's BLAKE3
//!    ([`crate::integrity::file_digest`]) and [`FileReceiver::verify_digest`] it against
//!    the sender's; only then rename into place.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::integrity::{ChunkHash, Digest};
use crate::manifest::{
    decide_resume, ResumeDecision, ResumeManifest, SourceIdentity, StartOverReason, HEADER_LEN,
    RECORD_LEN,
};

/// Receiver state of one file.
#[derive(Debug, Clone)]
pub struct FileReceiver {
    manifest: ResumeManifest,
    /// Chunks accepted and being written, with how many copies (a chunk the sender sent
    /// again on another stream may arrive while the first copy is still being written).
    writing: BTreeMap<u32, u32>,
}

/// What to do with the part file and the manifest file when a file is announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartStart {
    /// Keep the part file; truncate the manifest file to `manifest_len` (drops a torn
    /// last record) before appending to it.
    Resume {
        /// Valid length of the stored manifest.
        manifest_len: usize,
    },
    /// Start the part file over and write a new manifest beginning with these bytes.
    Fresh {
        /// The new manifest's header.
        manifest_header: [u8; HEADER_LEN],
        /// Why a stored manifest was not used (`None`: there was none).
        reason: Option<StartOverReason>,
    },
}

/// Result of [`FileReceiver::open`].
#[derive(Debug, Clone)]
pub struct Opened {
    /// The receiver.
    pub receiver: FileReceiver,
    /// What to do with the files on disk.
    pub start: PartStart,
    /// Chunks already verified, as `(first, count)` runs for the sender.
    pub have: Vec<(u32, u32)>,
}

/// Verdict on an arriving chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkCheck {
    /// Hash and placement are right: write it, sync, then call `chunk_durable`.
    Write,
    /// Already verified (a retry that crossed an ack): ack again, do not write.
    Duplicate,
}

impl FileReceiver {
    /// Decides between resuming and starting over; see the module docs.
    pub fn open(
        source: SourceIdentity,
        chunk_size: u64,
        stored_manifest: Option<&[u8]>,
    ) -> Result<Opened> {
        let mut valid_len = 0;
        let stored = stored_manifest.map(|bytes| {
            ResumeManifest::parse(bytes).map(|l| {
                valid_len = l.valid_len;
                l.manifest
            })
        });
        let (manifest, start) = match decide_resume(stored, &source, chunk_size) {
            ResumeDecision::Continue(m) => (
                m,
                PartStart::Resume {
                    manifest_len: valid_len,
                },
            ),
            ResumeDecision::Fresh => {
                let m = ResumeManifest::new(source, chunk_size)?;
                let manifest_header = m.header_bytes();
                (
                    m,
                    PartStart::Fresh {
                        manifest_header,
                        reason: None,
                    },
                )
            }
            ResumeDecision::StartOver(reason) => {
                let m = ResumeManifest::new(source, chunk_size)?;
                let manifest_header = m.header_bytes();
                (
                    m,
                    PartStart::Fresh {
                        manifest_header,
                        reason: Some(reason),
                    },
                )
            }
        };
        let have = manifest.verified_runs();
        Ok(Opened {
            receiver: Self {
                manifest,
                writing: BTreeMap::new(),
            },
            start,
            have,
        })
    }

    /// The manifest as it stands.
    pub fn manifest(&self) -> &ResumeManifest {
        &self.manifest
    }

    /// Checks an arriving chunk: its index, its placement (`offset`, `len` as the sender
    /// announced them) and its hash (`claimed` by the sender, `computed` over the bytes
    /// received, zeros included for a hole chunk).
    pub fn check_chunk(
        &mut self,
        index: u32,
        offset: u64,
        len: u64,
        claimed: ChunkHash,
        computed: ChunkHash,
    ) -> Result<ChunkCheck> {
        let m = &self.manifest;
        if index >= m.chunk_count() {
            return Err(Error::ChunkPlacement {
                index,
                offset,
                len,
                why: "index beyond the file's chunk count",
            });
        }
        if offset != u64::from(index) * m.chunk_size() || len != m.chunk_len(index) {
            return Err(Error::ChunkPlacement {
                index,
                offset,
                len,
                why: "offset or length does not match the chunk grid",
            });
        }
        if claimed != computed {
            return Err(Error::ChunkHashMismatch {
                index,
                claimed,
                computed,
            });
        }
        if let Some(h) = m.verified_hash(index) {
            return if h == computed {
                Ok(ChunkCheck::Duplicate)
            } else {
                Err(Error::ManifestConflict { index })
            };
        }
        *self.writing.entry(index).or_insert(0) += 1;
        Ok(ChunkCheck::Write)
    }

    /// The chunk accepted by `check_chunk` is written: records it and returns the
    /// manifest record to append before acking. `None` if it was already
    /// recorded.
    pub fn chunk_durable(
        &mut self,
        index: u32,
        hash: ChunkHash,
    ) -> Result<Option<[u8; RECORD_LEN]>> {
        if !self.unmark_writing(index) {
            return Err(Error::ChunkPlacement {
                index,
                offset: 0,
                len: 0,
                why: "chunk_durable without a successful check_chunk",
            });
        }
        self.manifest.record_verified(index, hash)
    }

    /// Writing an accepted chunk failed; it will come again.
    pub fn chunk_abandoned(&mut self, index: u32) {
        self.unmark_writing(index);
    }

    /// Drops one copy of `index` from the chunks being written; false if there was none.
    fn unmark_writing(&mut self, index: u32) -> bool {
        match self.writing.get_mut(&index) {
            None => false,
            Some(1) => {
                self.writing.remove(&index);
                true
            }
            Some(n) => {
                *n -= 1;
                true
            }
        }
    }

    /// Every chunk recorded as verified.
    pub fn is_complete(&self) -> bool {
        self.manifest.is_complete()
    }

    /// The last gate before the rename: the file must be complete and the BLAKE3 the
    /// receiver computed over the part file must equal the sender's.
    pub fn verify_digest(&self, ours: &Digest, senders: &Digest) -> Result<()> {
        if !self.is_complete() {
            return Err(Error::NotComplete {
                verified: self.manifest.verified_count(),
                chunks: self.manifest.chunk_count(),
            });
        }
        if ours != senders {
            return Err(Error::DigestMismatch {
                ours: crate::integrity::digest_hex(ours),
                senders: crate::integrity::digest_hex(senders),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The receiver core compares hashes only; any hash function serves here.
    fn chunk_hash(c: &[u8]) -> ChunkHash {
        crate::integrity::chunk_hash(c, 0, true)
    }

    fn hh(n: u64) -> ChunkHash {
        let mut h = [0u8; 32];
        h[..8].copy_from_slice(&n.to_le_bytes());
        h
    }

    const CS: u64 = 4096;

    fn src(size: u64) -> SourceIdentity {
        SourceIdentity {
            size,
            mtime_secs: 5,
            mtime_nanos: 6,
            fingerprint: 7,
        }
    }

    #[test]
    fn fresh_resume_and_commit() {
        let data: Vec<u8> = (0..3 * CS as usize + 10).map(|i| (i % 253) as u8).collect();
        let s = src(data.len() as u64);
        let o = FileReceiver::open(s, CS, None).unwrap();
        let PartStart::Fresh {
            manifest_header,
            reason: None,
        } = o.start
        else {
            panic!("{:?}", o.start)
        };
        assert!(o.have.is_empty());
        let mut r = o.receiver;
        let mut disk = manifest_header.to_vec();
        let chunk = |i: usize| &data[i * CS as usize..((i + 1) * CS as usize).min(data.len())];
        for i in [2u32, 0] {
            let c = chunk(i as usize);
            let h = chunk_hash(c);
            let off = u64::from(i) * CS;
            assert_eq!(
                r.check_chunk(i, off, c.len() as u64, h, h).unwrap(),
                ChunkCheck::Write
            );
            disk.extend(r.chunk_durable(i, h).unwrap().unwrap());
        }
        // A bad hash, a wrong offset, a chunk past the end: refused.
        let c1 = chunk(1);
        assert!(matches!(
            r.check_chunk(1, CS, CS, hh(1), hh(2)),
            Err(Error::ChunkHashMismatch { .. })
        ));
        assert!(r.check_chunk(1, CS + 1, CS, hh(1), hh(1)).is_err());
        assert!(r.check_chunk(4, 4 * CS, 0, hh(1), hh(1)).is_err());
        assert!(r.chunk_durable(1, hh(1)).is_err(), "durable without check");
        // Crash here; reopen from the manifest bytes.
        let o = FileReceiver::open(s, CS, Some(&disk)).unwrap();
        assert_eq!(
            o.start,
            PartStart::Resume {
                manifest_len: disk.len()
            }
        );
        assert_eq!(o.have, vec![(0, 1), (2, 1)]);
        let mut r = o.receiver;
        let h0 = chunk_hash(chunk(0));
        assert_eq!(
            r.check_chunk(0, 0, CS, h0, h0).unwrap(),
            ChunkCheck::Duplicate
        );
        let h1 = chunk_hash(c1);
        assert_eq!(r.check_chunk(1, CS, CS, h1, h1).unwrap(), ChunkCheck::Write);
        let ours = crate::integrity::chunk_hash(&data, 0, true);
        assert!(r.verify_digest(&ours, &ours).is_err(), "not complete yet");
        r.chunk_durable(1, h1).unwrap().unwrap();
        r.check_chunk(3, 3 * CS, 10, chunk_hash(chunk(3)), chunk_hash(chunk(3)))
            .unwrap();
        r.chunk_durable(3, chunk_hash(chunk(3))).unwrap();
        assert!(r.is_complete());
        r.verify_digest(&ours, &ours).unwrap();
        assert!(matches!(
            r.verify_digest(&ours, &[0; 32]),
            Err(Error::DigestMismatch { .. })
        ));
    }

    #[test]
    fn two_copies_of_one_chunk_in_flight() {
        let o = FileReceiver::open(src(2 * CS), CS, None).unwrap();
        let mut r = o.receiver;
        let c = vec![7u8; CS as usize];
        let h = chunk_hash(&c);
        assert_eq!(r.check_chunk(1, CS, CS, h, h).unwrap(), ChunkCheck::Write);
        assert_eq!(r.check_chunk(1, CS, CS, h, h).unwrap(), ChunkCheck::Write);
        assert!(r.chunk_durable(1, h).unwrap().is_some());
        assert_eq!(
            r.chunk_durable(1, h).unwrap(),
            None,
            "second copy: no second record"
        );
        assert!(r.chunk_durable(1, h).is_err());
        assert_eq!(
            r.check_chunk(1, CS, CS, h, h).unwrap(),
            ChunkCheck::Duplicate
        );
    }

    #[test]
    fn changed_source_starts_over() {
        let mut m = ResumeManifest::new(src(3 * CS), CS).unwrap();
        let mut disk = m.header_bytes().to_vec();
        disk.extend(m.record_verified(0, hh(9)).unwrap().unwrap());
        let o = FileReceiver::open(
            SourceIdentity {
                mtime_secs: 99,
                ..src(3 * CS)
            },
            CS,
            Some(&disk),
        )
        .unwrap();
        assert!(matches!(
            o.start,
            PartStart::Fresh {
                reason: Some(StartOverReason::SourceChanged { .. }),
                ..
            }
        ));
        assert!(o.have.is_empty());
        let o = FileReceiver::open(src(3 * CS), CS, Some(b"garbage")).unwrap();
        assert!(matches!(
            o.start,
            PartStart::Fresh {
                reason: Some(StartOverReason::Corrupt(_)),
                ..
            }
        ));
    }
}
