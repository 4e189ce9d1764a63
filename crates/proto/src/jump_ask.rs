//! A client's jump-start ask (see `docs/jump-start.md`): the fields bench's `BenchParams`
//! and cp's `TransferParams` carry alike, their bounds, and how both write them.

use crate::error::ProtoError;
use crate::limits;
use crate::wire::{invalid, Reader, Writer};

/// What a client asks of the server for a jump-start (see `docs/jump-start.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JumpAsk {
    /// Total pacing rate to start at, bit/s (used when the server sends).
    pub start_bps: u64,
    /// The remembered rate to hold once the jump is confirmed, bit/s.
    pub remembered_bps: u64,
    /// Initial congestion window per stream, segments (the server's route `initcwnd`).
    pub init_cwnd: u32,
    /// Initial receive window per stream, segments (the server's route `initrwnd`).
    pub init_rwnd: u32,
}

impl JumpAsk {
    /// Checks the ask against [`crate::limits`]: rates in
    /// `1..=`[`limits::MAX_JUMP_RATE_BPS`] with the start no higher than the remembered
    /// rate, windows in `1..=`[`limits::MAX_JUMP_WINDOW_SEGMENTS`]. A server still bounds
    /// what it carries out by its own view; this only refuses what no client asks.
    pub fn validate(&self) -> Result<(), ProtoError> {
        let bad = |field: &'static str, why: String| Err(ProtoError::InvalidField { field, why });
        let rates = 1..=limits::MAX_JUMP_RATE_BPS;
        if !rates.contains(&self.start_bps) || !rates.contains(&self.remembered_bps) {
            return bad(
                "jump rate",
                format!(
                    "start {} and remembered {} bit/s must be within 1..={} bit/s",
                    self.start_bps,
                    self.remembered_bps,
                    limits::MAX_JUMP_RATE_BPS
                ),
            );
        }
        if self.start_bps > self.remembered_bps {
            return bad(
                "jump rate",
                format!(
                    "a start of {} bit/s above the remembered {} bit/s",
                    self.start_bps, self.remembered_bps
                ),
            );
        }
        let windows = 1..=limits::MAX_JUMP_WINDOW_SEGMENTS;
        if !windows.contains(&self.init_cwnd) || !windows.contains(&self.init_rwnd) {
            return bad(
                "jump window",
                format!(
                    "initcwnd {} and initrwnd {} segments must be within 1..={}",
                    self.init_cwnd,
                    self.init_rwnd,
                    limits::MAX_JUMP_WINDOW_SEGMENTS
                ),
            );
        }
        Ok(())
    }
}

/// A jump-start ask, as bench's `BenchParams` and cp's `TransferParams` write it: 0, or 1
/// and its four fields.
impl Writer<'_> {
    pub(crate) fn jump_ask(&mut self, ask: Option<&JumpAsk>) {
        match ask {
            None => self.u8(0),
            Some(j) => {
                self.u8(1);
                self.u64(j.start_bps);
                self.u64(j.remembered_bps);
                self.u32(j.init_cwnd);
                self.u32(j.init_rwnd);
            }
        }
    }
}

impl Reader<'_> {
    pub(crate) fn jump_ask(&mut self) -> Result<Option<JumpAsk>, ProtoError> {
        match self.u8("jump")? {
            0 => Ok(None),
            1 => Ok(Some(JumpAsk {
                start_bps: self.u64("jump start rate")?,
                remembered_bps: self.u64("jump remembered rate")?,
                init_cwnd: self.u32("jump initcwnd")?,
                init_rwnd: self.u32("jump initrwnd")?,
            })),
            v => Err(invalid(
                "jump",
                format!("{v} is not absent (0) or present (1)"),
            )),
        }
    }
}
