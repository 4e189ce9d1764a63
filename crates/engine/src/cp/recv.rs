//! The receiving end of a transfer (the server on a push, the client on a pull).
//!
//! Every path from the peer is checked (`parse_peer_path`), placed by cp's rules and
//! opened only through the [`ServedRoot`]. A file is written into `.NAME.longhaul-part`
//! with positional writes of the non-zero blocks of each chunk (holes stay holes); for a
//! file of several chunks each verified chunk is recorded in `.NAME.longhaul-manifest`
//! before it is acked, so a rerun after a crash re-sends only chunks in flight (a rerun
//! re-hashes recorded chunks before it trusts them, so records need no sync of their own).
//! The file is renamed into place only when every chunk is verified and the BLAKE3 over
//! the part file equals the sender's. With `--sync` ([`RecvTarget::sync`]) data and
//! records are flushed every few seconds and each file before its rename; without it, as
//! with cp, rsync and GridFTP, the kernel writes the page cache back in its own time.

use std::collections::HashSet;
use std::fs::{File, FileTimes, Permissions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use longhaul_proto::transfer::{
    ChunkHeader, EntryKind, FileEntry, RejectReason, SkipReason, TransferMessage, CHUNK_FLAG_HOLE,
    MAX_FILE_ID,
};
use longhaul_sys::aligned::AlignedBuf;
use longhaul_sys::file_io;
use longhaul_sys::served_root::{Access, ServedRoot};
use longhaul_transfer::manifest::{chunk_count, HEADER_LEN, RECORD_LEN};
use longhaul_transfer::place::{manifest_name, part_name, place_entry};
use longhaul_transfer::{
    parse_peer_path, sparse, ChunkCheck, ChunkHash, Error as TransferError, FileReceiver,
    PartStart, SafeRelPath, SourceIdentity,
};

use super::control::{ControlLink, ControlTx, Incoming};
use super::digest::{FileHashes, PIECE};
use super::send::show;
use super::{CpError, Progress, Stop};

/// Where received files go.
pub struct RecvTarget {
    /// The directory everything is written beneath.
    pub root: Arc<ServedRoot>,
    /// The destination below the root (`None`: the root itself).
    pub target: Option<SafeRelPath>,
    /// Never replace an existing file.
    pub no_clobber: bool,
    /// Only compare digests.
    pub checksum_only: bool,
    /// Flush each file to disk before its rename, and the resume records as they go.
    pub sync: bool,
}

/// What the receiver did.
#[derive(Debug, Clone, Default)]
pub struct RecvOutcome {
    /// Files renamed into place (or equal, in `--checksum-only`).
    pub files_ok: u64,
    /// Files not written because they exist (`--no-clobber`).
    pub files_skipped: u64,
    /// Files that failed, with why.
    pub failed: Vec<String>,
    /// Chunk payload bytes received in this run.
    pub received_bytes: u64,
    /// Bytes found verified from an earlier run.
    pub resumed_bytes: u64,
    /// Bytes of the files in this transfer.
    pub total_bytes: u64,
}

#[derive(Default)]
struct Commit {
    ours: Option<[u8; 32]>,
    theirs: Option<[u8; 32]>,
    done: bool,
}

struct RecvFile {
    id: u32,
    entry: FileEntry,
    final_rel: PathBuf,
    part_rel: PathBuf,
    manifest_rel: Option<PathBuf>,
    /// The part file (or, in `--checksum-only`, the existing file); for a file of one
    /// chunk it is created when that chunk arrives, on the data stream's thread.
    data: OnceLock<File>,
    /// `data` was created without a name (`O_TMPFILE`): it is linked into place, and
    /// nothing is left behind if the transfer stops first.
    unnamed: AtomicBool,
    create: Mutex<()>,
    /// Held while writing to `data`: ext4 takes the inode lock for every buffered write
    /// and a stream waiting for it spins in the kernel, burning a core; waiting here
    /// sleeps instead.
    write: Mutex<()>,
    manifest: Option<Mutex<File>>,
    /// The manifest again, to sync without taking the append lock.
    manifest_sync: Option<File>,
    /// Records appended since the last sync.
    dirty: AtomicBool,
    rx: Mutex<FileReceiver>,
    digest: FileHashes,
    commit: Mutex<Commit>,
}

impl RecvFile {
    /// A file being received: `paths` = (final, part); `data` = the open part file (or
    /// the existing file in `--checksum-only`), `None` to create it on first use;
    /// `manifest` = its path and open file for files of several chunks.
    fn new(
        id: u32,
        entry: FileEntry,
        paths: (PathBuf, PathBuf),
        data: Option<File>,
        manifest: Option<(PathBuf, File)>,
        receiver: FileReceiver,
        digest: FileHashes,
    ) -> Self {
        let (manifest_rel, manifest) = manifest.unzip();
        Self {
            id,
            entry,
            final_rel: paths.0,
            part_rel: paths.1,
            manifest_rel,
            data: data.map(OnceLock::from).unwrap_or_default(),
            unnamed: AtomicBool::new(false),
            create: Mutex::new(()),
            write: Mutex::new(()),
            manifest_sync: manifest.as_ref().and_then(|m| m.try_clone().ok()),
            manifest: manifest.map(Mutex::new),
            dirty: AtomicBool::new(false),
            rx: Mutex::new(receiver),
            digest,
            commit: Mutex::new(Commit::default()),
        }
    }

    /// The data file, if it exists yet.
    fn file(&self) -> io::Result<&File> {
        self.data
            .get()
            .ok_or_else(|| io::Error::other("the part file does not exist yet"))
    }

    /// The data file, creating the part file of a one-chunk file on first use (a stale
    /// part file from an earlier attempt is replaced).
    fn file_or_create(&self, root: &ServedRoot) -> io::Result<&File> {
        if let Some(f) = self.data.get() {
            return Ok(f);
        }
        let _guard = self
            .create
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?;
        if let Some(f) = self.data.get() {
            return Ok(f);
        }
        let dir = self.part_rel.parent().unwrap_or(Path::new(""));
        let file = match root.create_unnamed(dir, 0o600) {
            Ok(file) => {
                self.unnamed.store(true, Ordering::Release);
                file
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Unsupported
                        | io::ErrorKind::IsADirectory
                        | io::ErrorKind::InvalidInput
                ) =>
            {
                let access = Access::CreateNew { mode: 0o600 };
                match root.open_file(&self.part_rel, access) {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        remove_if_there(root, &self.part_rel)?;
                        root.open_file(&self.part_rel, access)?
                    }
                    other => other?,
                }
            }
            Err(e) => return Err(e),
        };
        if self.entry.size > 0 {
            file.set_len(self.entry.size)?;
        }
        Ok(self.data.get_or_init(|| file))
    }
}

