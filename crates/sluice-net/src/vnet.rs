//! The virtio-net header a TUN device with `IFF_VNET_HDR` puts in front of
//! every packet: the offload metadata of the kernel's `sk_buff`.
//!
//! With offloads enabled (`TUNSETOFFLOAD`: checksum, TSO, USO) the kernel
//! hands bulk TCP over as GSO packets of up to 64 KiB with their checksum
//! still to be computed, and takes such packets back the same way, so the
//! daemon moves one packet where the wire carries forty. The header
//! (`struct virtio_net_hdr`, include/uapi/linux/virtio_net.h; 10 bytes, in
//! the host's byte order for a legacy TUN device) says:
//!
//! | field | meaning |
//! |---|---|
//! | `flags` | `NEEDS_CSUM`: the transport checksum is left to the device |
//! | `gso_type` | none, TCPv4, TCPv6, UDP_L4, with the ECN bit |
//! | `hdr_len` | bytes of headers (a hint) |
//! | `gso_size` | payload bytes per segment (the MSS) |
//! | `csum_start`, `csum_offset` | where the checksummed bytes start, where the sum goes |
//!
//! [`VnetHdr::to_packet`] turns a header and the IP bytes behind it into a
//! sluice-core [`Packet`] with its [`Gso`] and [`CsumPartial`] metadata and
//! the kernel's accounted length (`qdisc_pkt_len_init`, see
//! [`sluice_core::gso`]); [`VnetHdr::of`] is the way back.

use crate::plane::{parse_ip_vec, Malformed};
use sluice_core::gso;
use sluice_core::packet::{CsumPartial, Gso, GsoKind, Packet};

