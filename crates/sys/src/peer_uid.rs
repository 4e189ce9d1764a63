//! Who is at the other end of a loopback TCP connection: the user id of the process's
//! socket, from the kernel's table of TCP sockets (`/proc/net/tcp`). A listener on the
//! loopback that must serve only its own user (the relay of a copy through ssh) checks
//! each connection with it; any process on the host can reach a loopback port.

use std::io;
use std::net::SocketAddrV4;

/// The user id owning the socket whose local address is `peer` and remote address is
/// `local` (the accepted connection seen from the other side), if the table lists it.
pub fn loopback_peer_uid(peer: SocketAddrV4, local: SocketAddrV4) -> io::Result<Option<u32>> {
    let table = std::fs::read_to_string("/proc/net/tcp")?;
    Ok(find_uid(&table, peer, local))
}

/// `ADDR:PORT` as the table writes it: the IPv4 address as a 32-bit number in hex (in
/// the host's byte order, as the kernel prints it), the port in hex.
fn table_form(a: SocketAddrV4) -> String {
    let ip = u32::from_ne_bytes(a.ip().octets());
    format!("{ip:08X}:{:04X}", a.port())
}

/// The uid column of the row whose local and remote addresses are `peer` and `local`.
fn find_uid(table: &str, peer: SocketAddrV4, local: SocketAddrV4) -> Option<u32> {
    let (want_local, want_remote) = (table_form(peer), table_form(local));
    table.lines().skip(1).find_map(|row| {
        let cols: Vec<&str> = row.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid ...
        if cols.len() > 7 && cols[1] == want_local && cols[2] == want_remote {
            cols[7].parse().ok()
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener, TcpStream};

    #[test]
    fn a_row_is_found_by_both_addresses() {
        let peer = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0x9c40);
        let local = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0x1f90);
        let (p, l) = (table_form(peer), table_form(local));
        let table = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             \x20  0: {l} 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n\
             \x20  1: {p} {l} 01 00000000:00000000 00:00000000 00000000  1000        0 2 1\n"
        );
        assert_eq!(find_uid(&table, peer, local), Some(1000));
        assert_eq!(find_uid(&table, local, peer), None);
    }

    /// A real connection on the loopback is ours.
    #[test]
    fn our_own_connection_is_ours() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, peer) = listener.accept().unwrap();
        let (std::net::SocketAddr::V4(peer), std::net::SocketAddr::V4(local)) =
            (peer, conn.local_addr().unwrap())
        else {
            panic!("not IPv4");
        };
        let me = unsafe { libc::geteuid() };
        assert_eq!(loopback_peer_uid(peer, local).unwrap(), Some(me));
    }
}
