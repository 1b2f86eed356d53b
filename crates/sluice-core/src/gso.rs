//! Generic segmentation offload: packets that stand for several wire packets.
//!
//! A device with offloads (a TUN device with `TUN_F_TSO4`, a NIC with TSO)
//! hands the stack's TCP data over as *super-packets*: one copy of the IP and
//! TCP headers followed by up to 64 KiB of payload, with `gso_size` (the
//! MSS) saying where the wire packets' boundaries will be. The kernel's
//! qdiscs see these packets whole, and account for them as the wire will:
//!
//! - `qdisc_pkt_len_init` (net/core/dev.c) counts every segment's headers
//!   in the length: `len = skb->len + (gso_segs - 1) * hdr_len`, where
//!   `hdr_len` is the link, network and transport headers. For packets from
//!   an untrusted source (`SKB_GSO_DODGY`: TUN, virtio) `gso_segs` is
//!   recomputed as `ceil(payload / gso_size)`. [`init`] does both.
//! - `bstats_update` (include/net/sch_generic.h) counts `gso_segs` packets
//!   per GSO packet, so `tc -s` shows wire packets ([`Packet::segs`]).
//! - A qdisc that must see wire-size packets segments in software
//!   (`skb_gso_segment`): tbf when a GSO packet exceeds its `max_size`
//!   (`tbf_segment`), netem before it corrupts one (`netem_segment`).
//!   [`segment`] does what `tcp_gso_segment`/`__udp_gso_segment` and
//!   `inet_gso_segment`/`ipv6_gso_segment` do: the payload cut into
//!   `gso_size` pieces, each behind a copy of the headers with the IP total
//!   length (IPv4: also the ID, +1 per segment, and the header checksum) and
//!   the TCP sequence number fixed, FIN and PSH only on the last segment and
//!   CWR only on the first, and the transport checksum recomputed — or, for
//!   a packet whose checksum is offloaded too (`CHECKSUM_PARTIAL`), left to
//!   the device with the pseudo-header sum in its field, as the kernel does
//!   when the device can checksum.
//! - [`checksum_help`] is `skb_checksum_help`: compute an offloaded
//!   checksum in software (netem does before it corrupts a packet).
//!
//! `data` starts at the network header (IPv4 or IPv6); the link-layer
//! bytes a packet's `len` counts (`len - data.len()`) are counted again for
//! every segment. A packet may also stop after its headers, its IP length
//! counting payload bytes that are not there (the simulator's packets carry
//! no payload): its pieces then stop after theirs too, their lengths and
//! checksums accounting for zero bytes, which add nothing to a checksum.
//! [`offload_checksum`] makes such a packet what a TCP sender hands a
//! device with TSO: its checksum left to the device (`CHECKSUM_PARTIAL`).

use crate::packet::{CsumPartial, Gso, GsoKind, Packet, Skb};

/// Why a packet cannot be treated as a GSO packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GsoError {
    /// The headers are cut short or inconsistent.
    #[error("truncated or inconsistent headers")]
    Malformed,
    /// Not the transport protocol the GSO type names, or not IPv4/IPv6.
    #[error("GSO type does not match the packet")]
    WrongProtocol,
    /// No payload behind the headers, or a zero segment size.
    #[error("nothing to segment")]
    Empty,
}

const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// The transport header's offset and protocol: after the IPv4 header, or
/// after IPv6's header and its hop-by-hop, routing and destination-options
/// extension headers.
pub fn transport_offset(data: &[u8]) -> Option<(usize, u8)> {
    match data.first()? >> 4 {
        4 => {
            let ihl = (data[0] & 0xf) as usize * 4;
            (ihl >= 20 && data.len() >= ihl).then(|| (ihl, data[9]))
        }
        6 => {
            let (mut off, mut next) = (40, *data.get(6)?);
            while matches!(next, 0 | 43 | 60) {
                let ext = data.get(off..off + 2)?;
                next = ext[0];
                off += (ext[1] as usize + 1) * 8;
            }
            (data.len() >= off).then_some((off, next))
        }
        _ => None,
    }
}

