//! `longhaul serve --config` with several exported areas (issue 31, item 4): each area has
//! its root, the tokens that open it, read-only or read-write, and its own caps. A real
//! server and real clients, each holding one token: a client reaches the areas its token
//! opens and no other (told only the names of its own), a push into a read-only area is
//! refused before anything is written while pulls from it work, an area's cap holds, the
//! server's root is no area, and a token the server does not hold is refused.

#[macro_use]
mod support;

use std::fs;

use support::http::{free_port, get};
use support::{make_token, refused_config, write_file, Scratch, Server};

#[test]
fn each_token_reaches_its_areas_and_no_other() {
    let s = Scratch::new("serve-areas");
    let home = s.dir("home");
    let (physics, cms, archive) = (s.dir("physics"), s.dir("cms"), s.dir("archive"));
    let (token_a, token_b, stranger) = (s.join("a.token"), s.join("b.token"), s.join("c.token"));
    for t in [&token_a, &token_b, &stranger] {
        make_token(&home, t);
    }
    write_file(&archive.join("run1.dat"), &[7u8; 300_000], 0o644);
    let config = s.join("serve.toml");
    write_file(
        &config,
        b"listen = \"127.0.0.1\"\nport = 0\nidentity_dir = \"identity\"\n\
          [areas.physics]\nroot = \"physics\"\ntoken_files = [\"a.token\"]\n\
          [areas.cms]\nroot = \"cms\"\ntoken_files = [\"b.token\"]\nmax_bytes = \"100kB\"\n\
          [areas.archive]\nroot = \"archive\"\ntoken_files = [\"a.token\", \"b.token\"]\n\
          read_only = true\n",
        0o644,
    );
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = Server::start_args(
        &[],
        &home,
        &["--config", config.to_str().unwrap(), "--metrics", &metrics],
    );
    let log = server.log();
    assert!(
        log.contains("area archive:") && log.contains("read-only"),
        "{log}"
    );
    let small = s.join("small.txt");
    write_file(&small, b"a small file\n", 0o644);
    // `longhaul cp --token-file TOKEN ARGS...`.
    let holding = |token: &std::path::Path, args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = support::cp_command(&home);
        c.arg("--token-file").arg(token);
        args.iter().for_each(|x| _ = c.arg(x));
        support::run(&mut c, support::CP_LIMIT)
    };
    let a = |args: &[&dyn AsRef<std::ffi::OsStr>]| holding(&token_a, args);
    let b = |args: &[&dyn AsRef<std::ffi::OsStr>]| holding(&token_b, args);

    // Each token pushes into its own area.
    a(&[&small, &server.remote("physics/in/small.txt")]).assert_ok();
    assert_eq!(
        fs::read(physics.join("in/small.txt")).unwrap(),
        b"a small file\n"
    );
    b(&[&small, &server.remote("cms/small.txt")]).assert_ok();
    assert_eq!(fs::read(cms.join("small.txt")).unwrap(), b"a small file\n");

    // The other's area reads as one that does not exist; the message names only the
    // client's own areas.
    let denied = a(&[&small, &server.remote("cms/small2.txt")]);
    denied.assert_failed();
    assert!(
        denied
            .stderr
            .contains("no area \"cms\" here for your token")
            && denied.stderr.contains("your token opens: archive, physics"),
        "{}",
        denied.describe()
    );
    assert!(!cms.join("small2.txt").exists());
    let dest = s.dir("dest");
    let denied = b(&[&server.remote("physics/in/small.txt"), &dest]);
    denied.assert_failed();
    assert!(
        denied.stderr.contains("your token opens: archive, cms")
            && !denied.stderr.contains("physics,"),
        "{}",
        denied.describe()
    );

    // The read-only area: pulls work for both tokens, a push is refused and writes nothing.
    a(&[&server.remote("archive/run1.dat"), &dest.join("a.dat")]).assert_ok();
    b(&[&server.remote("archive/run1.dat"), &dest.join("b.dat")]).assert_ok();
    assert_eq!(fs::read(dest.join("b.dat")).unwrap(), vec![7u8; 300_000]);
    let refused = a(&[&small, &server.remote("archive/small.txt")]);
    refused.assert_failed();
    assert!(
        refused.stderr.contains("area archive is read-only"),
        "{}",
        refused.describe()
    );
    assert_eq!(
        fs::read_dir(&archive).unwrap().count(),
        1,
        "nothing written into the read-only area"
    );

    // The area's own cap (100 kB), not the server's (none).
    let big = s.join("big.dat");
    write_file(&big, &[1u8; 200_000], 0o644);
    let capped = b(&[&big, &server.remote("cms/big.dat")]);
    capped.assert_failed();
    assert!(
        capped.stderr.contains("more than 100.0 kB")
            && capped
                .stderr
                .contains("this area's max_bytes = 100000 in the server's config"),
        "{}",
        capped.describe()
    );
    assert!(!cms.join("big.dat").exists());
    a(&[&big, &server.remote("physics/big.dat")]).assert_ok();

    // The server's root is no area: the answer says how to name one.
    let root = a(&[&"-r", &server.remote(""), &s.dir("all")]);
    root.assert_failed();
    assert!(
        root.stderr.contains("this server exports areas")
            && root.stderr.contains("your token opens: archive, physics"),
        "{}",
        root.describe()
    );

    // A token the server does not hold gets nowhere.
    let out = holding(&stranger, &[&small, &server.remote("physics/x.txt")]);
    out.assert_code(2);
    assert!(
        out.stderr.to_lowercase().contains("token"),
        "{}",
        out.describe()
    );
    assert!(!physics.join("x.txt").exists());

    // The metrics count each area's bytes, and each session's rate.
    let text = get(&metrics, "GET /metrics HTTP/1.1\r\n\r\n");
    for line in [
        "longhaul_area_bytes_total{area=\"physics\",direction=\"received\"} 200013",
        "longhaul_area_bytes_total{area=\"cms\",direction=\"received\"} 13",
        "longhaul_area_bytes_total{area=\"archive\",direction=\"sent\"} 600000",
        "longhaul_area_bytes_total{area=\"archive\",direction=\"received\"} 0",
        "longhaul_session_rate_bits_per_second_count 5",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from:\n{text}"
        );
    }
}

