//! `longhaul cp` as it is used: a `longhaul serve --root DIR` process and `longhaul cp`
//! processes on loopback, real files compared byte for byte. Covers trees with empty,
//! 0-byte, chunk-boundary, deep, unicode and non-UTF-8 entries (push and pull, modes and
//! mtimes kept, symlinks copied as links, a FIFO skipped), a 4 GiB sparse file that stays
//! sparse both ways, the
//! cp-like placement rules, `-r`, `--no-clobber`, `--checksum-only`, path-escape attempts
//! and the `--json` schema.

#[macro_use]
mod support;

use std::fs::{self, File};
use std::os::unix::fs::{symlink, FileExt, MetadataExt};
use std::path::Path;
use std::time::Duration;

use support::*;

/// Chunk size passed as `--chunk 1MiB` where the tests want many chunks.
const CHUNK: u64 = MIB;

/// Files of the test tree: relative path (raw bytes), size, mode.
fn tree_files() -> Vec<(Vec<u8>, usize, u32)> {
    let c = CHUNK as usize;
    let mut deep = Vec::new();
    for i in 0..60 {
        deep.extend_from_slice(format!("level-{i:02}-of-sixty/").as_bytes());
    }
    deep.extend_from_slice(b"leaf.bin");
    vec![
        (b"zero".to_vec(), 0, 0o644),
        (b"sub/zero-too".to_vec(), 0, 0o600),
        (b"sub/small.txt".to_vec(), 100, 0o640),
        (b"sizes/0".to_vec(), 0, 0o644),
        (b"sizes/1".to_vec(), 1, 0o600),
        (b"sizes/chunk-1".to_vec(), c - 1, 0o640),
        (b"sizes/chunk".to_vec(), c, 0o755),
        (b"sizes/chunk+1".to_vec(), c + 1, 0o444),
        (b"sizes/3chunk+7".to_vec(), 3 * c + 7, 0o644),
        (deep, 5000, 0o644),
        (
            "ünïcödé/日本語のファイル.txt".as_bytes().to_vec(),
            3000,
            0o644,
        ),
        (
            "ünïcödé/emoji 🚀 and spaces.bin".as_bytes().to_vec(),
            4097,
            0o600,
        ),
        ("Ωμέγα/ℵ".as_bytes().to_vec(), 0, 0o644),
        (b"latin1-caf\xe9-\xff.bin".to_vec(), 2000, 0o644),
        // The longest name allowed: its work files need a shortened name.
        (
            [vec![b'n'; 251], b".bin".to_vec()].concat(),
            2 * c + 3,
            0o644,
        ),
    ]
}

/// Symlinks of the test tree: relative path, target (in the tree, out of it, dangling).
const TREE_LINKS: &[(&str, &str)] = &[
    ("link-to-zero", "zero"),
    ("sub/link-up", "../sizes/1"),
    ("link-out", "/etc/hostname"),
    ("sub/dangling", "no/such/target"),
];

