//! Listing and `lstat` below a served root on real files, with both resolvers: entries and
//! attributes are right (symlinks reported as symlinks, never followed, non-UTF-8 names
//! kept), and no listing or stat reaches outside the root (`..`, absolute paths, symlinks
//! out, a symlink to a directory given as the directory to list).

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;

use longhaul_sys::served_root::{Resolver, ServedRoot};
use longhaul_testkit::served::each_resolver;

/// `<tmp>/root` holding a file, an empty directory, a non-UTF-8 name, a fifo and
/// symlinks in and out; `<tmp>/outside` a directory beside the root.
fn setup() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir_all(root.join("sub/empty")).unwrap();
    fs::create_dir_all(tmp.path().join("outside/hidden")).unwrap();
    fs::write(tmp.path().join("outside/secret"), b"outside").unwrap();
    fs::write(root.join("sub/f.txt"), b"12345").unwrap();
    fs::write(root.join(OsStr::from_bytes(b"sub/\xff\xfe")), b"x").unwrap();
    symlink(tmp.path().join("outside"), root.join("out")).unwrap();
    symlink("../outside", root.join("sub/rel_out")).unwrap();
    symlink("f.txt", root.join("sub/in_link")).unwrap();
    symlink("sub", root.join("sub_link")).unwrap();
    tmp
}

#[test]
fn lists_entries_with_lstat_attributes() {
    let tmp = setup();
    for r in each_resolver(&tmp.path().join("root")) {
        let mut names: Vec<Vec<u8>> = r
            .read_dir(Path::new("sub"))
            .unwrap()
            .into_iter()
            .map(|e| {
                let want = fs::symlink_metadata(tmp.path().join("root/sub").join(&e.name)).unwrap();
                assert_eq!(e.metadata.ino(), want.ino(), "{:?}", e.name);
                assert_eq!(e.metadata.file_type(), want.file_type(), "{:?}", e.name);
                e.name.as_bytes().to_vec()
            })
            .collect();
        names.sort();
        let want: Vec<&[u8]> = vec![b"empty", b"f.txt", b"in_link", b"rel_out", b"\xff\xfe"];
        assert_eq!(names, want, "{:?}", r.resolver());

        // The root itself, by "" and by ".".
        for top in ["", "."] {
            let mut top_names: Vec<_> = r
                .read_dir(Path::new(top))
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect();
            top_names.sort();
            assert_eq!(top_names, ["out", "sub", "sub_link"]);
            assert!(r.metadata(Path::new(top)).unwrap().is_dir());
        }
        assert!(r.read_dir(Path::new("sub/empty")).unwrap().is_empty());

        let f = r.metadata(Path::new("sub/f.txt")).unwrap();
        assert!(f.is_file());
        assert_eq!(f.len(), 5);
        // Symlinks are reported, not followed, wherever they point.
        for link in ["sub/in_link", "sub/rel_out", "out", "sub_link"] {
            let m = r.metadata(Path::new(link)).unwrap();
            assert!(m.file_type().is_symlink(), "{link} via {:?}", r.resolver());
        }
        // Bounded listing.
        assert!(r.read_dir_at_most(Path::new("sub"), 5).is_ok());
        let e = r.read_dir_at_most(Path::new("sub"), 4).unwrap_err();
        assert!(e.to_string().contains("more than 4 entries"), "{e}");
    }
}

#[test]
fn listing_and_stat_stay_below_the_root() {
    let tmp = setup();
    for r in each_resolver(&tmp.path().join("root")) {
        for bad in [
            "..",
            "../outside",
            "sub/../../outside",
            "/etc",
            "out/hidden",
            "sub/rel_out/hidden",
        ] {
            let e = r.read_dir(Path::new(bad)).unwrap_err();
            assert!(e.to_string().contains(bad), "{bad}: {e}");
            assert!(
                r.metadata(Path::new(bad)).is_err(),
                "{bad} stat'ed via {:?}",
                r.resolver()
            );
        }
        assert!(r.metadata(Path::new("out/secret")).is_err());
        assert!(r.metadata(Path::new("sub/rel_out/secret")).is_err());
        // A symlink is never listed as the directory it points at, in or out.
        for link in ["out", "sub/rel_out", "sub_link"] {
            assert!(
                r.read_dir(Path::new(link)).is_err(),
                "{link} listed via {:?}",
                r.resolver()
            );
        }
        assert!(r.read_dir(Path::new("sub/f.txt")).is_err());
        assert!(r.read_dir(Path::new("missing")).is_err());
    }
}

#[test]
fn inner_symlinked_directories_depend_on_the_resolver() {
    let tmp = setup();
    let strict = ServedRoot::open_with(&tmp.path().join("root"), Resolver::NoSymlinks).unwrap();
    assert!(strict.metadata(Path::new("sub_link/f.txt")).is_err());
    let r = ServedRoot::open(&tmp.path().join("root")).unwrap();
    if r.resolver() == Resolver::Openat2 {
        // A directory on the way may be a symlink that stays inside.
        assert_eq!(r.metadata(Path::new("sub_link/f.txt")).unwrap().len(), 5);
        assert_eq!(r.read_dir(Path::new("sub_link/empty")).unwrap().len(), 0);
    }
}
