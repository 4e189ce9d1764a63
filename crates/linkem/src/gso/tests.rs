//! Unit and property tests of super-packet analysis and splitting.

use super::*;
use proptest::prelude::*;

fn tcp_super(ipv6: bool, payload: usize, mss: u16, flags: u8) -> Vec<u8> {
    let mut p = vec![0u8; VNET_HDR_LEN];
    let l4 = if ipv6 { 40 } else { 20 };
    let total = l4 + 32 + payload;
    VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if ipv6 { GSO_TCPV6 } else { GSO_TCPV4 },
        hdr_len: (l4 + 32) as u16,
        gso_size: mss,
        csum_start: l4 as u16,
        csum_offset: 16,
    }
    .write(&mut p);
    let mut ip = vec![0u8; total];
    if ipv6 {
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&((total - 40) as u16).to_be_bytes());
        ip[6] = PROTO_TCP;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&[0xfd, 0, 0x6c, 0x68, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        ip[24..40].copy_from_slice(&[0xfd, 0, 0x6c, 0x68, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&0xfffeu16.to_be_bytes());
        ip[8] = 64;
        ip[9] = PROTO_TCP;
        ip[12..16].copy_from_slice(&[10, 99, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 99, 0, 2]);
    }
    ip[l4 + 4..l4 + 8].copy_from_slice(&0xffff_ff00u32.to_be_bytes());
    ip[l4 + 12] = 8 << 4;
    ip[l4 + 13] = flags;
    for (i, b) in ip[l4 + 32..].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    p.extend_from_slice(&ip);
    p
}

/// Completes the partial checksum as a NIC would and checks the segment verifies.
fn l4_checksum_ok(pkt: &[u8]) -> bool {
    let hdr = VnetHdr::parse(pkt).unwrap();
    let mut ip = pkt[VNET_HDR_LEN..].to_vec();
    let start = hdr.csum_start as usize;
    let at = start + hdr.csum_offset as usize;
    let partial = u16::from_be_bytes([ip[at], ip[at + 1]]);
    ip[at..at + 2].copy_from_slice(&[0, 0]);
    let full = !fold(sum_be16(&ip[start..], partial as u32));
    ip[at..at + 2].copy_from_slice(&full.to_be_bytes());
    let ipv6 = ip[0] >> 4 == 6;
    let proto = if ipv6 { ip[6] } else { ip[9] };
    let pseudo = pseudo_header_sum(&ip, ipv6, proto, ip.len() - start);
    fold(sum_be16(&ip[start..], pseudo)) == 0xffff
}

#[test]
fn counts_segments_of_a_tcp_super_packet() {
    let p = tcp_super(false, 2500, 1000, 0x18);
    let l = Layout::of(&p);
    assert_eq!(l.transport, Some(Transport::Tcp));
    assert_eq!((l.segments, l.headers_len, l.payload_len), (3, 52, 2500));
    assert_eq!(l.segment_wire_len(0), 1052);
    assert_eq!(l.segment_wire_len(2), 552);
}

#[test]
fn plain_packet_is_one_segment() {
    let mut p = tcp_super(false, 100, 1000, 0x10);
    p[1] = GSO_NONE;
    let l = Layout::of(&p);
    assert_eq!((l.segments, l.transport), (1, None));
    assert_eq!(l.segment_wire_len(0), p.len() - VNET_HDR_LEN);
    assert!(!cut_run(&p, &l, 0, 1, &mut Vec::new()));
}