/// Builds the test tree at `root`: the files above (random bytes), empty directories,
/// symlinks ([`TREE_LINKS`]) and a FIFO (to be skipped; reading it would block), then odd
/// modes on directories and distinct mtimes (with nanoseconds) on every file, directory
/// and symlink.
fn build_tree(root: &Path, rng: &mut Rng) {
    fs::create_dir_all(root).unwrap();
    for (rel, size, mode) in tree_files() {
        let data = rng.bytes(size);
        write_file(&root.join(os(&rel)), &data, mode);
    }
    fs::create_dir_all(root.join("empty-dir")).unwrap();
    fs::create_dir_all(root.join("nested/empty/dirs/all/the/way")).unwrap();
    for (link, target) in TREE_LINKS {
        symlink(target, root.join(link)).unwrap();
    }
    let fifo = std::process::Command::new("mkfifo")
        .arg(root.join("a-fifo"))
        .status()
        .unwrap();
    assert!(fifo.success(), "mkfifo failed");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(root.join("empty-dir"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(root.join("sub"), fs::Permissions::from_mode(0o750)).unwrap();
    for (i, (rel, md)) in list_tree(root).into_iter().enumerate() {
        let i = i as u64;
        let (secs, nanos) = (
            1_500_000_000 + i * 1000,
            ((i * 123_456_789) % 1_000_000_000) as u32,
        );
        if md.is_symlink() {
            set_link_mtime(&root.join(os(&rel)), secs, nanos);
        } else if md.is_file() || md.is_dir() {
            set_mtime(&root.join(os(&rel)), secs, nanos);
        }
    }
}

/// Sets a symlink's own mtime (`touch -h`: std has no lutimes).
fn set_link_mtime(path: &Path, secs: u64, nanos: u32) {
    let ok = std::process::Command::new("touch")
        .arg("-h")
        .arg("-d")
        .arg(format!("@{secs}.{nanos:09}"))
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "touch -h {}", path.display());
}

/// Bytes of the files under `root` in `CHUNK`-sized chunks that are all zero (such a
/// chunk may travel as a hole, without payload).
fn zero_chunk_bytes(root: &Path) -> u64 {
    list_tree(root)
        .into_iter()
        .filter(|(_, md)| md.is_file())
        .map(|(rel, _)| {
            let data = fs::read(root.join(os(&rel))).unwrap();
            data.chunks(CHUNK as usize)
                .filter(|c| c.iter().all(|&b| b == 0))
                .map(|c| c.len() as u64)
                .sum::<u64>()
        })
        .sum()
}

/// Checks the `start` and `end` lines of a successful fresh copy of `files` regular files
/// holding `bytes` bytes (of which `zero_chunk_bytes` in all-zero chunks) with `streams`
/// streams of `--chunk 1MiB`. Warnings (from the
/// source walk) may come before `start`; `end` is last.
fn check_json(
    run: &CpRun,
    direction: &str,
    (files, bytes, zero_chunk_bytes): (u64, u64, u64),
    streams: u64,
) {
    let lines = run.json();
    let start = lines
        .iter()
        .find(|l| l["type"] != "warning")
        .unwrap_or_else(|| panic!("no lines\n{}", run.describe()));
    assert_eq!(start["type"], "start", "{}", run.describe());
    assert_eq!(lines.last().unwrap()["type"], "end", "{}", run.describe());
    assert_eq!(start["direction"], direction, "{start}");
    assert_eq!(start["streams"], streams, "{start}");
    assert_eq!(start["chunk_bytes"], CHUNK, "{start}");
    assert!(
        start["rtt_ms"].as_f64().is_some_and(|r| r >= 0.0),
        "{start}"
    );
    assert!(start["window_bytes"].as_u64().is_some(), "{start}");
    assert!(start["congestion"].is_string(), "{start}");
    let end = lines.last().unwrap();
    assert_eq!(end["ok"], true, "{end}");
    assert_eq!(end["files"], files, "{end}");
    assert_eq!(end["bytes"], bytes, "{end}");
    assert_eq!(end["streams"], streams, "{end}");
    assert_eq!(end["chunk_bytes"], CHUNK, "{end}");
    for key in [
        "resumed_bytes",
        "skipped_files",
        "failed_files",
        "rejected_chunks",
    ] {
        assert_eq!(end[key], 0, "{key} in {end}");
    }
    // Every byte goes once (a chunk is in flight on one stream at a time); only a chunk of zeros may go as a
    // hole (random data has none, but a short last chunk can be all zero, and a receiver
    // leaves it a hole that a later pull finds).
    let sent = end["sent_bytes"].as_u64().unwrap();
    assert!(
        sent + zero_chunk_bytes <= bytes + (2 * streams + 2) * CHUNK
            && sent + zero_chunk_bytes >= bytes,
        "sent_bytes {sent} for {bytes} bytes ({zero_chunk_bytes} in all-zero chunks): {end}"
    );
    for key in ["seconds", "bits_per_second"] {
        let v = end[key].as_f64().unwrap_or(-1.0);
        assert!(v.is_finite() && v > 0.0, "{key} in {end}");
    }
    let cpu = end["cpu_seconds"].as_f64().unwrap_or(-1.0);
    assert!(cpu.is_finite() && cpu >= 0.0, "cpu_seconds in {end}");
    // Per GB only over enough bytes to mean something (64 MiB), null below.
    let per_gb = &end["cpu_seconds_per_gb"];
    if end["bytes"].as_u64().unwrap_or(0) < 64 << 20 {
        assert!(per_gb.is_null(), "cpu_seconds_per_gb in {end}");
    } else {
        let v = per_gb.as_f64().unwrap_or(-1.0);
        assert!(v.is_finite() && v >= 0.0, "cpu_seconds_per_gb in {end}");
    }
    // This end's CPU by stage: what it hashed and read or wrote, within the process's CPU
    // time (the thread clocks and rusage tick apart by up to a few ms per thread).
    let stage = |k: &str| end["cpu_by_stage"][k].as_f64().unwrap_or(-1.0);
    let stages = ["cipher_seconds", "hash_seconds", "disk_seconds"].map(stage);
    assert!(stages.iter().all(|s| *s >= 0.0), "cpu_by_stage in {end}");
    assert!(
        stages.iter().sum::<f64>() <= cpu + 0.05 * (streams as f64 + 1.0),
        "the stages take more than the process's CPU time: {end}"
    );
    assert!(stage("socket_and_rest_seconds") >= 0.0, "{end}");
    if bytes > zero_chunk_bytes {
        assert!(
            stages[1] > 0.0 && stages[2] > 0.0,
            "no hash or disk time: {end}"
        );
    }
    // At least the last, partial interval; each with per-stream figures and progress.
    let intervals: Vec<_> = lines.iter().filter(|l| l["type"] == "interval").collect();
    assert!(
        !intervals.is_empty(),
        "no interval line\n{}",
        run.describe()
    );
    for i in &intervals {
        assert!(i["done_bytes"].as_u64().is_some_and(|b| b <= bytes), "{i}");
        assert_eq!(i["total_bytes"], bytes, "{i}");
        assert!(i["seconds"].as_f64().is_some(), "{i}");
        let per_stream = i["streams"].as_array().unwrap();
        assert_eq!(per_stream.len() as u64, streams, "{i}");
        // A pull judges an interval on the sending server's reported counters: `unknown`
        // only where none came (its rates are then of what arrived).
        let judged = direction == "push" || i["rate_source"] == "delivered";
        for st in per_stream {
            let limited = st["limited_by"].as_str().unwrap_or_else(|| panic!("{i}"));
            assert_eq!(limited == "unknown", !judged, "{i}");
        }
    }
    // A receiver's interval bytes add up to the payload it read; a sender's are what the
    // kernel saw acknowledged (payload and chunk headers; the last acks may still be on
    // their way when the transfer ends).
    let moved: u64 = intervals.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
    if direction == "pull" {
        assert_eq!(moved, sent, "interval bytes against sent_bytes: {end}");
    } else {
        let chunks = bytes / CHUNK + files + 2 * streams;
        assert!(
            moved > 0 && moved <= sent + chunks * 1024,
            "acknowledged {moved} for {sent} sent: {end}"
        );
    }
    assert!(end["limited_by"].is_string(), "{end}");
    assert_eq!(
        end["stream_summaries"].as_array().map(Vec::len),
        Some(streams as usize),
        "{end}"
    );
}

/// True if the run warned (stderr or a JSON warning) about `name`.
fn warned_about(run: &CpRun, name: &str) -> bool {
    run.stderr.contains(name)
        || run
            .json()
            .iter()
            .any(|l| l["type"] == "warning" && l["message"].as_str().unwrap_or("").contains(name))
}

#[test]
fn tree_push_and_pull_are_bit_identical_with_modes_and_mtimes() {
    let mut rng = Rng::from_env("tree_push_and_pull");
    let s = Scratch::new("tree");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.join("src/tree");
    build_tree(&src, &mut rng);
    fs::create_dir(root.join("incoming")).unwrap();
    let server = Server::start(&home, &root);

    let push =
        cp!(&home; "-r", "--chunk", "1MiB", "-P", "2", "--json", &src, server.remote("incoming"));
    push.assert_ok();
    // Symlinks arrive as symlinks with the same targets and mtimes (the one out of the
    // tree and the dangling one included); the FIFO is skipped with a warning.
    let (files, bytes) = assert_same_tree(&src, &root.join("incoming/tree"), EXACT);
    assert_eq!(files, (tree_files().len() + TREE_LINKS.len()) as u64);
    let zeros = zero_chunk_bytes(&src);
    check_json(&push, "push", (files, bytes, zeros), 2);
    assert!(
        warned_about(&push, "a-fifo"),
        "no warning about the skipped a-fifo\n{}",
        push.describe()
    );
    for (link, _) in TREE_LINKS {
        assert!(!warned_about(&push, link), "{link}\n{}", push.describe());
    }

    let pulled = s.join("pulled");
    let pull = cp!(&home; "-r", "--chunk", "1MiB", "-P", "2", "--json", server.remote("incoming/tree"), &pulled);
    pull.assert_ok();
    assert_same_tree(&src, &pulled, EXACT);
    check_json(&pull, "pull", (files, bytes, zeros), 2);
}

/// A 4 GiB file with a few MiB of data at four places, some straddling chunk boundaries.
#[test]
fn multi_gb_sparse_file_is_identical_and_stays_sparse_both_ways() {
    const SIZE: u64 = 4 << 30;
    let mut rng = Rng::from_env("sparse");
    let s = Scratch::new("sparse");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.join("src/sparse.img");
    fs::create_dir_all(src.parent().unwrap()).unwrap();
    let extents: [(u64, u64); 4] = [
        (0, MIB),
        ((1 << 30) + 12_345, 2 * MIB),
        ((3 << 30) - 512 * 1024 + 3, MIB),
        (SIZE - 100, 100),
    ];
    {
        let f = File::create(&src).unwrap();
        f.set_len(SIZE).unwrap();
        for (off, len) in extents {
            f.write_all_at(&rng.bytes(len as usize), off).unwrap();
        }
    }
    set_mtime(&src, 1_600_000_000, 42);
    let src_alloc = allocated_bytes(&src);
    let server = Server::start(&home, &root);
    let limit = Duration::from_secs(400);

    let check = |run: &CpRun, copy: &Path| {
        run.assert_ok();
        assert_same_bytes(&src, copy);
        let (a, b) = (fs::metadata(&src).unwrap(), fs::metadata(copy).unwrap());
        assert_eq!(mtime_of(&a), mtime_of(&b), "mtime of {}", copy.display());
        assert_eq!(a.mode() & 0o7777, b.mode() & 0o7777);
        let alloc = allocated_bytes(copy);
        eprintln!(
            "sparse: {} allocates {alloc} bytes (source {src_alloc}) of {SIZE}",
            copy.display()
        );
        assert!(
            alloc <= 64 * MIB,
            "{} is not sparse: {alloc} bytes allocated for {src_alloc} in the source",
            copy.display()
        );
        // Chunks wholly in a hole go without payload: only chunks touching data are sent
        // (each once).
        let end = run.json_of("end");
        let chunk = end["chunk_bytes"].as_u64().unwrap();
        let streams = end["streams"].as_u64().unwrap();
        let mut data_chunks: Vec<u64> = extents
            .iter()
            .flat_map(|&(off, len)| off / chunk..=(off + len - 1) / chunk)
            .collect();
        data_chunks.dedup();
        let sent = end["sent_bytes"].as_u64().unwrap();
        assert!(
            sent <= (data_chunks.len() as u64 + 2 * streams + 2) * chunk,
            "sent {sent} bytes for {} data chunks of {chunk}: {end}",
            data_chunks.len()
        );
        assert_eq!(end["bytes"], SIZE, "{end}");
        // No -P: from the RTT measured at the connect (2 on an idle loopback, more when
        // a busy host answers in 2 ms or more), unless the run jumped. The count is
        // decided on the TCP connect's sample (or a remembered RTT that matches it) while
        // the start record reports the smaller of that and the TLS handshake's, so on a
        // busy host the count may be the one of a somewhat longer RTT (CI: 1.19 ms
        // reported, 4 streams): any count the path's RTT gives between the reported one
        // and four times it, never that of a long path.
        if end["jump_start"]["used"] != true {
            let rtt_ms = run.json_of("start")["rtt_ms"].as_f64().unwrap();
            let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
            let low = u64::from(longhaul_policy::streams_for_path(rtt));
            let high = u64::from(longhaul_policy::streams_for_path(rtt * 4));
            assert!(
                (low..=high).contains(&streams),
                "{streams} streams for rtt {rtt_ms} ms (expected {low}..={high}): {end}"
            );
        }
    };

    let mut c = cp_command(&home);
    c.args(["--json"])
        .arg(&src)
        .arg(server.remote("sparse.img"));
    let push = run(&mut c, limit);
    check(&push, &root.join("sparse.img"));

    let pulled = s.join("pulled.img");
    let mut c = cp_command(&home);
    c.args(["--json"])
        .arg(server.remote("sparse.img"))
        .arg(&pulled);
    let pull = run(&mut c, limit);
    check(&pull, &pulled);
    // Nothing was at pulled.img: the list was answered ahead (a push never is).
    assert_eq!(pull.json_of("end")["answered_ahead"], true);
    assert_eq!(push.json_of("end")["answered_ahead"], false);
}

#[test]
fn placement_follows_cp() {
    let mut rng = Rng::from_env("placement");
    let s = Scratch::new("place");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.dir("src");
    let a = write_random(&src.join("a.txt"), &mut rng, 3000);
    let b = write_random(&src.join("b.txt"), &mut rng, 10);
    write_random(&src.join("tree/x"), &mut rng, 2 * CHUNK as usize + 1);
    write_random(&src.join("tree/sub/y"), &mut rng, 7);
    write_file(&src.join("odd:name"), b"colon", 0o644);
    fs::create_dir_all(root.join("dir")).unwrap();
    fs::create_dir_all(root.join("dir2")).unwrap();
    let server = Server::start(&home, &root);
    let read = |p: &Path| fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));

    // A file into an existing directory, and to a new name.
    cp!(&home; src.join("a.txt"), server.remote("dir")).assert_ok();
    assert_eq!(read(&root.join("dir/a.txt")), a);
    cp!(&home; src.join("a.txt"), server.remote("dir/renamed")).assert_ok();
    assert_eq!(read(&root.join("dir/renamed")), a);
    // The empty path is the root.
    cp!(&home; src.join("b.txt"), server.remote("")).assert_ok();
    assert_eq!(read(&root.join("b.txt")), b);
    // A tree into an existing directory, and to a new name.
    cp!(&home; "-r", "--chunk", "1MiB", src.join("tree"), server.remote("dir")).assert_ok();
    assert_same_tree(&src.join("tree"), &root.join("dir/tree"), EXACT);
    cp!(&home; "-r", "--chunk", "1MiB", src.join("tree"), server.remote("newtree")).assert_ok();
    assert_same_tree(&src.join("tree"), &root.join("newtree"), EXACT);
    // Several sources into an existing directory.
    cp!(&home; src.join("a.txt"), src.join("b.txt"), server.remote("dir2")).assert_ok();
    assert_eq!(read(&root.join("dir2/a.txt")), a);
    assert_eq!(read(&root.join("dir2/b.txt")), b);
    // Several sources into a name that is not a directory: refused, nothing written.
    let r = cp!(&home; src.join("a.txt"), src.join("b.txt"), server.remote("nodir"));
    r.assert_code(2);
    assert!(!root.join("nodir").exists(), "{}", r.describe());
    let r = cp!(&home; src.join("a.txt"), src.join("b.txt"), server.remote("b.txt"));
    r.assert_code(2);
    assert_eq!(read(&root.join("b.txt")), b, "{}", r.describe());
    // `./odd:name` is a local path (no ':' before the first '/').
    let mut c = cp_command(&home);
    c.current_dir(&src)
        .arg("./odd:name")
        .arg(server.remote("dir"));
    run(&mut c, CP_LIMIT).assert_ok();
    assert_eq!(read(&root.join("dir/odd:name")), b"colon");

    // Pull: a file into an existing directory, to a new name; a tree both ways.
    let local = s.dir("local");
    cp!(&home; server.remote("dir/a.txt"), &local).assert_ok();
    assert_eq!(read(&local.join("a.txt")), a);
    cp!(&home; server.remote("dir/a.txt"), local.join("new-name")).assert_ok();
    assert_eq!(read(&local.join("new-name")), a);
    cp!(&home; "-r", server.remote("dir/tree"), &local).assert_ok();
    assert_same_tree(&src.join("tree"), &local.join("tree"), EXACT);
    cp!(&home; "-r", server.remote("dir/tree"), s.join("fresh")).assert_ok();
    assert_same_tree(&src.join("tree"), &s.join("fresh"), EXACT);
    // Several remote sources (a file and a tree) into an existing directory...
    let many = s.dir("many");
    cp!(&home; "-r", server.remote("dir/a.txt"), server.remote("dir/tree"), &many).assert_ok();
    assert_eq!(read(&many.join("a.txt")), a);
    assert_same_tree(&src.join("tree"), &many.join("tree"), EXACT);
    // ...one missing: the others still arrive, exit 2 names the missing one.
    let more = s.dir("more");
    let r = cp!(&home; server.remote("dir/nothing"), server.remote("b.txt"), &more);
    r.assert_code(2);
    assert!(r.stderr.contains("dir/nothing"), "{}", r.describe());
    assert_eq!(read(&more.join("b.txt")), b, "{}", r.describe());
    // ...into a name that is not a directory: refused before anything is sent.
    let r = cp!(&home; server.remote("dir/a.txt"), server.remote("b.txt"), s.join("nodir"));
    r.assert_code(2);
    assert!(
        r.stderr.contains("not an existing directory"),
        "{}",
        r.describe()
    );
    assert!(!s.join("nodir").exists(), "{}", r.describe());
    // Local and remote sources mixed: refused.
    let r = cp!(&home; src.join("a.txt"), server.remote("b.txt"), &more);
    r.assert_code(2);
    assert!(
        r.stderr.contains("mix local and remote"),
        "{}",
        r.describe()
    );
}

