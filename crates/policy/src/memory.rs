//! The server's memory budget (`longhaul serve --memory`): how many bytes it commits to
//! sessions at once, and what each session may take.
//!
//! A session's cost is what its peer's choices make the server hold per data stream: the
//! socket buffer it sets (`SO_RCVBUF`/`SO_SNDBUF`; the kernel doubles the value, and the
//! autotuning ceiling where it sets nothing), a whole chunk in memory on a receiving
//! stream (a push: the chunk size is the client's choice, up to 1 GiB), and a fixed
//! overhead for the stream's thread and read pieces. A session gets a reservation for
//! that before any data connection is expected, or a refusal that says what to lower.
//! No session may take more than half of the budget, so one client cannot shut the
//! door on the others; a push whose chunks do not fit gets smaller chunks (a power of two,
//! not below [`MIN_FITTED_CHUNK`]) before it is refused.
//!
//! Sans-I/O: the engine keeps one [`MemoryBudget`] behind a lock and releases each
//! [`Reservation`] when its session ends.

use std::fmt;

/// What one data stream costs besides its socket buffer and chunk: a thread's stack and
/// the pieces it reads and hashes in.
pub const STREAM_OVERHEAD: u64 = 1 << 20;
/// Smallest chunk a push is cut down to before it is refused (smaller chunks cost a
/// header, an ack and a hash each).
pub const MIN_FITTED_CHUNK: u64 = 1 << 20;
/// A session may reserve at most this fraction (1/N) of the budget.
pub const SESSION_SHARE_DIVISOR: u64 = 2;

/// What a session asks the server to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryNeed {
    /// Data streams.
    pub streams: u16,
    /// Bytes of chunk each stream holds at once (0 when the server sends).
    pub chunk_bytes: u64,
    /// Kernel socket memory per stream, bytes (what the kernel may allocate: twice the
    /// setsockopt value, or the autotuning ceiling).
    pub socket_bytes: u64,
}

impl MemoryNeed {
    /// The session's total.
    pub fn bytes(&self) -> u64 {
        u64::from(self.streams).saturating_mul(
            self.chunk_bytes
                .saturating_add(self.socket_bytes)
                .saturating_add(STREAM_OVERHEAD),
        )
    }
}

/// Why a session gets no memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryRefusal {
    /// The session alone needs more than any session may have: the client must ask for
    /// less.
    TooLarge {
        /// What it asked for.
        need: MemoryNeed,
        /// The most one session may reserve.
        share: u64,
        /// The whole budget.
        total: u64,
    },
    /// It would fit, but other sessions hold the memory now.
    Full {
        /// What it asked for, bytes.
        need: u64,
        /// Free now.
        free: u64,
        /// The whole budget.
        total: u64,
        /// Sessions holding reservations.
        sessions: u32,
    },
}

impl fmt::Display for MemoryRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { need, share, total } => write!(
                f,
                "this session needs {} MiB of server memory ({} streams x ({} MiB chunk + {} MiB \
                 socket buffer + {} MiB per stream)), more than the {} MiB one session may have \
                 of this server's {} MiB budget (serve --memory); lower --streams, --chunk or \
                 --window",
                mib(need.bytes()),
                need.streams,
                mib(need.chunk_bytes),
                mib(need.socket_bytes),
                mib(STREAM_OVERHEAD),
                mib(*share),
                mib(*total)
            ),
            Self::Full {
                need,
                free,
                total,
                sessions,
            } => write!(
                f,
                "the server is full: {sessions} sessions hold {} MiB of its {} MiB memory budget \
                 and this session needs {} MiB; try again later (or lower --streams, --chunk \
                 or --window)",
                mib(total - free),
                mib(*total),
                mib(*need)
            ),
        }
    }
}

fn mib(b: u64) -> u64 {
    b.div_ceil(1 << 20)
}

/// Bytes reserved for one session; give it back with [`MemoryBudget::release`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a reservation is held until released"]
pub struct Reservation {
    bytes: u64,
}

impl Reservation {
    /// The bytes reserved.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// The server's budget and what is reserved of it.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    total: u64,
    reserved: u64,
    sessions: u32,
    peak: u64,
}

impl MemoryBudget {
    /// A budget of `total` bytes.
    pub fn new(total: u64) -> Self {
        Self {
            total,
            reserved: 0,
            sessions: 0,
            peak: 0,
        }
    }

    /// The default for a host with `ram` bytes: half of it, at least 256 MiB. Socket
    /// buffers sized for long fat paths are large (2 x BDP: 45 MB per stream at 1 Gbit/s
    /// and 180 ms; a bench probe with no --rate on a 436 ms path sets 1 GiB), so a small
    /// figure would refuse the transfers the server exists for (a data-transfer node
    /// serves little else); half leaves the page cache, which every transfer streams
    /// through, the other half.
    pub fn default_for_ram(ram: u64) -> u64 {
        (ram / 2).max(256 << 20)
    }

    /// The whole budget.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Reserved now.
    pub fn reserved(&self) -> u64 {
        self.reserved
    }

    /// The most ever reserved at once.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// Sessions holding a reservation.
    pub fn sessions(&self) -> u32 {
        self.sessions
    }

