//! When a client's data connections leave, and how many, bench and cp alike, with no I/O:
//! the schedule behind docs/startup.md's timelines. The driver (the engine's
//! `jump::ClientStart`) looks the path up, sets routes and dials; [`DataSchedule`] says what
//! to do at the two moments that matter:
//!
//! - **before the control connection's SYN** ([`DataSchedule::before_connect`]): how many
//!   data connections go with it (t = 0). A path remembered (a fresh record) goes with its
//!   record's count (and jump, its route set first when this end sends); a path not
//!   remembered sends the user's `-P`, or as many as the longest path needs
//!   ([`MAX_PATH_STREAMS`]), to keep the RTT's count of them at the connect; a run whose
//!   server sends and would jump from the record sends none, to send them behind the
//!   request (a run that would not jump, e.g. at a `--rate`, guesses like a sender).
//! - **at the connect**, the RTT measured ([`DataSchedule::at_connect`]): whether those
//!   connections stand ([`Count::Keep`]), some of them stand ([`Count::Trim`]), or they
//!   are replaced ([`Count::New`]; `New(0)` behind a jump's request: the server's route
//!   must exist when their handshakes complete there).
//!
//! [`DataSchedule::leave`] then says when the run's data connections left ([`Leave`]),
//! which is what its first data byte waits for.

use std::time::Duration;

use crate::jump_start::rtt_matches;
use crate::transport::MAX_PATH_STREAMS;

/// What the user asked, as far as the data connections go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataWish {
    /// `-P`: the user's count (within the protocol's bounds).
    pub user_streams: Option<u16>,
    /// This end receives on the data connections (a pull, `bench --reverse`): the server
    /// sends, and a jump is its own route's.
    pub receiving: bool,
}

/// What is known of the path before the connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathBefore {
    /// No route toward the server: nothing is looked up.
    Unroutable,
    /// Looked up, and not remembered (no record, or one older than
    /// [`crate::jump_start::MAX_AGE`]).
    NotRemembered,
    /// Remembered: a fresh record.
    Remembered {
        /// Its RTT.
        rtt: Duration,
        /// A run from it would jump ([`crate::decide_jump`] says so: jump-start allowed,
        /// the probe runs, this end may set routes and force its buffers). Read only for
        /// a receiving run (a sending run's guess decides its own jump).
        would_jump: bool,
    },
}

/// A run's stream count and whether it jumps, as the driver decided them (its route set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    /// Data connections.
    pub streams: u16,
    /// The run jumps (its plan exists).
    pub jumps: bool,
}

/// What becomes of the data connections opened before the connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// They stand (the guess held).
    Keep,
    /// They are dropped and this many opened instead, also when it is as many: a dropped
    /// guess's connections may carry its route's initial windows.
    New(u16),
    /// The first this many stand, the rest are closed before their TLS starts: a path not
    /// remembered opens as many as the longest path needs at t = 0 and keeps what its RTT
    /// asks for ([`crate::streams_for_path`]), one round trip sooner than opening them at
    /// the connect.
    Trim(u16),
}

/// The control connection's connect, as the driver saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtConnect {
    /// The RTT its TCP handshake measured.
    pub rtt: Duration,
    /// Data connections on their way to the address that answered (0: none, or they went
    /// to another address).
    pub opened: u16,
    /// The connection's ends are the path the guess was made for.
    pub same_path: bool,
}

/// When a run's data connections left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// With the control connection's SYN (t = 0).
    WithControl,
    /// At the control connection's connect (1 RTT).
    AtConnect,
    /// Right behind the request (2 RTT): the server sends and jumps.
    BehindRequest,
}

/// The schedule of one run's data connections; see the module docs.
#[derive(Debug, Clone)]
pub struct DataSchedule {
    wish: DataWish,
    /// A decision made before the connect from the path's record: the remembered RTT and
    /// whether its run jumped.
    guess: Option<(Duration, Decided)>,
    /// A path not remembered, no `-P`: as many as the longest path needs went at t = 0.
    wide_guess: bool,
    /// A run whose server sends and may jump: none before the request.
    hold: bool,
    leave: Option<Leave>,
}

