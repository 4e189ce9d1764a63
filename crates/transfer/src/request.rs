//! A copy's request and the server's answer to it: the rules both ends apply, with no
//! I/O. The chunk size a client proposes and the one a server answers with
//! ([`path_chunk_size`], [`answer_chunk_size`]), what a server refuses in a request before
//! it touches its disk ([`check_request`]), and what a client takes in the answer
//! ([`check_answer`]).

use std::time::Duration;

use longhaul_model::buffers::bdp_bytes;
use longhaul_proto::limits::MAX_STREAMS;
use longhaul_proto::transfer::{valid_chunk_size, CopyDirection, TransferParams};

use crate::chunk_size_for;

/// The rate a chunk size is sized for when the request gives none (`--rate` not used).
pub const ASSUMED_RATE_BPS: u64 = 1_000_000_000;

/// The chunk size for `total` bytes (`u64::MAX`: not known yet, as for a pull's client)
/// on `streams` streams over a path of `rtt` at `rate_bps` (0: [`ASSUMED_RATE_BPS`]): a
/// stream's share of the path's BDP, and at least four chunks per stream
/// ([`chunk_size_for`]).
pub fn path_chunk_size(rate_bps: u64, rtt: Duration, streams: u16, total: u64) -> u64 {
    let rate = if rate_bps > 0 {
        rate_bps
    } else {
        ASSUMED_RATE_BPS
    };
    chunk_size_for(bdp_bytes(rate, rtt), u32::from(streams), total)
}

/// What a server refuses in a request before anything else is done for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestRefused {
    /// No streams, or more than the protocol allows.
    #[error("{0} streams is outside 1..={MAX_STREAMS}")]
    Streams(u16),
    /// A push whose list the client says it answered: the server receives, and answers
    /// a pushed list itself.
    #[error("a push's list cannot be answered ahead: this server receives, and answers it itself")]
    PushAnsweredAhead,
    /// A chunk size the protocol does not allow.
    #[error("chunk size {0} is not a power of two in 4 KiB..=1 GiB")]
    ChunkSize(u64),
}

/// The checks of a request that need neither the served tree nor the host.
pub fn check_request(p: &TransferParams) -> Result<(), RequestRefused> {
    if p.streams == 0 || p.streams > MAX_STREAMS {
        return Err(RequestRefused::Streams(p.streams));
    }
    if p.direction == CopyDirection::Push && p.options.answered_ahead {
        return Err(RequestRefused::PushAnsweredAhead);
    }
    if !valid_chunk_size(p.chunk_size) {
        return Err(RequestRefused::ChunkSize(p.chunk_size));
    }
    Ok(())
}

/// The chunk size a server answers a checked request with, before its memory budget has
/// its say: the client's, or for a pull whose client chose from the path alone
/// (`auto_chunk`) the same rule with the source's total known (`pull_total`), never above
/// the client's choice.
pub fn answer_chunk_size(p: &TransferParams, pull_total: u64) -> u64 {
    if p.direction == CopyDirection::Pull && p.options.auto_chunk {
        let rtt = Duration::from_micros(u64::from(p.rtt_us));
        path_chunk_size(p.rate_bps, rtt, p.streams, pull_total).min(p.chunk_size)
    } else {
        p.chunk_size
    }
}

/// What a client does not take in the server's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerRefused {
    /// A chunk size the protocol does not allow.
    #[error("the server chose a chunk size of {0} bytes")]
    ChunkSize(u64),
    /// A share of a striped copy answered with chunks of another size: every pair must cut
    /// the files alike.
    #[error(
        "the source chose chunks of {answered} bytes for a share of a striped copy cut in \
         chunks of {asked}: every pair must use the same"
    )]
    ShareChunks {
        /// The share's chunk size.
        asked: u64,
        /// The server's.
        answered: u64,
    },
    /// A push's chunks raised (a server may only lower them, to fit its memory budget).
    #[error("the server chose chunks of {answered} bytes for a push of {asked}")]
    PushRaised {
        /// The client's chunk size.
        asked: u64,
        /// The server's.
        answered: u64,
    },
}

