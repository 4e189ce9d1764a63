//! An entry's id in a transfer's file list ([`EntryId`]): the position the sender gave it
//! (`FileEntries`' `first_id` plus its place in the frame), which every later message
//! about the entry names. On the wire a `u32`; a type of its own so that an entry id,
//! a chunk index and a stream number cannot be mixed up.

use std::fmt;

/// An entry of a transfer's file list, by its position in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EntryId(pub u32);

impl EntryId {
    /// Its place in a list indexed from 0 (the entries, each side's per-entry state).
    pub fn slot(self) -> usize {
        self.0 as usize
    }

    /// The entry `n` places after this one (`None` past `u32::MAX`).
    pub fn after(self, n: usize) -> Option<EntryId> {
        u32::try_from(n)
            .ok()
            .and_then(|n| self.0.checked_add(n))
            .map(EntryId)
    }
}

impl fmt::Display for EntryId {
    /// The bare number, as messages and logs have always shown an entry.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_shows_as_its_number_and_counts_on_without_wrapping() {
        assert_eq!(EntryId(7).to_string(), "7");
        assert_eq!(EntryId(7).after(3), Some(EntryId(10)));
        assert_eq!(EntryId(u32::MAX).after(1), None);
        assert_eq!(EntryId(3).slot(), 3);
    }
}
