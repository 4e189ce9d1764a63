//! The simulated receiving end: the real [`RecvSession`] and the real [`Store`] on a
//! directory, driven as `longhaul_engine::cp::recv` drives them, with streams of the
//! simulated network in place of sockets.
//!
//! The order rules are the threaded driver's: a chunk is written, then its manifest
//! record appended, and only then `chunk_recorded` (which queues the ack); the store's
//! answers go back to the session in the order of its events; chunks to hash from disk
//! are hashed after the events that asked for them (the threaded driver's helper thread),
//! in zero virtual time.

use longhaul_proto::transfer::EntryId;
use std::collections::VecDeque;
use std::sync::Arc;

use longhaul_engine::cp::store::{Answer, Store};
use longhaul_proto::transfer::{
    decode_transfer_frame, encode_transfer_frame, ChunkHeader, TransferMessage,
};
use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::session::recv::{Arrival, ChunkPlan};
use longhaul_transfer::session::{RecvConfig, RecvEvent, RecvInput, RecvOutcome, RecvSession};
use longhaul_transfer::{ChunkGrid, ChunkHasher};

use super::net::Net;

/// Where a data stream's reader is.
enum Reading {
    Header,
    Payload(Box<Partial>),
    Ended,
}

/// A chunk whose payload is being read.
struct Partial {
    header: ChunkHeader,
    plan: ChunkPlan,
    hasher: ChunkHasher,
    bytes: Vec<u8>,
}

/// The receiving end of one run.
pub struct SimReceiver {
    session: RecvSession,
    store: Store,
    chunk_size: u64,
    control_in: usize,
    control_out: usize,
    streams: Vec<(usize, Reading)>,
    inbox: Vec<u8>,
    hash_jobs: VecDeque<(EntryId, Vec<u32>)>,
    /// When the sender's `TransferDone` was handled (virtual ns).
    pub done_at: Option<u64>,
}

impl SimReceiver {
    /// The receiving end writing beneath `root`.
    pub fn new(
        root: Arc<ServedRoot>,
        chunk_size: u64,
        control: (usize, usize),
        data: &[usize],
    ) -> Self {
        let session = RecvSession::new(RecvConfig::into_directory(chunk_size));
        SimReceiver {
            session,
            store: Store::new(root, chunk_size),
            chunk_size,
            control_in: control.0,
            control_out: control.1,
            streams: data.iter().map(|&f| (f, Reading::Header)).collect(),
            inbox: Vec::new(),
            hash_jobs: VecDeque::new(),
            done_at: None,
        }
    }

    /// What the session reports.
    pub fn outcome(&self) -> RecvOutcome {
        self.session.outcome()
    }

    /// Runs `f` on the session, then sends what it queued and does its file work.
    fn with<T>(
        &mut self,
        net: &mut Net,
        f: impl FnOnce(&mut RecvSession) -> Result<T, String>,
    ) -> Result<T, String> {
        let out = f(&mut self.session)?;
        self.pump(net)?;
        Ok(out)
    }