struct Shared {
    /// Files still to commit; the last commit sets the directories' times first.
    uncommitted: AtomicU64,
    /// Directories to give their modes and mtimes once every file is in place.
    dirs: Mutex<Vec<DirFix>>,
    root: Arc<ServedRoot>,
    files: Vec<Option<Arc<RecvFile>>>,
    chunk_size: u64,
    no_clobber: bool,
    checksum_only: bool,
    sync: bool,
    control: ControlTx,
    stop: Stop,
    received: AtomicU64,
    ok: AtomicU64,
    failed: Mutex<Vec<String>>,
    progress: Arc<Progress>,
}

impl Shared {
    /// Stops the transfer; the first reason goes to the sender at once (before any data
    /// stream closes, so the sender reports this rather than a broken pipe).
    fn fail(&self, why: String) {
        if self.stop.record(why.clone()) {
            self.control.send_error(&why);
        }
        self.stop.raise();
    }
}

/// Directories created, with the mode and mtime to set once their contents are in.
struct DirFix {
    rel: PathBuf,
    depth: usize,
    mode: u32,
    mtime: SystemTime,
}

/// Runs the receiving end to completion.
pub fn run_receiver(
    target: RecvTarget,
    chunk_size: u64,
    control: ControlLink,
    streams: impl FnOnce() -> Result<Vec<TcpStream>, CpError>,
    progress: Arc<Progress>,
) -> Result<RecvOutcome, CpError> {
    let mut list = match ListState::new(&target) {
        Ok(l) => l,
        Err(e) => return Err(refuse(&control, e.to_string())),
    };
    // The file list, answered as a whole.
    let mut answers = Vec::new();
    let mut files: Vec<Option<Arc<RecvFile>>> = Vec::new();
    loop {
        match control.next("receiving the file list")? {
            TransferMessage::FileEntries { first_id, entries } => {
                if first_id as usize != files.len()
                    || files.len() + entries.len() > MAX_FILE_ID as usize + 1
                {
                    return Err(refuse(
                        &control,
                        format!(
                            "file entries out of order or too many (first id {first_id}, expected {})",
                            files.len()
                        ),
                    ));
                }
                for entry in entries {
                    let id = files.len() as u32;
                    match list.accept(&target, chunk_size, id, entry, &progress) {
                        Ok((file, answer)) => {
                            files.push(file);
                            answers.extend(answer);
                        }
                        Err(e) => return Err(refuse(&control, e)),
                    }
                }
            }
            TransferMessage::FileListEnd { .. } => break,
            other => {
                return Err(refuse(
                    &control,
                    format!("unexpected {} before the file list ended", other.kind()),
                ))
            }
        }
    }
    answers.push(TransferMessage::FileListEnd {
        files: files.len() as u32,
        bytes: list.total_bytes,
    });
    let to_commit = files.iter().flatten().count() as u64;
    if to_commit == 0 && !target.checksum_only {
        // Nothing will be committed (only directories, or all skipped): the tree is final
        // now, before the sender hears it is done.
        fix_dirs(&target.root, &mut list.dirs);
    }
    control
        .tx
        .send_all(&answers)
        .map_err(|e| CpError::io("answering the file list", e))?;
    // The data streams, which may still have been attaching while the list was read.
    let streams = match streams() {
        Ok(s) => s,
        Err(e) => return Err(refuse(&control, e.to_string())),
    };
    progress.add_total(list.total_bytes);
    progress.add_done(list.resumed_bytes);
    progress.set_files(files.iter().flatten().count() as u64);
    progress.mark_listed();

    let shared = Arc::new(Shared {
        root: target.root.clone(),
        files,
        chunk_size,
        no_clobber: target.no_clobber,
        checksum_only: target.checksum_only,
        sync: target.sync,
        control: control.tx.clone(),
        stop: Stop::default(),
        received: AtomicU64::new(0),
        ok: AtomicU64::new(0),
        failed: Mutex::new(Vec::new()),
        progress,
        uncommitted: AtomicU64::new(to_commit),
        dirs: Mutex::new(std::mem::take(&mut list.dirs)),
    });
    let catch_up = {
        let sh = shared.clone();
        std::thread::spawn(move || {
            for f in sh.files.iter().flatten() {
                if sh.stop.raised() {
                    return;
                }
                let read_at = |off: u64, b: &mut [u8]| file_io::read_exact_at(f.file()?, b, off);
                match f.digest.advance(&read_at) {
                    // Also a file whose every chunk was resumed (hashes from the manifest).
                    Ok(_) => {
                        if let Some(d) = f.digest.result() {
                            set_ours(&sh, f, d)
                        }
                    }
                    Err(e) => sh.fail(format!("reading {}: {e}", f.part_rel.display())),
                }
            }
        })
    };
    // Clones to unblock the stream threads if the transfer stops early.
    let handles: Vec<TcpStream> = streams.iter().filter_map(|s| s.try_clone().ok()).collect();
    let workers: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let sh = shared.clone();
            std::thread::spawn(move || stream_loop(&sh, i, s))
        })
        .collect();

    let sync_stop = Arc::new(AtomicBool::new(false));
    let syncer = {
        let (sh, stop) = (shared.clone(), sync_stop.clone());
        std::thread::spawn(move || {
            if sh.sync {
                sync_loop(&sh, &stop)
            }
        })
    };
    let result = control_loop(&shared, &control);
    // A failure of this end (disk full...) is the cause; the sender closing the
    // connection in answer to it is only the consequence.
    let own = shared.stop.reason();
    let result = match (result, own) {
        (Err(_), Some(own)) => Err(CpError::Local(own)),
        (r, _) => r,
    };
    sync_stop.store(true, Ordering::SeqCst);
    let _ = syncer.join();
    if let Err(e) = &result {
        shared.fail(e.to_string());
        for h in &handles {
            let _ = h.shutdown(Shutdown::Both);
        }
    }
    shared.stop.raise();
    control.tx.shutdown();
    for w in workers {
        let _ = w.join();
    }
    let _ = catch_up.join();
    result?;
    if !target.checksum_only {
        // Normally done with the last commit; again here in case a file never committed.
        if let Ok(mut dirs) = shared.dirs.lock() {
            fix_dirs(&target.root, &mut dirs);
        }
    }
    let mut failed = shared.failed.lock().map(|f| f.clone()).unwrap_or_default();
    failed.append(&mut list.missing);
    failed.sort();
    Ok(RecvOutcome {
        files_ok: shared.ok.load(Ordering::Relaxed) + list.already,
        files_skipped: list.skipped,
        failed,
        received_bytes: shared.received.load(Ordering::Relaxed),
        resumed_bytes: list.resumed_bytes,
        total_bytes: list.total_bytes,
    })
}