    /// The most one session may reserve.
    pub fn session_share(&self) -> u64 {
        self.total / SESSION_SHARE_DIVISOR
    }

    /// The largest chunk, a power of two no larger than `need.chunk_bytes`, with which
    /// the session fits its share and the free memory; `None` when not even
    /// [`MIN_FITTED_CHUNK`] (or the chunk asked for, if smaller) fits.
    pub fn fit_chunk(&self, need: MemoryNeed) -> Option<u64> {
        let room = self.session_share().min(self.total - self.reserved);
        let floor = need.chunk_bytes.min(MIN_FITTED_CHUNK);
        let mut chunk = need.chunk_bytes;
        loop {
            let trial = MemoryNeed {
                chunk_bytes: chunk,
                ..need
            };
            if trial.bytes() <= room {
                return Some(chunk);
            }
            if chunk / 2 < floor || chunk < 2 {
                return None;
            }
            chunk /= 2;
        }
    }

    /// Reserves what `need` costs, or says why not.
    pub fn reserve(&mut self, need: MemoryNeed) -> Result<Reservation, MemoryRefusal> {
        let bytes = need.bytes();
        if bytes > self.session_share() {
            return Err(MemoryRefusal::TooLarge {
                need,
                share: self.session_share(),
                total: self.total,
            });
        }
        let free = self.total - self.reserved;
        if bytes > free {
            return Err(MemoryRefusal::Full {
                need: bytes,
                free,
                total: self.total,
                sessions: self.sessions,
            });
        }
        self.reserved += bytes;
        self.sessions += 1;
        self.peak = self.peak.max(self.reserved);
        Ok(Reservation { bytes })
    }

    /// Gives a session's reservation back.
    pub fn release(&mut self, r: Reservation) {
        self.reserved = self.reserved.saturating_sub(r.bytes);
        self.sessions = self.sessions.saturating_sub(1);
    }

    /// One line for logs: `memory 120 of 6144 MiB reserved by 2 sessions (peak 300)`.
    pub fn describe(&self) -> String {
        format!(
            "memory {} of {} MiB reserved by {} sessions (peak {} MiB)",
            mib(self.reserved),
            mib(self.total),
            self.sessions,
            mib(self.peak)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn need(streams: u16, chunk: u64, socket: u64) -> MemoryNeed {
        MemoryNeed {
            streams,
            chunk_bytes: chunk,
            socket_bytes: socket,
        }
    }

    #[test]
    fn reservations_add_up_and_come_back() {
        let mut b = MemoryBudget::new(400 * MIB);
        let a = b.reserve(need(4, 8 * MIB, 10 * MIB)).unwrap();
        assert_eq!(a.bytes(), 4 * 19 * MIB);
        let c = b.reserve(need(4, 8 * MIB, 10 * MIB)).unwrap();
        assert_eq!(b.reserved(), 152 * MIB);
        assert_eq!(b.sessions(), 2);
        b.release(a);
        b.release(c);
        assert_eq!((b.reserved(), b.sessions(), b.peak()), (0, 0, 152 * MIB));
    }

    #[test]
    fn a_session_past_its_share_is_told_what_to_lower() {
        let mut b = MemoryBudget::new(1024 * MIB);
        let r = b.reserve(need(256, 1 << 30, 0)).unwrap_err();
        assert!(matches!(r, MemoryRefusal::TooLarge { share, .. } if share == 512 * MIB));
        let text = r.to_string();
        assert!(
            text.contains("--streams") && text.contains("--chunk"),
            "{text}"
        );
        assert_eq!(b.reserved(), 0);
    }

    #[test]
    fn a_full_server_says_try_later() {
        let mut b = MemoryBudget::new(400 * MIB);
        let held: Vec<_> = (0..4)
            .map(|_| b.reserve(need(9, 0, 10 * MIB)).unwrap())
            .collect();
        let r = b.reserve(need(9, 0, 10 * MIB)).unwrap_err();
        assert!(
            matches!(r, MemoryRefusal::Full { sessions: 4, .. }),
            "{r:?}"
        );
        assert!(r.to_string().contains("try again later"));
        for h in held {
            b.release(h);
        }
        assert!(b.reserve(need(9, 0, 10 * MIB)).is_ok());
    }

    #[test]
    fn chunks_are_halved_until_the_session_fits() {
        let b = MemoryBudget::new(1024 * MIB);
        // 16 streams x 1 GiB chunks: cut to 16 MiB (16 x (16 + 4 + 1) = 336 <= 512 MiB).
        assert_eq!(b.fit_chunk(need(16, 1 << 30, 4 * MIB)), Some(16 * MIB));
        // Already small enough: unchanged.
        assert_eq!(b.fit_chunk(need(2, 64 * MIB, 0)), Some(64 * MIB));
        // 300 streams do not fit even with 1 MiB chunks.
        assert_eq!(b.fit_chunk(need(300, 1 << 30, 0)), None);
        // A small chunk asked for is never raised, and is the floor.
        assert_eq!(b.fit_chunk(need(1, 4096, 0)), Some(4096));
    }
}
