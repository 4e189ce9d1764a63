//! The server's memory budget, driven: one [`MemoryBudget`] behind a lock, a
//! [`MemoryHold`] per session that gives its reservation back when dropped, and the
//! socket-buffer rules that keep unauthenticated connections small.
//!
//! The listening socket's receive buffer is raised when a session needs a window scale
//! beyond the default (see `server::widen_window_scale`); every socket accepted afterwards
//! would inherit that buffer (up to 2 GiB of unread data each, locked so autotuning never
//! lowers it). So once the listener is widened, each accepted socket is set back to the
//! default buffer before anything is read from it, and a data socket of an authenticated
//! session gets the autotuning ceiling again before its plan's own buffer is applied.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use longhaul_policy::{BufferChoice, MemoryBudget, MemoryNeed, Reservation, Side};
use longhaul_proto::HostFacts;

/// The budget and the listener's buffer state, shared by every connection.
pub(crate) struct ServerMemory {
    budget: Mutex<MemoryBudget>,
    /// The receive buffer a new socket gets (read from the listener before any change).
    default_rcvbuf: u64,
    /// The listener's receive buffer was raised: accepted sockets must be set back.
    widened: AtomicBool,
}

impl ServerMemory {
    pub(crate) fn new(total: u64, default_rcvbuf: u64) -> Self {
        Self {
            budget: Mutex::new(MemoryBudget::new(total)),
            default_rcvbuf,
            widened: AtomicBool::new(false),
        }
    }

    /// Replaces the budget's total (before serving).
    pub(crate) fn set_total(&self, total: u64) {
        if let Ok(mut b) = self.budget.lock() {
            *b = MemoryBudget::new(total);
        }
    }

    /// One line for logs.
    pub(crate) fn describe(&self) -> String {
        self.budget
            .lock()
            .map(|b| b.describe())
            .unwrap_or_else(|_| "memory budget unavailable".into())
    }

    /// The budget, what is reserved of it now, and the most ever reserved at once.
    pub(crate) fn figures(&self) -> (u64, u64, u64) {
        self.budget
            .lock()
            .map(|b| (b.total(), b.reserved(), b.peak()))
            .unwrap_or_default()
    }

    /// The largest chunk (no larger than asked) with which `need` fits now.
    pub(crate) fn fit_chunk(&self, need: MemoryNeed) -> Option<u64> {
        self.budget.lock().ok()?.fit_chunk(need)
    }

    /// The listener's receive buffer was raised.
    pub(crate) fn mark_widened(&self) {
        self.widened.store(true, Ordering::SeqCst);
    }

    /// A freshly accepted socket, before anything is read: the default receive buffer
    /// when the listener's is raised (the setsockopt value is half what the kernel
    /// reports).
    pub(crate) fn shrink_accepted(&self, sock: &impl std::os::fd::AsRawFd) {
        if self.widened.load(Ordering::SeqCst) && self.default_rcvbuf > 0 {
            let _ = longhaul_sys::socket::set_receive_buffer(sock, self.default_rcvbuf / 2, false);
        }
    }

    /// A data socket of an authenticated session, before its plan's buffer is applied:
    /// where [`ServerMemory::shrink_accepted`] set it small, give it the ceiling that
    /// autotuning would have reached (a plan that sets a buffer overrides this).
    pub(crate) fn restore_data_socket(&self, sock: &impl std::os::fd::AsRawFd, facts: &HostFacts) {
        if self.widened.load(Ordering::SeqCst) && facts.tcp_rmem_max > 0 {
            let _ = longhaul_sys::socket::set_receive_buffer(
                sock,
                facts.tcp_rmem_max / 2,
                facts.can_force_buffers,
            );
        }
    }
}

/// A session's reservation, given back when dropped.
pub struct MemoryHold {
    memory: Arc<ServerMemory>,
    reservation: Option<Reservation>,
}

impl MemoryHold {
    /// Reserves `need`, or returns the words to send the client.
    pub(crate) fn reserve(memory: &Arc<ServerMemory>, need: MemoryNeed) -> Result<Self, String> {
        let mut budget = memory
            .budget
            .lock()
            .map_err(|_| "the server's memory budget is unavailable".to_string())?;
        let reservation = budget.reserve(need).map_err(|e| e.to_string())?;
        Ok(Self {
            memory: memory.clone(),
            reservation: Some(reservation),
        })
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.reservation.as_ref().map_or(0, Reservation::bytes)
    }

    /// For the session's log line: what it held and what the server holds.
    pub fn describe(&self) -> String {
        format!(
            "reserved {} MiB; {}",
            self.bytes().div_ceil(1 << 20),
            self.memory.describe()
        )
    }
}

impl Drop for MemoryHold {
    fn drop(&mut self) {
        if let (Some(r), Ok(mut b)) = (self.reservation.take(), self.memory.budget.lock()) {
            b.release(r);
        }
    }
}

/// Memory one data socket may take on `side` under `choice`: the value set (the payload
/// its buffer holds; the kernel's doubling is overhead it reclaims under `tcp_mem`
/// pressure), or the autotuning ceiling. Counting the doubling made a bench probe's
/// 1 GiB window (a 436 ms path with no --rate) need 2 GiB and be refused.
pub fn socket_bytes(side: Side, choice: &BufferChoice, facts: &HostFacts) -> u64 {
    match (choice, side) {
        (BufferChoice::Autotune, Side::Receive) => facts.tcp_rmem_max,
        (BufferChoice::Autotune, Side::Send) => facts.tcp_wmem_max,
        (c, _) => longhaul_policy::choice_bytes(c),
    }
}

/// The default budget for this host (half of its RAM, see
/// [`MemoryBudget::default_for_ram`]).
pub fn default_budget() -> u64 {
    let ram = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(4 << 30, |kb| kb * 1024);
    MemoryBudget::default_for_ram(ram)
}