/// Checks the chunk size of the server's answer against the request's (`asked`); `Ok`
/// holds the size a push's sender must now cut its files in when the server lowered it
/// (the user is told), `None` when nothing changes for the client.
pub fn check_answer(
    direction: CopyDirection,
    share: bool,
    asked: u64,
    answered: u64,
) -> Result<Option<u64>, AnswerRefused> {
    if !valid_chunk_size(answered) {
        return Err(AnswerRefused::ChunkSize(answered));
    }
    if answered == asked {
        return Ok(None);
    }
    if share {
        return Err(AnswerRefused::ShareChunks { asked, answered });
    }
    match direction {
        // A pull's sender chooses (it knows the total): any valid size.
        CopyDirection::Pull => Ok(None),
        CopyDirection::Push if answered < asked => Ok(Some(answered)),
        CopyDirection::Push => Err(AnswerRefused::PushRaised { asked, answered }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_proto::transfer::TransferOptions;

    const MIB: u64 = 1 << 20;

    fn params(direction: CopyDirection, streams: u16, chunk_size: u64) -> TransferParams {
        TransferParams {
            direction,
            streams,
            chunk_size,
            rate_bps: 0,
            window_bytes: 0,
            rtt_us: 150_000,
            options: TransferOptions::default(),
            congestion: String::new(),
            path: b".".to_vec(),
            jump: None,
        }
    }

    #[test]
    fn a_request_is_refused_for_its_streams_its_chunks_or_a_pushed_answer_ahead() {
        let ok = params(CopyDirection::Push, 8, 4 * MIB);
        assert_eq!(check_request(&ok), Ok(()));
        for streams in [0, MAX_STREAMS + 1] {
            let p = params(CopyDirection::Pull, streams, 4 * MIB);
            assert_eq!(check_request(&p), Err(RequestRefused::Streams(streams)));
        }
        let p = params(CopyDirection::Pull, MAX_STREAMS, 4 * MIB);
        assert_eq!(check_request(&p), Ok(()));
        for chunk in [0, 4096 / 2, 3 * MIB, 2 << 30] {
            let p = params(CopyDirection::Pull, 1, chunk);
            assert_eq!(check_request(&p), Err(RequestRefused::ChunkSize(chunk)));
        }
        let mut ahead = params(CopyDirection::Push, 8, 4 * MIB);
        ahead.options.answered_ahead = true;
        assert_eq!(
            check_request(&ahead),
            Err(RequestRefused::PushAnsweredAhead)
        );
        ahead.direction = CopyDirection::Pull;
        assert_eq!(check_request(&ahead), Ok(()));
    }

    #[test]
    fn a_pull_chosen_from_the_path_is_answered_from_the_total_never_above_the_ask() {
        // 1 Gbit/s x 150 ms on 8 streams: 2.3 MB a stream, rounded up to 4 MiB.
        let asked = path_chunk_size(0, Duration::from_millis(150), 8, u64::MAX);
        assert_eq!(asked, 4 * MIB);
        let mut p = params(CopyDirection::Pull, 8, asked);
        p.options.auto_chunk = true;
        // A small total keeps four chunks a stream, down to the smallest path chunk.
        assert!(answer_chunk_size(&p, 8 * 4 * MIB) <= asked);
        assert_eq!(answer_chunk_size(&p, u64::MAX), asked);
        // A faster path would take larger chunks; the client's ask is the ceiling.
        p.rate_bps = 100_000_000_000;
        assert_eq!(answer_chunk_size(&p, u64::MAX), asked);
        // A chunk size the user gave, or a push's, is answered as it is.
        p.options.auto_chunk = false;
        assert_eq!(answer_chunk_size(&p, 1), asked);
        let mut push = params(CopyDirection::Push, 8, 64 * MIB);
        push.options.auto_chunk = true;
        assert_eq!(answer_chunk_size(&push, 1), 64 * MIB);
    }

    #[test]
    fn an_answer_may_lower_a_push_choose_a_pull_and_never_change_a_share() {
        let (push, pull) = (CopyDirection::Push, CopyDirection::Pull);
        assert_eq!(check_answer(push, false, 8 * MIB, 8 * MIB), Ok(None));
        assert_eq!(
            check_answer(push, false, 8 * MIB, 4 * MIB),
            Ok(Some(4 * MIB))
        );
        assert_eq!(
            check_answer(push, false, 4 * MIB, 8 * MIB),
            Err(AnswerRefused::PushRaised {
                asked: 4 * MIB,
                answered: 8 * MIB
            })
        );
        assert_eq!(check_answer(pull, false, 8 * MIB, 16 * MIB), Ok(None));
        assert_eq!(check_answer(pull, false, 8 * MIB, 4 * MIB), Ok(None));
        assert_eq!(
            check_answer(pull, true, 8 * MIB, 4 * MIB),
            Err(AnswerRefused::ShareChunks {
                asked: 8 * MIB,
                answered: 4 * MIB
            })
        );
        assert_eq!(check_answer(pull, true, 8 * MIB, 8 * MIB), Ok(None));
        for bad in [0, 3 * MIB] {
            assert_eq!(
                check_answer(pull, false, 8 * MIB, bad),
                Err(AnswerRefused::ChunkSize(bad))
            );
        }
    }
}
