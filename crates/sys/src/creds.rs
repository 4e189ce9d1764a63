//! Running one thread as another user: a daemon started as root serves each exported area
//! as that area's local user, so the kernel's own permission checks (and file ownership)
//! apply to what a token holder reads and writes.
//!
//! Linux keeps credentials per thread; the C library's `setuid` family changes every
//! thread of the process at once, the raw system calls only the calling one. A session's
//! thread drops to the user with the raw calls ([`become_user`]) before it touches a file,
//! and every thread it starts afterwards inherits that; the rest of the daemon keeps its
//! own. The thread keeps one capability, `CAP_NET_ADMIN`, for what a session does to its
//! sockets and routes (forced buffer sizes, a route's initial windows for jump-start), and
//! nothing that reaches files. The session's thread ends with the session: there is no way
//! back, and none is needed.

use std::ffi::CString;
use std::io;

/// Who a thread becomes: user, primary group and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCreds {
    /// The user's name, as given.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Every group the user is in (the primary one included).
    pub groups: Vec<u32>,
}

/// The most supplementary groups taken for one user.
const MAX_GROUPS: usize = 1024;

/// Looks `name` up in the system's user database (`getpwnam_r`, `getgrouplist`); a
/// number is taken as a user id with no entry of its own (its group the same number, no
/// other groups), as a container's users often are.
pub fn lookup_user(name: &str) -> io::Result<UserCreds> {
    if let Ok(uid) = name.parse::<u32>() {
        return Ok(UserCreds {
            name: name.into(),
            uid,
            gid: uid,
            groups: vec![uid],
        });
    }
    let c_name = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the user name"))?;
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0u8; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives the use of `pwd`'s
    // strings (none are kept).
    let rc = unsafe {
        libc::getpwnam_r(
            c_name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    if found.is_null() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no user {name:?} on this system"),
        ));
    }
    let (uid, gid) = (pwd.pw_uid, pwd.pw_gid);
    let mut groups = vec![0 as libc::gid_t; 64];
    loop {
        let mut n = groups.len() as libc::c_int;
        // SAFETY: `groups` holds `n` entries; the call writes at most that many.
        let rc = unsafe { libc::getgrouplist(c_name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n.max(0) as usize);
            break;
        }
        let want = (n.max(0) as usize).max(groups.len() * 2);
        if want > MAX_GROUPS {
            return Err(io::Error::other(format!(
                "user {name:?} is in more than {MAX_GROUPS} groups"
            )));
        }
        groups.resize(want, 0);
    }
    Ok(UserCreds {
        name: name.into(),
        uid,
        gid,
        groups,
    })
}

/// The calling thread's real, effective and saved user ids.
pub fn thread_uids() -> (u32, u32, u32) {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: three valid pointers to uid_t.
    unsafe { libc::syscall(libc::SYS_getresuid, &mut r, &mut e, &mut s) };
    (r, e, s)
}

/// Turns the calling thread (only it, and the threads it starts afterwards) into `who`,
/// keeping `CAP_NET_ADMIN` and no other capability. Needs root; the thread cannot come back.
pub fn become_user(who: &UserCreds) -> io::Result<()> {
    let check = |rc: libc::c_long, what: &str| {
        if rc == 0 {
            Ok(())
        } else {
            let e = io::Error::last_os_error();
            Err(io::Error::new(
                e.kind(),
                format!("{what} for user {}: {e}", who.name),
            ))
        }
    };
    let groups: Vec<libc::gid_t> = who.groups.iter().take(MAX_GROUPS).copied().collect();
    // SAFETY: raw system calls on this thread's credentials with valid arguments; the
    // group list is `groups.len()` entries long.
    unsafe {
        // Keep the permitted capabilities through the change of user id (per thread).
        check(
            libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) as libc::c_long,
            "keeping capabilities",
        )?;
        check(
            libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()),
            "setting the groups",
        )?;
        check(
            libc::syscall(libc::SYS_setresgid, who.gid, who.gid, who.gid),
            "setting the group id",
        )?;
        check(
            libc::syscall(libc::SYS_setresuid, who.uid, who.uid, who.uid),
            "setting the user id",
        )?;
    }
    keep_only_net_admin().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("dropping capabilities for user {}: {e}", who.name),
        )
    })?;
    if thread_uids() != (who.uid, who.uid, who.uid) {
        return Err(io::Error::other(format!(
            "the thread did not become user {}",
            who.name
        )));
    }
    Ok(())
}

/// Sets this thread's capabilities to `CAP_NET_ADMIN` alone (effective and permitted,
/// nothing inheritable).
fn keep_only_net_admin() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_NET_ADMIN: u32 = 12;
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let bit = 1u32 << CAP_NET_ADMIN;
    let none = Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    };
    let data = [
        Data {
            effective: bit,
            permitted: bit,
            inheritable: 0,
        },
        none,
    ];
    // SAFETY: a version-3 header and its two data words, as capset(2) reads them.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_a_user_id_and_a_name_is_looked_up() {
        let n = lookup_user("65534").unwrap();
        assert_eq!(
            (n.uid, n.gid, n.groups.clone()),
            (65534, 65534, vec![65534])
        );
        let root = lookup_user("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        let e = lookup_user("no-such-user-longhaul").unwrap_err();
        assert!(e.to_string().contains("no user"), "{e}");
    }

    /// One thread becomes another user; the rest of the process stays root. Root only.
    #[test]
    fn only_the_calling_thread_changes_user() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let who = UserCreds {
            name: "test".into(),
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
        };
        let inner = locked.clone();
        let seen = std::thread::spawn(move || {
            become_user(&who).unwrap();
            // A thread started now inherits the user.
            let child = std::thread::spawn(thread_uids).join().unwrap();
            let denied = std::fs::write(inner.join("x"), b"x").is_err();
            (thread_uids(), child, denied)
        })
        .join()
        .unwrap();
        assert_eq!(seen.0, (65534, 65534, 65534));
        assert_eq!(seen.1, (65534, 65534, 65534));
        assert!(seen.2, "root's 0700 directory must be closed to the user");
        assert_eq!(thread_uids(), (0, 0, 0), "the process is still root");
        std::fs::write(locked.join("y"), b"y").unwrap();
    }
}