/// The headers every segment repeats (network and transport), and the
/// transport header's offset: `hdr_len` of `qdisc_pkt_len_init` without
/// the link layer.
pub fn header_len(data: &[u8], kind: GsoKind) -> Result<(usize, usize), GsoError> {
    let (thoff, proto) = transport_offset(data).ok_or(GsoError::Malformed)?;
    let want_v4 = matches!(kind, GsoKind::TcpV4);
    let v4 = data[0] >> 4 == 4;
    match kind {
        GsoKind::TcpV4 | GsoKind::TcpV6 => {
            if proto != IPPROTO_TCP || want_v4 != v4 {
                return Err(GsoError::WrongProtocol);
            }
            let doff = *data.get(thoff + 12).ok_or(GsoError::Malformed)? as usize >> 4;
            let hdr = thoff + doff * 4;
            if doff < 5 || data.len() < hdr {
                return Err(GsoError::Malformed);
            }
            Ok((hdr, thoff))
        }
        GsoKind::UdpL4 => {
            if proto != IPPROTO_UDP {
                return Err(GsoError::WrongProtocol);
            }
            let hdr = thoff + 8;
            if data.len() < hdr {
                return Err(GsoError::Malformed);
            }
            Ok((hdr, thoff))
        }
    }
}

/// `qdisc_pkt_len_init` for a packet a device handed over as a GSO packet
/// of `size`-byte segments: count its segments from its payload (the
/// device is not trusted, as with `SKB_GSO_DODGY`) and add every further
/// segment's headers, link layer included, to `len`.
pub fn init(pkt: &mut Packet, size: u16, kind: GsoKind, ecn: bool) -> Result<(), GsoError> {
    if size == 0 {
        return Err(GsoError::Empty);
    }
    let (hdr, _) = header_len(&pkt.data, kind)?;
    let payload = pkt.data.len() - hdr;
    if payload == 0 {
        return Err(GsoError::Empty);
    }
    let segs = payload.div_ceil(size as usize);
    let l2 = pkt.len.saturating_sub(pkt.data.len() as u32);
    pkt.len += (segs as u32 - 1) * (hdr as u32 + l2);
    pkt.gso = Some(Gso {
        size,
        // At most 65535 payload bytes behind at least 28 bytes of headers.
        segs: segs.min(u16::MAX as usize) as u16,
        kind,
        ecn,
    });
    Ok(())
}

/// The length of the packet's longest segment, link layer included
/// (`skb_gso_mac_seglen`); its `len` for a packet that is not GSO.
pub fn seg_len(pkt: &Packet) -> u32 {
    let Some(g) = pkt.gso else {
        return pkt.len;
    };
    match header_len(&pkt.data, g.kind) {
        Ok((hdr, _)) => l2_len(pkt, hdr) + hdr as u32 + g.size as u32,
        Err(_) => pkt.len,
    }
}

/// The link-layer bytes counted in each segment's length.
fn l2_len(pkt: &Packet, hdr: usize) -> u32 {
    let segs = pkt.segs();
    let real = pkt.skb_len.unwrap_or(pkt.len);
    let headers = ip_len(&pkt.data) as u32 + (segs - 1) * hdr as u32;
    real.saturating_sub(headers) / segs
}

/// The IP packet's length: the bytes present, or more where the header's
/// length field counts payload that is not carried.
fn ip_len(data: &[u8]) -> usize {
    let field = match data.first().map(|b| b >> 4) {
        Some(4) if data.len() >= 4 => u16::from_be_bytes([data[2], data[3]]) as usize,
        Some(6) if data.len() >= 6 => 40 + u16::from_be_bytes([data[4], data[5]]) as usize,
        _ => 0,
    };
    field.max(data.len())
}

/// Leave a TCP GSO packet's checksum to the device, as the kernel's TCP
/// does for a device with TSO (`CHECKSUM_PARTIAL`): the field holds the
/// pseudo-header sum, and [`split`] may cut the packet into pieces of
/// several segments.
pub fn offload_checksum(pkt: &mut Packet) -> Result<(), GsoError> {
    let kind = pkt.gso.map_or(GsoKind::TcpV4, |g| g.kind);
    let (_, thoff) = header_len(&pkt.data, kind)?;
    let tlen = ip_len(&pkt.data) - thoff;
    let check = fold(pseudo_header_sum(&pkt.data, thoff, tlen));
    pkt.data[thoff + 16..thoff + 18].copy_from_slice(&check.to_be_bytes());
    pkt.csum_partial = Some(CsumPartial {
        start: thoff as u16,
        offset: 16,
    });
    Ok(())
}

