//! How a client trusts a daemon, with real `longhaul serve` and `longhaul cp` processes:
//! the certificate pinned on first contact in the known-servers file (only once the server
//! proved the token), a changed one refused with ssh's warning (nothing sent, nothing
//! written), `--ca` for a certificate a CA issued (made here with openssl), and an older
//! longhaul that does not speak TLS named as such.

#[macro_use]
mod support;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

use support::*;

fn known_servers(home: &std::path::Path) -> String {
    fs::read_to_string(home.join(".config/longhaul/known_servers")).unwrap_or_default()
}

#[test]
fn first_contact_pins_the_certificate_and_a_changed_one_is_refused() {
    let s = Scratch::new("tls-pin");
    let home = s.dir("home");
    let root = s.dir("root");
    let src = s.join("a.txt");
    write_file(&src, b"first", 0o644);
    let server = Server::start(&home, &root);
    let fp = server
        .log()
        .lines()
        .find_map(|l| l.split_once("TLS certificate ").map(|x| x.1.to_string()))
        .and_then(|rest| rest.split_whitespace().next().map(str::to_string))
        .expect("serve prints its certificate's fingerprint");
    assert!(fp.starts_with("sha256:") && fp.len() == 71, "{fp}");

    let first = cp!(&home; "--json", &src, server.remote("a.txt"));
    first.assert_ok();
    assert!(first.stdout.contains("now pinned"), "{}", first.describe());
    let pinned = known_servers(&home);
    assert_eq!(pinned.trim(), format!("{} {fp}", server.addr));
    // A second contact finds the same certificate: nothing new is said or written.
    let second = cp!(&home; "--json", &src, server.remote("b.txt"));
    second.assert_ok();
    assert!(
        !second.stdout.contains("now pinned"),
        "{}",
        second.describe()
    );
    assert_eq!(known_servers(&home), pinned);

    // The server's certificate "changed" (as a server in the middle would present):
    // the record says something else now.
    let other = format!("sha256:{}", "ab".repeat(32));
    fs::write(
        home.join(".config/longhaul/known_servers"),
        format!("# pinned by longhaul\n{} {other}\n", server.addr),
    )
    .unwrap();
    let refused = cp!(&home; &src, server.remote("c.txt"));
    refused.assert_failed();
    for want in [
        "WARNING: LONGHAUL SERVER IDENTITY HAS CHANGED",
        &fp,
        &other,
        "line 2",
    ] {
        assert!(
            refused.stderr.contains(want),
            "{want}: {}",
            refused.describe()
        );
    }
    assert!(!root.join("c.txt").exists());
    // The record is left as it was: only the user removes a pin.
    assert!(known_servers(&home).contains(&other));
}

/// First contact pins only a server that proved the token: one holding another token (or
/// something answering in its place) fails authentication and leaves the known-servers
/// file as it was, saying so; the real server is then pinned on its own first contact.
#[test]
fn a_server_that_fails_the_token_proof_is_not_pinned() {
    let s = Scratch::new("tls-pin-proof");
    let home = s.dir("home");
    let root = s.dir("root");
    write_file(&root.join("f"), b"the real file", 0o644);
    let (theirs, ours) = (s.join("server.token"), s.join("client.token"));
    write_file(
        &theirs,
        b"9e246822afff72bd2c4ca4bd7b64c563cd379b1c42a0c04489530a685d914cec",
        0o600,
    );
    write_file(
        &ours,
        b"e54816753be6d09045ae4f70834582db730526896d9e9eb77c3299805a69e7c8",
        0o600,
    );
    let ks = s.join("ks");
    let server = Server::start_with_token_file(&home, &root, &theirs);

    let refused = cp!(&home; "--token-file", &ours, "--known-servers", &ks,
        server.remote("f"), s.join("got"));
    refused.assert_failed();
    let pinned = fs::read_to_string(&ks).unwrap_or_default();
    assert!(
        !pinned.contains(&server.addr),
        "a server that failed the proof was pinned:\n{pinned}"
    );
    for want in ["authentication failed", "not pinned", &server.addr] {
        assert!(
            refused.stderr.contains(want),
            "{want}: {}",
            refused.describe()
        );
    }
    assert!(!s.join("got").exists());

    // The same server with the right token: pinned now, and the copy goes through.
    let first = cp!(&home; "--json", "--token-file", &theirs, "--known-servers", &ks,
        server.remote("f"), s.join("got"));
    first.assert_ok();
    assert!(first.stdout.contains("now pinned"), "{}", first.describe());
    assert!(fs::read_to_string(&ks).unwrap().contains(&server.addr));
    assert_eq!(fs::read(s.join("got")).unwrap(), b"the real file");
}

