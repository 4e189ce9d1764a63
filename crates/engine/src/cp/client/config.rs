//! What a `longhaul cp` run is asked to do: the job (a push of listed local files, a
//! pull to a local destination, or a daemon's relayed pull into its own files) and the options that shape it ([`CpConfig`]).

use std::path::PathBuf;

use longhaul_proto::Credential;
use longhaul_transfer::session::recv::SyncRules;
use longhaul_transfer::Filter;

use crate::cp::recv::RecvTarget;
use crate::cp::send::SendItem;
use crate::transport::tls::Security;

/// What to copy.
pub enum CpJob {
    /// Local files (already listed) to the server's `remote_path`.
    Push {
        /// The entries, directories before their contents.
        items: Vec<SendItem>,
    },
    /// The server's `remote_path` to a local destination.
    Pull {
        /// Local destination (an existing directory, or a new name).
        dest: PathBuf,
    },
    /// The server's `remote_path` to a target beneath a root this end serves: a
    /// destination daemon's relayed pull (a third-party copy), its target landed and
    /// confined as a push's to it would be.
    Relay {
        /// Where the files go, and the rules that hold there.
        target: RecvTarget,
    },
}

/// Asked once a pull's streams, chunk and socket buffers are known, before the request:
/// returns the chunk to ask for (the same or smaller), or the words to refuse with. A
/// daemon's relayed pull reserves what it will hold from its memory budget here.
pub type MemoryGate = std::sync::Arc<
    dyn Fn(u16, u64, &longhaul_policy::BufferChoice) -> Result<u64, String> + Send + Sync,
>;

/// A `longhaul cp` run.
pub struct CpConfig {
    /// `HOST:PORT` or `[V6]:PORT` of the server.
    pub server: String,
    /// Path below the server's root (raw bytes; empty = the root), or with `user_paths`
    /// the ssh user's path (absolute or from the home; empty = the home).
    pub remote_path: Vec<u8>,
    /// The server is a `longhaul ssh-server` serving the user's own files (see
    /// `ServedFiles::User`), not a daemon's root.
    pub user_paths: bool,
    /// Push or pull.
    pub job: CpJob,
    /// What this end proves: the shared token, or a ticket of the server's.
    pub credential: Credential,
    /// Copy directories.
    pub recursive: bool,
    /// Never replace existing files.
    pub no_clobber: bool,
    /// The receiver flushes each file to disk before its rename (`--sync`).
    pub sync: bool,
    /// Only compare digests.
    pub checksum_only: bool,
    /// On a pull, keep set-user-ID, set-group-ID and sticky bits the server names
    /// (`--keep-setuid`); dropped otherwise.
    pub keep_setuid: bool,
    /// Data streams (`None`: from the path).
    pub streams: Option<u16>,
    /// A push or a pull may start at the rate remembered for the path (jump-start; not
    /// `--no-jump-start`): a push's sender is this end, a pull's the server, asked in the
    /// request.
    pub jump_start: bool,
    /// Total pacing rate, bit/s.
    pub rate_bps: Option<u64>,
    /// Fixed socket buffer per stream.
    pub window: Option<u64>,
    /// Congestion control of the sending side (pushes).
    pub congestion: Option<String>,
    /// Chunk size (`None`: from the path).
    pub chunk_size: Option<u64>,
    /// How the server is trusted, and whether the data streams are encrypted.
    pub security: Security,
    /// `longhaul sync`: only the chunks of a changed file that differ from the
    /// destination's copy are sent, entries placed by rsync's rule.
    pub delta: Option<SyncRules>,
    /// `--exclude` / `--include` rules in command-line order (empty: everything). A push's
    /// items are already walked with them (`walk_local_filtered`); they go to the server
    /// either way (a pull's server lists with them, a push's keeps what they exclude from
    /// `--delete`).
    pub filter: Filter,
    /// `--delete`: the receiver removes what the source lacks from the directories the
    /// transfer sends (needs `recursive`), keeping what `filter` excludes.
    pub delete: bool,
    /// `-H`: the sender lists later names of a file as hard links of the first (a push's
    /// items are walked so already; a pull's server is asked to).
    pub hard_links: bool,
    /// What a pull may hold, checked before the request (`None`: no check).
    pub memory_gate: Option<MemoryGate>,
    /// A `sync --checksum` pull: the destination's old copies, hashed while the far end
    /// started (`cp::hash_ahead`; `None`: hashed when the list names them).
    pub hashed_ahead: Option<std::sync::Arc<crate::cp::hash_ahead::HashedAhead>>,
}