/// `skb_gso_segment`: the wire packets a GSO packet stands for, in order.
/// A packet that is not GSO comes back alone. Each segment's `len` is its
/// own length (the kernel's `pkt_len = skb->len`: no size table applied).
pub fn segment(pkt: &Packet) -> Result<Vec<Packet>, GsoError> {
    split(pkt, 1)
}

/// Cut a GSO packet into smaller ones of at most `per_piece` segments
/// each, in order: what [`segment`] does for one segment per piece, with
/// the pieces of several segments still GSO packets (their checksums left
/// to the device, as the original's must be; one that was computed already
/// cannot be split in pieces, only segmented). A packet that is not GSO, or
/// has no more segments than `per_piece`, comes back alone.
pub fn split(pkt: &Packet, per_piece: u16) -> Result<Vec<Packet>, GsoError> {
    let Some(g) = pkt.gso else {
        return Ok(vec![pkt.clone()]);
    };
    if per_piece >= g.segs {
        return Ok(vec![pkt.clone()]);
    }
    let k = if pkt.csum_partial.is_some() {
        per_piece.max(1) as usize
    } else {
        1
    };
    let (hdr, thoff) = header_len(&pkt.data, g.kind)?;
    let l2 = l2_len(pkt, hdr);
    let size = g.size.max(1) as usize;
    let payload = ip_len(&pkt.data) - hdr;
    let present = &pkt.data[hdr..];
    let count = payload.div_ceil(size * k).max(1);
    let mut pieces = Vec::with_capacity(count);
    for i in 0..count {
        let from = i * size * k;
        let chunk_len = (size * k).min(payload - from);
        let chunk = present
            .get(from..(from + chunk_len).min(present.len()))
            .unwrap_or(&[]);
        let mut data = Vec::with_capacity(hdr + chunk.len());
        data.extend_from_slice(&pkt.data[..hdr]);
        data.extend_from_slice(chunk);
        let piece_len = hdr + chunk_len;
        fix_network_header(&mut data, thoff, (i * k) as u16, piece_len);
        let (first, last) = (i == 0, i + 1 == count);
        match g.kind {
            GsoKind::TcpV4 | GsoKind::TcpV6 => {
                let seq = u32::from_be_bytes(data[thoff + 4..thoff + 8].try_into().expect("4"));
                let seq = seq.wrapping_add((i * k * size) as u32);
                data[thoff + 4..thoff + 8].copy_from_slice(&seq.to_be_bytes());
                if !last {
                    data[thoff + 13] &= !(TCP_FIN | TCP_PSH);
                }
                if !first {
                    data[thoff + 13] &= !TCP_CWR;
                }
            }
            GsoKind::UdpL4 => {
                let ulen = (piece_len - thoff) as u16;
                data[thoff + 4..thoff + 6].copy_from_slice(&ulen.to_be_bytes());
            }
        }
        let csum_at = thoff + if g.kind == GsoKind::UdpL4 { 6 } else { 16 };
        let pseudo = pseudo_header_sum(&data, thoff, piece_len - thoff);
        let check = if pkt.csum_partial.is_some() {
            fold(pseudo)
        } else {
            data[csum_at..csum_at + 2].fill(0);
            let c = !fold(sum(&data[thoff..], pseudo));
            if c == 0 && g.kind == GsoKind::UdpL4 {
                0xffff
            } else {
                c
            }
        };
        data[csum_at..csum_at + 2].copy_from_slice(&check.to_be_bytes());
        let segs = chunk_len.div_ceil(size) as u32;
        pieces.push(Packet::from(Skb {
            // Every segment's headers and link layer, as `init` counts them.
            len: piece_len as u32 + l2 + (segs - 1) * (hdr as u32 + l2),
            data,
            protocol: pkt.protocol,
            mark: pkt.mark,
            priority: pkt.priority,
            hash: pkt.hash,
            tstamp: pkt.tstamp,
            id: pkt.id,
            skb_len: None,
            gso: (segs > 1).then_some(Gso {
                segs: segs as u16,
                ecn: g.ecn && first,
                ..g
            }),
            csum_partial: pkt.csum_partial,
            pkt_type: pkt.pkt_type,
            tc_index: pkt.tc_index,
            queue_mapping: pkt.queue_mapping,
            txtime: pkt.txtime,
            cb: pkt.cb,
            skb_iif: pkt.skb_iif,
            from_ingress: pkt.from_ingress,
            redirects: pkt.redirects,
            tc_skip_classify: pkt.tc_skip_classify,
            conn: pkt.conn,
            eth: pkt.eth,
            vlan: pkt.vlan,
            vlan_inband: pkt.vlan_inband.clone(),
        }));
    }
    Ok(pieces)
}

