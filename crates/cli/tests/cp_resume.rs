//! `longhaul cp` survives kill -9: the sender or the receiver is killed at a random point
//! (seeded, seed printed) in many runs, in both directions; each time the same command run
//! again must exit 0 with a bit-identical result, having re-sent only what the receiver
//! had not verified. A source changed between the killed run and the rerun is sent again.
//!
//! # The bound on re-sent bytes
//! The receiver appends a manifest record for a chunk only after the chunk's data is
//! synced, so after a kill the manifest lists chunks whose data is in the part file (this
//! test checks each one against the source). The rerun must send every chunk the manifest
//! does not list (`unverified` bytes) and nothing it lists, so
//! `sent_bytes(rerun) <= unverified + (2 x streams + 2) x chunk`, the slack being chunks
//! sent again after a data stream failed mid-chunk (at most one unit per stream, a second
//! one pipelined) plus two chunks for a chunk
//! rejected and sent again. The work lost at the kill (chunks with data in the part file
//! but not recorded: written and not yet recorded, or being written) is bounded the same
//! way, since each stream has at most one chunk between arrival and record, plus one
//! being received. The rerun's `resumed_bytes` must equal what the manifest lists.

#[macro_use]
mod support;

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

const SIZE: u64 = 64 * MIB;
const CHUNK: u64 = MIB;
const STREAMS: u64 = 4;
/// Chunks that may be sent beyond the unverified ones (see the module docs).
const SLACK_CHUNKS: u64 = 2 * STREAMS + 2;
const NAME: &str = "big";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Direction {
    Push,
    Pull,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Victim {
    Sender,
    Receiver,
}

/// When to kill: after a delay from the start, or once the receiver's manifest lists
/// this many verified chunks (a point mid-transfer whatever the machine's load).
#[derive(Clone, Copy, Debug)]
enum Trigger {
    AfterMs(u64),
    AfterRecords(u64),
}

/// A server, a 64 MiB source and the receiver's directory for one direction.
struct Setup {
    /// Declared first so it is killed before the scratch directory goes.
    server: Server,
    _scratch: Scratch,
    home: PathBuf,
    direction: Direction,
    /// The source file (local for a push, in the served root for a pull).
    src: PathBuf,
    /// Where the receiver puts `big` (the served root for a push, local for a pull).
    dst_dir: PathBuf,
}

impl Setup {
    fn new(tag: &str, direction: Direction, rng: &mut Rng) -> Self {
        let s = Scratch::new(tag);
        let home = s.dir("home");
        let root = s.dir("root");
        let local = s.dir("local");
        let (src, dst_dir) = match direction {
            Direction::Push => (local.join(NAME), root.clone()),
            Direction::Pull => (root.join(NAME), local.clone()),
        };
        write_random(&src, rng, SIZE as usize);
        set_mtime(&src, 1_650_000_000, 5);
        let server = Server::start(&home, &root);
        Self {
            _scratch: s,
            home,
            server,
            direction,
            src,
            dst_dir,
        }
    }

    /// The command, the same for the killed run and the rerun (only the server's port
    /// changes when the server was restarted).
    fn command(&self) -> Command {
        let mut c = cp_command(&self.home);
        c.args(["--chunk", "1MiB", "-P", "4", "--rate", "400M", "--json"]);
        match self.direction {
            Direction::Push => c.arg(&self.src).arg(self.server.remote(NAME)),
            Direction::Pull => c.arg(self.server.remote(NAME)).arg(self.dst_dir.join(NAME)),
        };
        c
    }

    fn dst(&self) -> PathBuf {
        self.dst_dir.join(NAME)
    }

    fn manifest(&self) -> PathBuf {
        manifest_path(&self.dst_dir, NAME)
    }

    fn part(&self) -> PathBuf {
        part_path(&self.dst_dir, NAME)
    }

    fn clear_dst(&self) {
        for p in [self.dst(), self.manifest(), self.part()] {
            let _ = fs::remove_file(p);
        }
    }

    /// Is the process to kill the client (`longhaul cp`) or the server?
    fn victim_is_client(&self, victim: Victim) -> bool {
        (self.direction == Direction::Push) == (victim == Victim::Sender)
    }
}

/// What the kill runs of one scenario showed.
#[derive(Default, Debug)]
struct Figures {
    runs: u64,
    /// Killed before the file was committed.
    interrupted: u64,
    /// Of those, killed with some chunks verified and not all (mid-data).
    mid_transfer: u64,
    max_lost_chunks: u64,
    /// Largest `sent_bytes(rerun) - unverified` (chunks sent again).
    max_excess_bytes: i64,
    max_verified_at_kill: u64,
    /// Reruns that answered the list ahead (pulls into nothing).
    answered_ahead: u64,
}

/// Chunk `index` of `f` (shorter at the end of the file, empty past it).
fn chunk_of(f: &File, index: u64) -> Vec<u8> {
    let len = f.metadata().unwrap().len();
    let start = index * CHUNK;
    let n = CHUNK.min(len.saturating_sub(start)) as usize;
    let mut buf = vec![0u8; n];
    f.read_exact_at(&mut buf, start).unwrap();
    buf
}

/// Checks the receiver's partial state after a kill; returns (verified chunks, chunks
/// holding data but not recorded).
fn inspect_partial(setup: &Setup) -> (u64, u64) {
    let verified = manifest_verified(&setup.manifest());
    let Ok(part) = File::open(setup.part()) else {
        assert!(
            verified.is_empty(),
            "the manifest lists {} chunks but there is no part file",
            verified.len()
        );
        return (0, 0);
    };
    let src = File::open(&setup.src).unwrap();
    let chunks = SIZE.div_ceil(CHUNK);
    let mut lost = 0;
    for i in 0..chunks {
        let have = chunk_of(&part, i);
        let recorded = verified.iter().any(|&(v, _)| u64::from(v) == i);
        if recorded {
            assert_eq!(
                have,
                chunk_of(&src, i),
                "chunk {i} is recorded as verified but the part file does not hold it"
            );
        } else if have.iter().any(|&b| b != 0) {
            lost += 1;
        }
    }
    (verified.len() as u64, lost)
}

/// `runs` kill runs of `victim` in `direction`, each followed by the rerun.
fn kill_runs(direction: Direction, victim: Victim, default_runs: u64) -> Figures {
    let runs = std::env::var("LONGHAUL_KILL_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_runs);
    let tag = format!("{direction:?}-{victim:?}").to_lowercase();
    let mut rng = Rng::from_env(&format!("kill runs, {tag}"));
    let mut setup = Setup::new(&tag, direction, &mut rng);
    let kill_client = setup.victim_is_client(victim);
    let chunks = SIZE / CHUNK;
    let mut fig = Figures::default();
    for run_no in 0..runs {
        setup.clear_dst();
        let trigger = if rng.range(0, 3) == 0 {
            Trigger::AfterMs(rng.range(0, 700))
        } else {
            Trigger::AfterRecords(rng.range(1, chunks - 4))
        };
        let ctx = format!("{tag} run {run_no} ({trigger:?})");
        let mut first = spawn_piped(&mut setup.command());
        let started = Instant::now();
        let finished_early = loop {
            if first.has_exited() {
                break true;
            }
            let fire = match trigger {
                Trigger::AfterMs(ms) => started.elapsed() >= Duration::from_millis(ms),
                Trigger::AfterRecords(k) => manifest_record_count(&setup.manifest()) >= k,
            };
            if fire {
                break false;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{ctx}: the first run neither ended nor reached its kill point in 60 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        if !finished_early {
            if kill_client {
                first.kill9();
            } else {
                setup.server.kill();
            }
        }
        // A client whose server died must end by itself with an error (not hang).
        let first = first.wait(Duration::from_secs(60));
        if !kill_client {
            setup.server.restart();
        } else if direction == Direction::Push {
            // The receiving server may still record chunks that had arrived.
            wait_until_stable(&setup.manifest(), Duration::from_millis(300));
        }
        let committed = setup.dst().exists();
        if committed {
            // Nothing is presented as complete that is not.
            assert_same_bytes(&setup.src, &setup.dst());
        } else if !kill_client && !finished_early {
            assert!(
                matches!(first.code(), Some(c) if c != 0),
                "{ctx}: the client reported success without the file\n{}",
                first.describe()
            );
        }
        fig.runs += 1;
        if !finished_early && !committed {
            fig.interrupted += 1;
        }
        let (verified, lost) = if committed {
            (0, 0)
        } else {
            inspect_partial(&setup)
        };
        if verified > 0 {
            fig.mid_transfer += 1;
        }
        fig.max_lost_chunks = fig.max_lost_chunks.max(lost);
        fig.max_verified_at_kill = fig.max_verified_at_kill.max(verified);
        assert!(
            lost <= SLACK_CHUNKS,
            "{ctx}: {lost} chunks were written but not recorded (bound {SLACK_CHUNKS})"
        );

        // A pull into a destination that holds nothing of the file (no copy, no part
        // file, no manifest) answers the list ahead; one with a part file resumes.
        let nothing_there =
            !setup.dst().exists() && !setup.part().exists() && !setup.manifest().exists();
        let rerun = run(&mut setup.command(), Duration::from_secs(120));
        assert_eq!(
            rerun.code(),
            Some(0),
            "{ctx}: the rerun failed\n{}\nserver log:\n{}",
            rerun.describe(),
            setup.server.log()
        );
        assert_same_bytes(&setup.src, &setup.dst());
        assert!(
            !setup.part().exists() && !setup.manifest().exists(),
            "{ctx}: leftovers"
        );
        assert_eq!(
            rerun.json_of("end")["answered_ahead"],
            direction == Direction::Pull && nothing_there,
            "{ctx}\n{}",
            rerun.describe()
        );
        fig.answered_ahead += u64::from(rerun.json_of("end")["answered_ahead"] == true);
        let sent = rerun.end_u64("sent_bytes");
        let resumed = rerun.end_u64("resumed_bytes");
        let verified_bytes = (verified * CHUNK).min(SIZE);
        let unverified = SIZE - verified_bytes;
        if !committed {
            assert_eq!(
                resumed,
                verified_bytes,
                "{ctx}: the rerun resumed other than what the manifest lists\n{}",
                rerun.describe()
            );
        }
        assert!(
            sent <= unverified + SLACK_CHUNKS * CHUNK,
            "{ctx}: the rerun sent {sent} bytes; {unverified} were not verified, bound {}\n{}",
            unverified + SLACK_CHUNKS * CHUNK,
            rerun.describe()
        );
        fig.max_excess_bytes = fig.max_excess_bytes.max(sent as i64 - unverified as i64);
    }
    eprintln!(
        "{tag}: {} runs, {} interrupted ({} with chunks verified), at most {} of {chunks} chunks verified at a kill, \
         at most {} chunks lost (written, not recorded) per kill, rerun sent at most {} \
         bytes beyond the unverified ones (bound {} = {SLACK_CHUNKS} chunks), {} reruns \
         answered the list ahead",
        fig.runs,
        fig.interrupted,
        fig.mid_transfer,
        fig.max_verified_at_kill,
        fig.max_lost_chunks,
        fig.max_excess_bytes,
        SLACK_CHUNKS * CHUNK,
        fig.answered_ahead
    );
    assert!(
        fig.interrupted * 4 >= fig.runs * 3,
        "only {} of {} runs were interrupted mid-transfer",
        fig.interrupted,
        fig.runs
    );
    fig
}

#[test]
fn push_sender_killed_20_times_each_rerun_completes() {
    kill_runs(Direction::Push, Victim::Sender, 20);
}

#[test]
fn push_receiver_killed_20_times_each_rerun_completes() {
    kill_runs(Direction::Push, Victim::Receiver, 20);
}

#[test]
fn pull_sender_killed_10_times_each_rerun_completes() {
    kill_runs(Direction::Pull, Victim::Sender, 10);
}

#[test]
fn pull_receiver_killed_10_times_each_rerun_completes() {
    kill_runs(Direction::Pull, Victim::Receiver, 10);
}

/// The source is rewritten in place between the killed run and the rerun, with its old
/// size and mtime put back: only its identity (ctime) tells, and the rerun must send the
/// whole file again and end with the new content.
#[test]
fn a_source_changed_after_a_kill_is_sent_again() {
    let mut rng = Rng::from_env("source changed");
    for direction in [Direction::Push, Direction::Pull] {
        let tag = format!("changed-{direction:?}").to_lowercase();
        let setup = Setup::new(&tag, direction, &mut rng);
        let mut first = spawn_piped(&mut setup.command());
        let started = Instant::now();
        let k = rng.range(8, 40);
        while manifest_record_count(&setup.manifest()) < k {
            assert!(
                !first.has_exited(),
                "{tag}: the first run ended before chunk {k}"
            );
            assert!(started.elapsed() < Duration::from_secs(60), "{tag}: stuck");
            std::thread::sleep(Duration::from_millis(1));
        }
        first.kill9();
        let _ = first.wait(Duration::from_secs(30));
        wait_until_stable(&setup.manifest(), Duration::from_millis(300));
        assert!(!setup.dst().exists());
        assert!(!manifest_verified(&setup.manifest()).is_empty());

        let f = fs::OpenOptions::new().write(true).open(&setup.src).unwrap();
        for at in [0, SIZE / 2 + 4097] {
            f.write_all_at(&rng.bytes(4096), at).unwrap();
        }
        drop(f);
        set_mtime(&setup.src, 1_650_000_000, 5);

        let rerun = run(&mut setup.command(), Duration::from_secs(120));
        assert_eq!(
            rerun.code(),
            Some(0),
            "{tag}: rerun\n{}\nserver log:\n{}",
            rerun.describe(),
            setup.server.log()
        );
        assert_same_bytes(&setup.src, &setup.dst());
        assert_eq!(rerun.end_u64("resumed_bytes"), 0, "{}", rerun.describe());
        assert!(rerun.end_u64("sent_bytes") >= SIZE, "{}", rerun.describe());
    }
}
