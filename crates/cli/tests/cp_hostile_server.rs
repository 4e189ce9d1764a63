//! A hostile server (it holds the token: the token is shared, so any client can pose as a
//! server) answers `longhaul cp HOST:big.h5 DEST/` with a file list naming `.bashrc`:
//! scp's CVE-2019-6111 class. The real client must refuse the list, exit 2 saying why, and
//! write nothing into the destination. The server here is a real TCP server speaking the
//! real protocol through `longhaul-proto`'s session state machine; only its answer lies.
//! The same server frames a chunk with its hash after its bytes (`features::HASH_AFTER`):
//! taken with the chunk's own trailer, refused with another's. A server that takes the
//! request and then says nothing ends the pull at the client's wait for its answer.

#[macro_use]
mod support;

use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use longhaul_engine::transport::framed::{Frame, FramedConn};
use longhaul_engine::transport::secure::SecureStream;
use longhaul_engine::transport::tls::ServerTls;
use longhaul_proto::transfer::{
    ChunkHeader, EntryId, EntryKind, FileEntry, TransferMessage, CHUNK_FLAG_HASH_AFTER,
};
use longhaul_proto::{Message, ServerEvent, ServerSession};
use support::*;

/// How the server frames each chunk on its data stream.
#[derive(Clone, Copy)]
enum Framing {
    /// The hash in the header, before the bytes.
    HashFirst,
    /// The hash in a trailer after the bytes (`features::HASH_AFTER`).
    HashAfter,
    /// A trailer after the bytes that names another chunk.
    WrongTrailer,
}

/// A client's connections as this server took them: the control connection (the client
/// proved the token and its request was read), the data connections so far, and the
/// channel the others arrive on.
struct Opened {
    conn: FramedConn,
    data: Vec<SecureStream>,
    more: std::sync::mpsc::Receiver<(Frame, FramedConn)>,
    chunk_key: Option<longhaul_proto::ChunkKey>,
    params: longhaul_proto::transfer::TransferParams,
}

/// Accepts a client of the token in `token_file` up to its request: TLS with the hello as
/// 0.5-RTT data, the client's proof (welcomed), the request read.
fn open(listener: TcpListener, token_file: std::path::PathBuf) -> Opened {
    let (token, _) = longhaul_engine::token::load_token(Some(&token_file)).expect("token");
    // A server of its own identity: the client (a fresh home) pins it on first contact.
    let tls = ServerTls::ephemeral().unwrap();
    let cert = tls.fingerprint().0;
    let mut hello = Vec::new();
    longhaul_proto::encode_frame(
        &ServerSession::hello(&token.clone().into(), [7u8; 32], &cert)[0],
        &mut hello,
    );
    // The client opens its data connections together with the control connection:
    // each is told apart by its first message.
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let tls = tls.clone();
        let hello = hello.clone();
        std::thread::spawn(move || {
            // At most the control connection and 256 data connections.
            for _ in 0..257 {
                let Ok((tcp, _)) = listener.accept() else {
                    return;
                };
                // Each on its own thread: a data connection's TLS may wait for the
                // control connection's.
                let (tls, hello, tx) = (tls.clone(), hello.clone(), tx.clone());
                std::thread::spawn(move || {
                    let Ok(sock) = tls.accept(tcp, Duration::from_secs(20), &hello) else {
                        return;
                    };
                    let _ = sock.set_read_timeout(Some(Duration::from_secs(20)));
                    let mut conn = FramedConn::new(sock);
                    if let Ok(first) = conn.recv_any() {
                        let _ = tx.send((first, conn));
                    }
                });
            }
        });
    }
    let mut data = Vec::new();
    let (mut conn, hello_msg) = loop {
        match rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a control connection")
        {
            (Frame::Bench(m @ Message::ClientHello { .. }), c) => break (c, m),
            (_, c) => data.push(c.into_parts().0),
        }
    };
    let binding = longhaul_proto::ChannelBinding {
        cert,
        exporter: conn.stream().exporter().expect("an exporter"),
    };
    let mut session = ServerSession::new(token.into(), [7u8; 32], binding);
    session.handle(hello_msg).expect("a valid hello");
    let mut chunk_key = None;
    let params = loop {
        match conn.recv_any().expect("a frame from the client") {
            Frame::Bench(m) => {
                session.handle(m).expect("a valid handshake");
                while let Some(out) = session.poll_transmit() {
                    conn.send(&out).unwrap();
                }
                while let Some(ev) = session.poll_event() {
                    if let ServerEvent::Authenticated { secret, .. } = ev {
                        chunk_key = Some(secret.chunk_key());
                    }
                }
            }
            Frame::Transfer(TransferMessage::TransferParams(p)) => {
                session
                    .begin_transfer()
                    .expect("authenticated before the request");
                while let Some(out) = session.poll_transmit() {
                    conn.send(&out).unwrap();
                }
                if let Some(ServerEvent::Authenticated { .. }) = session.poll_event() {}
                break p;
            }
            Frame::Transfer(other) => panic!("unexpected {}", other.kind()),
        }
    };
    Opened {
        conn,
        data,
        more: rx,
        chunk_key,
        params,
    }
}

