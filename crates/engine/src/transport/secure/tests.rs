//! `SecureStream` over real sockets: bulk data both ways, close_notify, a cut connection,
//! bytes altered or split anywhere in transit, whole reads opened where they land.

use super::*;
use crate::transport::tls::{ClientTls, ServerTls, ServerTrust};
use std::net::TcpListener;

const T: Duration = Duration::from_secs(10);

/// A TLS pair over loopback; `relay` (if given) sits between them and may alter bytes
/// going from the client to the server.
fn pair(relay: Option<fn(u64, &mut [u8])>) -> (SecureStream, SecureStream) {
    let server_tls = ServerTls::ephemeral().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut target = l.local_addr().unwrap();
    if let Some(alter) = relay {
        let r = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = target;
        target = r.local_addr().unwrap();
        std::thread::spawn(move || {
            let (a, _) = r.accept().unwrap();
            let b = TcpStream::connect(to).unwrap();
            let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = io::copy(&mut &b2, &mut &a2);
                let _ = a2.shutdown(Shutdown::Write);
            });
            let mut buf = vec![0u8; 64 * 1024];
            let mut at = 0u64;
            loop {
                let n = match (&a).read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                alter(at, &mut buf[..n]);
                // In pieces of 1-9000 bytes, each on its own: the reader sees records
                // split at every place, as through a path that delivers a packet at a
                // time.
                let _ = b.set_nodelay(true);
                let mut sent = 0;
                while sent < n {
                    let piece = (1 + (at as usize + sent) * 7919 % 9000).min(n - sent);
                    if (&b).write_all(&buf[sent..sent + piece]).is_err() {
                        break;
                    }
                    sent += piece;
                    if sent % 3 == 0 {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                }
                at += n as u64;
            }
            let _ = b.shutdown(Shutdown::Write);
        });
    }
    let fp = server_tls.fingerprint();
    let accept = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        server_tls.accept(s, T, &[]).unwrap()
    });
    let tcp = TcpStream::connect(target).unwrap();
    let client = ClientTls::new("localhost", 0, ServerTrust::Pinned(fp))
        .unwrap()
        .connect(tcp, "test", T)
        .unwrap()
        .0;
    (client, accept.join().unwrap())
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 4096) as u8).collect()
}

#[test]
fn bulk_data_crosses_both_ways_at_once_and_ends_with_close_notify() {
    let (c, s) = pair(None);
    let n = 24 << 20;
    let (c2, s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
    // Each end writes on one thread while another reads the peer's data.
    let w1 = std::thread::spawn(move || {
        (&c2).write_all(&pattern(n)).unwrap();
        c2.shutdown(Shutdown::Write).unwrap();
    });
    let w2 = std::thread::spawn(move || {
        (&s2).write_all(&pattern(n / 2)).unwrap();
        s2.shutdown(Shutdown::Write).unwrap();
    });
    let mut at_server = Vec::new();
    let r1 = std::thread::spawn(move || {
        (&s).read_to_end(&mut at_server).unwrap();
        at_server
    });
    let mut at_client = Vec::new();
    (&c).read_to_end(&mut at_client).unwrap();
    w1.join().unwrap();
    w2.join().unwrap();
    assert!(r1.join().unwrap() == pattern(n));
    assert!(at_client == pattern(n / 2));
}

#[test]
fn whole_reads_open_records_where_they_land_and_deliver_every_byte_in_order() {
    for relay in [None, Some((|_, _| {}) as fn(u64, &mut [u8]))] {
        whole_reads(relay);
    }
}

fn whole_reads(relay: Option<fn(u64, &mut [u8])>) {
    let (c, s) = pair(relay);
    let n = 12 << 20;
    let data = pattern(n);
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(&data).unwrap();
    // Writes of every kind: small frames, buffered writes, a file read into records.
    let writer = std::thread::spawn(move || {
        let mut at = 0usize;
        let mut buf = vec![0u8; 256 * 1024];
        for (i, w) in [80usize, 100_000, 1, 4 << 20, 80, 3_333_333]
            .iter()
            .cycle()
            .enumerate()
        {
            let w = (*w).min(n - at);
            if w == 0 {
                break;
            }
            if i % 3 == 2 {
                c.send_file_range(&file, at as u64, w as u64, &mut buf)
                    .unwrap();
            } else {
                (&c).write_all(&data[at..at + w]).unwrap();
            }
            at += w;
        }
        c.shutdown(Shutdown::Write).unwrap();
    });
    // Reads of every size: under and over the direct read's threshold, across records.
    let want = pattern(n);
    let mut at = 0usize;
    for r in [
        80usize,
        262_144,
        7,
        40_000,
        16_384,
        16_405,
        1 << 20,
        32_768,
        100,
    ]
    .iter()
    .cycle()
    {
        let r = (*r).min(n - at);
        if r == 0 {
            break;
        }
        let mut got = vec![0u8; r];
        (&s).read_exact(&mut got).unwrap();
        assert!(got == want[at..at + r], "bytes {at}..{}", at + r);
        at += r;
    }
    let mut rest = Vec::new();
    (&s).read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    writer.join().unwrap();
}

#[test]
fn a_whole_read_of_an_altered_stream_fails_and_delivers_nothing_false() {
    let (c, s) = pair(Some(|at, buf| {
        let target = 3 << 20;
        if at <= target && target < at + buf.len() as u64 {
            buf[(target - at) as usize] ^= 0x08;
        }
    }));
    let writer = std::thread::spawn(move || {
        let _ = (&c).write_all(&pattern(8 << 20));
        let _ = c.shutdown(Shutdown::Write);
    });
    let want = pattern(8 << 20);
    let mut at = 0;
    let err = loop {
        let mut got = vec![0u8; 256 * 1024];
        match (&s).read_exact(&mut got) {
            Ok(()) => {
                assert!(got == want[at..at + got.len()]);
                at += got.len();
            }
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    assert!(at < 3 << 20, "{at} bytes read past the altered one");
    drop(s);
    writer.join().unwrap();
}

#[test]
fn a_connection_cut_without_close_notify_is_an_error_not_an_end() {
    let (c, s) = pair(None);
    (&c).write_all(b"partial").unwrap();
    c.tcp().shutdown(Shutdown::Both).unwrap();
    let mut got = Vec::new();
    let err = (&s).read_to_end(&mut got).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
    assert_eq!(got, b"partial");
}

#[test]
fn a_byte_altered_in_transit_is_refused_and_nothing_after_it_is_read() {
    // Flip one byte 1 MB into the client's stream (well past the handshake).
    let (c, s) = pair(Some(|at, buf| {
        let target = 1 << 20;
        if at <= target && target < at + buf.len() as u64 {
            buf[(target - at) as usize] ^= 0x40;
        }
    }));
    let writer = std::thread::spawn(move || {
        let _ = (&c).write_all(&pattern(4 << 20));
        let _ = c.shutdown(Shutdown::Write);
    });
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let err = loop {
        match (&s).read(&mut buf) {
            Ok(0) => panic!("the altered stream ended cleanly"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(err.to_string().contains("altered in transit"), "{err}");
    assert!(got.len() < 1 << 20, "{} bytes read", got.len());
    assert!(
        got == pattern(got.len()),
        "every byte delivered is the sender's"
    );
    drop(s);
    writer.join().unwrap();
}