/// Tells the peer why the transfer is refused and returns the error.
fn refuse(control: &ControlLink, why: String) -> CpError {
    control.tx.send_error(&why);
    CpError::Local(why)
}

/// State while the file list arrives.
struct ListState {
    target_is_dir: bool,
    first_source: Option<Vec<u8>>,
    multiple: bool,
    dirs_known: HashSet<PathBuf>,
    dirs: Vec<DirFix>,
    total_bytes: u64,
    resumed_bytes: u64,
    skipped: u64,
    /// `--checksum-only`: destination files that do not exist (or differ in size).
    missing: Vec<String>,
    /// Files found already in place.
    already: u64,
}

impl ListState {
    fn new(t: &RecvTarget) -> Result<Self, CpError> {
        let target_is_dir = match &t.target {
            None => true,
            Some(p) => match t.root.open_file(&p.to_path_buf(), Access::Read) {
                Ok(f) => f.metadata().map(|m| m.is_dir()).unwrap_or(false),
                Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                Err(e) => {
                    return Err(CpError::io(
                        format!("looking at the destination {}", show(p.as_bytes())),
                        e,
                    ))
                }
            },
        };
        Ok(Self {
            target_is_dir,
            first_source: None,
            multiple: false,
            dirs_known: HashSet::new(),
            dirs: Vec::new(),
            total_bytes: 0,
            resumed_bytes: 0,
            skipped: 0,
            missing: Vec::new(),
            already: 0,
        })
    }

