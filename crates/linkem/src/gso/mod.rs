//! Offload super-packets as the TUN device hands them over: the `virtio_net_hdr` in front,
//! how many wire segments a packet stands for, and how to cut out a run of consecutive
//! segments as a packet of its own (fixing IP length, ID and checksum, TCP sequence number
//! and flags, UDP length, and the partial L4 checksum). No I/O; every offset is checked
//! against the buffer, so any byte string is safe to pass in.

/// Length of the legacy virtio header on every packet.
pub const VNET_HDR_LEN: usize = 10;

const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// `struct virtio_net_hdr` (little-endian fields, as TUN uses on x86 and arm).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*`.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`, possibly with the ECN bit.
    pub gso_type: u8,
    /// Length of the headers to replicate in every segment.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksum computation starts (offset in the IP packet).
    pub csum_start: u16,
    /// Where, from `csum_start`, the checksum goes.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads the header at the front of `buf`.
    pub fn parse(buf: &[u8]) -> Option<VnetHdr> {
        let b = buf.get(..VNET_HDR_LEN)?;
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// Writes the header into the first 10 bytes of `out`.
    pub fn write(&self, out: &mut [u8]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }
}

/// The transport of a splittable super-packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TCP segmentation offload.
    Tcp,
    /// UDP segmentation offload (one datagram per segment).
    Udp,
}

/// What a packet read from the TUN device stands for on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Wire segments this packet becomes (>= 1).
    pub segments: u32,
    /// IP + transport header bytes repeated in every segment (0 when not splittable).
    pub headers_len: usize,
    /// Payload bytes per segment (the last may be shorter).
    pub segment_payload: usize,
    /// Total payload bytes after the headers.
    pub payload_len: usize,
    /// Offset of the transport header in the IP packet.
    pub l4_offset: usize,
    /// Splittable TCP/UDP super-packet, or `None` (forwarded whole).
    pub transport: Option<Transport>,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
}

impl Layout {
    /// Analyses `pkt` (virtio header + IP packet). Never fails: what it cannot parse counts
    /// as one unsplittable segment of the whole packet.
    pub fn of(pkt: &[u8]) -> Layout {
        let whole = Layout {
            segments: 1,
            headers_len: 0,
            segment_payload: pkt.len().saturating_sub(VNET_HDR_LEN),
            payload_len: pkt.len().saturating_sub(VNET_HDR_LEN),
            l4_offset: 0,
            transport: None,
            ipv6: false,
        };
        let Some(hdr) = VnetHdr::parse(pkt) else {
            return whole;
        };
        let gso = hdr.gso_type & !GSO_ECN;
        if gso == GSO_NONE || hdr.gso_size == 0 {
            return whole;
        }
        parse_super(&pkt[VNET_HDR_LEN..], gso, hdr.gso_size as usize).unwrap_or(whole)
    }

    /// Bytes segment `i` occupies on the wire (its IP packet length).
    pub fn segment_wire_len(&self, i: u32) -> usize {
        if self.transport.is_none() {
            return self.payload_len;
        }
        let start = i as usize * self.segment_payload;
        let len = self
            .segment_payload
            .min(self.payload_len.saturating_sub(start));
        self.headers_len + len
    }
}

fn parse_super(ip: &[u8], gso: u8, gso_size: usize) -> Option<Layout> {
    let version = ip.first()? >> 4;
    let (ipv6, l4_offset, proto) = match version {
        4 => {
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let total = u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]) as usize;
            if ihl < 20 || total != ip.len() {
                return None;
            }
            (false, ihl, *ip.get(9)?)
        }
        6 => {
            let payload = u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]) as usize;
            if payload + 40 != ip.len() {
                return None;
            }
            (true, 40, *ip.get(6)?)
        }
        _ => return None,
    };
    let (transport, l4_len) = match (gso, proto) {
        (GSO_TCPV4, PROTO_TCP) if !ipv6 => (Transport::Tcp, tcp_header_len(ip, l4_offset)?),
        (GSO_TCPV6, PROTO_TCP) if ipv6 => (Transport::Tcp, tcp_header_len(ip, l4_offset)?),
        (GSO_UDP_L4, PROTO_UDP) => (Transport::Udp, 8),
        _ => return None,
    };
    let headers_len = l4_offset + l4_len;
    if headers_len > ip.len() {
        return None;
    }
    let payload_len = ip.len() - headers_len;
    let segments = payload_len.div_ceil(gso_size).max(1);
    Some(Layout {
        segments: u32::try_from(segments).ok()?,
        headers_len,
        segment_payload: gso_size,
        payload_len,
        l4_offset,
        transport: Some(transport),
        ipv6,
    })
}

