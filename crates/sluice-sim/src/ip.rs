//! IPv4 packets as the simulated hosts build and read them.
//!
//! Packets carry real header bytes (built and parsed with `etherparse`) so
//! the classifiers in the devices see exactly what the kernel's would: u32
//! offsets, TOS, protocol, ports. Payloads are not materialized; the IPv4
//! total length and the accounted `Packet::len` (+14 bytes of Ethernet
//! header, as the kernel's `qdisc_pkt_len` on Ethernet) carry the size.

use etherparse::{
    IcmpEchoHeader, Icmpv4Header, Icmpv4Type, IpNumber, Ipv4Header, Ipv4HeaderSlice, UdpHeader,
};
use sluice_core::packet::{Packet, ETH_P_IP};
use sluice_core::qdisc::pfifo_fast::tos_to_priority;
use std::net::Ipv4Addr;

/// Bytes of Ethernet header counted by qdiscs on top of the IP packet.
pub const ETH_HLEN: u32 = 14;

/// What the simulator needs from an IPv4 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Info {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number (1 ICMP, 6 TCP, 17 UDP).
    pub protocol: u8,
    /// Type of service byte.
    pub tos: u8,
    /// Total length.
    pub total_len: u16,
    /// Header length in bytes.
    pub header_len: usize,
}

/// Read the IPv4 header of a packet.
pub fn ipv4_info(pkt: &Packet) -> Option<Ipv4Info> {
    // A zero-copy view: routing reads a few fields of every packet.
    let h = Ipv4HeaderSlice::from_slice(&pkt.data).ok()?;
    Some(Ipv4Info {
        src: h.source_addr(),
        dst: h.destination_addr(),
        protocol: h.protocol().0,
        tos: (h.dcp().value() << 2) | h.ecn().value(),
        total_len: h.total_len(),
        header_len: h.slice().len(),
    })
}

fn ipv4_header(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: IpNumber,
    tos: u8,
    payload_len: u16,
) -> Option<Ipv4Header> {
    let mut h = Ipv4Header::new(payload_len, 64, proto, src.octets(), dst.octets()).ok()?;
    h.dscp = etherparse::Ipv4Dscp::try_new(tos >> 2).ok()?;
    h.ecn = etherparse::Ipv4Ecn::try_new(tos & 3).ok()?;
    h.header_checksum = h.calc_header_checksum();
    Some(h)
}

/// Wrap network-layer bytes into a packet with the metadata Linux sets
/// (priority from the TOS, as the IP stack does for local traffic).
pub fn packet(bytes: Vec<u8>, total_len: u16, tos: u8) -> Packet {
    let mut p = Packet::new(bytes, total_len as u32 + ETH_HLEN, ETH_P_IP);
    p.priority = tos_to_priority(tos);
    p
}

/// An ICMP echo request (`reply == false`) or reply carrying `payload` bytes (ping's 56 by default).
pub fn icmp_echo(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    tos: u8,
    id: u16,
    seq: u16,
    payload: u16,
    reply: bool,
) -> Packet {
    let echo = IcmpEchoHeader { id, seq };
    let t = if reply {
        Icmpv4Type::EchoReply(echo)
    } else {
        Icmpv4Type::EchoRequest(echo)
    };
    let icmp = Icmpv4Header::new(t);
    let l4 = icmp.header_len() as u16 + payload;
    let ip = ipv4_header(src, dst, IpNumber::ICMP, tos, l4).expect("valid ICMP header");
    let mut bytes = ip.to_bytes().to_vec();
    bytes.extend_from_slice(&icmp.to_bytes());
    packet(bytes, ip.total_len, tos)
}

/// Parse an ICMP echo: (is_reply, id, seq).
pub fn parse_icmp_echo(pkt: &Packet, info: &Ipv4Info) -> Option<(bool, u16, u16)> {
    let (icmp, _) = Icmpv4Header::from_slice(pkt.data.get(info.header_len..)?).ok()?;
    match icmp.icmp_type {
        Icmpv4Type::EchoRequest(e) => Some((false, e.id, e.seq)),
        Icmpv4Type::EchoReply(e) => Some((true, e.id, e.seq)),
        _ => None,
    }
}

/// A UDP datagram with `payload` bytes.
pub fn udp(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16, tos: u8, payload: u16) -> Packet {
    let udp = UdpHeader {
        source_port: sport,
        destination_port: dport,
        length: 8 + payload,
        checksum: 0,
    };
    let ip = ipv4_header(src, dst, IpNumber::UDP, tos, 8 + payload).expect("valid UDP header");
    let mut bytes = ip.to_bytes().to_vec();
    bytes.extend_from_slice(&udp.to_bytes());
    packet(bytes, ip.total_len, tos)
}

/// Parse UDP ports: (source, destination, payload length).
pub fn parse_udp(pkt: &Packet, info: &Ipv4Info) -> Option<(u16, u16, u16)> {
    let (u, _) = UdpHeader::from_slice(pkt.data.get(info.header_len..)?).ok()?;
    Some((
        u.source_port,
        u.destination_port,
        u.length.saturating_sub(8),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_packets_have_the_sizes_ping_sends() {
        let a = Ipv4Addr::new(10, 0, 0, 1);
        let b = Ipv4Addr::new(10, 0, 0, 2);
        let p = icmp_echo(a, b, 0, 7, 3, 56, false);
        let info = ipv4_info(&p).unwrap();
        assert_eq!((info.total_len, p.len, info.protocol), (84, 98, 1));
        assert_eq!(parse_icmp_echo(&p, &info), Some((false, 7, 3)));
        // u32 `match ip protocol 1 0xff` reads byte 9.
        assert_eq!(p.data[9], 1);
    }

    #[test]
    fn udp_and_tos_round_trip() {
        let a = Ipv4Addr::new(10, 0, 0, 1);
        let b = Ipv4Addr::new(10, 0, 1, 2);
        let p = udp(a, 5000, b, 6000, 0x10, 472);
        let info = ipv4_info(&p).unwrap();
        assert_eq!((info.total_len, info.tos, info.dst), (500, 0x10, b));
        assert_eq!(parse_udp(&p, &info), Some((5000, 6000, 472)));
        // TOS 0x10 (minimize delay) maps to TC_PRIO_INTERACTIVE (6), band 0 of pfifo_fast.
        assert_eq!(p.priority, 6);
    }
}
