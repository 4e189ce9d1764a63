//! The far end of a stream carried through ssh (`longhaul ssh-bridge ADDR:PORT`, hidden):
//! ssh runs it on the far host for each connection of [`super::relay`], and it joins its
//! stdin and stdout to one TCP connection to the far longhaul's port there, until both
//! directions have ended.
//!
//! Why not OpenSSH's own `ssh -W`: its forwarding channel advertises half the window of a
//! session channel (measured at 180 ms: 43 Mbit/s per connection against 76 for
//! `ssh host cat`), and sshd may forbid it (`AllowTcpForwarding no`); a command on a
//! session channel is what every ssh copier uses.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

/// How long the far longhaul's port has to accept.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Joins `input` and `output` (ssh's channel) to a TCP connection to `target`; returns the
/// bytes carried each way (in, out) once both directions have ended. The connection is
/// made when the first bytes arrive (the client always speaks first): a bridge logged in
/// ahead that no stream needed ends without ever reaching the far end's door.
pub fn bridge(
    target: SocketAddr,
    mut input: impl Read + Send,
    mut output: impl Write,
) -> io::Result<(u64, u64)> {
    let mut first = vec![0u8; PIECE];
    let n = loop {
        match input.read(&mut first) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    if n == 0 {
        return Ok((0, 0));
    }
    let conn = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT)?;
    let _ = conn.set_nodelay(true);
    let mut to_far = conn.try_clone()?;
    let mut from_far = conn;
    to_far.write_all(&first[..n])?;
    drop(first);
    std::thread::scope(|scope| {
        let sending = scope.spawn(move || {
            let n = pump(&mut input, &mut to_far).map(|m| m + n as u64);
            // The channel ended: so does this direction, the other goes on.
            let _ = to_far.shutdown(Shutdown::Write);
            n
        });
        let received = pump(&mut from_far, &mut output);
        let sent = sending
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the sending thread panicked")));
        Ok((sent?, received?))
    })
}

/// The longest line naming the target on stdin (`ssh-bridge -`).
const MAX_TARGET_LINE: usize = 64;

/// Reads the target from the first line of `input` (`ADDR:PORT\n`, a byte at a time so
/// nothing after it is taken): how a bridge logged in ahead learns the port.
pub fn read_target(input: &mut impl Read) -> io::Result<SocketAddr> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match input.read(&mut byte)? {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the input ended before the target's line",
                ))
            }
            _ if byte[0] == b'\n' => break,
            _ if line.len() >= MAX_TARGET_LINE => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the target's line is too long",
                ))
            }
            _ => line.push(byte[0]),
        }
    }
    std::str::from_utf8(&line)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "the target is no ADDR:PORT"))
}

/// Bytes carried per read.
const PIECE: usize = 256 * 1024;

/// Copies `from` to `to` until `from` ends, with plain reads and writes; returns the bytes
/// carried. (`io::copy`, which tries the kernel's copy paths first, ended at once on the
/// socket pair sshd gives a command, without a single read: seen with strace.)
pub(super) fn pump(from: &mut impl Read, to: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; PIECE];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
    to.flush()?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Bytes cross both ways, and the end of the input reaches the far side as an end.
    #[test]
    fn both_directions_cross_and_end() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let far = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            c.write_all(&got.iter().rev().copied().collect::<Vec<u8>>())
                .unwrap();
            got.len()
        });
        let input: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut output = Vec::new();
        let (sent, received) = bridge(at, &input[..], &mut output).unwrap();
        assert_eq!((sent, received), (200_000, 200_000));
        assert_eq!(far.join().unwrap(), 200_000);
        assert!(output.iter().rev().eq(input.iter()));
    }

    /// A bridge whose input ends before any byte (a login made ahead that no stream
    /// needed) never connects: the far end's door sees nothing of it.
    #[test]
    fn an_unused_bridge_never_connects() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut output = Vec::new();
        assert_eq!(bridge(at, &b""[..], &mut output).unwrap(), (0, 0));
        assert!(listener.accept().is_err(), "no connection was made");
    }

    #[test]
    fn the_target_line_is_read_alone() {
        let mut input: &[u8] = b"10.0.0.2:5000\nTLS bytes";
        assert_eq!(
            read_target(&mut input).unwrap(),
            "10.0.0.2:5000".parse().unwrap()
        );
        assert_eq!(input, b"TLS bytes");
        let mut v6: &[u8] = b"[fd00::2]:7\n";
        assert!(read_target(&mut v6).is_ok());
        for bad in [&b"10.0.0.2:5000"[..], b"nonsense\n", &[b'1'; 100]] {
            assert!(read_target(&mut &bad[..]).is_err());
        }
    }
}