fn tcp_header_len(ip: &[u8], l4: usize) -> Option<usize> {
    let doff = (*ip.get(l4 + 12)? >> 4) as usize * 4;
    (doff >= 20).then_some(doff)
}

/// Appends to `out` a packet (virtio header + IP packet) made of segments
/// `first .. first + count` of `pkt`, whose layout is `layout`. Returns false (and leaves
/// `out` unchanged) when the packet is not splittable or the range is out of bounds.
pub fn cut_run(pkt: &[u8], layout: &Layout, first: u32, count: u32, out: &mut Vec<u8>) -> bool {
    let Some(transport) = layout.transport else {
        return false;
    };
    let Some(orig) = VnetHdr::parse(pkt) else {
        return false;
    };
    let in_range = first
        .checked_add(count)
        .is_some_and(|end| end <= layout.segments);
    if count == 0 || !in_range {
        return false;
    }
    let ip = &pkt[VNET_HDR_LEN..];
    let h = layout.headers_len;
    let start = first as usize * layout.segment_payload;
    let end = (start + count as usize * layout.segment_payload).min(layout.payload_len);
    if h > ip.len() || h + end > ip.len() || start >= end {
        return false;
    }
    let base = out.len();
    out.extend_from_slice(&[0; VNET_HDR_LEN]);
    out.extend_from_slice(&ip[..h]);
    out.extend_from_slice(&ip[h + start..h + end]);
    let run_len = h + end - start;
    let last = first + count == layout.segments;
    let hdr = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if count > 1 { orig.gso_type } else { GSO_NONE },
        hdr_len: if count > 1 { h as u16 } else { 0 },
        gso_size: if count > 1 {
            layout.segment_payload as u16
        } else {
            0
        },
        csum_start: layout.l4_offset as u16,
        csum_offset: match transport {
            Transport::Tcp => 16,
            Transport::Udp => 6,
        },
    };
    let o = &mut out[base..];
    hdr.write(o);
    let ip = &mut o[VNET_HDR_LEN..];
    let l4 = layout.l4_offset;
    let l4_len = run_len - l4;
    if layout.ipv6 {
        ip[4..6].copy_from_slice(&((run_len - 40) as u16).to_be_bytes());
    } else {
        ip[2..4].copy_from_slice(&(run_len as u16).to_be_bytes());
        let id = u16::from_be_bytes([ip[4], ip[5]]).wrapping_add(first as u16);
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        ip[10..12].copy_from_slice(&[0, 0]);
        let sum = !fold(sum_be16(&ip[..l4], 0));
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    let proto = match transport {
        Transport::Tcp => {
            let seq = u32::from_be_bytes([ip[l4 + 4], ip[l4 + 5], ip[l4 + 6], ip[l4 + 7]])
                .wrapping_add(start as u32);
            ip[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
            if first > 0 {
                ip[l4 + 13] &= !0x80; // CWR only on the first segment
            }
            if !last {
                ip[l4 + 13] &= !(0x01 | 0x08); // FIN and PSH only on the last
            }
            PROTO_TCP
        }
        Transport::Udp => {
            ip[l4 + 4..l4 + 6].copy_from_slice(&(l4_len.min(0xffff) as u16).to_be_bytes());
            PROTO_UDP
        }
    };
    let csum_at = l4 + hdr.csum_offset as usize;
    let pseudo = pseudo_header_sum(ip, layout.ipv6, proto, l4_len);
    ip[csum_at..csum_at + 2].copy_from_slice(&fold(pseudo).to_be_bytes());
    true
}

/// Sum of the pseudo header (addresses, protocol, L4 length) as one's-complement words.
fn pseudo_header_sum(ip: &[u8], ipv6: bool, proto: u8, l4_len: usize) -> u32 {
    let addrs = if ipv6 { &ip[8..40] } else { &ip[12..20] };
    let mut sum = sum_be16(addrs, 0);
    sum += proto as u32;
    sum += (l4_len as u32) >> 16;
    sum += (l4_len as u32) & 0xffff;
    sum
}

fn sum_be16(data: &[u8], mut sum: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
        sum = (sum & 0xffff) + (sum >> 16);
    }
    if let [b] = chunks.remainder() {
        sum += (*b as u32) << 8;
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Full Internet checksum of `data` (for tests and for callers that need one).
pub fn internet_checksum(data: &[u8]) -> u16 {
    !fold(sum_be16(data, 0))
}

#[cfg(test)]
mod tests;