/// The `index`th segment's IP header: its total or payload length (of
/// `len` bytes in all) and, for IPv4, the ID (the original's plus `index`)
/// and header checksum.
fn fix_network_header(data: &mut [u8], thoff: usize, index: u16, len: usize) {
    if data[0] >> 4 == 4 {
        let tot = len as u16;
        data[2..4].copy_from_slice(&tot.to_be_bytes());
        let id = u16::from_be_bytes([data[4], data[5]]).wrapping_add(index);
        data[4..6].copy_from_slice(&id.to_be_bytes());
        let ihl = (data[0] & 0xf) as usize * 4;
        data[10..12].fill(0);
        let c = !fold(sum(&data[..ihl.min(thoff)], 0));
        data[10..12].copy_from_slice(&c.to_be_bytes());
    } else {
        let plen = (len - 40) as u16;
        data[4..6].copy_from_slice(&plen.to_be_bytes());
    }
}

/// `skb_checksum_help`: compute an offloaded transport checksum now.
pub fn checksum_help(pkt: &mut Packet) -> Result<(), GsoError> {
    let Some(CsumPartial { start, offset }) = pkt.csum_partial else {
        return Ok(());
    };
    let (start, at) = (start as usize, start as usize + offset as usize);
    if at + 2 > pkt.data.len() {
        return Err(GsoError::Malformed);
    }
    // The field holds the pseudo-header sum; the sum over it and the rest
    // is the checksum's complement.
    let c = !fold(sum(&pkt.data[start..], 0));
    pkt.data[at..at + 2].copy_from_slice(&c.to_be_bytes());
    pkt.csum_partial = None;
    Ok(())
}

/// The pseudo-header sum of the `tlen`-byte transport segment at `thoff`
/// (RFC 793 / RFC 8200 §8.1).
fn pseudo_header_sum(data: &[u8], thoff: usize, tlen: usize) -> u64 {
    let tlen = tlen as u64;
    if data[0] >> 4 == 4 {
        sum(&data[12..20], data[9] as u64 + tlen)
    } else {
        let (_, proto) = transport_offset(data).unwrap_or((thoff, data[6]));
        sum(&data[8..40], proto as u64 + tlen)
    }
}

