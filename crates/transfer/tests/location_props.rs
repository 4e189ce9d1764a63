//! Property tests of `cp` argument parsing: arbitrary bytes never panic, a generated
//! host/port/path written as an argument reads back as the same remote, and an argument
//! with no `:` before its first `/` is always local.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use longhaul_transfer::{parse_location, remote_path, Location, RemoteSpec};
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
        if let Ok(Location::Remote(spec)) = parse_location(OsStr::from_bytes(&bytes)) {
            prop_assert!(!spec.host.is_empty());
            prop_assert!(spec.port != Some(0));
            let _ = remote_path(&spec);
        }
    }

    #[test]
    fn remote_specs_round_trip(host in host(), port in proptest::option::of(1u16..), path in path()) {
        let spec = RemoteSpec { host, port, path };
        let arg = spec.to_arg();
        match parse_location(&arg) {
            Ok(Location::Remote(back)) => {
                prop_assert_eq!(&back.host, &spec.host);
                prop_assert_eq!(back.port, spec.port);
                prop_assert_eq!(remote_path(&back), remote_path(&spec));
                if port.is_some() || back.path.len() == spec.path.len() {
                    prop_assert_eq!(&back.path, &spec.path);
                }
            }
            other => prop_assert!(false, "{:?} read as {:?}", arg, other),
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
        if arg[0] != b'[' {
            match parse_location(OsStr::from_bytes(&arg)) {
                Ok(Location::Local(p)) => prop_assert_eq!(p.as_os_str().as_bytes(), &arg[..]),
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}