/// Serves one pull of `list` (a lie or not), then its bytes framed as `framing` says, and
/// its digests.
fn serve_list(
    listener: TcpListener,
    token_file: std::path::PathBuf,
    lie: Vec<FileEntry>,
    framing: Framing,
) {
    let Opened {
        mut conn,
        mut data,
        more: rx,
        chunk_key,
        params,
    } = open(listener, token_file);
    conn.send_transfer(&TransferMessage::TransferReady {
        chunk_size: params.chunk_size,
        jump_start_bps: 0,
        jump_note: String::new(),
    })
    .unwrap();
    // Take the data connections (their proofs are not checked: this server lies anyway).
    while data.len() < params.streams as usize {
        let (_, c) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a data connection");
        data.push(c.into_parts().0);
    }
    // The token holder knows the session's key: its headers pass the MAC, so only the
    // client's own checks stand between the lie and the disk.
    let chunk_key = chunk_key.expect("authenticated");
    let lie_entries = lie.clone();
    let n = lie.len() as u32;
    let bytes = lie.iter().map(|e| e.size).sum();
    conn.send_transfer(&TransferMessage::FileEntries {
        first_id: EntryId(0),
        entries: lie,
    })
    .unwrap();
    conn.send_transfer(&TransferMessage::FileListEnd {
        files: n,
        bytes,
        deleted: 0,
    })
    .unwrap();
    // Then the lie's bytes and digest, as a real sender would: without the check the
    // client would write them into the destination.
    let data = data;
    for (i, e) in lie_entries.iter().enumerate() {
        let bytes = vec![b'#'; e.size as usize];
        let hash = longhaul_transfer::chunk_hash(&bytes, 0, true);
        let header = ChunkHeader {
            file: EntryId(i as u32),
            index: 0,
            flags: 0,
            offset: 0,
            len: e.size as u32,
            hash,
        };
        // A client that refused may have gone: what it missed does not matter.
        let send = |b: &[u8]| {
            let _ = (&data[0]).write_all(b);
        };
        match framing {
            Framing::HashFirst => {
                send(&header.encode(&chunk_key));
                send(&bytes);
            }
            Framing::HashAfter | Framing::WrongTrailer => {
                let after = ChunkHeader {
                    flags: CHUNK_FLAG_HASH_AFTER,
                    hash: [0; 32],
                    ..header
                };
                let mut trailer = after.trailer(hash);
                if matches!(framing, Framing::WrongTrailer) {
                    trailer.index = 1;
                }
                send(&after.encode(&chunk_key));
                send(&bytes);
                send(&trailer.encode(&chunk_key));
            }
        }
        let _ = conn.send_transfer(&TransferMessage::FileDigest {
            file: EntryId(i as u32),
            blake3: hash,
        });
    }
    // Done once every file's commit is in, as a real sender; read until the client hangs
    // up (a client that refused says so first).
    let mut committed = 0;
    while let Ok(frame) = conn.recv_any() {
        if let Frame::Transfer(TransferMessage::FileCommitted { .. }) = frame {
            committed += 1;
            if committed == n {
                let _ = conn.send_transfer(&TransferMessage::TransferDone { files: n, bytes });
            }
        }
    }
    drop(data);
}