#[test]
fn a_pull_runs_the_congestion_control_asked_for_on_the_server() {
    let mut rng = Rng::from_env("pull_cc");
    let s = Scratch::new("pullcc");
    let home = s.dir("home");
    let root = s.dir("root");
    let a = write_random(&root.join("a"), &mut rng, 300_000);
    let server = Server::start(&home, &root);
    for cc in ["reno", "cubic"] {
        let dst = s.join(cc);
        let r = cp!(&home; "--json", "-C", cc, server.remote("a"), &dst);
        r.assert_ok();
        assert_eq!(fs::read(&dst).unwrap(), a);
        assert!(
            r.stdout.contains(&format!("\"congestion\":\"{cc}\"")),
            "{}",
            r.describe()
        );
        let want = format!("congestion {cc}");
        let log = server.log_with(&want);
        assert!(log.contains(&want), "{log}");
    }
    // One the server's kernel lacks: refused, naming what it has; nothing written.
    let r = cp!(&home; "-C", "nosuchcc", server.remote("a"), s.join("none"));
    r.assert_code(2);
    assert!(r.stderr.contains("not available"), "{}", r.describe());
    assert!(
        !r.stderr.contains("run the same command again"),
        "{}",
        r.describe()
    );
    assert!(!s.join("none").exists());
    // Not a name at all: refused before connecting.
    let r = cp!(&home; "-C", "no such", server.remote("a"), s.join("none"));
    r.assert_code(2);
    assert!(
        r.stderr.contains("congestion-control name"),
        "{}",
        r.describe()
    );
}