/// Size of `struct virtio_net_hdr` (the TUN default, `TUNSETVNETHDRSZ` unset).
pub const VNET_HDR_LEN: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP` (UFO, obsolete: refused).
pub const GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4`.
pub const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN`.
pub const GSO_ECN: u8 = 0x80;

/// `struct virtio_net_hdr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM` or 0.
    pub flags: u8,
    /// A `GSO_*` type, possibly with `GSO_ECN`.
    pub gso_type: u8,
    /// Header bytes (network and transport) of a GSO packet.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed bytes start.
    pub csum_start: u16,
    /// Where the checksum goes, from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Read a header from the first [`VNET_HDR_LEN`] bytes.
    pub fn parse(b: &[u8]) -> Result<VnetHdr, Malformed> {
        let b: &[u8; VNET_HDR_LEN] = b
            .get(..VNET_HDR_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(Malformed::Truncated)?;
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Ok(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// The header's bytes.
    pub fn emit(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    /// The packet this header and the IP bytes behind it describe: parsed as
    /// [`crate::plane::parse_ip`] does, with its offload metadata, and for
    /// a GSO packet the length of all its segments.
    pub fn to_packet(&self, ip: Vec<u8>) -> Result<Packet, Malformed> {
        let mut pkt = parse_ip_vec(ip)?;
        if self.flags & F_NEEDS_CSUM != 0 {
            let end = self.csum_start as usize + self.csum_offset as usize + 2;
            if end > pkt.data.len() {
                return Err(Malformed::BadOffload);
            }
            pkt.csum_partial = Some(CsumPartial {
                start: self.csum_start,
                offset: self.csum_offset,
            });
        }
        let kind = match self.gso_type & !GSO_ECN {
            GSO_NONE => return Ok(pkt),
            GSO_TCPV4 => GsoKind::TcpV4,
            GSO_TCPV6 => GsoKind::TcpV6,
            GSO_UDP_L4 => GsoKind::UdpL4,
            _ => return Err(Malformed::BadOffload),
        };
        gso::init(&mut pkt, self.gso_size, kind, self.gso_type & GSO_ECN != 0)
            .map_err(|_| Malformed::BadOffload)?;
        Ok(pkt)
    }

    /// The header to write in front of `pkt`.
    pub fn of(pkt: &Packet) -> VnetHdr {
        let mut h = VnetHdr::default();
        if let Some(c) = pkt.csum_partial {
            h.flags = F_NEEDS_CSUM;
            h.csum_start = c.start;
            h.csum_offset = c.offset;
        }
        if let Some(Gso {
            size, kind, ecn, ..
        }) = pkt.gso
        {
            h.gso_type = match kind {
                GsoKind::TcpV4 => GSO_TCPV4,
                GsoKind::TcpV6 => GSO_TCPV6,
                GsoKind::UdpL4 => GSO_UDP_L4,
            } | if ecn { GSO_ECN } else { 0 };
            h.gso_size = size;
            h.hdr_len = gso::header_len(&pkt.data, kind).map_or(0, |(hdr, _)| hdr as u16);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4/TCP packet with `payload` data bytes and a 20-byte TCP header.
    pub(crate) fn tcp4(payload: usize) -> Vec<u8> {
        let mut d = vec![0u8; 40 + payload];
        d[0] = 0x45;
        let tot = d.len() as u16;
        d[2..4].copy_from_slice(&tot.to_be_bytes());
        d[8] = 64;
        d[9] = 6;
        d[12..16].copy_from_slice(&[10, 77, 1, 1]);
        d[16..20].copy_from_slice(&[10, 77, 1, 2]);
        d[32] = 5 << 4;
        d[33] = 0x18;
        d
    }

    #[test]
    fn a_header_round_trips_through_its_bytes() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 40,
            gso_size: 1460,
            csum_start: 20,
            csum_offset: 16,
        };
        assert_eq!(VnetHdr::parse(&h.emit()), Ok(h));
        assert_eq!(VnetHdr::parse(&[0; 9]), Err(Malformed::Truncated));
    }

    #[test]
    fn a_tso_packet_becomes_a_gso_packet_counted_as_its_segments() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 40,
            gso_size: 1460,
            csum_start: 20,
            csum_offset: 16,
        };
        let pkt = h.to_packet(tcp4(14_600)).unwrap();
        let g = pkt.gso.unwrap();
        assert_eq!((g.segs, g.size, g.kind), (10, 1460, GsoKind::TcpV4));
        assert_eq!(pkt.len, 10 * 1500);
        assert_eq!(
            pkt.csum_partial,
            Some(CsumPartial {
                start: 20,
                offset: 16
            })
        );
        // And back: the header the kernel gets with it.
        assert_eq!(VnetHdr::of(&pkt), h);
        // No offload: a plain packet, a zero header.
        let plain = VnetHdr::default().to_packet(tcp4(100)).unwrap();
        assert!(plain.gso.is_none() && plain.csum_partial.is_none());
        assert_eq!(VnetHdr::of(&plain), VnetHdr::default());
    }

    #[test]
    fn inconsistent_offload_metadata_is_malformed() {
        let bad = [
            // Checksum field beyond the packet.
            VnetHdr {
                flags: F_NEEDS_CSUM,
                csum_start: 20,
                csum_offset: 4000,
                ..Default::default()
            },
            // UFO, which the kernel no longer makes.
            VnetHdr {
                gso_type: GSO_UDP,
                gso_size: 100,
                ..Default::default()
            },
            // TCPv6 on an IPv4 packet; UDP on TCP; a zero segment size.
            VnetHdr {
                gso_type: GSO_TCPV6,
                gso_size: 100,
                ..Default::default()
            },
            VnetHdr {
                gso_type: GSO_UDP_L4,
                gso_size: 100,
                ..Default::default()
            },
            VnetHdr {
                gso_type: GSO_TCPV4,
                gso_size: 0,
                ..Default::default()
            },
            VnetHdr {
                gso_type: 9,
                ..Default::default()
            },
        ];
        for h in bad {
            assert_eq!(h.to_packet(tcp4(3000)), Err(Malformed::BadOffload), "{h:?}");
        }
    }
}