#[test]
fn areas_in_a_bad_config_are_one_clear_error() {
    let s = Scratch::new("serve-areas-bad");
    let home = s.dir("home");
    s.dir("r");
    make_token(&home, &s.join("t.token"));
    let area = "[areas.x]\nroot = \"r\"\ntoken_files = [\"t.token\"]\n";
    for (text, expect) in [
        (
            "[areas.x]\nroot = \"r\"\n".to_string(),
            "missing field `token_files`".to_string(),
        ),
        (
            "[areas.x]\nroot = \"r\"\ntoken_files = []\n".into(),
            "[areas.x]: token_files is empty".into(),
        ),
        (
            "[areas.\"a b\"]\nroot = \"r\"\ntoken_files = [\"t.token\"]\n".into(),
            "area name \"a b\"".into(),
        ),
        (
            format!("root = \"r\"\n{area}"),
            "--root and the config's [areas] cannot both be given".into(),
        ),
        (
            format!("{area}writable = true\n"),
            "unknown field `writable`".into(),
        ),
        (
            "[areas.x]\nroot = \"missing\"\ntoken_files = [\"t.token\"]\n".into(),
            "the root of area x must name an existing directory".into(),
        ),
        (
            "[areas.x]\nroot = \"r\"\ntoken_files = [\"none.token\"]\n".into(),
            "area x".into(),
        ),
    ] {
        let text = format!("listen = \"127.0.0.1\"\nport = 0\n{text}");
        let err = refused_config(&home, &s.join("bad.toml"), &text);
        assert!(err.contains(&expect), "{text}: {err}");
    }
}

/// An area with `user`: its sessions run as that local user (root only), so what it
/// writes belongs to the user and what the user may not touch stays out of reach, while
/// the server itself stays root.
#[test]
fn an_area_with_a_user_runs_its_sessions_as_that_user() {
    if !support::is_root() {
        eprintln!("skipped: needs root to change users");
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let s = Scratch::new("serve-areas-user");
    let home = s.dir("home");
    let scratch = s.dir("scratch");
    // The area's root belongs to the user (65534, the usual `nobody`); the directories
    // above it are open to all, as /srv is.
    for dir in [s.0.as_path(), scratch.as_path()] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::os::unix::fs::chown(&scratch, Some(65534), Some(65534)).unwrap();
    let locked = s.dir("scratch/locked");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    write_file(&scratch.join("secret"), b"root only\n", 0o600);
    make_token(&home, &s.join("t.token"));
    let config = s.join("serve.toml");
    write_file(
        &config,
        b"listen = \"127.0.0.1\"\nport = 0\nidentity_dir = \"identity\"\n\
          [areas.scratch]\nroot = \"scratch\"\ntoken_files = [\"t.token\"]\nuser = \"65534\"\n",
        0o644,
    );
    let server = Server::start_args(&[], &home, &["--config", config.to_str().unwrap()]);
    assert!(server.log().contains("as user 65534"), "{}", server.log());
    let small = s.join("small.txt");
    write_file(&small, b"a small file\n", 0o644);
    let cp = |from: &dyn AsRef<std::ffi::OsStr>, to: &dyn AsRef<std::ffi::OsStr>| {
        let mut c = support::cp_command(&home);
        c.arg("--token-file")
            .arg(s.join("t.token"))
            .arg(from)
            .arg(to);
        support::run(&mut c, support::CP_LIMIT)
    };
    cp(&small, &server.remote("scratch/new.txt")).assert_ok();
    let made = fs::metadata(scratch.join("new.txt")).unwrap();
    assert_eq!(
        (made.uid(), made.gid()),
        (65534, 65534),
        "owned by the area's user"
    );
    // Root's directory in the area is closed to the user: nothing lands there.
    let denied = cp(&small, &server.remote("scratch/locked/x.txt"));
    denied.assert_failed();
    assert!(
        denied.stderr.to_lowercase().contains("permission denied"),
        "{}",
        denied.describe()
    );
    assert!(!locked.join("x.txt").exists());
    // Nor can the user read root's file.
    let dest = s.dir("dest");
    let unread = cp(&server.remote("scratch/secret"), &dest.join("secret"));
    unread.assert_failed();
    assert!(!dest.join("secret").exists());
    // The server is still root, and serves the next session.
    cp(&small, &server.remote("scratch/again.txt")).assert_ok();
    let pid = server.pid();
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid_line.split_whitespace().skip(1).all(|u| u == "0"),
        "{uid_line}"
    );
}