#[test]
fn cuts_runs_with_fixed_headers_v4() {
    let p = tcp_super(false, 2500, 1000, 0x18 | 0x80 | 0x01);
    let l = Layout::of(&p);
    let mut a = Vec::new();
    assert!(cut_run(&p, &l, 0, 1, &mut a));
    let mut b = Vec::new();
    assert!(cut_run(&p, &l, 1, 2, &mut b));
    // first run: one segment, no GSO, CWR kept, PSH/FIN cleared
    let ha = VnetHdr::parse(&a).unwrap();
    assert_eq!((ha.gso_type, ha.gso_size), (GSO_NONE, 0));
    let ia = &a[VNET_HDR_LEN..];
    assert_eq!(ia.len(), 1052);
    assert_eq!(u16::from_be_bytes([ia[2], ia[3]]), 1052);
    assert_eq!(ia[20 + 13], 0x10 | 0x80);
    assert_eq!(internet_checksum(&ia[..20]), 0);
    assert!(l4_checksum_ok(&a));
    // second run: two segments, GSO kept, seq advanced, ID + 1 (wrapping), CWR cleared
    let hb = VnetHdr::parse(&b).unwrap();
    assert_eq!(
        (hb.gso_type, hb.gso_size, hb.hdr_len),
        (GSO_TCPV4, 1000, 52)
    );
    let ib = &b[VNET_HDR_LEN..];
    assert_eq!(ib.len(), 52 + 1500);
    assert_eq!(u16::from_be_bytes([ib[4], ib[5]]), 0xffff);
    assert_eq!(
        u32::from_be_bytes([ib[24], ib[25], ib[26], ib[27]]),
        0xffff_ff00u32.wrapping_add(1000)
    );
    assert_eq!(ib[20 + 13], 0x18 | 0x01);
    assert_eq!(internet_checksum(&ib[..20]), 0);
    assert!(l4_checksum_ok(&b));
    assert_eq!(&ib[52..], &p[VNET_HDR_LEN + 52 + 1000..]);
    assert_eq!(Layout::of(&b).segments, 2);
}

#[test]
fn cuts_runs_v6() {
    let p = tcp_super(true, 3000, 1000, 0x10);
    let l = Layout::of(&p);
    assert!(l.ipv6);
    let mut r = Vec::new();
    assert!(cut_run(&p, &l, 2, 1, &mut r));
    let ip = &r[VNET_HDR_LEN..];
    assert_eq!(u16::from_be_bytes([ip[4], ip[5]]) as usize, ip.len() - 40);
    assert!(l4_checksum_ok(&r));
}

#[test]
fn rejects_out_of_range_runs() {
    let p = tcp_super(false, 2500, 1000, 0x10);
    let l = Layout::of(&p);
    let mut out = Vec::new();
    assert!(!cut_run(&p, &l, 2, 2, &mut out));
    assert!(!cut_run(&p, &l, 0, 0, &mut out));
    assert!(!cut_run(&p, &l, u32::MAX, 2, &mut out));
    assert!(out.is_empty());
}

proptest! {
    #[test]
    fn any_bytes_are_safe(bytes in proptest::collection::vec(any::<u8>(), 0..300), first in 0u32..5, count in 0u32..5) {
        let l = Layout::of(&bytes);
        prop_assert!(l.segments >= 1);
        let mut out = Vec::new();
        let _ = cut_run(&bytes, &l, first, count, &mut out);
    }

    #[test]
    fn runs_reassemble_the_payload(payload in 1usize..9000, mss in 1u16..3000, cut in 0u32..8) {
        let p = tcp_super(false, payload, mss, 0x10);
        let l = Layout::of(&p);
        prop_assert_eq!(l.segments as usize, payload.div_ceil(mss as usize));
        let cut = cut.min(l.segments - 1);
        let mut joined = Vec::new();
        for (first, count) in [(0, cut), (cut, l.segments - cut)] {
            if count == 0 { continue; }
            let mut r = Vec::new();
            prop_assert!(cut_run(&p, &l, first, count, &mut r));
            prop_assert!(l4_checksum_ok(&r));
            joined.extend_from_slice(&r[VNET_HDR_LEN + 52..]);
        }
        prop_assert_eq!(&joined[..], &p[VNET_HDR_LEN + 52..]);
    }
}
