//! The simulated sending end: the real [`SendSession`] and the real source files, driven
//! as `longhaul_engine::cp::send` drives them, with streams of the simulated network in
//! place of sockets and the virtual clock in place of `Instant::now`.
//!
//! Differences from the threaded driver, all in timing only: work happens in zero virtual
//! time; a data stream takes its next work unit whenever its send buffer has room (the
//! threaded driver's `write_all` returns at that moment too); chunks the receiver already
//! has are hashed at once instead of on a helper thread; no chunk is looked up as a hole
//! (the scenarios' files are not sparse); there is no rate probe (the transport model's
//! pacing stands for the held rate).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use longhaul_engine::cp::walk::SourceFile;
use longhaul_proto::transfer::{
    decode_transfer_frame, encode_transfer_frame, ChunkHeader, EntryId, TransferMessage,
};
use longhaul_transfer::scheduler::{Chunk, StreamId};
use longhaul_transfer::session::{
    SendConfig, SendEvent, SendInput, SendOutcome, SendSession, Work,
};
use longhaul_transfer::FileHashes;

use super::net::Net;

/// A chunk by (entry, index).
pub type ChunkKey = (EntryId, u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamState {
    Open,
    Closed,
    Failed,
}

/// The sending end of one run.
pub struct SimSender {
    session: SendSession,
    origins: Vec<PathBuf>,
    open: BTreeMap<EntryId, File>,
    control_out: usize,
    control_in: usize,
    streams: Vec<(usize, StreamState)>,
    inbox: Vec<u8>,
    epoch: Instant,
    buf: Vec<u8>,
    /// When every file was committed (virtual ns).
    pub done_at: Option<u64>,
    /// Chunks put into a stream (with their payload bytes), in this run.
    pub sent: BTreeMap<ChunkKey, u64>,
    /// Chunks the receiver acked, in this run.
    pub acked: BTreeSet<ChunkKey>,
}

impl SimSender {
    /// The sending end of `files` over the given streams; the file list goes out at once.
    pub fn new(
        files: &[SourceFile],
        chunk_size: u64,
        control: (usize, usize),
        data: &[usize],
        net: &mut Net,
    ) -> Self {
        let entries = files.iter().map(|f| f.entry.clone()).collect();
        let session = SendSession::new(
            entries,
            SendConfig {
                chunk_size,
                checksum_only: false,
                streams: data.len() as u16,
            },
        )
        .expect("a session for the file list");
        let mut s = SimSender {
            session,
            origins: files.iter().map(|f| f.origin.clone()).collect(),
            open: BTreeMap::new(),
            control_out: control.0,
            control_in: control.1,
            streams: data.iter().map(|&f| (f, StreamState::Open)).collect(),
            inbox: Vec::new(),
            epoch: Instant::now(),
            buf: Vec::new(),
            done_at: None,
            sent: BTreeMap::new(),
            acked: BTreeSet::new(),
        };
        s.pump(net);
        s
    }

    /// What the session reports.
    pub fn outcome(&self) -> SendOutcome {
        self.session.outcome()
    }

    /// Sends what the session queued and does the work it asks for.
    fn pump(&mut self, net: &mut Net) {
        loop {
            let mut out = Vec::new();
            while let Some(m) = self.session.poll_transmit() {
                encode_transfer_frame(&m, &mut out).expect("a valid control message");
            }
            if !out.is_empty() {
                net.flows[self.control_out].write(&out);
            }
            let Some(SendEvent::HashFromFile { entry, chunks }) = self.session.poll_event() else {
                return;
            };
            let size = self.session.entries()[entry.slot()].size;
            let hashes = FileHashes::new(size, self.session.chunk_size());
            for i in chunks {
                let (off, len) = hashes.chunk_range(i);
                let mut h = hashes.hasher(i);
                let bytes = self.read(entry, off, len);
                h.update(bytes);
                let hash = h.finish();
                self.session
                    .handle(SendInput::Hashed {
                        file: entry,
                        index: i,
                        hash,
                    })
                    .expect("a hash is never refused");
            }
        }
    }

    fn read(&mut self, entry: EntryId, off: u64, len: u64) -> &[u8] {
        let origin = &self.origins[entry.slot()];
        let file = self
            .open
            .entry(entry)
            .or_insert_with(|| File::open(origin).expect("the source file opens"));
        self.buf.resize(len as usize, 0);
        file.read_exact_at(&mut self.buf, off)
            .expect("the source file reads");
        &self.buf
    }

    /// Handles what arrived and fills the data streams; an error once the session failed.
    pub fn step(&mut self, net: &mut Net) -> Result<(), String> {
        let ctl = &mut net.flows[self.control_in];
        let n = ctl.readable();
        self.inbox.extend_from_slice(ctl.read(n));
        let mut at = 0;
        while let Some((msg, used)) =
            decode_transfer_frame(&self.inbox[at..]).map_err(|e| e.to_string())?
        {
            at += used;
            if let TransferMessage::ChunkVerified { file, index } = msg {
                self.acked.insert((file, index));
            }
            let r = self.session.handle(msg);
            self.pump(net);
            r.map_err(|e| e.to_string())?;
        }
        self.inbox.drain(..at);
        if self.done_at.is_none() && self.session.is_done() {
            self.pump(net);
            self.done_at = Some(net.now);
            // The process ends: the receiver sees each stream's end.
            for (flow, state) in &mut self.streams {
                if *state == StreamState::Open {
                    net.flows[*flow].close();
                    *state = StreamState::Closed;
                }
            }
            net.flows[self.control_out].close();
        }
        if self.done_at.is_some() {
            return Ok(());
        }
        for i in 0..self.streams.len() {
            self.fill(i, net);
        }
        Ok(())
    }

    /// Data stream `i` takes work while its send buffer has room.
    fn fill(&mut self, i: usize, net: &mut Net) {
        let (flow, state) = self.streams[i];
        let now = self.epoch + Duration::from_nanos(net.now);
        while state == StreamState::Open && net.flows[flow].send_buffer_free() {
            match self.session.next_work(StreamId(i as u32), now) {
                Work::Send(w) => {
                    for c in w.chunks {
                        self.send_chunk(&c, flow, net);
                    }
                }
                Work::Wait => return,
                Work::Finished => {
                    net.flows[flow].close();
                    self.streams[i].1 = StreamState::Closed;
                    return;
                }
            }
        }
    }

    /// One chunk: header with its hash, then its bytes (as `send::send_chunk`).
    fn send_chunk(&mut self, c: &Chunk, flow: usize, net: &mut Net) {
        let entry = self.session.entry_of(c);
        let mut hasher = self.session.hasher(c);
        let bytes = self.read(entry, c.offset, c.len);
        hasher.update(bytes);
        let header = ChunkHeader {
            file: entry,
            index: c.id.index,
            flags: 0,
            offset: c.offset,
            len: c.len as u32,
            hash: hasher.finish(),
        };
        net.flows[flow].write(&header.encode(&super::SIM_CHUNK_KEY));
        net.flows[flow].write(&self.buf);
        self.sent.insert((entry, c.id.index), c.len);
        self.session
            .handle(SendInput::ChunkSent {
                chunk: *c,
                hash: header.hash,
                payload: c.len,
            })
            .expect("a sent chunk is never refused");
        self.pump(net);
    }

    /// Data stream `i` was cut: its chunks go to the others.
    pub fn stream_failed(&mut self, i: usize) -> Result<(), String> {
        if self.streams[i].1 != StreamState::Open {
            return Ok(());
        }
        self.streams[i].1 = StreamState::Failed;
        self.session
            .handle(SendInput::StreamFailed {
                stream: StreamId(i as u32),
                why: "connection reset (simulated cut)".into(),
            })
            .map_err(|e| e.to_string())
    }
}