    /// Places and prepares one entry; returns its state and the answer for the sender.
    fn accept(
        &mut self,
        t: &RecvTarget,
        chunk_size: u64,
        id: u32,
        entry: FileEntry,
        _progress: &Progress,
    ) -> Result<(Option<Arc<RecvFile>>, Vec<TransferMessage>), String> {
        let path = parse_peer_path(&entry.path)
            .map_err(|e| format!("refused path {}: {e}", show(&entry.path)))?;
        let top = path.components().next().unwrap_or_default().to_vec();
        match &self.first_source {
            None => self.first_source = Some(top),
            Some(first) if *first != top => self.multiple = true,
            Some(_) => {}
        }
        let placed = place_entry(t.target.as_ref(), self.target_is_dir, self.multiple, &path)
            .map_err(|e| e.to_string())?;
        let final_rel = placed.to_path_buf();
        let mtime = entry_mtime(&entry);
        if entry.kind == EntryKind::Dir {
            if !t.checksum_only {
                t.root
                    .create_dirs(&final_rel, 0o700 | (entry.mode & 0o777))
                    .map_err(|e| format!("creating directory {}: {e}", final_rel.display()))?;
                self.dirs_known.insert(final_rel.clone());
                self.dirs.push(DirFix {
                    rel: final_rel,
                    depth: placed.depth(),
                    mode: entry.mode & 0o7777,
                    mtime,
                });
            }
            return Ok((None, Vec::new()));
        }
        if let Some(parent) = placed.parent() {
            let parent = parent.to_path_buf();
            if !t.checksum_only && !self.dirs_known.contains(&parent) {
                t.root
                    .create_dirs(&parent, 0o755)
                    .map_err(|e| format!("creating directory {}: {e}", parent.display()))?;
                self.dirs_known.insert(parent);
            }
        }
        self.total_bytes += entry.size;
        let chunks = chunk_count(entry.size, chunk_size);
        // A one-chunk file is prepared on the data path; it needs no look now unless
        // --no-clobber or --checksum-only asks about the destination.
        let lazy = chunks == 1 && !t.checksum_only;
        let look = !lazy || t.no_clobber;
        let existing = match look.then(|| t.root.open_file(&final_rel, Access::Read)) {
            None => None,
            Some(Ok(f)) => {
                let m = f
                    .metadata()
                    .map_err(|e| format!("{}: {e}", final_rel.display()))?;
                if m.is_dir() {
                    return Err(format!(
                        "the destination {} is a directory; a file cannot replace it",
                        final_rel.display()
                    ));
                }
                Some(f)
            }
            Some(Err(e)) if e.kind() == io::ErrorKind::NotFound => None,
            Some(Err(e)) => return Err(format!("looking at {}: {e}", final_rel.display())),
        };
        let skip = |reason| Ok((None, vec![TransferMessage::SkipFile { file: id, reason }]));
        // Already in place from an earlier run (same size and mtime, which a commit
        // copies from the source): nothing to send (rsync's quick check).
        if !t.checksum_only {
            use std::os::unix::fs::MetadataExt;
            if let Ok(m) = t.root.metadata(&final_rel) {
                if m.is_file()
                    && m.len() == entry.size
                    && m.mtime() == entry.mtime_secs
                    && m.mtime_nsec() == i64::from(entry.mtime_nanos)
                {
                    self.resumed_bytes += entry.size;
                    self.already += 1;
                    return skip(SkipReason::AlreadyComplete);
                }
            }
        }
        let source = SourceIdentity {
            size: entry.size,
            mtime_secs: entry.mtime_secs,
            mtime_nanos: entry.mtime_nanos,
            fingerprint: entry.fingerprint,
        };
        if t.checksum_only {
            let Some(data) = existing else {
                self.missing.push(format!(
                    "{}: missing at the destination",
                    final_rel.display()
                ));
                return skip(SkipReason::Missing);
            };
            let opened = FileReceiver::open(source, chunk_size, None).map_err(|e| e.to_string())?;
            let digest = FileHashes::new(entry.size, chunk_size);
            if data.metadata().map(|m| m.len()).unwrap_or(0) == entry.size {
                digest.mark_ready(0..chunks as u32);
            } else {
                // Sizes differ: no need to hash to know the copies differ.
                self.missing.push(format!(
                    "{}: differs in size from the source",
                    final_rel.display()
                ));
                return Ok((
                    None,
                    vec![TransferMessage::SkipFile {
                        file: id,
                        reason: SkipReason::Missing,
                    }],
                ));
            }
            return Ok((
                Some(Arc::new(RecvFile::new(
                    id,
                    entry,
                    (final_rel.clone(), final_rel),
                    Some(data),
                    None,
                    opened.receiver,
                    digest,
                ))),
                Vec::new(),
            ));
        }
        if existing.is_some() && t.no_clobber {
            self.skipped += 1;
            return skip(SkipReason::Exists);
        }
        let part_rel = part_name(&placed).map_err(|e| e.to_string())?.to_path_buf();
        let manifest_rel = if chunks > 1 {
            Some(
                manifest_name(&placed)
                    .map_err(|e| e.to_string())?
                    .to_path_buf(),
            )
        } else {
            None
        };
        if lazy {
            let digest = FileHashes::new(entry.size, chunk_size);
            let opened = FileReceiver::open(source, chunk_size, None).map_err(|e| e.to_string())?;
            return Ok((
                Some(Arc::new(RecvFile::new(
                    id,
                    entry,
                    (final_rel, part_rel),
                    None,
                    None,
                    opened.receiver,
                    digest,
                ))),
                Vec::new(),
            ));
        }
        let prepared = prepare_part(t, &part_rel, manifest_rel.as_deref(), source, chunk_size)
            .map_err(|e| format!("preparing {}: {e}", part_rel.display()))?;
        let digest = FileHashes::new(entry.size, chunk_size);
        let mut answer = Vec::new();
        for &(first, count) in &prepared.have {
            for i in first..first + count {
                let m = prepared.receiver.manifest();
                self.resumed_bytes += m.chunk_len(i);
                // Re-hashed against the part file when the manifest was read.
                if let Some(hash) = m.verified_hash(i) {
                    let _ = digest.offer(i, hash);
                }
            }
        }
        answer.extend(longhaul_proto::transfer::pack_have_chunks(
            id,
            &prepared.have,
        ));
        Ok((
            Some(Arc::new(RecvFile::new(
                id,
                entry,
                (final_rel, part_rel),
                Some(prepared.part),
                manifest_rel.zip(prepared.manifest),
                prepared.receiver,
                digest,
            ))),
            answer,
        ))
    }
}