#[test]
fn a_certificate_issued_by_a_ca_is_verified_with_ca() {
    let s = Scratch::new("tls-ca");
    let home = s.dir("home");
    let root = s.dir("root");
    let ids = s.dir("identity");
    let sh = |script: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&ids)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // A CA, and a certificate for 127.0.0.1 it signed, in the server's identity dir.
    sh(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca 2>/dev/null",
    );
    sh(
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null",
    );
    sh(
        "printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext.cnf && \
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
        -out server.crt -days 2 -extfile ext.cnf 2>/dev/null",
    );
    let server = Server::start_with(&home, &root, &["--identity-dir", ids.to_str().unwrap()]);
    let src = s.join("f");
    write_file(&src, b"verified by a CA", 0o644);
    let ca = ids.join("ca.pem");
    cp!(&home; "--ca", &ca, &src, server.remote("f")).assert_ok();
    assert_eq!(fs::read(root.join("f")).unwrap(), b"verified by a CA");
    // --ca pins nothing.
    assert_eq!(known_servers(&home), "");
    // Another CA's certificate does not vouch for this server.
    sh(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout other.key -out other.pem -days 2 -subj /CN=other-ca 2>/dev/null",
    );
    let refused = cp!(&home; "--ca", ids.join("other.pem"), &src, server.remote("g"));
    refused.assert_failed();
    assert!(
        refused.stderr.contains("TLS handshake"),
        "{}",
        refused.describe()
    );
    assert!(!root.join("g").exists());
}

#[test]
fn a_server_that_does_not_speak_tls_is_named_an_older_longhaul() {
    // At most this many data connections: a path not remembered opens as many as the
    // longest path needs with the control connection, and keeps the path's count (2 on
    // loopback) once the RTT is known.
    const MOST_STREAMS: u16 = 64; // longhaul_policy::MAX_PATH_STREAMS
                                  // What a longhaul of protocol 4 answers to a TLS ClientHello: its frame decoder
                                  // reads the record header as an absurd length and sends an Error frame in clear.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // The client opens its data connections with the control connection: every one
    // is answered (on its own thread: a data connection speaks only after the control
    // connection's TLS), until the client is gone.
    let old = std::thread::spawn(move || {
        let mut answering = Vec::new();
        // The control connection and every data connection.
        for _ in 0..1 + MOST_STREAMS {
            let Ok((mut c, _)) = listener.accept() else {
                break;
            };
            answering.push(std::thread::spawn(move || {
                let mut first = [0u8; 5];
                if c.read_exact(&mut first).is_err() {
                    return;
                }
                let mut frame = Vec::new();
                longhaul_proto::encode_frame(
                    &longhaul_proto::Message::Error {
                        code: longhaul_proto::ErrorCode::Protocol,
                        message: "frame of 369295616 bytes exceeds the limit".into(),
                    },
                    &mut frame,
                );
                let _ = c.write_all(&frame);
            }));
        }
        for a in answering {
            let _ = a.join();
        }
    });
    let s = Scratch::new("tls-old");
    let home = s.dir("home");
    let src = s.join("f");
    write_file(&src, b"x", 0o644);
    let run = cp!(&home; &src, format!("longhaul://{addr}/f"));
    run.assert_failed();
    assert!(
        run.stderr.contains("without TLS") && run.stderr.contains("protocol 4 or before"),
        "{}",
        run.describe()
    );
    // Data connections the client did not get to open before it gave up are stood in
    // for, so that the fake server's bounded accept loop ends.
    for _ in 0..=MOST_STREAMS {
        let _ = std::net::TcpStream::connect(addr);
    }
    old.join().unwrap();
}
