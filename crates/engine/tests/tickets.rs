//! Tickets for third-party copies, against a real server in this process over loopback
//! TLS: a ticket pulls its path once; another path, a push, a second use, a use after
//! expiry and a ticket to a server that is not pinned are refused; no ticket is issued
//! for a path that is not there.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

mod support;

use longhaul_engine::cp::client::{run_cp, CpConfig, CpJob, CpReport};
use longhaul_engine::cp::send::SendItem;
use longhaul_engine::cp::third_party::ask_ticket;
use longhaul_engine::cp::walk::walk_local_filtered;
use longhaul_engine::cp::Progress;
use longhaul_engine::transport::tls::{Security, ServerTrust};
use longhaul_proto::{Credential, TicketGrant};
use support::{cp_config, token, TestServer};

/// The root every test server here serves: `data/one`, `data/two` and `other`.
fn root(dir: &Path) {
    std::fs::create_dir(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/one"), vec![1u8; 300_000]).unwrap();
    std::fs::write(dir.join("data/two"), b"two").unwrap();
    std::fs::write(dir.join("other"), b"not for the ticket").unwrap();
}

/// A ticket from `s` for `path`, valid `secs`; the certificate it came with is the
/// server's.
fn ticket(s: &TestServer, path: &str, secs: u32) -> TicketGrant {
    let (grant, cert) = ask_ticket(
        &s.addr.to_string(),
        &token(),
        &s.security(),
        path.as_bytes(),
        secs,
    )
    .unwrap();
    assert_eq!(cert, s.tls.fingerprint());
    grant
}

fn copy(
    s: &TestServer,
    credential: Credential,
    path: &str,
    job: CpJob,
) -> Result<CpReport, String> {
    run_cp(
        cp_config(&s.target(), credential, path, job),
        Arc::new(Progress::default()),
        &mut |_| {},
    )
    .map_err(|e| e.to_string())
}

fn pull(s: &TestServer, grant: &TicketGrant, path: &str, dest: &Path) -> Result<CpReport, String> {
    let job = CpJob::Pull {
        dest: dest.to_path_buf(),
    };
    copy(s, Credential::Ticket(grant.clone()), path, job)
}

#[test]
fn a_ticket_pulls_its_path_once() {
    let s = TestServer::start(root);
    let grant = ticket(&s, "data", 60);
    let dest = tempfile::tempdir().unwrap();
    let report = pull(&s, &grant, "data", dest.path()).unwrap();
    assert_eq!(report.files_ok, 2, "{report:?}");
    for f in ["one", "two"] {
        assert_eq!(
            std::fs::read(dest.path().join("data").join(f)).unwrap(),
            std::fs::read(s.root_path().join("data").join(f)).unwrap()
        );
    }
    let again = tempfile::tempdir().unwrap();
    let err = pull(&s, &grant, "data", again.path()).unwrap_err();
    assert!(err.contains("used already"), "{err}");
    assert!(!again.path().join("data").exists());
}

#[test]
fn a_ticket_opens_no_other_path_and_no_push() {
    let s = TestServer::start(root);
    let dest = tempfile::tempdir().unwrap();
    let grant = ticket(&s, "data", 60);
    let err = pull(&s, &grant, "other", dest.path()).unwrap_err();
    assert!(err.contains("the ticket is for data"), "{err}");
    assert!(!dest.path().join("other").exists());
    // Below the path is not the path: the ticket names what is pulled, whole.
    let grant = ticket(&s, "data", 60);
    let err = pull(&s, &grant, "data/one", dest.path()).unwrap_err();
    assert!(err.contains("the ticket is for data"), "{err}");
    // Writing with it is refused, and nothing lands.
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("planted"), b"x").unwrap();
    let items = walk_local_filtered(
        &[src.path().join("planted")],
        false,
        &Default::default(),
        false,
        &mut |_| {},
    )
    .unwrap()
    .into_iter()
    .map(|s| SendItem {
        entry: s.entry,
        origin: s.origin,
    })
    .collect();
    let grant = ticket(&s, "data", 60);
    let err = copy(&s, Credential::Ticket(grant), "data", CpJob::Push { items }).unwrap_err();
    assert!(err.contains("reading only"), "{err}");
    assert!(!s.root_path().join("data/planted").exists());
}

#[test]
fn an_expired_ticket_is_refused() {
    let s = TestServer::start(root);
    let grant = ticket(&s, "data", 1);
    std::thread::sleep(Duration::from_millis(1200));
    let dest = tempfile::tempdir().unwrap();
    let err = pull(&s, &grant, "data", dest.path()).unwrap_err();
    assert!(err.contains("expired"), "{err}");
}

#[test]
fn no_ticket_for_a_missing_path_or_an_escape() {
    let s = TestServer::start(root);
    for path in ["nope", "../etc"] {
        let err = ask_ticket(
            &s.addr.to_string(),
            &token(),
            &s.security(),
            path.as_bytes(),
            60,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("no ticket") || err.contains("refused path"),
            "{path}: {err}"
        );
    }
}

#[test]
fn a_ticket_is_proved_only_to_a_pinned_server() {
    let s = TestServer::start(root);
    let grant = ticket(&s, "data", 60);
    let known = tempfile::tempdir().unwrap();
    let cfg_security = Security {
        trust: ServerTrust::KnownServers {
            file: known.path().join("known"),
        },
        ..s.security()
    };
    let dest = tempfile::tempdir().unwrap();
    let job = CpJob::Pull {
        dest: dest.path().to_path_buf(),
    };
    let cfg = CpConfig {
        security: cfg_security,
        ..cp_config(&s.target(), Credential::Ticket(grant.clone()), "data", job)
    };
    let err = run_cp(cfg, Arc::new(Progress::default()), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("pinned"), "{err}");
    // Nothing reached the server: the ticket still opens its path.
    pull(&s, &grant, "data", dest.path()).unwrap();
}