impl DataSchedule {
    /// The schedule of a run the user asked for so.
    pub fn new(wish: DataWish) -> Self {
        Self {
            wish,
            guess: None,
            wide_guess: false,
            hold: false,
            leave: None,
        }
    }

    /// How many data connections go with the control connection's SYN. `decide` is the
    /// driver's decision on a remembered path of that RTT (it sets a jump's route).
    pub fn before_connect(
        &mut self,
        path: PathBefore,
        decide: impl FnOnce(Duration) -> Decided,
    ) -> u16 {
        let (rtt, would_jump) = match path {
            PathBefore::Unroutable => return self.wish.user_streams.unwrap_or(0),
            PathBefore::NotRemembered => {
                return self.wish.user_streams.unwrap_or_else(|| {
                    // Closing the extra ones at the connect costs the server an accept
                    // each; waiting for the RTT to open them costs every stream a round
                    // trip.
                    self.wide_guess = true;
                    MAX_PATH_STREAMS
                });
            }
            PathBefore::Remembered { rtt, would_jump } => (rtt, would_jump),
        };
        if self.wish.receiving && would_jump {
            self.hold = true;
            return 0;
        }
        let decided = decide(rtt);
        self.guess = Some((rtt, decided));
        decided.streams
    }

    /// What becomes of the connections opened before `at`. `decide` is the driver's
    /// decision at the connect, given the connections on their way that must stand (made
    /// before any route could be set); it is not called when the guess held (the driver
    /// keeps its own). Returns the count, and whether the guess held.
    pub fn at_connect(
        &mut self,
        at: AtConnect,
        decide: impl FnOnce(u16) -> Decided,
    ) -> (Count, bool) {
        let guess = self.guess.take();
        if let Some((then, _)) = guess {
            if at.opened > 0 && at.same_path && rtt_matches(then, at.rtt) {
                self.leave = Some(Leave::WithControl);
                return (Count::Keep, true);
            }
        }
        // A guess for another path than this one is decided again (its route goes with
        // it); without a guess, the user's count on its way stands (made before any route,
        // it cannot jump), or none went yet.
        let (carried_route, decide_opened) = match guess {
            Some((_, d)) => (d.jumps, 0),
            None if self.wide_guess => (false, 0),
            None => (false, at.opened),
        };
        let Decided { streams: n, jumps } = decide(decide_opened);
        let count = if self.hold && jumps {
            // The server's route first: they leave behind the request.
            Count::New(0)
        } else if at.opened > 0 && n == at.opened && !carried_route && !jumps {
            // Connections on their way stand if as many are wanted and none carries a
            // route's initial windows the run no longer has (a dropped guess's) or lacks
            // a new jump's.
            Count::Keep
        } else if self.wide_guess && n <= at.opened && !jumps {
            Count::Trim(n)
        } else {
            Count::New(n)
        };
        self.leave = Some(match count {
            Count::Keep | Count::Trim(_) => Leave::WithControl,
            Count::New(0) => Leave::BehindRequest,
            Count::New(_) => Leave::AtConnect,
        });
        (count, false)
    }

    /// A receiving run whose server would jump: its data connections wait for the
    /// request (unless the jump does not happen at the connect after all).
    pub fn holds_for_request(&self) -> bool {
        self.hold
    }

