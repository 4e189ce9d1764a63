//! A path's record in jump-start's path cache (see `docs/jump-start.md`): what the last
//! run held on the path, the text the cache file holds it as, and how a new run's record
//! replaces or confirms the old one. The file itself (where it is, how it is read and
//! replaced) is the engine's `path_cache`.

use std::net::IpAddr;
use std::time::Duration;

use crate::PathMemory;

/// Most records kept.
pub const MAX_ENTRIES: usize = 256;
/// Largest file read (a full file of the longest lines is under 32 KiB).
pub const MAX_FILE_BYTES: u64 = 64 << 10;
/// Rate change within which a new run confirms the record (10 %).
const SAME_RATE: f64 = 0.10;
/// First line of the file.
const HEADER: &str = "longhaul-paths 1";

/// One path's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathRecord {
    /// The peer's address.
    pub peer: IpAddr,
    /// This end's address toward it.
    pub local: IpAddr,
    /// The delivered rate the run held, all streams, bit/s.
    pub rate_bps: u64,
    /// Its minimum RTT, microseconds.
    pub min_rtt_us: u64,
    /// Its MSS, bytes.
    pub mss: u32,
    /// When it was written, seconds since the Unix epoch.
    pub written_unix: u64,
    /// Runs in a row that found about this rate.
    pub confirmations: u32,
}

impl PathRecord {
    /// What the jump-start decision sees of this record at `now` (seconds since the epoch).
    pub fn memory(&self, now_unix: u64) -> PathMemory {
        PathMemory {
            rate_bps: self.rate_bps,
            min_rtt: Duration::from_micros(self.min_rtt_us),
            mss: self.mss,
            // A record from the future (a clock set back) counts as old.
            age: match now_unix.checked_sub(self.written_unix) {
                Some(s) => Duration::from_secs(s),
                None => Duration::MAX,
            },
            confirmations: self.confirmations,
        }
    }
}

/// Parses the file's text; lines that do not parse are skipped, a wrong header gives none.
pub fn parse(text: &str) -> Vec<PathRecord> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Vec::new();
    }
    lines.filter_map(parse_line).take(MAX_ENTRIES).collect()
}

fn parse_line(line: &str) -> Option<PathRecord> {
    let f: Vec<&str> = line.split(' ').collect();
    let [peer, local, rate, rtt, mss, written, conf] = f.as_slice() else {
        return None;
    };
    Some(PathRecord {
        peer: peer.parse().ok()?,
        local: local.parse().ok()?,
        rate_bps: rate.parse().ok()?,
        min_rtt_us: rtt.parse().ok()?,
        mss: mss.parse().ok()?,
        written_unix: written.parse().ok()?,
        confirmations: conf.parse().ok()?,
    })
}

/// The file's text for `records`.
pub fn encode(records: &[PathRecord]) -> String {
    let mut s = String::from(HEADER);
    s.push('\n');
    for r in records {
        s.push_str(&format!(
            "{} {} {} {} {} {} {}\n",
            r.peer, r.local, r.rate_bps, r.min_rtt_us, r.mss, r.written_unix, r.confirmations
        ));
    }
    s
}

/// Puts `new` in `records` (replacing the same path's record; counting a confirmation
/// when its rate is within 10 % of the old one and the RTT matches) and drops the oldest
/// records past [`MAX_ENTRIES`].
pub fn merge(records: &mut Vec<PathRecord>, mut new: PathRecord) {
    if let Some(i) = records
        .iter()
        .position(|r| r.peer == new.peer && r.local == new.local)
    {
        let old = records.remove(i);
        let same_rate =
            (old.rate_bps as f64 - new.rate_bps as f64).abs() <= old.rate_bps as f64 * SAME_RATE;
        let same_rtt = crate::jump_start::rtt_matches(
            Duration::from_micros(old.min_rtt_us),
            Duration::from_micros(new.min_rtt_us),
        );
        new.confirmations = if same_rate && same_rtt {
            old.confirmations.saturating_add(1)
        } else {
            1
        };
    } else {
        new.confirmations = 1;
    }
    records.push(new);
    if records.len() > MAX_ENTRIES {
        records.sort_by_key(|r| std::cmp::Reverse(r.written_unix));
        records.truncate(MAX_ENTRIES);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(peer: &str, rate: u64, written: u64) -> PathRecord {
        PathRecord {
            peer: peer.parse().unwrap(),
            local: "10.0.0.1".parse().unwrap(),
            rate_bps: rate,
            min_rtt_us: 436_000,
            mss: 4418,
            written_unix: written,
            confirmations: 1,
        }
    }

    #[test]
    fn records_round_trip_and_bad_lines_are_skipped() {
        let rs = vec![rec("10.0.0.2", 980_000_000, 1000), rec("fd00::2", 5, 7)];
        let mut text = encode(&rs);
        text.push_str("garbage line\n10.0.0.3 x 1 2 3 4 5\n");
        assert_eq!(parse(&text), rs);
        assert!(parse("not the header\n10.0.0.2 10.0.0.1 1 2 3 4 5\n").is_empty());
    }

    #[test]
    fn a_similar_rate_confirms_a_different_one_restarts() {
        let mut rs = Vec::new();
        merge(&mut rs, rec("10.0.0.2", 1_000_000_000, 1));
        merge(&mut rs, rec("10.0.0.2", 950_000_000, 2));
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].confirmations, 2);
        assert_eq!(rs[0].rate_bps, 950_000_000);
        merge(&mut rs, rec("10.0.0.2", 500_000_000, 3));
        assert_eq!(rs[0].confirmations, 1);
    }

    #[test]
    fn the_oldest_records_go_first() {
        let mut rs = Vec::new();
        for i in 0..=MAX_ENTRIES as u64 {
            let peer = format!("10.1.{}.{}", i / 256, i % 256);
            merge(&mut rs, rec(&peer, 1, 100 + i));
        }
        assert_eq!(rs.len(), MAX_ENTRIES);
        assert!(rs.iter().all(|r| r.written_unix > 100));
    }

    #[test]
    fn a_record_from_the_future_is_old() {
        let r = rec("10.0.0.2", 1, 1000);
        assert_eq!(r.memory(999).age, Duration::MAX);
        assert_eq!(r.memory(1010).age, Duration::from_secs(10));
    }
}
