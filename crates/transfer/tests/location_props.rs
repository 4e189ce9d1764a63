//! Property tests of `cp` argument parsing: arbitrary bytes never panic, a generated
//! daemon host/port/path written as a `longhaul://` argument reads back as the same spec,
//! an ssh `host:path` reads back as itself (or as the refused old daemon form when the
//! path starts with `DIGITS:`), and an argument with no `:` before its first `/` is
//! always local.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use longhaul_transfer::{parse_location, remote_path, Error, Location, RemoteSpec};
use proptest::prelude::*;

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?",
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>())
            .prop_map(|(a, b, c, d)| format!("{a}.{b}.{c}.{d}")),
        any::<[u16; 8]>().prop_map(|s| std::net::Ipv6Addr::from(s).to_string()),
    ]
}

fn path() -> impl Strategy<Value = Vec<u8>> {
    // Any bytes but NUL; '/', ':' and digits are common so ports and slashes get mixed in.
    proptest::collection::vec(
        prop_oneof![Just(b'/'), Just(b':'), b'0'..=b'9', 1u8..=255],
        0..40,
    )
}

proptest! {
    #[test]
    fn arbitrary_arguments_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        match parse_location(OsStr::from_bytes(&bytes)) {
            Ok(Location::Daemon(spec)) => {
                prop_assert!(!spec.host.is_empty());
                prop_assert!(spec.port != Some(0));
                let _ = remote_path(&spec);
            }
            Ok(Location::Ssh(spec)) => {
                prop_assert!(!spec.host.host.is_empty());
                prop_assert!(!spec.host.host.starts_with('-'));
            }
            _ => {}
        }
    }

    #[test]
    fn daemon_specs_round_trip(host in host(), port in proptest::option::of(1u16..), path in path()) {
        let spec = RemoteSpec { host, port, path };
        let arg = spec.to_arg();
        match parse_location(&arg) {
            Ok(Location::Daemon(back)) => prop_assert_eq!(back, spec),
            other => prop_assert!(false, "{:?} read as {:?}", arg, other),
        }
    }

    #[test]
    fn ssh_specs_read_back(host in host(), path in path()) {
        let shown = if host.contains(':') { format!("[{host}]") } else { host.clone() };
        let mut arg = format!("{shown}:").into_bytes();
        arg.extend_from_slice(&path);
        let digits = path.iter().take_while(|b| b.is_ascii_digit()).count();
        let old_form = digits > 0 && path.get(digits) == Some(&b':');
        match parse_location(OsStr::from_bytes(&arg)) {
            Ok(Location::Ssh(back)) if !old_form => {
                prop_assert_eq!(&back.host.host, &host);
                prop_assert_eq!(&back.path, &path);
            }
            Err(Error::OldDaemonForm { .. }) if old_form => {}
            other => prop_assert!(false, "{:?} read as {:?}", String::from_utf8_lossy(&arg), other),
        }
    }

    #[test]
    fn slash_before_colon_is_local(
        head in "[^:/]{0,10}",
        tail in proptest::collection::vec(1u8..=255, 0..30),
    ) {
        let mut arg = head.into_bytes();
        arg.push(b'/');
        arg.extend_from_slice(&tail);
        match parse_location(OsStr::from_bytes(&arg)) {
            Ok(Location::Local(p)) => prop_assert_eq!(p.as_os_str().as_bytes(), &arg[..]),
            other => prop_assert!(false, "{:?}", other),
        }
    }
}