    /// When the run's data connections left (`None` before the connect).
    pub fn leave(&self) -> Option<Leave> {
        self.leave
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn wish(receiving: bool) -> DataWish {
        DataWish {
            user_streams: None,
            receiving,
        }
    }

    fn remembered(rtt: Duration) -> PathBefore {
        PathBefore::Remembered {
            rtt,
            would_jump: true,
        }
    }

    fn connect(rtt: Duration, opened: u16) -> AtConnect {
        AtConnect {
            rtt,
            opened,
            same_path: true,
        }
    }

    const fn decided(streams: u16, jumps: bool) -> Decided {
        Decided { streams, jumps }
    }

    #[test]
    fn a_remembered_path_s_guess_goes_with_the_syn_and_stands_when_the_rtt_matches() {
        let mut s = DataSchedule::new(wish(false));
        assert_eq!(
            s.before_connect(remembered(150 * MS), |_| decided(16, true)),
            16
        );
        let (count, held) = s.at_connect(connect(152 * MS, 16), |_| unreachable!());
        assert_eq!((count, held), (Count::Keep, true));
        assert_eq!(s.leave(), Some(Leave::WithControl));
    }

    #[test]
    fn a_guess_for_another_rtt_is_replaced_at_the_connect_even_by_as_many() {
        let mut s = DataSchedule::new(wish(false));
        s.before_connect(remembered(150 * MS), |_| decided(16, true));
        // Its connections carry the old jump's route: replaced though as many are wanted.
        let (count, held) = s.at_connect(connect(40 * MS, 16), |opened| {
            assert_eq!(opened, 0, "the guess's connections do not stand");
            decided(16, false)
        });
        assert_eq!((count, held), (Count::New(16), false));
        assert_eq!(s.leave(), Some(Leave::AtConnect));
        // Another path than the guess's: the same.
        let mut s = DataSchedule::new(wish(false));
        s.before_connect(remembered(150 * MS), |_| decided(16, false));
        let other = AtConnect {
            same_path: false,
            ..connect(150 * MS, 16)
        };
        assert_eq!(s.at_connect(other, |_| decided(16, false)).0, Count::Keep);
    }

    #[test]
    fn a_path_not_remembered_sends_the_longest_path_s_count_and_keeps_the_rtt_s() {
        let mut s = DataSchedule::new(wish(false));
        let looked = PathBefore::NotRemembered;
        assert_eq!(
            s.before_connect(looked, |_| unreachable!()),
            MAX_PATH_STREAMS
        );
        let (count, _) = s.at_connect(connect(150 * MS, MAX_PATH_STREAMS), |opened| {
            assert_eq!(opened, 0);
            decided(16, false)
        });
        assert_eq!(count, Count::Trim(16));
        assert_eq!(s.leave(), Some(Leave::WithControl));
    }

    #[test]
    fn the_user_s_count_goes_at_once_and_stands() {
        let mut s = DataSchedule::new(DataWish {
            user_streams: Some(4),
            ..wish(false)
        });
        let looked = PathBefore::NotRemembered;
        assert_eq!(s.before_connect(looked, |_| unreachable!()), 4);
        let (count, _) = s.at_connect(connect(150 * MS, 4), |opened| decided(opened, false));
        assert_eq!(count, Count::Keep);
        assert_eq!(s.leave(), Some(Leave::WithControl));
    }

    #[test]
    fn a_receiving_run_whose_server_jumps_sends_its_connections_behind_the_request() {
        let mut s = DataSchedule::new(wish(true));
        assert_eq!(
            s.before_connect(remembered(150 * MS), |_| unreachable!()),
            0
        );
        let (count, _) = s.at_connect(connect(150 * MS, 0), |_| decided(16, true));
        assert_eq!(count, Count::New(0));
        assert_eq!(s.leave(), Some(Leave::BehindRequest));
        // The same run whose jump did not happen opens them at the connect.
        let mut s = DataSchedule::new(wish(true));
        s.before_connect(remembered(150 * MS), |_| unreachable!());
        let (count, _) = s.at_connect(connect(150 * MS, 0), |_| decided(16, false));
        assert_eq!(count, Count::New(16));
        assert_eq!(s.leave(), Some(Leave::AtConnect));
    }

    #[test]
    fn a_receiving_run_that_would_not_jump_guesses_like_a_sender() {
        // At a `--rate`, without root, with `--no-jump-start`: no hold, no round trip lost.
        let mut s = DataSchedule::new(wish(true));
        let path = PathBefore::Remembered {
            rtt: 150 * MS,
            would_jump: false,
        };
        assert_eq!(s.before_connect(path, |_| decided(16, false)), 16);
        assert_eq!(
            s.at_connect(connect(150 * MS, 16), |_| unreachable!()).0,
            Count::Keep
        );
    }

    #[test]
    fn no_route_sends_the_user_s_count_or_waits_for_the_rtt() {
        let mut s = DataSchedule::new(wish(false));
        assert_eq!(
            s.before_connect(PathBefore::Unroutable, |_| unreachable!()),
            0
        );
        let (count, _) = s.at_connect(connect(150 * MS, 0), |_| decided(16, false));
        assert_eq!(count, Count::New(16));
        assert_eq!(s.leave(), Some(Leave::AtConnect));
    }
}