/// Sets directories' modes and mtimes, deepest first (writing into a directory changes
/// its mtime).
fn fix_dirs(root: &ServedRoot, dirs: &mut [DirFix]) {
    dirs.sort_by_key(|d| std::cmp::Reverse(d.depth));
    for d in dirs.iter() {
        if let Ok(f) = root.open_file(&d.rel, Access::Read) {
            let _ = f.set_times(FileTimes::new().set_modified(d.mtime));
            let _ = f.set_permissions(Permissions::from_mode(d.mode));
        }
    }
}

struct Prepared {
    part: File,
    manifest: Option<File>,
    receiver: FileReceiver,
    have: Vec<(u32, u32)>,
}

/// Opens the part file (and manifest) for resuming, or starts them over.
fn prepare_part(
    t: &RecvTarget,
    part_rel: &Path,
    manifest_rel: Option<&Path>,
    source: SourceIdentity,
    chunk_size: u64,
) -> io::Result<Prepared> {
    let root = &t.root;
    // A stored manifest counts only if the part file is there, regular, of full size.
    let stored = match manifest_rel {
        Some(m) => read_manifest(root, m, source.size, chunk_size)?,
        None => None,
    };
    let part_ok = stored.is_some()
        && root
            .open_file(part_rel, Access::Read)
            .and_then(|f| f.metadata())
            .is_ok_and(|m| m.is_file() && m.len() == source.size);
    let opened = FileReceiver::open(
        source,
        chunk_size,
        if part_ok { stored.as_deref() } else { None },
    )
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    match opened.start {
        PartStart::Resume { manifest_len } => {
            let part = root.open_file(part_rel, Access::ReadWriteCreate { mode: 0o600 })?;
            // Trust a record only if its chunk still hashes the same (a power cut can
            // keep a record whose data never reached the disk): else start over.
            if !recorded_chunks_intact(&part, opened.receiver.manifest())? {
                drop(part);
                if let Some(m) = manifest_rel {
                    remove_if_there(root, m)?;
                }
                remove_if_there(root, part_rel)?;
                return prepare_part(t, part_rel, manifest_rel, source, chunk_size);
            }
            let mrel = manifest_rel.ok_or_else(|| io::Error::other("resume without manifest"))?;
            let mut m = root.open_file(mrel, Access::ReadWriteCreate { mode: 0o600 })?;
            m.set_len(manifest_len as u64)?;
            m.seek(SeekFrom::End(0))?;
            Ok(Prepared {
                part,
                manifest: Some(m),
                receiver: opened.receiver,
                have: opened.have,
            })
        }
        PartStart::Fresh {
            manifest_header, ..
        } => {
            remove_if_there(root, part_rel)?;
            let part = root.open_file(part_rel, Access::CreateNew { mode: 0o600 })?;
            part.set_len(source.size)?;
            let manifest = match manifest_rel {
                Some(mrel) => {
                    remove_if_there(root, mrel)?;
                    let mut m = root.open_file(mrel, Access::CreateNew { mode: 0o600 })?;
                    m.write_all(&manifest_header)?;
                    file_io::sync_data(&m)?;
                    Some(m)
                }
                None => None,
            };
            Ok(Prepared {
                part,
                manifest,
                receiver: opened.receiver,
                have: Vec::new(),
            })
        }
    }
}