#[test]
fn a_directory_without_r_is_refused() {
    let mut rng = Rng::from_env("no_r");
    let s = Scratch::new("nor");
    let home = s.dir("home");
    let root = s.dir("root");
    write_random(&s.join("src/tree/x"), &mut rng, 100);
    write_random(&root.join("rtree/y"), &mut rng, 100);
    let server = Server::start(&home, &root);

    let push = cp!(&home; s.join("src/tree"), server.remote("dst"));
    push.assert_code(2);
    assert!(push.stderr.contains("-r"), "{}", push.describe());
    assert!(!root.join("dst").exists(), "{}", push.describe());

    let pull = cp!(&home; server.remote("rtree"), s.join("got"));
    pull.assert_code(2);
    assert!(pull.stderr.contains("-r"), "{}", pull.describe());
    // A refusal is not a failure to resume from.
    assert!(
        !pull.stderr.contains("run the same command again"),
        "{}",
        pull.describe()
    );
    assert!(!s.join("got").exists(), "{}", pull.describe());
}

#[test]
fn sync_and_small_chunks_copy_exactly_and_odd_chunk_sizes_are_refused() {
    let mut rng = Rng::from_env("sync_chunks");
    let s = Scratch::new("syncchunks");
    let home = s.dir("home");
    let root = s.dir("root");
    // 17 chunks of 64 KiB and a tail: many subtrees merged into the file's BLAKE3.
    write_random(&s.join("src/big"), &mut rng, 17 * 65536 + 1234);
    write_random(&root.join("remote"), &mut rng, 5 * 65536);
    let server = Server::start(&home, &root);

    let push = cp!(&home; "--sync", "--chunk", "64KiB", s.join("src/big"), server.remote("big"));
    push.assert_ok();
    assert_eq!(
        fs::read(root.join("big")).unwrap(),
        fs::read(s.join("src/big")).unwrap()
    );
    // A one-chunk file (created unnamed, linked into place) with --sync.
    write_random(&s.join("src/small"), &mut rng, 1000);
    cp!(&home; "--sync", s.join("src/small"), server.remote("small")).assert_ok();
    assert_eq!(
        fs::read(root.join("small")).unwrap(),
        fs::read(s.join("src/small")).unwrap()
    );
    let pull = cp!(&home; "--sync", "--chunk", "64KiB", server.remote("remote"), s.join("got"));
    pull.assert_ok();
    assert_eq!(
        fs::read(s.join("got")).unwrap(),
        fs::read(root.join("remote")).unwrap()
    );

    let odd = cp!(&home; "--chunk", "100KiB", s.join("src/big"), server.remote("odd"));
    odd.assert_code(2);
    assert!(odd.stderr.contains("power of two"), "{}", odd.describe());
    assert!(!root.join("odd").exists(), "{}", odd.describe());
}

