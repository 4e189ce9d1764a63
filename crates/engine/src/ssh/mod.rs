//! Starting the far end over the user's own ssh ("daemonless" mode, as rsync, bbcp and
//! mscp do), then talking to it directly over TCP like to a daemon.
//!
//! - [`rsh`]: the ssh command line: `-e/--rsh` split as rsync splits it, the destination,
//!   the far command (`--remote-longhaul` then `ssh-server`).
//! - [`launch`]: this end: runs ssh with its stdin and stdout as pipes, reads the far
//!   end's one [`SshReady`](longhaul_proto::SshReady) line, finds an address that reaches
//!   its port, keeps ssh alive for the session (its channel is the far process's
//!   lifeline) and closes it at the end; errors say what failed and what to do.
//! - [`deploy`]: a far host without longhaul (or with another protocol's) gets this
//!   binary, over the same ssh, in a private per-user cache, and runs it from there.
//! - [`far`]: the far end (`longhaul ssh-server`): an ephemeral port (on the address
//!   the client dials, when known), a one-time token, the ready line, its client's one
//!   session with the ssh user's own files, then exit; it also exits when ssh's channel
//!   closes or when its client does not come. Strangers at its port end nothing.
//!
//! ```text
//! client                       ssh                        far host
//! ssh [-e opts] host  ───────────────────────────────▶ longhaul ssh-server
//!                     ◀── LONGHAUL-READY port=P token=T ──  (stdout, one line)
//! TCP connect host:P, token T  ═══════════════════════▶ one bench/cp session
//! close ssh stdin      ──────────── EOF ─────────────▶ exit
//! ```

pub mod bridge;
pub mod deploy;
pub mod dial_back;
pub mod far;
pub mod launch;
mod reach;
pub mod relay;
pub mod reverse;
pub mod rsh;

/// How long the far end waits for its client before it exits.
pub const FAR_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// How long this end waits for the ready line.
pub const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl SshError {
    /// Whether the far host lacks a longhaul this one can talk to (none, one too old, one
    /// of another protocol): what an upload of this binary fixes.
    pub fn wants_upload(&self) -> bool {
        matches!(
            self,
            SshError::FarMissing { .. } | SshError::FarTooOld { .. } | SshError::Version { .. }
        )
    }

    /// Why, in a few words, for the upload's note.
    pub fn short(&self) -> String {
        match self {
            SshError::FarMissing { .. } => "no longhaul there".into(),
            SshError::FarTooOld { .. } => "its longhaul is too old".into(),
            SshError::Version { theirs, ours, .. } => {
                format!("its longhaul speaks protocol {theirs}, this one {ours}")
            }
            other => other.to_string(),
        }
    }
}

/// What can go wrong starting or reaching the far end; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    /// `-e/--rsh` could not be split (an unclosed quote, nothing in it).
    #[error("--rsh {value:?}: {why}")]
    BadRsh {
        /// The option as given.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// The ssh program could not be started at all.
    #[error("cannot run {program:?}: {cause}; install an ssh client (apt-get install openssh-client) or name one with -e")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        cause: std::io::Error,
    },
    /// The far host has no such longhaul.
    #[error("longhaul is not installed on {host} (`{remote}` not found there{said}); install it on that host (e.g. `cargo install --path crates/cli`, or copy the binary to /usr/local/bin), or give its path with --remote-longhaul PATH")]
    FarMissing {
        /// The ssh destination.
        host: String,
        /// The far command tried.
        remote: String,
        /// What the far end said (`; it said: ...`), may be empty.
        said: String,
    },
    /// This binary was uploaded to the far host and does not run there.
    #[error("the far host {host} cannot run this longhaul (uploaded to its ~/.cache/longhaul; it said: {said}); on another CPU, OS or an older C library, install a longhaul built for that host there and name it with --remote-longhaul PATH; on a home mounted noexec, point XDG_CACHE_HOME there at a file system that allows programs")]
    FarCannotRun {
        /// The ssh destination.
        host: String,
        /// What the far system answered when the copy was run.
        said: String,
    },
    /// The upload itself failed (ssh, a full disk, no answer).
    #[error("uploading longhaul to {host} failed ({status}){said}; install longhaul there, or give its path with --remote-longhaul PATH")]
    UploadFailed {
        /// The ssh destination.
        host: String,
        /// How ssh ended.
        status: String,
        /// What the far side said.
        said: String,
    },
    /// The far longhaul is older than this one's ssh start-up (no ssh-server command, or
    /// one without an option this end passes).
    #[error("the longhaul on {host} (`{remote}`) is too old for this one: its ssh-server is missing or takes other options{said}; install this release there, or give a newer one with --remote-longhaul PATH")]
    FarTooOld {
        /// The ssh destination.
        host: String,
        /// The far command tried.
        remote: String,
        /// What the far end said.
        said: String,
    },
    /// ssh itself failed (exit 255: no route, refused, host key, authentication).
    #[error("ssh to {host} failed ({status}){said}; check that `{command}` works on its own")]
    SshFailed {
        /// The ssh destination.
        host: String,
        /// How ssh ended.
        status: String,
        /// ssh's stderr (`: ...`), may be empty.
        said: String,
        /// The ssh command, to try by hand.
        command: String,
    },
    /// The far longhaul ended (or said something else) without its ready line.
    #[error("the longhaul on {host} ended without saying it was ready ({status}){said}")]
    FarFailed {
        /// The ssh destination.
        host: String,
        /// How ssh ended.
        status: String,
        /// What the far end said on stdout and stderr.
        said: String,
    },
    /// The far end speaks another protocol version.
    #[error("the longhaul on {host} speaks protocol {theirs}, this one speaks {ours}; install the same longhaul release on both hosts (or give a matching one with --remote-longhaul PATH)")]
    Version {
        /// The ssh destination.
        host: String,
        /// The far end's version.
        theirs: u16,
        /// Ours.
        ours: u16,
    },
    /// A ready line that does not parse.
    #[error("the longhaul on {host} printed a bad ready line: {cause}")]
    BadReady {
        /// The ssh destination.
        host: String,
        /// Why it was refused.
        cause: longhaul_proto::ProtoError,
    },
    /// No ready line in time.
    #[error("no answer from longhaul on {host} within {} s{said}; is ssh waiting for a password or a host-key prompt? (try `ssh {host}` by hand first)", .after.as_secs())]
    NoReady {
        /// The ssh destination.
        host: String,
        /// How long we waited.
        after: std::time::Duration,
        /// What ssh said so far.
        said: String,
    },
    /// The far end's port cannot be reached from here.
    #[error("cannot reach the far longhaul's TCP port {port} on {host} ({tried}); a firewall between the hosts probably blocks it: open TCP port {port} on {host}, or choose ports that are open with --port-range LO-HI")]
    Unreachable {
        /// The host as the user named it.
        host: String,
        /// The port the far end listens on.
        port: u16,
        /// Each address tried and why it failed.
        tried: String,
    },
    /// Something local failed (pipes, threads).
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        cause: std::io::Error,
    },
}