    /// Sends the queued messages and answers the events until the session asks nothing.
    fn pump(&mut self, net: &mut Net) -> Result<(), String> {
        loop {
            let mut out = Vec::new();
            while let Some(m) = self.session.poll_transmit() {
                encode_transfer_frame(&m, &mut out).expect("a valid control message");
            }
            if !out.is_empty() {
                net.flows[self.control_out].write(&out);
            }
            let mut events: Vec<RecvEvent> = Vec::new();
            while let Some(ev) = self.session.poll_event() {
                events.push(ev);
            }
            if events.is_empty() {
                break;
            }
            let mut answers = Vec::new();
            for ev in events {
                match self.store.perform(ev).map_err(|e| e.to_string())? {
                    Answer::Hash(id, chunks) => self.hash_jobs.push_back((id, chunks)),
                    Answer::Give(input) => answers.push(input),
                    Answer::None => {}
                }
            }
            let s = &mut self.session;
            for input in answers {
                s.handle(input).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// Chunks to hash from disk, as the threaded driver's helper thread does them.
    fn hash_pending(&mut self, net: &mut Net) -> Result<(), String> {
        while let Some((id, chunks)) = self.hash_jobs.pop_front() {
            let size = self
                .store
                .data(id)
                .and_then(|d| d.file().ok().and_then(|f| f.metadata().ok()))
                .map(|m| m.len())
                .ok_or_else(|| format!("file {id} has no data to hash"))?;
            let grid = ChunkGrid::new(size, self.chunk_size);
            let list = self
                .store
                .hash_chunks(id, &grid, &chunks)
                .map_err(|e| format!("reading file {id} back: {e}"))?;
            self.with(net, |s| {
                for (index, hash) in list {
                    s.handle(RecvInput::Hashed {
                        file: id,
                        index,
                        hash,
                    })
                    .map_err(|e| e.to_string())?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Handles what arrived on the control connection and the data streams.
    pub fn step(&mut self, net: &mut Net) -> Result<(), String> {
        if self.done_at.is_some() {
            return Ok(());
        }
        let ctl = &mut net.flows[self.control_in];
        let n = ctl.readable();
        self.inbox.extend_from_slice(ctl.read(n));
        let mut at = 0;
        while let Some((msg, used)) =
            decode_transfer_frame(&self.inbox[at..]).map_err(|e| e.to_string())?
        {
            at += used;
            let done = matches!(msg, TransferMessage::TransferDone { .. });
            self.with(net, |s| s.handle(msg).map_err(|e| e.to_string()))?;
            self.hash_pending(net)?;
            if done {
                self.done_at = Some(net.now);
                // As `run_receiver` does after its control loop.
                let dirs = self.session.take_dirs();
                self.store.fix_dirs(dirs);
                net.flows[self.control_out].close();
                return Ok(());
            }
        }
        self.inbox.drain(..at);
        if !self.session.is_listed() {
            return Ok(());
        }
        for i in 0..self.streams.len() {
            self.read_stream(i, net)?;
        }
        self.hash_pending(net)
    }

    /// Data stream `i` was cut: a chunk half read is dropped (the sender sends it again).
    pub fn stream_lost(&mut self, i: usize) {
        self.streams[i].1 = Reading::Ended;
    }

    /// Reads what data stream `i` delivered: headers, payloads, whole chunks.
    fn read_stream(&mut self, i: usize, net: &mut Net) -> Result<(), String> {
        let flow = self.streams[i].0;
        loop {
            let state = std::mem::replace(&mut self.streams[i].1, Reading::Ended);
            let f = &mut net.flows[flow];
            match state {
                Reading::Ended => return Ok(()),
                Reading::Header => {
                    if f.readable() < ChunkHeader::LEN {
                        if !f.at_eof() {
                            self.streams[i].1 = Reading::Header;
                        }
                        return Ok(());
                    }
                    let mut raw = [0u8; ChunkHeader::LEN];
                    raw.copy_from_slice(f.read(ChunkHeader::LEN));
                    let header = ChunkHeader::decode(&raw, &super::SIM_CHUNK_KEY)
                        .map_err(|e| format!("a data stream lost its framing: {e}"))?;
                    let plan = self
                        .session
                        .chunk_header(&header)
                        .map_err(|e| e.to_string())?;
                    let mut hasher = plan.hasher.clone();
                    if plan.hole {
                        hasher.update_zeros(u64::from(header.len));
                    }
                    self.streams[i].1 = Reading::Payload(Box::new(Partial {
                        header,
                        bytes: Vec::with_capacity(plan.payload as usize),
                        plan,
                        hasher,
                    }));
                }
                Reading::Payload(mut p) => {
                    let want = p.plan.payload as usize - p.bytes.len();
                    let piece = f.read(want);
                    p.hasher.update(piece);
                    p.bytes.extend_from_slice(piece);
                    if p.bytes.len() < p.plan.payload as usize {
                        if !f.at_eof() {
                            self.streams[i].1 = Reading::Payload(p);
                        }
                        return Ok(());
                    }
                    self.streams[i].1 = Reading::Header;
                    let Partial {
                        header,
                        plan,
                        hasher,
                        bytes,
                    } = *p;
                    self.chunk(&header, &plan, hasher, &bytes, net)?;
                }
            }
        }
    }

    /// A whole chunk: check, write, record, ack (as `recv::receive_chunk`).
    fn chunk(
        &mut self,
        h: &ChunkHeader,
        plan: &ChunkPlan,
        hasher: ChunkHasher,
        bytes: &[u8],
        net: &mut Net,
    ) -> Result<(), String> {
        let computed = hasher.finish();
        let arrival = self.with(net, |s| {
            s.chunk_arrived(h, computed).map_err(|e| e.to_string())
        })?;
        if arrival != Arrival::Write {
            return Ok(());
        }
        let data = self
            .store
            .data(plan.id)
            .ok_or_else(|| format!("file {} was never opened", plan.id))?;
        self.store
            .write_chunk(&data, plan.lazy.as_ref(), h.offset, plan.hole, bytes)
            .map_err(|e| format!("writing {}: {e}", plan.name.display()))?;
        let record = self
            .session
            .chunk_written(h.file, h.index, computed)
            .map_err(|e| e.to_string())?;
        if let Some(r) = record {
            self.store
                .append_record(&data, &r)
                .map_err(|e| format!("appending a record: {e}"))?;
        }
        self.with(net, |s| {
            s.handle(RecvInput::ChunkRecorded {
                file: h.file,
                index: h.index,
                hash: computed,
                len: u64::from(h.len),
            })
            .map_err(|e| e.to_string())
        })
    }
}
