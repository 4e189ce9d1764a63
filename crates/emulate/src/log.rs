//! The per-packet log (`--log FILE`) and its report: one text line per packet event,
//! `T_NS DIR EVENT BYTES SEGMENTS` (DIR `ab` or `ba`; EVENT `in`, `out`, `drop`), and from
//! it the inter-packet gap histogram and the rate in 0.25 ms bins of what was delivered.

use std::fs::File;
use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};

/// Bytes a thread buffers before it appends them to the shared file.
const CHUNK: usize = 64 * 1024;

/// What happened to a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEvent {
    /// Read from the sending end.
    In,
    /// Written to the receiving end.
    Out,
    /// Segments dropped (queue or loss); BYTES is 0.
    Drop,
}

/// One direction's writer into the shared log file (whole lines per append).
#[derive(Debug)]
pub struct PacketLog {
    file: Arc<Mutex<File>>,
    dir: &'static str,
    buf: String,
}

impl PacketLog {
    /// A writer for direction `dir` (`"ab"` or `"ba"`) appending to `file`.
    pub fn new(file: Arc<Mutex<File>>, dir: &'static str) -> PacketLog {
        PacketLog {
            file,
            dir,
            buf: String::with_capacity(CHUNK + 256),
        }
    }

    /// Records one event.
    pub fn record(&mut self, t_ns: u64, event: LogEvent, bytes: usize, segments: u32) {
        use std::fmt::Write as _;
        let ev = match event {
            LogEvent::In => "in",
            LogEvent::Out => "out",
            LogEvent::Drop => "drop",
        };
        let _ = writeln!(self.buf, "{t_ns} {} {ev} {bytes} {segments}", self.dir);
        if self.buf.len() >= CHUNK {
            self.flush();
        }
    }

    /// Appends what is buffered to the file.
    pub fn flush(&mut self) {
        if let Ok(mut f) = self.file.lock() {
            let _ = f.write_all(self.buf.as_bytes());
        }
        self.buf.clear();
    }
}

impl Drop for PacketLog {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Burstiness of the delivered packets of one direction.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DirectionReport {
    /// `ab` or `ba`.
    pub dir: String,
    /// Packets delivered.
    pub packets: u64,
    /// Segments delivered.
    pub segments: u64,
    /// Bytes delivered.
    pub bytes: u64,
    /// Gap histogram between consecutive deliveries: `(upper bound in us, count)`; the
    /// first bucket is < 1 us, then powers of two.
    pub gap_histogram: Vec<(u64, u64)>,
    /// Delivered bit rate in each 0.25 ms bin from the first to the last delivery (bit/s).
    pub bin_rates_bps: Vec<f64>,
}

/// Width of a rate bin.
pub const BIN_NS: u64 = 250_000;
/// Bins kept per direction (about 4 minutes); later deliveries are not binned.
const MAX_BINS: usize = 1_000_000;

/// Reads a log and reports each direction's deliveries.
pub fn report(reader: impl BufRead) -> io::Result<Vec<DirectionReport>> {
    let mut dirs: Vec<(DirectionReport, Option<u64>, u64, [u64; 32])> = Vec::new();
    for line in reader.lines() {
        let line = line?;
        let mut f = line.split_ascii_whitespace();
        let (Some(t), Some(dir), Some(ev), Some(bytes), Some(segs)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if ev != "out" {
            continue;
        }
        let (Ok(t), Ok(bytes), Ok(segs)) =
            (t.parse::<u64>(), bytes.parse::<u64>(), segs.parse::<u64>())
        else {
            continue;
        };
        let idx = match dirs.iter().position(|d| d.0.dir == dir) {
            Some(i) => i,
            None => {
                dirs.push((
                    DirectionReport {
                        dir: dir.to_owned(),
                        ..Default::default()
                    },
                    None,
                    t,
                    [0; 32],
                ));
                dirs.len() - 1
            }
        };
        let (rep, last, first, hist) = &mut dirs[idx];
        rep.packets += 1;
        rep.segments += segs;
        rep.bytes += bytes;
        if let Some(prev) = *last {
            let us = t.saturating_sub(prev) / 1000;
            hist[(64 - us.leading_zeros() as usize).min(31)] += 1;
        }
        *last = Some(t);
        let bin = (t.saturating_sub(*first) / BIN_NS) as usize;
        if bin < MAX_BINS {
            if rep.bin_rates_bps.len() <= bin {
                rep.bin_rates_bps.resize(bin + 1, 0.0);
            }
            rep.bin_rates_bps[bin] += bytes as f64 * 8.0 / (BIN_NS as f64 / 1e9);
        }
    }
    Ok(dirs
        .into_iter()
        .map(|(mut rep, _, _, hist)| {
            let top = hist.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
            rep.gap_histogram = (0..top).map(|k| (1u64 << k, hist[k])).collect();
            rep
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_gaps_and_bin_rates() {
        let text = "0 ab out 1000 1\n100000 ab in 5 1\n500000 ab out 1000 1\n500500 ab out 3000 2\n10 ba out 64 1\nbad line\n";
        let reps = report(text.as_bytes()).unwrap();
        assert_eq!(reps.len(), 2);
        let ab = &reps[0];
        assert_eq!((ab.packets, ab.segments, ab.bytes), (3, 4, 5000));
        // gaps: 500 us -> bucket [256,512) (upper 512), 0.5 us -> bucket 0 (upper 1)
        assert_eq!(ab.gap_histogram.iter().map(|g| g.1).sum::<u64>(), 2);
        assert_eq!(ab.gap_histogram[0], (1, 1));
        assert_eq!(ab.gap_histogram[9], (512, 1));
        assert_eq!(ab.bin_rates_bps.len(), 3);
        assert_eq!(ab.bin_rates_bps[0], 8000.0 / 250e-6);
        assert_eq!(ab.bin_rates_bps[1], 0.0);
        assert_eq!(ab.bin_rates_bps[2], 32000.0 / 250e-6);
        assert_eq!(reps[1].packets, 1);
    }
}
