//! TCP_INFO (and BBR's TCP_CC_INFO): what the kernel knows about one connection —
//! window, RTT, retransmits, delivery and pacing rates, and the time it spent limited by
//! the receiver's window, the send buffer or nothing (busy).

use std::io;
use std::os::fd::AsRawFd;

/// The kernel's `struct tcp_info` up to `tcpi_total_rto_time` (Linux 6.7). Older kernels
/// fill a prefix; [`TcpInfo::len`] says how much.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
    rcv_wnd: u32,
    rehash: u32,
    total_rto: u16,
    total_rto_recoveries: u16,
    total_rto_time: u32,
}

/// One snapshot of a connection's TCP_INFO, in plain units.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpInfo {
    /// Bytes of the structure the kernel filled.
    pub len: usize,
    /// Sender's maximum segment size, bytes.
    pub snd_mss: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Slow-start threshold, segments.
    pub snd_ssthresh: u32,
    /// Smoothed RTT, microseconds.
    pub rtt_us: u32,
    /// RTT variance, microseconds.
    pub rttvar_us: u32,
    /// Smallest RTT seen, microseconds.
    pub min_rtt_us: u32,
    /// Receiver's RTT estimate, microseconds.
    pub rcv_rtt_us: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Segments in flight.
    pub unacked: u32,
    /// Segments the peer acknowledged selectively (SACK) above the cumulative ACK.
    pub sacked: u32,
    /// The peer's segment size as this end estimates it (the largest payload seen), bytes.
    pub rcv_mss: u32,
    /// Data segments received, duplicates and out-of-order ones included (wraps at 2^32).
    pub data_segs_in: u32,
    /// Segments received, pure acks included (wraps at 2^32): on a sender, about the
    /// acks, each of which moves the smoothed RTT an eighth of the way to its sample.
    pub segs_in: u32,
    /// Segments received out of order, over the connection's life (wraps at 2^32);
    /// `None` on kernels before 5.4, which do not count them.
    pub rcv_ooopack: Option<u32>,
    /// Path MTU, bytes.
    pub pmtu: u32,
    /// Pacing rate, bytes/s.
    pub pacing_rate: u64,
    /// Pacing-rate cap, bytes/s (u64::MAX when none).
    pub max_pacing_rate: u64,
    /// Bytes acknowledged by the peer. On the connecting side the SYN counts as one byte,
    /// on the accepting side it does not: take differences from a baseline.
    pub bytes_acked: u64,
    /// Bytes received from the peer.
    pub bytes_received: u64,
    /// Bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Bytes retransmitted.
    pub bytes_retrans: u64,
    /// Latest delivery-rate sample, bytes/s.
    pub delivery_rate: u64,
    /// Whether that sample was limited by the application.
    pub delivery_rate_app_limited: bool,
    /// Microseconds the connection had data in flight.
    pub busy_time_us: u64,
    /// Microseconds of `busy_time_us` limited by the receiver's window.
    pub rwnd_limited_us: u64,
    /// Microseconds of `busy_time_us` limited by the send buffer.
    pub sndbuf_limited_us: u64,
    /// Bytes written by the application but not yet sent.
    pub notsent_bytes: u32,
    /// Peer's advertised window after scaling, bytes (0 on kernels before 5.4... 6.x).
    pub snd_wnd: u32,
    /// Our advertised window after scaling, bytes.
    pub rcv_wnd: u32,
    /// Send window scale, receive window scale.
    pub wscale: (u8, u8),
}

impl TcpInfo {
    /// Congestion window in bytes.
    pub fn cwnd_bytes(&self) -> u64 {
        self.snd_cwnd as u64 * self.snd_mss as u64
    }
}