#[test]
fn no_clobber_keeps_an_existing_file() {
    let s = Scratch::new("noclobber");
    let home = s.dir("home");
    let root = s.dir("root");
    write_file(&root.join("f"), b"old content on the server", 0o644);
    write_file(&s.join("src/f"), b"new content", 0o644);
    write_file(&s.join("local/g"), b"old local content", 0o644);
    write_file(&root.join("g"), b"new remote content", 0o644);
    let server = Server::start(&home, &root);

    let run = cp!(&home; "--no-clobber", "--json", s.join("src/f"), server.remote("f"));
    run.assert_ok();
    assert_eq!(
        fs::read(root.join("f")).unwrap(),
        b"old content on the server"
    );
    assert_eq!(run.end_u64("skipped_files"), 1, "{}", run.describe());
    let run = cp!(&home; "--no-clobber", "--json", server.remote("g"), s.join("local/g"));
    run.assert_ok();
    assert_eq!(fs::read(s.join("local/g")).unwrap(), b"old local content");
    assert_eq!(run.end_u64("skipped_files"), 1, "{}", run.describe());
    // Without it, cp replaces.
    cp!(&home; s.join("src/f"), server.remote("f")).assert_ok();
    assert_eq!(fs::read(root.join("f")).unwrap(), b"new content");
    cp!(&home; server.remote("g"), s.join("local/g")).assert_ok();
    assert_eq!(fs::read(s.join("local/g")).unwrap(), b"new remote content");
}

#[test]
fn checksum_only_says_whether_copies_match() {
    let mut rng = Rng::from_env("checksum_only");
    let s = Scratch::new("cksum");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.join("src/tree");
    write_random(&src.join("x"), &mut rng, 3 * CHUNK as usize + 5);
    write_random(&src.join("sub/y"), &mut rng, 1000);
    write_file(&src.join("empty"), b"", 0o644);
    let server = Server::start(&home, &root);
    cp!(&home; "-r", "--chunk", "1MiB", &src, server.remote("")).assert_ok();

    let check = || cp!(&home; "-r", "--checksum-only", "--json", &src, server.remote(""));
    let same = check();
    same.assert_code(0);
    assert_eq!(same.end_u64("sent_bytes"), 0, "{}", same.describe());
    // One byte changed in the middle of a chunk of the copy, size and mtime unchanged.
    let copy = root.join("tree/x");
    let mtime = mtime_of(&fs::metadata(&copy).unwrap());
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&copy)
        .unwrap();
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, 2 * CHUNK + 17).unwrap();
    f.write_all_at(&[byte[0] ^ 0x01], 2 * CHUNK + 17).unwrap();
    drop(f);
    set_mtime(&copy, mtime.0 as u64, mtime.1 as u32);
    let differs = check();
    differs.assert_code(1);
    assert_eq!(differs.end_u64("sent_bytes"), 0, "{}", differs.describe());
    let mut now = [0u8; 1];
    File::open(&copy)
        .unwrap()
        .read_exact_at(&mut now, 2 * CHUNK + 17)
        .unwrap();
    assert_eq!(now[0], byte[0] ^ 0x01, "--checksum-only rewrote the copy");

    // A missing copy differs.
    cp!(&home; "--checksum-only", src.join("sub/y"), server.remote("nothing-here")).assert_code(1);
    assert!(!root.join("nothing-here").exists());
    // Pull side, one file: equal, then one byte differs.
    cp!(&home; "--checksum-only", server.remote("tree/sub/y"), src.join("sub/y")).assert_code(0);
    cp!(&home; "--checksum-only", server.remote("tree/x"), src.join("x")).assert_code(1);
}