/// The source's mtime from its entry (times before 1970 are clamped to it).
fn entry_mtime(entry: &FileEntry) -> SystemTime {
    UNIX_EPOCH
        + Duration::new(
            entry.mtime_secs.max(0) as u64,
            entry.mtime_nanos.min(999_999_999),
        )
}

/// Whether every chunk the manifest records still has its recorded hash in `part`.
fn recorded_chunks_intact(
    part: &File,
    manifest: &longhaul_transfer::ResumeManifest,
) -> io::Result<bool> {
    let hashes = FileHashes::new(manifest.source().size, manifest.chunk_size());
    let read_at = |off: u64, b: &mut [u8]| file_io::read_exact_at(part, b, off);
    let mut buf = AlignedBuf::new();
    for (index, hash) in manifest.verified() {
        if hashes.hash_from_file(index, &read_at, &mut buf)? != hash {
            return Ok(false);
        }
    }
    Ok(true)
}

fn remove_if_there(root: &ServedRoot, rel: &Path) -> io::Result<()> {
    match root.remove_file(rel) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The stored manifest's bytes, bounded by what a manifest of this file can hold.
fn read_manifest(
    root: &ServedRoot,
    rel: &Path,
    size: u64,
    chunk_size: u64,
) -> io::Result<Option<Vec<u8>>> {
    let f = match root.open_file(rel, Access::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let limit = HEADER_LEN as u64 + RECORD_LEN as u64 * (chunk_count(size, chunk_size) * 2 + 16);
    if !f.metadata()?.is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    f.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        // Too long to be ours: start over.
        return Ok(None);
    }
    Ok(Some(bytes))
}

fn control_loop(sh: &Arc<Shared>, control: &ControlLink) -> Result<(), CpError> {
    loop {
        if sh.stop.raised() {
            let why = sh.stop.reason().unwrap_or_else(|| "stopped".into());
            control.tx.send_error(&why);
            return Err(CpError::Local(why));
        }
        let Some(item) = control.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        match item {
            Incoming::Msg(TransferMessage::FileDigest { file, blake3 }) => {
                let Some(Some(f)) = sh.files.get(file as usize) else {
                    return Err(refuse(
                        control,
                        format!("a digest for file {file}, which is not being received"),
                    ));
                };
                let both = {
                    let mut c = f.commit.lock().map_err(|_| poisoned())?;
                    c.theirs = Some(blake3);
                    c.ours.is_some() && !c.done
                };
                if both {
                    commit(sh, f);
                }
            }
            Incoming::Msg(TransferMessage::TransferDone { .. }) => {
                // Best effort: the sender need not wait for this and may be gone.
                let _ = control.tx.send(&TransferMessage::TransferDone {
                    files: sh.ok.load(Ordering::Relaxed) as u32,
                    bytes: sh.received.load(Ordering::Relaxed),
                });
                return Ok(());
            }
            Incoming::Msg(other) => {
                return Err(refuse(
                    control,
                    format!("unexpected {} during the transfer", other.kind()),
                ))
            }
            Incoming::PeerError(e) => return Err(CpError::Peer(e)),
            Incoming::Lost(e) => return Err(CpError::Lost(e)),
        }
    }
}

fn poisoned() -> CpError {
    CpError::Local("receiver state poisoned by a panicked thread".into())
}

fn set_ours(sh: &Shared, f: &RecvFile, digest: [u8; 32]) {
    let both = match f.commit.lock() {
        Ok(mut c) => {
            c.ours = Some(digest);
            c.theirs.is_some() && !c.done
        }
        Err(_) => false,
    };
    if both {
        commit(sh, f);
    }
}

/// Both digests are known: compare, then put the file in place (or report it equal).
fn commit(sh: &Shared, f: &RecvFile) {
    let (ours, theirs) = match f.commit.lock() {
        Ok(mut c) if !c.done => {
            c.done = true;
            (c.ours.unwrap_or_default(), c.theirs.unwrap_or_default())
        }
        _ => return,
    };
    let verdict = if sh.checksum_only {
        if ours == theirs {
            Ok(())
        } else {
            Err("differs from the source".to_string())
        }
    } else {
        finish_file(sh, f, &ours, &theirs)
    };
    let (ok, reason) = match verdict {
        Ok(()) => (true, String::new()),
        Err(why) => {
            note_failed(sh, f, why.clone());
            let mut end = why.len().min(longhaul_proto::transfer::MAX_REASON_BYTES);
            while !why.is_char_boundary(end) {
                end -= 1;
            }
            (false, why[..end].to_string())
        }
    };
    if ok {
        sh.ok.fetch_add(1, Ordering::Relaxed);
    }
    sh.progress.file_done();
    if sh.uncommitted.fetch_sub(1, Ordering::AcqRel) == 1 && !sh.checksum_only {
        // The last file: the tree is final (directory times set) before the sender hears
        // of this commit and reports success.
        if let Ok(mut dirs) = sh.dirs.lock() {
            fix_dirs(&sh.root, &mut dirs);
        }
    }
    if let Err(e) = sh.control.send(&TransferMessage::FileCommitted {
        file: f.id,
        ok,
        reason,
    }) {
        sh.fail(format!("sending a commit: {e}"));
    }
}

fn note_failed(sh: &Shared, f: &RecvFile, why: String) {
    if let Ok(mut v) = sh.failed.lock() {
        v.push(format!("{}: {why}", f.final_rel.display()));
    }
}

fn finish_file(
    sh: &Shared,
    f: &RecvFile,
    ours: &[u8; 32],
    theirs: &[u8; 32],
) -> Result<(), String> {
    let verdict =
        f.rx.lock()
            .map_err(|_| "poisoned".to_string())?
            .verify_digest(ours, theirs);
    if let Err(e) = verdict {
        // Start the file over next time: its chunks disagree with the source as a whole.
        let _ = sh.root.remove_file(&f.part_rel);
        if let Some(m) = &f.manifest_rel {
            let _ = sh.root.remove_file(m);
        }
        return Err(e.to_string());
    }
    let mtime = entry_mtime(&f.entry);
    let data = f.data.get().ok_or("the part file was never created")?;
    let _ = data.set_permissions(Permissions::from_mode(f.entry.mode & 0o7777));
    let _ = data.set_times(FileTimes::new().set_modified(mtime));
    if sh.sync {
        file_io::sync_data(data).map_err(|e| format!("syncing: {e}"))?;
    }
    if f.unnamed.load(Ordering::Acquire) {
        link_into_place(sh, f, data).map_err(|e| format!("putting the file in place: {e}"))?;
    } else {
        sh.root
            .rename(&f.part_rel, &f.final_rel, !sh.no_clobber)
            .map_err(|e| {
                format!(
                    "putting the file in place: {e} (the verified copy is kept as {})",
                    f.part_rel.display()
                )
            })?;
    }
    if sh.sync {
        // The new name itself must survive a power cut too.
        let dir = f.final_rel.parent().unwrap_or(Path::new(""));
        sh.root
            .sync_dir(dir)
            .map_err(|e| format!("syncing the directory: {e}"))?;
    }
    if let Some(m) = &f.manifest_rel {
        let _ = sh.root.remove_file(m);
    }
    Ok(())
}

/// One data stream: read chunks until the sender closes it.
fn stream_loop(sh: &Arc<Shared>, stream: usize, mut sock: TcpStream) {
    let mut buf = AlignedBuf::new();
    let mut hdr = [0u8; ChunkHeader::LEN];
    loop {
        if sh.stop.raised() {
            let _ = sock.shutdown(Shutdown::Both);
            return;
        }
        match read_header(&mut sock, &mut hdr) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                if !sh.stop.raised() {
                    // The sender reassigns this stream's chunks; only a protocol error
                    // (below) ends the transfer here.
                    let _ = e;
                }
                return;
            }
        }
        if let Err(why) = receive_chunk(sh, stream, &mut sock, &hdr, &mut buf) {
            sh.fail(why);
            let _ = sock.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Reads a whole header; `false` on a clean end of stream before it.
fn read_header(sock: &mut TcpStream, hdr: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < hdr.len() {
        match sock.read(&mut hdr[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn receive_chunk(
    sh: &Shared,
    stream: usize,
    sock: &mut TcpStream,
    hdr: &[u8; ChunkHeader::LEN],
    buf: &mut AlignedBuf,
) -> Result<(), String> {
    let h = ChunkHeader::decode(hdr).map_err(|e| format!("a data stream lost its framing: {e}"))?;
    let Some(Some(f)) = sh.files.get(h.file as usize) else {
        return Err(format!(
            "a chunk for file {}, which is not being received",
            h.file
        ));
    };
    if sh.checksum_only {
        return Err("a chunk arrived in a --checksum-only transfer".into());
    }
    let len = u64::from(h.len);
    if len > sh.chunk_size || h.flags & !CHUNK_FLAG_HOLE != 0 {
        return Err(format!(
            "chunk {} of {}: length {len} above the chunk size {} or unknown flags {:#x}",
            h.index,
            f.final_rel.display(),
            sh.chunk_size,
            h.flags
        ));
    }
    let hole = h.flags & CHUNK_FLAG_HOLE != 0;
    let mut hasher = f.digest.hasher(h.index);
    if hole {
        hasher.update_zeros(len);
    } else {
        // Hash each piece as it arrives, while it is in cache; write after the check.
        buf.resize(len as usize);
        for piece in buf.chunks_mut(PIECE) {
            sock.read_exact(piece)
                .map_err(|e| format!("data stream: {e}"))?;
            sh.progress.stream_bytes(stream, piece.len() as u64);
            hasher.update(piece);
        }
        sh.received.fetch_add(len, Ordering::Relaxed);
    }
    let computed = hasher.finish();
    let check =
        f.rx.lock()
            .map_err(|_| "poisoned".to_string())?
            .check_chunk(h.index, h.offset, len, h.hash, computed);
    match check {
        Err(TransferError::ChunkHashMismatch { .. }) => {
            return sh
                .control
                .send(&TransferMessage::ChunkRejected {
                    file: h.file,
                    index: h.index,
                    reason: RejectReason::Checksum,
                })
                .map_err(|e| format!("control: {e}"));
        }
        Err(e) => {
            return Err(format!(
                "chunk {} of {}: {e}",
                h.index,
                f.final_rel.display()
            ))
        }
        Ok(ChunkCheck::Duplicate) => {}
        Ok(ChunkCheck::Write) => {
            if let Err(e) = write_chunk(f, &h, hole, buf, computed, &sh.root) {
                if let Ok(mut rx) = f.rx.lock() {
                    rx.chunk_abandoned(h.index);
                }
                return Err(format!(
                    "writing {}: {e}{}",
                    f.part_rel.display(),
                    if e.raw_os_error() == Some(libc_enospc()) {
                        "; free space on the receiving side and run the same command again (verified chunks are kept)"
                    } else {
                        ""
                    }
                ));
            }
            match f.digest.offer(h.index, computed) {
                Ok(Some(d)) => set_ours(sh, f, d),
                Ok(None) => {}
                Err(e) => return Err(format!("{}: {e}", f.part_rel.display())),
            }
            sh.progress.add_done(len);
        }
    }
    sh.control
        .send(&TransferMessage::ChunkVerified {
            file: h.file,
            index: h.index,
        })
        .map_err(|e| format!("control: {e}"))
}

/// Names a verified unnamed file: one `linkat` where the name is free; replacing an
/// existing file (not `--no-clobber`) goes through the part name and a rename, so the old
/// file is replaced atomically.
fn link_into_place(sh: &Shared, f: &RecvFile, data: &File) -> io::Result<()> {
    match sh.root.link_unnamed(data, &f.final_rel) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && !sh.no_clobber => {
            remove_if_there(&sh.root, &f.part_rel)?;
            sh.root.link_unnamed(data, &f.part_rel)?;
            sh.root.rename(&f.part_rel, &f.final_rel, true)
        }
        other => other,
    }
}

fn libc_enospc() -> i32 {
    28
}

/// Writes the chunk's non-zero blocks and appends its manifest record (files of several
/// chunks). Written records survive the process being killed (they are in the page
/// cache like the data), so a rerun re-sends only chunks in flight; with `--sync`,
/// [`sync_loop`] makes them durable every few seconds. A resume re-hashes recorded chunks
/// before it trusts them (a power cut may have kept a record but not its data).
fn write_chunk(
    f: &RecvFile,
    h: &ChunkHeader,
    hole: bool,
    buf: &[u8],
    hash: ChunkHash,
    root: &ServedRoot,
) -> io::Result<()> {
    let data = f.file_or_create(root)?;
    if !hole {
        let _w = f.write.lock().map_err(|_| io::Error::other("poisoned"))?;
        for r in sparse::data_ranges(buf, 4096) {
            file_io::write_all_at(data, &buf[r.clone()], h.offset + r.start as u64)?;
        }
    }
    let record =
        f.rx.lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .chunk_durable(h.index, hash)
            .map_err(|e| io::Error::other(e.to_string()))?;
    if let (Some(rec), Some(m)) = (record, &f.manifest) {
        m.lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .write_all(&rec)?;
        f.dirty.store(true, Ordering::Release);
    }
    Ok(())
}

/// How often written chunks and their manifest records are synced to disk.
const SYNC_EVERY: Duration = Duration::from_secs(2);

/// Syncs the part files and manifests that changed, every [`SYNC_EVERY`], until the
/// transfer ends (data first, then the manifest).
fn sync_loop(sh: &Shared, stop: &AtomicBool) {
    let mut last = std::time::Instant::now();
    while !stop.load(Ordering::SeqCst) && !sh.stop.raised() {
        std::thread::sleep(Duration::from_millis(100));
        if last.elapsed() < SYNC_EVERY {
            continue;
        }
        last = std::time::Instant::now();
        for f in sh.files.iter().flatten() {
            if !f.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            let synced =
                f.file()
                    .and_then(file_io::sync_data)
                    .and_then(|()| match &f.manifest_sync {
                        Some(m) => file_io::sync_data(m),
                        None => Ok(()),
                    });
            if let Err(e) = synced {
                sh.fail(format!("syncing {}: {e}", f.part_rel.display()));
                return;
            }
        }
    }
}