/// One's-complement sum of big-endian 16-bit words (a trailing byte padded
/// with zero), added to `init`, not yet folded.
pub fn sum(bytes: &[u8], init: u64) -> u64 {
    let mut acc = init;
    let mut words = bytes.chunks_exact(4);
    for w in &mut words {
        acc += u32::from_be_bytes(w.try_into().expect("4")) as u64;
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc + u32::from_be_bytes(tail) as u64
}

/// A checksum field updated for bytes `from` becoming `to` (16-bit words,
/// equal lengths), as RFC 1624 (eqn. 3) and the kernel's `csum_replace2/4`
/// do it: `~(~check + ~from + to)`. With `partial` the field holds an
/// uncomplemented pseudo-header sum (`CHECKSUM_PARTIAL`), updated as
/// `inet_proto_csum_replace4` does: `check + ~from + to`.
pub fn csum_replace(check: u16, from: &[u8], to: &[u8], partial: bool) -> u16 {
    let gone: u64 = from
        .chunks(2)
        .map(|w| !u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u64)
        .sum();
    let start = if partial { check } else { !check };
    let folded = fold(sum(to, start as u64 + gone));
    if partial {
        folded
    } else {
        !folded
    }
}

/// Fold a sum to 16 bits (end-around carry).
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{ETH_P_IP, ETH_P_IPV6};
    use etherparse::{Ipv4Slice, Ipv6Slice, TcpSlice, UdpSlice};

    /// An IPv4/TCP packet with `payload` bytes of data (0, 1, 2, ...),
    /// timestamps in the TCP header (32 bytes), the given flags.
    fn tcp4(payload: usize, flags: u8) -> Vec<u8> {
        let mut d = vec![0u8; 20 + 32 + payload];
        d[0] = 0x45;
        let tot = d.len() as u16;
        d[2..4].copy_from_slice(&tot.to_be_bytes());
        d[4..6].copy_from_slice(&0xfffeu16.to_be_bytes()); // wraps
        d[6] = 0x40; // DF
        d[8] = 64;
        d[9] = IPPROTO_TCP;
        d[12..16].copy_from_slice(&[10, 77, 1, 1]);
        d[16..20].copy_from_slice(&[10, 77, 1, 2]);
        let t = 20;
        d[t..t + 2].copy_from_slice(&40000u16.to_be_bytes());
        d[t + 2..t + 4].copy_from_slice(&5201u16.to_be_bytes());
        d[t + 4..t + 8].copy_from_slice(&0xffff_f000u32.to_be_bytes()); // wraps
        d[t + 8..t + 12].copy_from_slice(&77u32.to_be_bytes());
        d[t + 12] = 8 << 4;
        d[t + 13] = flags;
        d[t + 14..t + 16].copy_from_slice(&512u16.to_be_bytes());
        d[t + 20..t + 32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        for (i, b) in d[52..].iter_mut().enumerate() {
            *b = i as u8;
        }
        d
    }

    fn tcp6(payload: usize) -> Vec<u8> {
        let mut d = vec![0u8; 40 + 20 + payload];
        d[0] = 0x60;
        let plen = (20 + payload) as u16;
        d[4..6].copy_from_slice(&plen.to_be_bytes());
        d[6] = IPPROTO_TCP;
        d[7] = 64;
        d[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        d[24..40].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        d[40 + 4..40 + 8].copy_from_slice(&1000u32.to_be_bytes());
        d[40 + 12] = 5 << 4;
        d[40 + 13] = 0x18; // ACK|PSH
        for (i, b) in d[60..].iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        d
    }

    fn udp4(payload: usize) -> Vec<u8> {
        let mut d = vec![0u8; 28 + payload];
        d[0] = 0x45;
        let tot = d.len() as u16;
        d[2..4].copy_from_slice(&tot.to_be_bytes());
        d[8] = 64;
        d[9] = IPPROTO_UDP;
        d[12..16].copy_from_slice(&[10, 0, 0, 1]);
        d[16..20].copy_from_slice(&[10, 0, 0, 2]);
        d[20..22].copy_from_slice(&4433u16.to_be_bytes());
        d[22..24].copy_from_slice(&443u16.to_be_bytes());
        let ulen = (8 + payload) as u16;
        d[24..26].copy_from_slice(&ulen.to_be_bytes());
        for (i, b) in d[28..].iter_mut().enumerate() {
            *b = (i * 3) as u8;
        }
        d
    }

    /// A GSO packet as a TUN device hands it over: no link layer.
    fn gso(data: Vec<u8>, size: u16, kind: GsoKind, partial: bool) -> Packet {
        let proto = if data[0] >> 4 == 4 {
            ETH_P_IP
        } else {
            ETH_P_IPV6
        };
        let mut p = Packet::new(data.clone(), data.len() as u32, proto);
        let (hdr, thoff) = header_len(&data, kind).unwrap();
        let off = if kind == GsoKind::UdpL4 { 6 } else { 16 };
        let at = thoff + off;
        if partial {
            p.csum_partial = Some(CsumPartial {
                start: thoff as u16,
                offset: off as u16,
            });
            let f = fold(pseudo_header_sum(&p.data, thoff, p.data.len() - thoff));
            p.data[at..at + 2].copy_from_slice(&f.to_be_bytes());
        }
        init(&mut p, size, kind, false).unwrap();
        assert!(hdr > thoff);
        p
    }

    fn tcp_of(seg: &Packet) -> (u32, u8, Vec<u8>) {
        let ip = Ipv4Slice::from_slice(&seg.data).expect("ipv4 header and length");
        let tcp = TcpSlice::from_slice(ip.payload().payload).expect("tcp");
        let mut flags = 0;
        for (set, bit) in [(tcp.fin(), 1), (tcp.psh(), 8), (tcp.cwr(), 0x80)] {
            if set {
                flags |= bit;
            }
        }
        (tcp.sequence_number(), flags, tcp.payload().to_vec())
    }

    #[test]
    fn the_length_counts_every_segments_headers_as_qdisc_pkt_len_init() {
        // 10 000 bytes of data in 1448-byte segments: 7 segments, six more
        // copies of the 52 header bytes.
        let p = gso(tcp4(10_000, 0x18), 1448, GsoKind::TcpV4, true);
        let g = p.gso.unwrap();
        assert_eq!((g.segs, p.segs()), (7, 7));
        assert_eq!(p.len, 52 + 10_000 + 6 * 52);
        assert_eq!(seg_len(&p), 1500);
        // The sum of the segments' lengths is the accounted length.
        let segs = segment(&p).unwrap();
        assert_eq!(segs.iter().map(|s| s.len).sum::<u32>(), p.len);
        // A link-layer header counted in `len` is counted once per segment.
        let mut q = Packet::new(tcp4(10_000, 0x18), 14 + 52 + 10_000, ETH_P_IP);
        init(&mut q, 1448, GsoKind::TcpV4, false).unwrap();
        assert_eq!(q.len, 7 * 14 + 52 + 10_000 + 6 * 52);
        assert_eq!(seg_len(&q), 1514);
        let segs = segment(&q).unwrap();
        assert!(segs[..6].iter().all(|s| s.len == 1514));
        assert_eq!(segs.iter().map(|s| s.len).sum::<u32>(), q.len);
    }

    #[test]
    fn a_packet_without_its_payload_splits_as_the_whole_one_would() {
        // The same 5000 zero bytes carried, and only counted: every piece
        // is the carried one's headers, with its length and checksums.
        for (partial, per_piece) in [(false, 1), (true, 1), (true, 2)] {
            let mut whole = tcp4(5000, 0x18);
            whole[52..].fill(0);
            let mut full = Packet::new(whole.clone(), 14 + whole.len() as u32, ETH_P_IP);
            init(&mut full, 1448, GsoKind::TcpV4, false).unwrap();
            let mut bare = full.clone();
            bare.data.truncate(52);
            if partial {
                offload_checksum(&mut full).unwrap();
                offload_checksum(&mut bare).unwrap();
                assert_eq!(full.data[..52], bare.data[..]);
            }
            assert_eq!(seg_len(&bare), seg_len(&full));
            let (a, b) = (
                split(&full, per_piece).unwrap(),
                split(&bare, per_piece).unwrap(),
            );
            assert_eq!(a.len(), b.len());
            assert_eq!(a.len(), 4usize.div_ceil(per_piece as usize));
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(
                    (x.len, x.gso, x.csum_partial),
                    (y.len, y.gso, y.csum_partial)
                );
                assert_eq!(
                    x.data[..52],
                    y.data[..],
                    "partial {partial}, {per_piece} per piece"
                );
                assert_eq!(y.data.len(), 52);
            }
        }
    }

    #[test]
    fn tcp_segments_carry_the_payload_in_order_with_fixed_headers() {
        for partial in [false, true] {
            let orig = tcp4(5000, 0x80 | 0x18 | 0x01); // CWR, ACK, PSH, FIN
            let p = gso(orig.clone(), 1448, GsoKind::TcpV4, partial);
            let segs = segment(&p).unwrap();
            assert_eq!(segs.len(), 4);
            let mut data = vec![];
            for (i, s) in segs.iter().enumerate() {
                assert!(s.gso.is_none() && s.segs() == 1);
                assert_eq!(s.csum_partial.is_some(), partial);
                let (seq, flags, pl) = tcp_of(s);
                assert_eq!(seq, 0xffff_f000u32.wrapping_add(i as u32 * 1448));
                let want = match i {
                    0 => 0x80,
                    3 => 0x09,
                    _ => 0,
                };
                assert_eq!(flags, want, "segment {i}");
                // IPv4 ID: +1 per segment, wrapping.
                let id = u16::from_be_bytes([s.data[4], s.data[5]]);
                assert_eq!(id, 0xfffeu16.wrapping_add(i as u16));
                data.extend(pl);
                // The IP header checksum verifies.
                assert_eq!(fold(sum(&s.data[..20], 0)), 0xffff);
                // The TCP checksum verifies once computed.
                let mut s = s.clone();
                checksum_help(&mut s).unwrap();
                let th = &s.data[20..];
                assert_eq!(
                    fold(sum(th, pseudo_header_sum(&s.data, 20, s.data.len() - 20))),
                    0xffff,
                    "segment {i} partial {partial}"
                );
                // The same as etherparse computes.
                let ip = Ipv4Slice::from_slice(&s.data).unwrap();
                let tcp = TcpSlice::from_slice(ip.payload().payload).unwrap();
                let want = tcp
                    .to_header()
                    .calc_checksum_ipv4(&ip.header().to_header(), tcp.payload())
                    .unwrap();
                assert_eq!(tcp.checksum(), want);
            }
            assert_eq!(data, orig[52..].to_vec());
            assert_eq!(segs[3].data.len(), 52 + 5000 - 3 * 1448);
        }
    }

    #[test]
    fn pieces_of_several_segments_segment_into_the_same_wire_packets() {
        let p = gso(tcp4(10_000, 0x80 | 0x18), 1448, GsoKind::TcpV4, true);
        let pieces = split(&p, 3).unwrap();
        let segs: Vec<u16> = pieces.iter().map(|q| q.gso.map_or(1, |g| g.segs)).collect();
        assert_eq!(segs, vec![3, 3, 1]);
        // Lengths add up; each piece is counted as `init` would count it.
        assert_eq!(pieces.iter().map(|q| q.len).sum::<u32>(), p.len);
        for q in &pieces {
            let mut again = Packet::new(q.data.clone(), q.data.len() as u32, ETH_P_IP);
            if let Some(g) = q.gso {
                init(&mut again, g.size, g.kind, g.ecn).unwrap();
            }
            assert_eq!(again.len, q.len);
        }
        // CWR stays with the first piece only.
        assert_eq!(
            pieces
                .iter()
                .map(|q| q.data[33] & 0x80 != 0)
                .collect::<Vec<_>>(),
            [true, false, false]
        );
        assert!(pieces[0].gso.unwrap().ecn == p.gso.unwrap().ecn);
        // Segmenting the pieces gives what segmenting the whole gives.
        let whole = segment(&p).unwrap();
        let by_pieces: Vec<Packet> = pieces.iter().flat_map(|q| segment(q).unwrap()).collect();
        assert_eq!(by_pieces, whole);
        // A packet with fewer segments than a piece holds comes back whole.
        assert_eq!(split(&p, 7).unwrap(), vec![p.clone()]);
        // Without checksum offload a piece cannot stay GSO: segmented instead.
        let full = gso(tcp4(10_000, 0x18), 1448, GsoKind::TcpV4, false);
        assert_eq!(split(&full, 3).unwrap(), segment(&full).unwrap());
    }

    #[test]
    fn tcp_over_ipv6_segments_fix_the_payload_length() {
        let p = gso(tcp6(3000), 1000, GsoKind::TcpV6, false);
        assert_eq!(p.len, 60 + 3000 + 2 * 60);
        let segs = segment(&p).unwrap();
        assert_eq!(segs.len(), 3);
        for (i, s) in segs.iter().enumerate() {
            let ip = Ipv6Slice::from_slice(&s.data).expect("ipv6 length");
            let tcp = TcpSlice::from_slice(ip.payload().payload).unwrap();
            assert_eq!(tcp.sequence_number(), 1000 + i as u32 * 1000);
            assert_eq!(tcp.psh(), i == 2);
            let want = tcp
                .to_header()
                .calc_checksum_ipv6(&ip.header().to_header(), tcp.payload())
                .unwrap();
            assert_eq!(tcp.checksum(), want);
            assert_eq!(s.len, 1060);
        }
    }

    #[test]
    fn udp_l4_segments_are_datagrams_of_gso_size() {
        for partial in [false, true] {
            let p = gso(udp4(2500), 1200, GsoKind::UdpL4, partial);
            assert_eq!(p.segs(), 3);
            let segs = segment(&p).unwrap();
            let sizes: Vec<usize> = segs
                .iter()
                .map(|s| {
                    let mut s = s.clone();
                    checksum_help(&mut s).unwrap();
                    let ip = Ipv4Slice::from_slice(&s.data).unwrap();
                    let udp = UdpSlice::from_slice(ip.payload().payload).unwrap();
                    let want = udp
                        .to_header()
                        .calc_checksum_ipv4(&ip.header().to_header(), udp.payload())
                        .unwrap();
                    assert_eq!(udp.checksum(), want);
                    udp.payload().len()
                })
                .collect();
            assert_eq!(sizes, vec![1200, 1200, 100]);
        }
    }

    #[test]
    fn bad_gso_packets_are_refused_not_segmented() {
        let mut p = Packet::new(tcp4(100, 0), 152, ETH_P_IP);
        assert_eq!(init(&mut p, 0, GsoKind::TcpV4, false), Err(GsoError::Empty));
        assert_eq!(
            init(&mut p, 50, GsoKind::UdpL4, false),
            Err(GsoError::WrongProtocol)
        );
        assert_eq!(
            init(&mut p, 50, GsoKind::TcpV6, false),
            Err(GsoError::WrongProtocol)
        );
        let mut q = Packet::new(tcp4(0, 0), 52, ETH_P_IP);
        assert_eq!(
            init(&mut q, 50, GsoKind::TcpV4, false),
            Err(GsoError::Empty)
        );
        let mut r = Packet::new(tcp4(100, 0)[..30].to_vec(), 30, ETH_P_IP);
        assert_eq!(
            init(&mut r, 50, GsoKind::TcpV4, false),
            Err(GsoError::Malformed)
        );
        for junk in [&[][..], &[0x45], &[0x60; 20], &[0x4f; 30], &[0x60; 48]] {
            let mut j = Packet::new(junk.to_vec(), junk.len() as u32, ETH_P_IP);
            assert!(init(&mut j, 100, GsoKind::TcpV4, false).is_err());
        }
        // A packet that is not GSO is its own single segment.
        let plain = Packet::new(tcp4(10, 0), 62, ETH_P_IP);
        assert_eq!(segment(&plain).unwrap(), vec![plain]);
    }

    #[test]
    fn checksum_help_completes_an_offloaded_checksum() {
        let mut p = Packet::new(udp4(333), 361, ETH_P_IP);
        p.csum_partial = Some(CsumPartial {
            start: 20,
            offset: 6,
        });
        let f = fold(pseudo_header_sum(&p.data, 20, p.data.len() - 20));
        p.data[26..28].copy_from_slice(&f.to_be_bytes());
        checksum_help(&mut p).unwrap();
        assert!(p.csum_partial.is_none());
        let ip = Ipv4Slice::from_slice(&p.data).unwrap();
        let udp = UdpSlice::from_slice(ip.payload().payload).unwrap();
        let want = udp
            .to_header()
            .calc_checksum_ipv4(&ip.header().to_header(), udp.payload())
            .unwrap();
        assert_eq!(udp.checksum(), want);
        // An offset beyond the packet is refused.
        let mut q = Packet::new(udp4(0), 28, ETH_P_IP);
        q.csum_partial = Some(CsumPartial {
            start: 20,
            offset: 60,
        });
        assert_eq!(checksum_help(&mut q), Err(GsoError::Malformed));
    }
}
