//! Unit tests of the location grammar: daemon URLs, ssh `[user@]host:path`, the refused
//! old daemon form, local paths, and the far end's reading of ssh paths.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::*;

fn daemon(arg: &str) -> RemoteSpec {
    match parse_location(OsStr::new(arg)).unwrap() {
        Location::Daemon(r) => r,
        l => panic!("{arg} read as {l:?}"),
    }
}

fn ssh(arg: &str) -> SshSpec {
    match parse_location(OsStr::new(arg)).unwrap() {
        Location::Ssh(r) => r,
        l => panic!("{arg} read as {l:?}"),
    }
}

fn is_local(arg: &[u8]) -> bool {
    matches!(
        parse_location(OsStr::from_bytes(arg)).unwrap(),
        Location::Local(p) if p.as_os_str().as_bytes() == arg
    )
}

fn spec(host: &str, port: Option<u16>, path: &str) -> RemoteSpec {
    RemoteSpec {
        host: host.into(),
        port,
        path: path.into(),
    }
}

fn sspec(user: Option<&str>, host: &str, path: &str) -> SshSpec {
    SshSpec {
        host: SshHost {
            user: user.map(str::to_string),
            host: host.into(),
            port: None,
        },
        path: path.into(),
    }
}

#[test]
fn ssh_host_and_path() {
    assert_eq!(ssh("h:data/x"), sspec(None, "h", "data/x"));
    assert_eq!(
        ssh("me@h.example.org:f"),
        sspec(Some("me"), "h.example.org", "f")
    );
    assert_eq!(ssh("10.0.0.2:/abs/f"), sspec(None, "10.0.0.2", "/abs/f"));
    assert_eq!(ssh("h:"), sspec(None, "h", ""));
    assert_eq!(ssh("h:a:b"), sspec(None, "h", "a:b"));
    assert_eq!(ssh("h:../up"), sspec(None, "h", "../up"));
    // Digits not followed by ':' are a path.
    assert_eq!(ssh("h:5290"), sspec(None, "h", "5290"));
    assert_eq!(ssh("h:12a:x"), sspec(None, "h", "12a:x"));
    assert_eq!(ssh("h:./5290:x"), sspec(None, "h", "./5290:x"));
    // ssh splits user@host at the last '@'.
    assert_eq!(ssh("a@b@h:x"), sspec(Some("a@b"), "h", "x"));
    assert_eq!(ssh("[::1]:d"), sspec(None, "::1", "d"));
    assert_eq!(
        ssh("u@[2001:db8::1]:d/e"),
        sspec(Some("u"), "2001:db8::1", "d/e")
    );
    assert_eq!(sspec(Some("u"), "::1", "x").to_string(), "u@[::1]:x");
}

#[test]
fn old_daemon_form_is_refused_with_both_ways_out() {
    for (arg, host) in [
        ("h:5290:data", "h"),
        ("[::1]:5290:data", "[::1]"),
        ("u@h:1:data", "h"),
    ] {
        let e = parse_location(OsStr::new(arg)).unwrap_err();
        assert!(matches!(e, Error::OldDaemonForm { .. }), "{arg}: {e:?}");
        let msg = e.to_string();
        let port = if arg.contains("5290") { "5290" } else { "1" };
        assert!(
            msg.contains(&format!("longhaul://{host}:{port}/data"))
                && msg.contains(&format!("{host}:./{port}:data")),
            "{msg}"
        );
    }
}

#[test]
fn daemon_urls() {
    assert_eq!(daemon("longhaul://h/data/x"), spec("h", None, "data/x"));
    assert_eq!(
        daemon("longhaul://h:5290/data"),
        spec("h", Some(5290), "data")
    );
    assert_eq!(daemon("longhaul://h"), spec("h", None, ""));
    assert_eq!(daemon("longhaul://h:1/"), spec("h", Some(1), ""));
    assert_eq!(daemon("longhaul://h:00080/a"), spec("h", Some(80), "a"));
    assert_eq!(daemon("longhaul://h/a:b"), spec("h", None, "a:b"));
    assert_eq!(
        daemon("longhaul://[::1]:5290/d"),
        spec("::1", Some(5290), "d")
    );
    assert_eq!(daemon("longhaul://[::1]/d"), spec("::1", None, "d"));
    assert_eq!(
        daemon("longhaul://[fe80::1%eth0]:7/x"),
        spec("fe80::1%eth0", Some(7), "x")
    );
    for bad in ["0", "65536", "99999999999999999999999", "000", "", "x1"] {
        let e = parse_location(OsStr::new(&format!("longhaul://h:{bad}/x"))).unwrap_err();
        assert!(
            matches!(e, Error::BadPort { ref value, .. } if value == bad),
            "{e:?}"
        );
    }
    for bad in [
        "longhaul://",
        "longhaul:///x",
        "longhaul://[::1",
        "longhaul://[::1]x/y",
    ] {
        assert!(parse_location(OsStr::new(bad)).is_err(), "{bad}");
    }
}

#[test]
fn local_paths() {
    for arg in [
        &b"/abs/a:b"[..],
        b"./a:b",
        b"../a:b",
        b"dir/a:b",
        b"plain",
        b".",
        b"/",
        b"\xff\xfe",
        b"[x]/y:z",
        b"[abc]",
    ] {
        assert!(is_local(arg), "{:?}", String::from_utf8_lossy(arg));
    }
}

