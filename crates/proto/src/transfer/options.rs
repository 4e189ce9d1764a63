//! The flags of a transfer request: the wire's bits and their parsed form.

use crate::error::ProtoError;

/// Flag bits of [`super::TransferParams::options`] on the wire.
pub mod transfer_flags {
    /// Copy directory trees (`-r`).
    pub const RECURSIVE: u32 = 1 << 0;
    /// Never replace an existing destination file (`--no-clobber`).
    pub const NO_CLOBBER: u32 = 1 << 1;
    /// Only compare digests of an existing copy, send nothing (`--checksum-only`).
    pub const CHECKSUM_ONLY: u32 = 1 << 2;
    /// Keep modes and mtimes.
    pub const PRESERVE: u32 = 1 << 3;
    /// `chunk_size` is the client's suggestion from the path alone: the sender, which
    /// knows the total size, may lower it (a pull: the server lists the files).
    pub const AUTO_CHUNK: u32 = 1 << 4;
    /// The receiver flushes every file to disk before renaming it into place (`--sync`).
    pub const SYNC: u32 = 1 << 5;
    /// `window_bytes` is the user's fixed window (`--window SIZE`): set it as is, no
    /// autotuning and no rate probe (protocol version 4).
    pub const WINDOW_FIXED: u32 = 1 << 6;
    /// `longhaul sync`: a destination file that differs from its source (size or mtime,
    /// or any file with [`CHECKSUM`]) is compared chunk by chunk (`OldChunks`) and only
    /// the chunks that differ cross.
    pub const DELTA: u32 = 1 << 7;
    /// With [`DELTA`]: compare every file that exists at both ends, even one whose size
    /// and mtime match (rsync's `--checksum`).
    pub const CHECKSUM: u32 = 1 << 8;
    /// With [`DELTA`]: the source named with a trailing slash (`sync src/ dst`, as
    /// rsync): its contents go into the destination directory (created if missing), not
    /// the directory itself. Without it a directory source goes inside the destination
    /// directory (created if missing), so a sync run twice lands in the same place.
    pub const CONTENTS: u32 = 1 << 10;
    /// With [`DELTA`]: a compared file is updated in place (its changed chunks written
    /// into the destination file itself) instead of rebuilt in a part file and renamed
    /// (`sync --inplace`, for files too large to hold twice).
    pub const INPLACE: u32 = 1 << 11;
    /// With [`DELTA`]: change nothing (`sync -n`): the receiver looks and hashes its
    /// copies, the sender hashes its files and says what each would send (`WouldSend`).
    pub const DRY_RUN: u32 = 1 << 12;
    /// The receiver removes what the source lacks from the directories the transfer
    /// sends (`--delete`), keeping what the rules exclude.
    pub const DELETE: u32 = 1 << 9;
    /// Hard links are kept (`sync -H`): the sender's walk lists a file already listed
    /// under another name (same device and inode) as a `HardLink` entry naming the first.
    pub const HARD_LINKS: u32 = 1 << 13;
    /// A pull's receiver holds nothing the list can name (its destination and the part
    /// files of its name are not there): it answers the list ahead, taking every file
    /// whole, and the sending server sends chunks with its list instead of a round trip
    /// later, after the answers (only to a server announcing
    /// [`crate::features::ANSWER_AHEAD`]). Not with [`NO_CLOBBER`], [`CHECKSUM_ONLY`] or
    /// [`DELTA`], whose answers the sender needs.
    pub const ANSWERED_AHEAD: u32 = 1 << 14;
    /// Every flag this build knows.
    pub const ALL: u32 = RECURSIVE
        | NO_CLOBBER
        | CHECKSUM_ONLY
        | PRESERVE
        | AUTO_CHUNK
        | SYNC
        | WINDOW_FIXED
        | DELTA
        | CHECKSUM
        | CONTENTS
        | INPLACE
        | DRY_RUN
        | DELETE
        | HARD_LINKS
        | ANSWERED_AHEAD;
}

