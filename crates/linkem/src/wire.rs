//! How a surviving run of segments is written out: with a bottleneck rate, segments of one
//! super-packet leave the bottleneck back to back, one transmission time apart, so a run
//! is cut into chunks that span at most `max_burst` of bottleneck time, each released at
//! its own last segment's departure. No I/O.

use crate::gso::Layout;

/// Segments `first .. first + segments` of a packet, written at `release_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// First segment (index in the packet read from the TUN device).
    pub first: u32,
    /// Number of segments.
    pub segments: u32,
    /// When to write it (same clock as the link model).
    pub release_ns: u64,
}

/// The bottleneck as far as spacing the segments of one packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WirePacing {
    /// Bottleneck rate, `None` = unlimited (runs are written whole).
    pub rate_bps: Option<u64>,
    /// Bytes the model adds to each segment for the rate (framing).
    pub overhead_bytes: u32,
    /// Longest chunk in bottleneck time, `None` = runs are written whole.
    pub max_burst_ns: Option<u64>,
}

impl WirePacing {
    /// Bottleneck time of `bytes` in `segments` segments.
    pub fn transmission_ns(&self, bytes: u64, segments: u32) -> u64 {
        let Some(rate) = self.rate_bps.filter(|&r| r > 0) else {
            return 0;
        };
        let wire = u128::from(bytes) + u128::from(self.overhead_bytes) * u128::from(segments);
        u64::try_from(wire * 8 * 1_000_000_000 / u128::from(rate)).unwrap_or(u64::MAX)
    }

    /// Segments per chunk for packets of this layout (`u32::MAX`: write runs whole).
    pub fn chunk_segments(&self, layout: &Layout) -> u32 {
        let (Some(_), Some(max_burst_ns)) = (self.rate_bps, self.max_burst_ns) else {
            return u32::MAX;
        };
        if layout.transport.is_none() || layout.segments <= 1 {
            return u32::MAX;
        }
        let seg_ns = self
            .transmission_ns(layout.segment_wire_len(0) as u64, 1)
            .max(1);
        (max_burst_ns / seg_ns).clamp(1, u64::from(u32::MAX)) as u32
    }

    /// Appends to `out` the chunks of the run `first .. first + segments` whose last
    /// segment is released at `release_ns`; earlier chunks are released earlier by the
    /// transmission time of the segments after them.
    pub fn chunks(
        &self,
        layout: &Layout,
        first: u32,
        segments: u32,
        release_ns: u64,
        out: &mut Vec<Chunk>,
    ) {
        let chunk = self.chunk_segments(layout);
        let end = first.saturating_add(segments);
        if chunk >= segments {
            out.push(Chunk {
                first,
                segments,
                release_ns,
            });
            return;
        }
        let start = out.len();
        // Walk backwards from the run's end, accumulating the bytes sent after each chunk.
        let (mut bytes_after, mut segs_after) = (0u64, 0u32);
        let mut chunk_end = end;
        let count = segments.div_ceil(chunk);
        for i in (0..count).rev() {
            let chunk_first = first + i * chunk;
            out.push(Chunk {
                first: chunk_first,
                segments: chunk_end - chunk_first,
                release_ns: release_ns
                    .saturating_sub(self.transmission_ns(bytes_after, segs_after)),
            });
            for k in chunk_first..chunk_end {
                bytes_after += layout.segment_wire_len(k) as u64;
            }
            segs_after += chunk_end - chunk_first;
            chunk_end = chunk_first;
        }
        out[start..].reverse();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gso::Transport;

    fn jumbo_layout(segments: u32, last_payload: usize) -> Layout {
        let mss = 8948;
        Layout {
            segments,
            headers_len: 52,
            segment_payload: mss,
            payload_len: mss * (segments as usize - 1) + last_payload,
            l4_offset: 20,
            transport: Some(Transport::Tcp),
            ipv6: false,
        }
    }

    #[test]
    fn unlimited_or_unbounded_writes_runs_whole() {
        let l = jumbo_layout(7, 8948);
        for pacing in [
            WirePacing {
                rate_bps: None,
                overhead_bytes: 0,
                max_burst_ns: Some(100_000),
            },
            WirePacing {
                rate_bps: Some(1_000_000_000),
                overhead_bytes: 0,
                max_burst_ns: None,
            },
        ] {
            let mut out = Vec::new();
            pacing.chunks(&l, 2, 5, 1_000_000, &mut out);
            assert_eq!(
                out,
                vec![Chunk {
                    first: 2,
                    segments: 5,
                    release_ns: 1_000_000
                }]
            );
        }
    }

    #[test]
    fn segments_are_spaced_by_their_transmission_time() {
        // 9000-byte segments at 1 Gbit/s: 72 us each; a 100 us bound fits one.
        let l = jumbo_layout(4, 8948);
        let p = WirePacing {
            rate_bps: Some(1_000_000_000),
            overhead_bytes: 0,
            max_burst_ns: Some(100_000),
        };
        let mut out = Vec::new();
        p.chunks(&l, 0, 4, 1_000_000, &mut out);
        let want: Vec<Chunk> = (0..4)
            .map(|k| Chunk {
                first: k,
                segments: 1,
                release_ns: 1_000_000 - (3 - u64::from(k)) * 72_000,
            })
            .collect();
        assert_eq!(out, want);
    }

    #[test]
    fn chunks_group_segments_up_to_the_bound_and_count_overhead() {
        // Last segment short (1052 bytes); 38 bytes overhead per segment; bound 150 us at
        // 1 Gbit/s holds two 9038-byte segments (72.3 us each).
        let l = jumbo_layout(5, 1000);
        let p = WirePacing {
            rate_bps: Some(1_000_000_000),
            overhead_bytes: 38,
            max_burst_ns: Some(150_000),
        };
        let mut out = Vec::new();
        p.chunks(&l, 0, 5, 10_000_000, &mut out);
        let t = |bytes: u64| bytes * 8; // ns at 1 Gbit/s
        assert_eq!(
            out,
            vec![
                Chunk {
                    first: 0,
                    segments: 2,
                    release_ns: 10_000_000 - t(2 * 9038 + 1090)
                },
                Chunk {
                    first: 2,
                    segments: 2,
                    release_ns: 10_000_000 - t(1090)
                },
                Chunk {
                    first: 4,
                    segments: 1,
                    release_ns: 10_000_000
                },
            ]
        );
    }

    #[test]
    fn a_run_in_the_middle_keeps_its_indices() {
        let l = jumbo_layout(6, 8948);
        let p = WirePacing {
            rate_bps: Some(1_000_000_000),
            overhead_bytes: 0,
            max_burst_ns: Some(1),
        };
        let mut out = Vec::new();
        p.chunks(&l, 3, 2, 500_000, &mut out);
        assert_eq!(
            out.iter()
                .map(|c| (c.first, c.segments))
                .collect::<Vec<_>>(),
            vec![(3, 1), (4, 1)]
        );
        assert_eq!(out[1].release_ns - out[0].release_ns, 72_000);
    }
}