/// A copy damaged after the fact (one byte changed, size and mtime kept) is flagged by
/// `--checksum-only`; a plain `cp` of the same file must then repair it (cp replaces).
/// Today the destination is skipped as "already in place" on size and mtime alone, the
/// run reports ok and the copy stays damaged.
#[test]
#[ignore = "by design for now (like rsync): a destination with the source's size and mtime counts as in place; --checksum-only is the check that reads the bytes. Kept to decide on a --checksum rerun mode"]
fn a_plain_cp_repairs_a_copy_that_checksum_only_flags() {
    let mut rng = Rng::from_env("repair");
    let s = Scratch::new("repair");
    let home = s.dir("home");
    let root = s.dir("root");
    write_random(&s.join("a"), &mut rng, 3 * CHUNK as usize);
    let server = Server::start(&home, &root);
    cp!(&home; "--chunk", "1MiB", s.join("a"), server.remote("a")).assert_ok();
    let copy = root.join("a");
    let mtime = mtime_of(&fs::metadata(&copy).unwrap());
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&copy)
        .unwrap();
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, 1000).unwrap();
    f.write_all_at(&[!byte[0]], 1000).unwrap();
    drop(f);
    set_mtime(&copy, mtime.0 as u64, mtime.1 as u32);
    cp!(&home; "--checksum-only", s.join("a"), server.remote("a")).assert_code(1);
    cp!(&home; "--chunk", "1MiB", s.join("a"), server.remote("a")).assert_ok();
    assert_same_bytes(&s.join("a"), &copy);
}

#[test]
fn checksum_only_pull_of_a_missing_local_copy_exits_1() {
    let s = Scratch::new("cksum-missing");
    let home = s.dir("home");
    let root = s.dir("root");
    write_file(&root.join("y"), b"some bytes", 0o644);
    let server = Server::start(&home, &root);
    let run = cp!(&home; "--checksum-only", server.remote("y"), s.join("missing"));
    run.assert_code(1);
    assert!(!s.join("missing").exists());
}

#[test]
fn json_start_line_says_files_and_bytes() {
    let s = Scratch::new("start-line");
    let home = s.dir("home");
    let root = s.dir("root");
    write_file(&s.join("src/t/a"), &[7u8; 3000], 0o644);
    write_file(&s.join("src/t/b"), b"", 0o644);
    let server = Server::start(&home, &root);
    let push = cp!(&home; "-r", "--json", s.join("src/t"), server.remote(""));
    push.assert_ok();
    let pull = cp!(&home; "-r", "--json", server.remote("t"), s.join("back"));
    pull.assert_ok();
    for run in [push, pull] {
        let start = run.json_of("start");
        assert_eq!(start["files"], 2, "{start}");
        assert_eq!(start["bytes"], 3000, "{start}");
    }
}

/// A served root holding symlinks that point out of it (absolute and relative, to a file
/// and to a directory), a tree with such a link, and files outside holding a secret.
struct EscapeFixture {
    s: Scratch,
    home: std::path::PathBuf,
    root: std::path::PathBuf,
    local: std::path::PathBuf,
    server: Server,
}

const SECRET: &[u8] = b"SECRET-OUTSIDE-THE-ROOT";

impl EscapeFixture {
    fn new() -> Self {
        let s = Scratch::new("escape");
        let home = s.dir("home");
        let root = s.dir("root");
        let outside = s.dir("outside");
        let outside_dir = s.dir("outside-dir");
        write_file(&outside.join("secret.txt"), SECRET, 0o644);
        write_file(&outside_dir.join("secret2.txt"), SECRET, 0o644);
        write_file(&s.join("src/a.txt"), b"payload", 0o644);
        write_file(&s.join("src/tree/t"), b"tree payload", 0o644);
        write_file(&root.join("mixed/ok.txt"), b"fine", 0o644);
        symlink(outside.join("secret.txt"), root.join("link-out")).unwrap();
        symlink("../outside/secret.txt", root.join("rel-out")).unwrap();
        symlink(&outside_dir, root.join("dir-out")).unwrap();
        symlink(outside.join("secret.txt"), root.join("mixed/leak")).unwrap();
        let local = s.dir("local");
        let server = Server::start(&home, &root);
        Self {
            s,
            home,
            root,
            local,
            server,
        }
    }

    /// Everything outside the root and the local destination, to check nothing changed.
    fn outside_state(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.s.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        for d in ["outside", "outside-dir"] {
            v.extend(
                names_under(&self.s.join(d))
                    .into_iter()
                    .map(|n| format!("{d}/{n}")),
            );
        }
        v
    }
}

/// Panics unless `run` failed, saying (when `what` is given) which path it refused.
fn refused(run: CpRun, what: Option<&str>) {
    run.assert_failed();
    assert!(
        !run.stderr.trim().is_empty(),
        "no error\n{}",
        run.describe()
    );
    if let Some(what) = what {
        assert!(
            run.stderr.contains(what),
            "the error does not name {what:?}\n{}",
            run.describe()
        );
    }
    eprintln!(
        "refused as expected: {}\n  {}",
        run.cmdline,
        run.stderr.trim()
    );
}