/// The flags of a transfer request, parsed: what the wire's [`transfer_flags`] bits mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TransferOptions {
    /// Copy directory trees (`-r`).
    pub recursive: bool,
    /// Never replace an existing destination file (`--no-clobber`).
    pub no_clobber: bool,
    /// Only compare digests, send nothing (`--checksum-only`).
    pub checksum_only: bool,
    /// Keep modes and mtimes.
    pub preserve: bool,
    /// The chunk size is a suggestion the sender may lower.
    pub auto_chunk: bool,
    /// Flush every file before its rename (`--sync`).
    pub sync: bool,
    /// The window is the user's fixed choice (`--window SIZE`).
    pub window_fixed: bool,
    /// `longhaul sync`: send only the chunks of a changed file that differ.
    pub delta: bool,
    /// With `delta`: compare files whose size and mtime match too (`--checksum`).
    pub checksum: bool,
    /// With `delta`: the source's contents go into the destination (`src/`).
    pub contents: bool,
    /// With `delta`: compared files are updated in place (`--inplace`).
    pub inplace: bool,
    /// With `delta`: change nothing, report what would be sent (`-n`).
    pub dry_run: bool,
    /// Remove what the source lacks (`--delete`).
    pub delete: bool,
    /// Keep hard links (`-H`): the sender lists later names of a file as `HardLink`s.
    pub hard_links: bool,
    /// The receiver answered the list ahead: send at once
    /// ([`transfer_flags::ANSWERED_AHEAD`]).
    pub answered_ahead: bool,
}

impl TransferOptions {
    /// Parses flag bits; unknown bits are refused (a newer peer asking for something this
    /// build cannot do).
    pub fn from_bits(bits: u32) -> Result<Self, ProtoError> {
        use transfer_flags::*;
        if bits & !ALL != 0 {
            return Err(ProtoError::InvalidField {
                field: "flags",
                why: format!("unknown bits {:#x}", bits & !ALL),
            });
        }
        let parsed = Self {
            recursive: bits & RECURSIVE != 0,
            no_clobber: bits & NO_CLOBBER != 0,
            checksum_only: bits & CHECKSUM_ONLY != 0,
            preserve: bits & PRESERVE != 0,
            auto_chunk: bits & AUTO_CHUNK != 0,
            sync: bits & SYNC != 0,
            window_fixed: bits & WINDOW_FIXED != 0,
            delta: bits & DELTA != 0,
            checksum: bits & CHECKSUM != 0,
            contents: bits & CONTENTS != 0,
            inplace: bits & INPLACE != 0,
            dry_run: bits & DRY_RUN != 0,
            delete: bits & DELETE != 0,
            hard_links: bits & HARD_LINKS != 0,
            answered_ahead: bits & ANSWERED_AHEAD != 0,
        };
        if parsed.answered_ahead && !parsed.may_answer_ahead() {
            return Err(ProtoError::InvalidField {
                field: "flags",
                why: "a list answered ahead with --no-clobber, --checksum-only or sync, \
                      whose answers the sender needs"
                    .into(),
            });
        }
        Ok(parsed)
    }

    /// Whether the receiver may answer the list ahead with these options: not with
    /// `--no-clobber`, `--checksum-only` or sync (`delta`), whose answers the sender
    /// needs ([`transfer_flags::ANSWERED_AHEAD`]).
    pub fn may_answer_ahead(self) -> bool {
        !self.no_clobber && !self.checksum_only && !self.delta
    }

    /// The wire bits.
    pub fn bits(self) -> u32 {
        use transfer_flags::*;
        [
            (self.recursive, RECURSIVE),
            (self.no_clobber, NO_CLOBBER),
            (self.checksum_only, CHECKSUM_ONLY),
            (self.preserve, PRESERVE),
            (self.auto_chunk, AUTO_CHUNK),
            (self.sync, SYNC),
            (self.window_fixed, WINDOW_FIXED),
            (self.delta, DELTA),
            (self.checksum, CHECKSUM),
            (self.contents, CONTENTS),
            (self.inplace, INPLACE),
            (self.dry_run, DRY_RUN),
            (self.delete, DELETE),
            (self.hard_links, HARD_LINKS),
            (self.answered_ahead, ANSWERED_AHEAD),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |acc, (_, bit)| acc | bit)
    }
}

#[cfg(test)]
mod tests {
    use super::transfer_flags::*;
    use super::TransferOptions;

    #[test]
    fn an_answer_ahead_goes_alone_or_with_plain_flags() {
        let ok = ANSWERED_AHEAD | RECURSIVE | PRESERVE | AUTO_CHUNK | SYNC;
        let parsed = TransferOptions::from_bits(ok).unwrap();
        assert!(parsed.answered_ahead);
        assert_eq!(parsed.bits(), ok);
        for other in [NO_CLOBBER, CHECKSUM_ONLY, DELTA] {
            let e = TransferOptions::from_bits(ANSWERED_AHEAD | other).unwrap_err();
            assert!(e.to_string().contains("answered ahead"), "{e}");
            assert!(TransferOptions::from_bits(other).is_ok());
        }
    }
}