#[test]
fn errors() {
    assert_eq!(parse_location(OsStr::new("")), Err(Error::EmptyLocation));
    assert!(matches!(
        parse_location(OsStr::new(":x")),
        Err(Error::EmptyHost { .. })
    ));
    assert!(matches!(
        parse_location(OsStr::from_bytes(b"h\xff:x")),
        Err(Error::NonUtf8Host { .. })
    ));
    for bad in [
        "-oProxyCommand=x:y",
        "-l@h:x",
        "@h:x",
        "a b:x",
        "h\t:x",
        "[::1]",
        "[::1",
    ] {
        assert!(parse_location(OsStr::new(bad)).is_err(), "{bad}");
    }
}

#[test]
fn daemon_paths() {
    let p = |s: &str| remote_path(&spec("h", None, s));
    assert_eq!(p("").unwrap(), None);
    assert_eq!(p(".").unwrap(), None);
    assert_eq!(p("./").unwrap(), None);
    assert_eq!(p("a/b").unwrap().unwrap().as_bytes(), b"a/b");
    assert_eq!(p("./a//b/").unwrap().unwrap().as_bytes(), b"a/b");
    assert!(matches!(p("/etc"), Err(Error::AbsolutePath { .. })));
    assert!(matches!(p(".."), Err(Error::ParentComponent { .. })));
    assert!(matches!(p("a/../../b"), Err(Error::ParentComponent { .. })));
    let e = p("x/../y").unwrap_err().to_string();
    assert!(e.contains("x/../y") && e.contains(".."), "{e}");
}

#[test]
fn to_arg_round_trips() {
    for s in [
        spec("h", None, "a"),
        spec("h", Some(9), "a:b"),
        spec("::1", Some(5290), ""),
        spec("::1", None, "12:x"),
        spec("h", None, "/abs"),
    ] {
        let back = daemon(s.to_arg().to_str().unwrap());
        assert_eq!(back, s);
    }
    assert_eq!(
        spec("::1", Some(1), "d").to_string(),
        "longhaul://[::1]:1/d"
    );
}

#[test]
fn user_paths_resolve_like_the_far_shell() {
    let home = Path::new("/home/me");
    let p = |raw: &str| {
        user_path(home, raw.as_bytes())
            .unwrap()
            .map(|p| String::from_utf8(p.as_bytes().to_vec()).unwrap())
    };
    assert_eq!(p("").as_deref(), Some("home/me"));
    assert_eq!(p(".").as_deref(), Some("home/me"));
    assert_eq!(p("data/x").as_deref(), Some("home/me/data/x"));
    assert_eq!(p("/tmp//x/").as_deref(), Some("tmp/x"));
    assert_eq!(p("../other/f").as_deref(), Some("home/other/f"));
    assert_eq!(p("./5290:x").as_deref(), Some("home/me/5290:x"));
    assert_eq!(p("/").as_deref(), None);
    assert_eq!(p("../../../..").as_deref(), None);
    assert_eq!(p("/a/b/../../..").as_deref(), None);
    assert!(user_path(home, b"a\0b").is_err());
    assert!(user_path(home, &vec![b'a'; 5000]).is_err());
    assert_eq!(
        user_path(Path::new("/"), b"x").unwrap().unwrap().as_bytes(),
        b"x"
    );
}

#[test]
fn ssh_tops() {
    let t = |raw: &str| ssh_top(raw.as_bytes()).map(|v| String::from_utf8(v).unwrap());
    assert_eq!(t("a/b.h5").as_deref(), Some("b.h5"));
    assert_eq!(t("/abs/dir/").as_deref(), Some("dir"));
    assert_eq!(t("a/b/..").as_deref(), Some("a"));
    assert_eq!(t("../x").as_deref(), None);
    assert_eq!(t("..").as_deref(), None);
    assert_eq!(t("").as_deref(), None);
    assert_eq!(t("/").as_deref(), None);
}

#[test]
fn ssh_urls() {
    let u = |s: &str| parse_ssh_url(s.as_bytes(), s.as_bytes());
    let h = u("me@h:2222").unwrap();
    assert_eq!(
        (h.user.as_deref(), h.host.as_str(), h.port),
        (Some("me"), "h", Some(2222))
    );
    let h = u("h/").unwrap();
    assert_eq!((h.user, h.host.as_str(), h.port), (None, "h", None));
    let h = u("[::1]:22").unwrap();
    assert_eq!((h.host.as_str(), h.port), ("::1", Some(22)));
    let h = u("[::1]").unwrap();
    assert_eq!((h.host.as_str(), h.port), ("::1", None));
    assert!(u("h:0").is_err() && u("::1").is_err() && u("-x").is_err());
    assert_eq!(h.destination(), "::1");
}

#[test]
fn striped_ends() {
    let s = |a: &str| parse_striped(OsStr::new(a));
    let hosts = s("longhaul://dtn1:7000,[::1]:7001,dtn3/data/run7")
        .unwrap()
        .unwrap();
    let got: Vec<(&str, Option<u16>, &[u8])> = hosts
        .iter()
        .map(|h| (h.host.as_str(), h.port, h.path.as_slice()))
        .collect();
    assert_eq!(
        got,
        [
            ("dtn1", Some(7000), &b"data/run7"[..]),
            ("::1", Some(7001), &b"data/run7"[..]),
            ("dtn3", None, &b"data/run7"[..]),
        ]
    );
    assert_eq!(s("longhaul://one/x").unwrap(), None);
    assert_eq!(s("one:x").unwrap(), None);
    for bad in ["longhaul://a,,b/x", "longhaul://a,/x", "longhaul://a,b:0/x"] {
        assert!(s(bad).is_err(), "{bad}");
    }
    let many = format!("longhaul://{}/x", vec!["h"; 65].join(","));
    assert!(s(&many).is_err());
    // The one-host parser refuses several hosts instead of taking "a,b" for a name.
    assert!(parse_location(OsStr::new("longhaul://a,b/x")).is_err());
}
