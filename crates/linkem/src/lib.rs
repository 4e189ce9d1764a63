//! The link model with no I/O: a bottleneck with a drop-tail queue, delay, jitter, loss,
//! reordering and duplication, driven in virtual time and seeded.
//!
//! Nothing here reads a clock: every call takes `now_ns`, nanoseconds since an epoch the
//! caller chooses (e.g. the driver's start, from a monotonic clock), and every random
//! choice comes from a generator seeded by the caller, so a run is reproducible.
//!
//! # How a driver uses it
//! ```
//! use std::time::Duration;
//! use longhaul_linkem::{DelayLine, Link, LinkConfig, LossModel, Packet, QueueLimit, Verdict};
//!
//! let cfg = LinkConfig {
//!     rate_bps: Some(1_000_000_000),
//!     queue: QueueLimit::Bytes(25_000_000),
//!     delay: Duration::from_millis(90),
//!     loss: LossModel::Bernoulli { p: 1e-4 },
//!     ..LinkConfig::default()
//! };
//! cfg.validate(9000).expect("valid config");
//! let mut link = Link::new(cfg, 42);
//! let mut verdict = Verdict::default(); // reused for every packet
//! let mut line: DelayLine<Vec<u8>> = DelayLine::new();
//!
//! // A packet read at now_ns: a TCP GSO super-packet with 52 header bytes and 8688 bytes
//! // of payload in 1448-byte segments (a plain packet is `Packet::single(len)`).
//! let now_ns = 1_000;
//! link.offer(now_ns, Packet::gso(52, 8688, 1448), &mut verdict);
//! for run in &verdict.runs {
//!     // If !verdict.is_whole(), rebuild a packet holding segments
//!     // run.first_segment .. run.first_segment + run.segments (fix lengths, IP ID, seq).
//!     for _ in 0..run.copies {
//!         line.push(run.release_ns, vec![0u8; run.bytes as usize]);
//!     }
//! }
//! // On each wakeup: write everything due, then sleep until line.next_release().
//! while let Some((_release_ns, _pkt)) = line.pop_due(now_ns + 100_000_000) {}
//! println!("{}", serde_json::to_string(link.stats()).unwrap());
//! ```
//!
//! # Model, per direction ([`Link`])
//! - Bottleneck of `rate_bps` (None = unlimited) with a drop-tail buffer
//!   ([`QueueLimit`]: bytes, packets or unlimited). Departure
//!   F_i = max(arrival_i, F_(i-1)) + bits_i / R on the virtual clock, exact to the
//!   nanosecond over any run length; a segment is dropped at arrival if the backlog (the
//!   remaining work in bytes, or the segments not yet sent) plus the segment exceeds the
//!   buffer. Queue accounting, loss and rate are per segment of a GSO super-packet, each
//!   segment carrying its own headers ([`Packet::gso`]).
//! - Random loss after the bottleneck, per segment: [`LossModel::Bernoulli`] or
//!   [`LossModel::GilbertElliott`] (netem's gemodel p, r, 1-h, 1-k).
//! - Release at F + delay + jitter ([`Jitter`]), kept in FIFO order (release = max(drawn,
//!   previous release)) unless the packet is chosen for reordering ([`Reorder`]), which
//!   holds it back by an extra delay so that later packets overtake it. Under dense
//!   traffic the clamp pushes per-packet jitter towards the bound; [`Jitter::Wander`] (a
//!   smooth offset over time) keeps order by itself and keeps the mean delay.
//! - Duplication: the packet's surviving runs are delivered twice ([`Run::copies`]).
//! - Jitter, reordering and duplication are drawn once per offered packet.
//! - [`LinkStats`] (serde) counts all of it; [`Duplex`] pairs two directions.
//!
//! # Real packets ([`gso`], [`wire`])
//! What the emulator's driver reads from a TUN device, still without I/O: [`gso::Layout`]
//! says how many wire segments an offload super-packet (virtio-net header + IP packet)
//! stands for, so it can be offered as [`Packet::gso`]; [`gso::cut_run`] cuts a surviving
//! run of segments out as a packet of its own (lengths, IP ID, TCP sequence, checksums);
//! [`wire::WirePacing`] splits a run into chunks released as the bottleneck would space
//! them.
//!
//! # Parsing the command line's specs
//! [`parse_loss`] (`1e-4`, `0.01%`, `ge:P,R,H,K`), [`parse_buffer`] (`25MB`, `1bdp`,
//! `500pkt`) with [`BufferSpec::resolve`], and [`parse_probability`] (e.g. `--reorder`).
#![forbid(unsafe_code)]

mod config;
mod delay_line;
mod duplex;
mod error;
pub mod gso;
mod link;
mod loss;
pub mod rng;
mod spec;
mod stats;
mod wander;
pub mod wire;

pub use config::{Jitter, LinkConfig, LossModel, QueueLimit, Reorder, MAX_DELAY, MAX_RATE_BPS};
pub use delay_line::DelayLine;
pub use duplex::{Direction, Duplex, DuplexStats};
pub use error::LinkemError;
pub use link::{Link, Packet, Run, Verdict, MAX_SEGMENTS};
pub use spec::{parse_buffer, parse_loss, parse_probability, BufferSpec};
pub use stats::{LinkStats, QUEUE_DELAY_BUCKETS};