#[test]
fn path_escapes_are_refused_and_nothing_is_written_outside_the_root() {
    let f = EscapeFixture::new();
    let (home, root, local, server) = (&f.home, &f.root, &f.local, &f.server);
    let before = f.outside_state();
    let etc_name = format!("/etc/longhaul-escape-test-{}", std::process::id());
    let a = f.s.join("src/a.txt");
    // Push: `..`, an absolute path, into or through a directory symlink pointing out.
    refused(cp!(home; &a, server.remote("../x")), Some(".."));
    refused(cp!(home; &a, server.remote("dir-out/../../x")), Some(".."));
    refused(cp!(home; &a, server.remote(&etc_name)), Some(&etc_name));
    refused(cp!(home; &a, server.remote("dir-out")), None);
    refused(cp!(home; &a, server.remote("dir-out/a.txt")), None);
    refused(
        cp!(home; "-r", f.s.join("src/tree"), server.remote("dir-out")),
        None,
    );
    // Pull: through a directory symlink pointing out, `..`, absolute paths.
    refused(
        cp!(home; server.remote("dir-out/secret2.txt"), local.join("got")),
        Some("dir-out"),
    );
    refused(
        cp!(home; server.remote("../outside/secret.txt"), local.join("got")),
        Some(".."),
    );
    refused(
        cp!(home; server.remote("/etc/hostname"), local.join("got")),
        Some("/etc/hostname"),
    );
    // Pull of a symlink pointing out (absolute, relative): copied as a link with the same
    // target, never followed (nothing of the secret is read).
    for link in ["link-out", "rel-out"] {
        let got = local.join(format!("got-{link}"));
        let run = cp!(home; server.remote(link), &got);
        run.assert_ok();
        assert_eq!(
            fs::read_link(&got).ok(),
            fs::read_link(root.join(link)).ok(),
            "{}",
            run.describe()
        );
    }
    // A tree holding a link out: the link arrives as a link, never followed.
    let run = cp!(home; "-r", server.remote("mixed"), local.join("mixed"));
    run.assert_ok();
    assert_eq!(
        fs::read(local.join("mixed/ok.txt")).ok().as_deref(),
        Some(&b"fine"[..]),
        "{}",
        run.describe()
    );
    assert_eq!(
        fs::read_link(local.join("mixed/leak")).ok(),
        fs::read_link(root.join("mixed/leak")).ok(),
        "{}",
        run.describe()
    );

    assert!(
        !any_file_contains(local, SECRET),
        "a pull leaked a file from outside the root: {:?}",
        names_under(local)
    );
    assert!(!Path::new(&etc_name).exists(), "{etc_name} was created");
    assert!(!root.join(etc_name.trim_start_matches('/')).exists());
    assert_eq!(
        f.outside_state(),
        before,
        "something was written outside the root"
    );
    assert!(fs::symlink_metadata(root.join("dir-out"))
        .unwrap()
        .file_type()
        .is_symlink());
}

/// The refusals above must say what was refused: the client of a push into a directory
/// symlink pointing out of the root got only "the peer closed the control connection"
/// (the server's reason stayed in its log). (The pull of a single symlink pointing out
/// now copies the link itself: `cp_symlinks.rs`.)
#[test]
fn path_escape_refusals_say_what_was_refused() {
    let f = EscapeFixture::new();
    let (home, local, server) = (&f.home, &f.local, &f.server);
    let a = f.s.join("src/a.txt");
    refused(cp!(home; &a, server.remote("dir-out")), Some("dir-out"));
    refused(
        cp!(home; &a, server.remote("dir-out/a.txt")),
        Some("dir-out"),
    );
    refused(
        cp!(home; "-r", f.s.join("src/tree"), server.remote("dir-out")),
        Some("dir-out"),
    );
    refused(
        cp!(home; server.remote("dir-out/secret2.txt"), local.join("got")),
        Some("dir-out"),
    );
}

#[test]
fn a_server_without_root_refuses_transfers() {
    let s = Scratch::new("noroot");
    let home = s.dir("home");
    write_file(&s.join("a"), b"x", 0o644);
    let server = Server::start_without_root(&home);
    cp!(&home; s.join("a"), server.remote("a")).assert_code(2);
    cp!(&home; server.remote("a"), s.join("b")).assert_code(2);
    assert!(!s.join("b").exists());
}

/// The refusal must say to start the server with `--root DIR`; about one push in six
/// reports "sending the file list: Broken pipe" instead (the client writes the file list
/// after the server sent its refusal and closed, and reports the write error rather than
/// reading the refusal), so this tries ten times.
#[test]
fn a_server_without_root_says_how_to_serve_files() {
    let s = Scratch::new("noroot-msg");
    let home = s.dir("home");
    write_file(&s.join("a"), b"x", 0o644);
    let server = Server::start_without_root(&home);
    for _ in 0..10 {
        let run = cp!(&home; s.join("a"), server.remote("a"));
        run.assert_code(2);
        assert!(run.stderr.contains("--root"), "{}", run.describe());
    }
    let run = cp!(&home; server.remote("a"), s.join("b"));
    assert!(run.stderr.contains("--root"), "{}", run.describe());
}

