//! The permission bits a receiver gives what it received: the one decision every path
//! that sets a mode (a committed file, a finished directory) goes through.
//!
//! A peer names the mode of each entry, and whoever holds the token is that peer. A server
//! running as root that kept `S_ISUID` would let any token holder place a setuid-root
//! program in its tree; a client pulling as root would let the server do the same. So, as
//! an rsync daemon does, the special bits are dropped by default: set-user-ID and
//! set-group-ID on files and directories, and the sticky bit on regular files (where it
//! means nothing on Linux). A directory keeps its sticky bit (`/tmp`-like trees are
//! harmless and common). `keep_setuid` (`serve --keep-setuid` for pushes, `cp
//! --keep-setuid` for pulls) keeps all of them, for peers trusted as much as root.
//!
//! The receiving session then takes its process's umask off (`RecvConfig::umask`), as
//! `cp -p` run by the receiving user would, and sets modes only on files it writes and
//! directories it creates.

use longhaul_proto::transfer::EntryKind;

/// Set-user-ID on execution.
pub const S_ISUID: u32 = 0o4000;
/// Set-group-ID on execution (on a directory: new entries take its group).
pub const S_ISGID: u32 = 0o2000;
/// Sticky bit (on a directory: only owners may remove entries).
pub const S_ISVTX: u32 = 0o1000;

/// The mode to set on a received entry of `kind` whose sender named `wire_mode`: its
/// permission bits (`& 0o7777`), without set-user-ID, set-group-ID and a file's sticky bit
/// unless `keep_setuid`.
pub fn received_mode(wire_mode: u32, kind: EntryKind, keep_setuid: bool) -> u32 {
    let mode = wire_mode & 0o7777;
    if keep_setuid {
        return mode;
    }
    let dropped = match kind {
        // A symlink's mode is never set (Linux has no lchmod); dropped like a file's.
        EntryKind::File | EntryKind::Symlink | EntryKind::HardLink => S_ISUID | S_ISGID | S_ISVTX,
        EntryKind::Dir => S_ISUID | S_ISGID,
    };
    mode & !dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_bits_are_dropped_from_files_by_default() {
        assert_eq!(received_mode(0o4755, EntryKind::File, false), 0o755);
        assert_eq!(received_mode(0o2755, EntryKind::File, false), 0o755);
        assert_eq!(received_mode(0o1644, EntryKind::File, false), 0o644);
        assert_eq!(received_mode(0o7777, EntryKind::File, false), 0o777);
        assert_eq!(received_mode(0o644, EntryKind::File, false), 0o644);
    }

    #[test]
    fn directories_lose_setuid_and_setgid_but_keep_sticky() {
        assert_eq!(received_mode(0o6755, EntryKind::Dir, false), 0o755);
        assert_eq!(received_mode(0o1777, EntryKind::Dir, false), 0o1777);
        assert_eq!(received_mode(0o7777, EntryKind::Dir, false), 0o1777);
    }

    #[test]
    fn keep_setuid_keeps_every_permission_bit() {
        assert_eq!(received_mode(0o4755, EntryKind::File, true), 0o4755);
        assert_eq!(received_mode(0o7777, EntryKind::File, true), 0o7777);
        assert_eq!(received_mode(0o2775, EntryKind::Dir, true), 0o2775);
    }

    #[test]
    fn bits_beyond_the_permission_bits_never_pass() {
        // S_IFREG | 0o4755, as a careless sender might put it on the wire.
        for keep in [false, true] {
            for kind in [EntryKind::File, EntryKind::Dir] {
                let m = received_mode(0o100_000 | 0o4755, kind, keep);
                assert_eq!(m & !0o7777, 0, "{kind:?} keep={keep}: {m:o}");
            }
        }
    }

    #[test]
    fn never_adds_a_bit_and_never_keeps_setuid_by_default() {
        for m in 0..=0o7777u32 {
            for kind in [EntryKind::File, EntryKind::Dir] {
                let out = received_mode(m, kind, false);
                assert_eq!(out & !m, 0, "{m:o} -> {out:o}");
                assert_eq!(out & (S_ISUID | S_ISGID), 0, "{m:o} -> {out:o}");
                assert_eq!(out & 0o777, m & 0o777, "{m:o}: rwx bits kept");
            }
        }
    }
}