fn dotfile(path: &str) -> FileEntry {
    FileEntry {
        path: path.as_bytes().to_vec(),
        kind: EntryKind::File,
        size: 30,
        mtime_secs: 1_700_000_000,
        mtime_nanos: 0,
        mode: 0o644,
        fingerprint: 1,
        link_target: Vec::new(),
    }
}

/// `longhaul cp longhaul://127.0.0.1:PORT/big.h5 DEST/` against a server that answers
/// with `list`, its chunks framed as `framing` says; the run and the destination.
fn pull_from(what: &str, list: Vec<FileEntry>, framing: Framing) -> (Scratch, PathBuf, CpRun) {
    pull_served(what, move |listener, token| {
        serve_list(listener, token, list, framing)
    })
}

/// `longhaul cp longhaul://127.0.0.1:PORT/big.h5 DEST/` against `serve`; the run and the
/// destination.
fn pull_served(
    what: &str,
    serve: impl FnOnce(TcpListener, PathBuf) + Send + 'static,
) -> (Scratch, PathBuf, CpRun) {
    let s = Scratch::new(what);
    let home = s.dir("home");
    let dest = s.dir("dest");
    let token = s.join("token");
    write_file(&token, b"ecd84607eccf70ac856e7d746ee36456", 0o600);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = {
        let token = token.clone();
        std::thread::spawn(move || serve(listener, token))
    };
    let run =
        cp!(&home; "--token-file", &token, format!("longhaul://127.0.0.1:{port}/big.h5"), &dest);
    server.join().expect("the server ended");
    (s, dest, run)
}

#[test]
fn a_pull_refuses_a_file_list_naming_what_was_not_asked_for() {
    for lie in [".bashrc", ".ssh/authorized_keys", "big.h5/../.profile"] {
        let (s, dest, run) = pull_from("hostile", vec![dotfile(lie)], Framing::HashFirst);
        assert!(
            names_under(&dest).is_empty(),
            "{lie}: the destination must stay empty, found {:?}; {}",
            names_under(&dest),
            run.describe()
        );
        run.assert_code(2);
        assert!(
            run.stderr.contains("not inside what was asked for")
                || run.stderr.contains("refused path"),
            "{lie}: {}",
            run.describe()
        );
        let _ = fs::remove_dir_all(&s.0);
    }
}

/// A chunk whose hash follows its bytes (`features::HASH_AFTER`) is taken with its own
/// trailer, and a trailer that names another chunk stops the pull with the reason: nothing
/// is written then.
#[test]
fn a_pull_takes_a_hash_after_its_bytes_only_with_the_chunk_s_own_trailer() {
    for (framing, ok) in [(Framing::HashAfter, true), (Framing::WrongTrailer, false)] {
        let (s, dest, run) = pull_from("hash-after", vec![dotfile("big.h5")], framing);
        if ok {
            run.assert_code(0);
            let got = fs::read(dest.join("big.h5"));
            assert!(
                got.as_ref().is_ok_and(|b| *b == vec![b'#'; 30]),
                "{got:?} {:?} {}",
                names_under(&dest),
                run.describe()
            );
        } else {
            run.assert_code(2);
            assert!(run.stderr.contains("not its trailer"), "{}", run.describe());
            assert!(names_under(&dest).is_empty(), "{:?}", names_under(&dest));
        }
        let _ = fs::remove_dir_all(&s.0);
    }
}

/// A server that welcomes the client and takes its request, then says nothing more (a
/// hung or hostile server): the client gives up when its wait for the answer runs out,
/// exits 2 naming that wait, and writes nothing.
#[test]
fn a_pull_from_a_server_that_never_answers_ends_at_its_wait_s_limit() {
    let (_s, dest, run) = pull_served("silent", |listener, token| {
        let Opened { mut conn, data, .. } = open(listener, token);
        // Hold every connection until the client hangs up.
        while conn.recv_any().is_ok() {}
        drop(data);
    });
    run.assert_code(2);
    assert!(
        run.stderr
            .contains("sent nothing for 15 s while waiting for the server's answer"),
        "{}",
        run.describe()
    );
    assert!(names_under(&dest).is_empty(), "{:?}", names_under(&dest));
}