/// A pull with `--window SIZE` keeps that window on the server (the sender): the server
/// sets exactly that send buffer (the kernel reports it doubled), does not autotune and
/// runs no rate probe. Before protocol 4 the request carried no fixed-window flag and the
/// server autotuned and probed.
#[test]
fn a_pull_with_a_fixed_window_keeps_it_on_the_server() {
    let mut rng = Rng::from_env("pull_window");
    let s = Scratch::new("pullwin");
    let home = s.dir("home");
    let root = s.dir("root");
    let a = write_random(&root.join("a"), &mut rng, 300_000);
    let server = Server::start(&home, &root);
    let r = cp!(&home; "--window", "1MiB", server.remote("a"), s.join("fixed"));
    r.assert_ok();
    assert_eq!(fs::read(s.join("fixed")).unwrap(), a);
    let log = server.log_with("sent a:");
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("sent a:"))
        .unwrap_or("");
    assert!(
        line.contains("send buffer 1048576 bytes")
            && line.contains("SO_SNDBUF 2097152")
            && line.contains(", fixed")
            && line.contains("rate probe off"),
        "{log}"
    );
    // Without --window on a loopback path the server chooses (and says it is not fixed).
    let r = cp!(&home; server.remote("a"), s.join("auto"));
    r.assert_ok();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut log = server.log();
    while log.matches("sent a:").count() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        log = server.log();
    }
    let last = log
        .lines()
        .rev()
        .find(|l| l.contains("sent a:"))
        .unwrap_or("");
    assert!(
        log.matches("sent a:").count() == 2 && !last.contains(", fixed"),
        "{log}"
    );
}

/// A tree push where one destination name is taken by a directory: that file fails (exit
/// 1, listed in `failures`), the others are committed, and nothing is presented under
/// the failed name.
fn push_with_a_blocked_name() -> (Scratch, CpRun) {
    let s = Scratch::new("blocked");
    let home = s.dir("home");
    let root = s.dir("root");
    fs::create_dir_all(root.join("t/x/inner")).unwrap();
    for name in ["a", "x", "b"] {
        write_file(&s.join(format!("src/t/{name}")), name.as_bytes(), 0o644);
    }
    let server = Server::start(&home, &root);
    let run = cp!(&home; "-r", "--json", s.join("src/t"), server.remote(""));
    drop(server);
    (s, run)
}

#[test]
fn a_file_that_cannot_be_placed_fails_alone_with_exit_1() {
    let (s, run) = push_with_a_blocked_name();
    run.assert_code(1);
    let end = run.json_of("end");
    assert_eq!(end["ok"], false, "{end}");
    assert_eq!(end["failed_files"], 1, "{end}");
    assert_eq!(end["files"], 2, "{end}");
    assert!(end["failures"].to_string().contains("t/x"), "{end}");
    for name in ["a", "b"] {
        assert_eq!(
            fs::read(s.join(format!("root/t/{name}"))).unwrap(),
            name.as_bytes()
        );
    }
    assert!(s.join("root/t/x").is_dir());
}

/// The failure must name its cause: today it says "the receiver's BLAKE3 differs from the
/// source's; the source changed during the transfer?" although the bytes arrived intact
/// and the rename onto a directory failed.
#[test]
fn a_file_that_cannot_be_placed_says_why() {
    let (_s, run) = push_with_a_blocked_name();
    let failures = run.json_of("end")["failures"].to_string().to_lowercase();
    assert!(
        failures.contains("directory") && !failures.contains("blake3"),
        "{failures}"
    );
}

/// Client and server share a token through `--token-file` (different HOMEs); a client
/// with another token is refused with exit 2 and a message about the token.
#[test]
fn token_file_shared_and_a_wrong_token_refused() {
    let s = Scratch::new("token");
    let (home_a, home_b) = (s.dir("home-a"), s.dir("home-b"));
    let root = s.dir("root");
    let token = s.join("token");
    write_file(&token, b"ecd84607eccf70ac856e7d746ee36456", 0o600);
    write_file(&s.join("a"), b"payload", 0o644);
    let server = Server::start_with_token_file(&home_a, &root, &token);
    cp!(&home_b; "--token-file", &token, s.join("a"), server.remote("a")).assert_ok();
    assert_eq!(fs::read(root.join("a")).unwrap(), b"payload");
    let wrong = cp!(&home_b; s.join("a"), server.remote("b"));
    wrong.assert_code(2);
    assert!(
        wrong.stderr.to_lowercase().contains("token"),
        "{}",
        wrong.describe()
    );
    assert!(!root.join("b").exists());
}

/// `longhaul://[V6ADDR]:PORT/PATH` reaches a server listening on `::1`, both ways.
#[test]
fn ipv6_remote_syntax_works_both_ways() {
    let mut rng = Rng::from_env("ipv6");
    let s = Scratch::new("ipv6");
    let home = s.dir("home");
    let root = s.dir("root");
    let data = write_random(&s.join("a.bin"), &mut rng, 3 * CHUNK as usize + 1);
    let server = Server::start_on(&home, &root, "::1");
    assert!(server.addr.starts_with("[::1]:"), "{}", server.addr);
    cp!(&home; "--chunk", "1MiB", s.join("a.bin"), server.remote("b.bin")).assert_ok();
    assert_eq!(fs::read(root.join("b.bin")).unwrap(), data);
    cp!(&home; server.remote("b.bin"), s.join("c.bin")).assert_ok();
    assert_eq!(fs::read(s.join("c.bin")).unwrap(), data);
}

/// 60 pulls of a 5 MB file from one server: every one must exit 0. Guards against the
/// race where the control writer's `flush` returned before the last message was written
/// and `shutdown(Write)` overtook it (about 1 % of pulls ended with "the peer closed the
/// control connection" on both ends).
#[test]
fn repeated_pulls_all_end_cleanly() {
    let mut rng = Rng::from_env("repeated pulls");
    let s = Scratch::new("repeat");
    let home = s.dir("home");
    let root = s.dir("root");
    write_random(&root.join("one"), &mut rng, 5_000_000);
    let server = Server::start(&home, &root);
    let mut failures = Vec::new();
    for i in 0..60 {
        let r = cp!(&home; server.remote("one"), s.join("got"));
        if r.code() != Some(0) {
            failures.push(format!("pull {i}: {}", r.stderr.trim()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 60 pulls failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
