//! A receiving root ([`ServedRoot::receiving_into`]) on real files, with every resolver
//! (the component walk, `openat2`, and `ssh-server`'s unconfined `/`): the directory
//! received into is resolved as named (a symlink there is followed where the resolver
//! follows them), while below it no symlink is followed in any component, for opens,
//! creations, renames, links, listings and removals; a symlink where a directory is to be
//! made is replaced by one (its target untouched) or refused, as told.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use longhaul_sys::served_root::{Access, LinkWhereDir, Resolver, ServedRoot};
use longhaul_testkit::served::each_resolver;

const NEW: Access = Access::CreateNew { mode: 0o644 };

/// `<tmp>/root` holding `real/` (with `real/up -> ..` and `real/out -> <tmp>/outside`),
/// `named -> real` (a link the user named as the destination) and `<tmp>/outside/`.
fn setup() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir_all(root.join("real")).unwrap();
    fs::create_dir_all(tmp.path().join("outside")).unwrap();
    symlink("..", root.join("real/up")).unwrap();
    symlink(tmp.path().join("outside"), root.join("real/out")).unwrap();
    symlink("real", root.join("named")).unwrap();
    tmp
}

/// The roots to try, each with the base (relative to it) that names `<tmp>/root/named`.
fn roots(tmp: &tempfile::TempDir) -> Vec<(ServedRoot, PathBuf)> {
    let root = tmp.path().join("root");
    // The no-symlinks walk cannot name the destination through its symlink; openat2 can.
    let mut v: Vec<_> = each_resolver(&root)
        .into_iter()
        .map(|r| {
            let base = match r.resolver() {
                Resolver::NoSymlinks => "real",
                _ => "named",
            };
            (r, PathBuf::from(base))
        })
        .collect();
    let slash = root.join("named");
    v.push((
        ServedRoot::open_unconfined().unwrap(),
        slash.strip_prefix("/").unwrap().to_path_buf(),
    ));
    v
}

fn nothing_escaped(tmp: &tempfile::TempDir) {
    let root = tmp.path().join("root");
    for stray in ["root/x", "root/d", "outside/x", "outside/d", "x"] {
        assert!(!tmp.path().join(stray).exists(), "{stray} was written");
    }
    assert_eq!(fs::read_dir(tmp.path().join("outside")).unwrap().count(), 0);
    assert!(root.join("real/up").is_symlink());
}

#[test]
fn below_the_base_no_symlink_is_followed() {
    let tmp = setup();
    for (root, base) in roots(&tmp) {
        let r = root.receiving_into(&base, LinkWhereDir::Replace).unwrap();
        let at = |p: &str| base.join(p);
        let what = format!("{:?} base {}", root.resolver(), base.display());
        // Through a link in the middle: refused, whatever it points at.
        for p in ["up/x", "out/x"] {
            assert!(r.open_file(&at(p), NEW).is_err(), "{what}: {p}");
        }
        assert!(
            r.read_dir_below(&at("up"), Path::new(""), 100).is_err(),
            "{what}"
        );
        assert!(
            r.remove_below(&at("up"), Path::new("x"), false).is_err(),
            "{what}"
        );
        // The last component is never followed for reading either.
        assert!(r.open_file(&at("up"), Access::Read).is_err(), "{what}");
        // The base itself is the destination as named: a link there is followed.
        let f = at("f");
        r.open_file(&f, NEW).unwrap();
        assert!(tmp.path().join("root/real/f").is_file(), "{what}");
        assert!(r.rename(&f, &at("up/f"), true).is_err(), "{what}");
        assert!(r.hard_link(&f, &at("out/f")).is_err(), "{what}");
        assert!(r.create_symlink(b"f", &at("up/s")).is_err(), "{what}");
        fs::remove_file(tmp.path().join("root/real/f")).unwrap();
        nothing_escaped(&tmp);
    }
}

#[test]
fn a_link_where_a_directory_goes_is_replaced_or_refused() {
    for links in [LinkWhereDir::Replace, LinkWhereDir::Refuse] {
        let tmp = setup();
        let (root, base) = roots(&tmp).remove(0);
        let r = root.receiving_into(&base, links).unwrap();
        let made = r.create_dirs(&base.join("up/d"), 0o755);
        match links {
            LinkWhereDir::Replace => {
                let made = made.unwrap();
                assert_eq!(made, vec![base.join("up"), base.join("up/d")]);
                assert!(fs::symlink_metadata(tmp.path().join("root/real/up"))
                    .unwrap()
                    .is_dir());
                assert!(tmp.path().join("root/real/up/d").is_dir());
                assert!(!tmp.path().join("root/d").exists());
            }
            LinkWhereDir::Refuse => {
                let e = made.unwrap_err();
                assert!(
                    e.to_string()
                        .contains("symlink where the sender has a directory"),
                    "{e}"
                );
                nothing_escaped(&tmp);
            }
        }
        // A link out of the root too (its target untouched either way).
        let out = r.create_dirs(&base.join("out"), 0o755);
        assert_eq!(out.is_ok(), links == LinkWhereDir::Replace);
        assert_eq!(fs::read_dir(tmp.path().join("outside")).unwrap().count(), 0);
    }
}

/// Paths at or above the base keep the root's own rule (a plain root is unchanged).
#[test]
fn the_root_itself_keeps_following_links_inside_it() {
    let tmp = setup();
    let root = ServedRoot::open(&tmp.path().join("root")).unwrap();
    if root.resolver() != Resolver::Openat2 {
        eprintln!("SKIP: openat2 not available on this kernel");
        return;
    }
    root.open_file(Path::new("real/up/real/g"), NEW).unwrap();
    assert!(tmp.path().join("root/real/g").is_file());
    let r = root
        .receiving_into(Path::new("real"), LinkWhereDir::Replace)
        .unwrap();
    assert!(r.open_file(Path::new("real/up/real/h"), NEW).is_err());
    r.open_file(Path::new("named/h"), NEW).unwrap();
    assert!(tmp.path().join("root/real/h").is_file());
}
