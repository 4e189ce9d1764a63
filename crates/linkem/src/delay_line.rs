//! A release-ordered holding area for packets in flight: items go in with a release time
//! and come out when it is due, earliest first, FIFO among equal times.
//!
//! In-order traffic (release times that never decrease, which is what [`crate::Link`]
//! produces without reordering) costs O(1) per item in a ring buffer; an item released
//! earlier than the newest one goes into a binary heap (O(log n)). Storage is reused, so a
//! warm line does not allocate.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

/// Packets (any payload `T`) held until their release time.
#[derive(Debug)]
pub struct DelayLine<T> {
    in_order: VecDeque<Held<T>>,
    early: BinaryHeap<Reverse<Held<T>>>,
    next_seq: u64,
}

#[derive(Debug)]
struct Held<T> {
    release_ns: u64,
    seq: u64,
    item: T,
}

impl<T> Held<T> {
    fn key(&self) -> (u64, u64) {
        (self.release_ns, self.seq)
    }
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<T> Eq for Held<T> {}
impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Held<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl<T> Default for DelayLine<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> DelayLine<T> {
    /// An empty line.
    pub fn new() -> Self {
        DelayLine {
            in_order: VecDeque::new(),
            early: BinaryHeap::new(),
            next_seq: 0,
        }
    }

    /// An empty line with room for `capacity` in-order items before it allocates.
    pub fn with_capacity(capacity: usize) -> Self {
        DelayLine {
            in_order: VecDeque::with_capacity(capacity),
            early: BinaryHeap::new(),
            next_seq: 0,
        }
    }

    /// Holds `item` until `release_ns`.
    pub fn push(&mut self, release_ns: u64, item: T) {
        let held = Held {
            release_ns,
            seq: self.next_seq,
            item,
        };
        self.next_seq += 1;
        match self.in_order.back() {
            Some(last) if release_ns < last.release_ns => self.early.push(Reverse(held)),
            _ => self.in_order.push_back(held),
        }
    }

    /// The earliest release time held, if any: when the driver should wake up next.
    pub fn next_release(&self) -> Option<u64> {
        match (self.in_order.front(), self.early.peek()) {
            (None, None) => None,
            (Some(a), None) => Some(a.release_ns),
            (None, Some(Reverse(b))) => Some(b.release_ns),
            (Some(a), Some(Reverse(b))) => Some(a.release_ns.min(b.release_ns)),
        }
    }

    /// Takes out the earliest item whose release time is at or before `now_ns`, with its
    /// release time; `None` when nothing is due. Call it in a loop on each wakeup.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(u64, T)> {
        let take_early = match (self.in_order.front(), self.early.peek()) {
            (None, None) => return None,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(a), Some(Reverse(b))) => b < a,
        };
        let held = if take_early {
            if self.early.peek()?.0.release_ns > now_ns {
                return None;
            }
            self.early.pop()?.0
        } else {
            if self.in_order.front()?.release_ns > now_ns {
                return None;
            }
            self.in_order.pop_front()?
        };
        Some((held.release_ns, held.item))
    }

    /// Number of items held.
    pub fn len(&self) -> usize {
        self.in_order.len() + self.early.len()
    }

    /// True if nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_in_time_order_fifo_on_ties() {
        let mut d = DelayLine::new();
        d.push(10, "a");
        d.push(30, "b");
        d.push(20, "c"); // earlier than the newest: goes to the heap
        d.push(30, "d");
        d.push(5, "e");
        assert_eq!(d.len(), 5);
        assert_eq!(d.next_release(), Some(5));
        assert_eq!(d.pop_due(4), None);
        let mut out = Vec::new();
        while let Some((t, x)) = d.pop_due(100) {
            out.push((t, x));
        }
        assert_eq!(out, [(5, "e"), (10, "a"), (20, "c"), (30, "b"), (30, "d")]);
        assert!(d.is_empty());
        assert_eq!(d.next_release(), None);
    }

    #[test]
    fn pop_due_stops_at_now() {
        let mut d = DelayLine::new();
        for t in 0..10u64 {
            d.push(t * 10, t);
        }
        let mut n = 0;
        while d.pop_due(45).is_some() {
            n += 1;
        }
        assert_eq!(n, 5);
        assert_eq!(d.next_release(), Some(50));
    }
}