/// Reads TCP_INFO of a TCP socket.
pub fn tcp_info(sock: &impl AsRawFd) -> io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: raw is a plain-old-data struct valid for `len` bytes of writes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo {
        len: len as usize,
        snd_mss: raw.snd_mss,
        snd_cwnd: raw.snd_cwnd,
        snd_ssthresh: raw.snd_ssthresh,
        rtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        min_rtt_us: raw.min_rtt,
        rcv_rtt_us: raw.rcv_rtt,
        total_retrans: raw.total_retrans,
        unacked: raw.unacked,
        sacked: raw.sacked,
        rcv_mss: raw.rcv_mss,
        data_segs_in: raw.data_segs_in,
        segs_in: raw.segs_in,
        rcv_ooopack: (len as usize >= std::mem::offset_of!(RawTcpInfo, rcv_ooopack) + 4)
            .then_some(raw.rcv_ooopack),
        pmtu: raw.pmtu,
        pacing_rate: raw.pacing_rate,
        max_pacing_rate: raw.max_pacing_rate,
        bytes_acked: raw.bytes_acked,
        bytes_received: raw.bytes_received,
        bytes_sent: raw.bytes_sent,
        bytes_retrans: raw.bytes_retrans,
        delivery_rate: raw.delivery_rate,
        delivery_rate_app_limited: raw.flags & 1 != 0,
        busy_time_us: raw.busy_time,
        rwnd_limited_us: raw.rwnd_limited,
        sndbuf_limited_us: raw.sndbuf_limited,
        notsent_bytes: raw.notsent_bytes,
        snd_wnd: raw.snd_wnd,
        rcv_wnd: raw.rcv_wnd,
        wscale: (raw.wscale & 0x0f, raw.wscale >> 4),
    })
}

/// BBR's own model of the path (TCP_CC_INFO while BBR runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BbrInfo {
    /// Estimated bottleneck bandwidth, bytes/s.
    pub bandwidth: u64,
    /// Estimated minimum RTT, microseconds.
    pub min_rtt_us: u32,
    /// Pacing gain x 256.
    pub pacing_gain: u32,
    /// Cwnd gain x 256.
    pub cwnd_gain: u32,
}

/// Reads BBR's bandwidth and RTT estimates; `None` when the socket does not run BBR.
pub fn bbr_info(sock: &impl AsRawFd) -> Option<BbrInfo> {
    let mut raw = [0u32; 5];
    let mut len = std::mem::size_of_val(&raw) as libc::socklen_t;
    // SAFETY: raw is valid for `len` bytes of writes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CC_INFO,
            raw.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < std::mem::size_of_val(&raw) {
        return None;
    }
    if crate::socket::congestion(sock).ok()?.as_str() != "bbr" {
        return None;
    }
    Some(BbrInfo {
        bandwidth: (raw[1] as u64) << 32 | raw[0] as u64,
        min_rtt_us: raw[2],
        pacing_gain: raw[3],
        cwnd_gain: raw[4],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn counts_bytes_moved_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let base = tcp_info(&c).unwrap().bytes_acked;
        c.write_all(&[7u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).unwrap();
        c.flush().unwrap();
        let rx = tcp_info(&s).unwrap();
        assert_eq!(rx.bytes_received, 100_000);
        // The sender's ACK may still be in flight; wait until the count settles.
        let mut tx = tcp_info(&c).unwrap();
        for _ in 0..100 {
            if tx.bytes_acked - base >= 100_000 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            tx = tcp_info(&c).unwrap();
        }
        assert_eq!(tx.bytes_acked - base, 100_000);
        // The accepting side's counter starts the same way (its SYN-ACK counts one).
        let sbase = tcp_info(&s).unwrap().bytes_acked;
        s.write_all(&[1u8; 1000]).unwrap();
        let mut one = vec![0u8; 1000];
        c.read_exact(&mut one).unwrap();
        let mut stx = tcp_info(&s).unwrap();
        for _ in 0..100 {
            if stx.bytes_acked - sbase >= 1000 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            stx = tcp_info(&s).unwrap();
        }
        assert_eq!(stx.bytes_acked - sbase, 1000);
        assert!(tx.snd_mss > 0 && tx.snd_cwnd > 0 && tx.len >= 200);
        // The receiver counted the data segments and saw nothing out of order.
        assert!(rx.data_segs_in > 0 && rx.rcv_mss > 0, "{rx:?}");
        assert!(rx.rcv_ooopack.is_none_or(|n| n == 0), "{rx:?}");
        assert_eq!(tx.sacked, 0);
    }
}
