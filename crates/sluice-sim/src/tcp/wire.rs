//! Real IPv4 + TCP header bytes for a [`Segment`], and back.
//!
//! Packets in the simulator carry the bytes of their network and transport
//! headers so that classifiers (u32 at byte offsets, flow hashing, iptables
//! matches) read exactly what they would read in the kernel. The fixed
//! headers are written and read with `etherparse`; TCP options use the
//! model's own encoder so the layout is Linux's (see `segment.rs`).
//!
//! [`Segment::emit_ipv4`] writes the headers only: the IPv4 total length and
//! the TCP checksum account for `payload_len` zero bytes that are not there
//! (sluice-core's `Packet` carries headers plus an accounting length).
//! [`Segment::emit_ipv4_with_payload`] appends those zero bytes for consumers
//! that want a complete datagram. [`Segment::parse_ipv4`] accepts both.
//!
//! Offsets worth knowing (IPv4 without options, IHL 5): the TCP flags byte is
//! at offset 33, so the LARTC filter `match u8 0x10 0xff at 33` sees exactly
//! ACK-only segments; with timestamps a pure ACK is 52 bytes long, which
//! passes that script's `match u16 0x0000 0xffc0 at 2` (total length < 64),
//! while an ACK carrying one SACK block is 64 bytes and does not.

use super::segment::{Ecn, Flags, Segment, TcpOptions};
use etherparse::{
    IpNumber, Ipv4Dscp, Ipv4Ecn, Ipv4Header, Ipv4HeaderSlice, TcpHeader, TcpHeaderSlice,
};
use std::net::Ipv4Addr;

/// Fields of the IPv4 header that are not the segment's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Meta {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// TOS / DS byte; its two ECN bits are replaced by the segment's ECN field.
    pub tos: u8,
    /// Time to live (Linux default 64).
    pub ttl: u8,
    /// Identification field.
    pub id: u16,
}

impl Ipv4Meta {
    /// Addresses with Linux defaults for the rest (TOS 0, TTL 64, id 0).
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        Ipv4Meta {
            src,
            dst,
            tos: 0,
            ttl: 64,
            id: 0,
        }
    }
}

/// Why bytes are not a TCP-in-IPv4 packet the model can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The IPv4 header is missing, truncated or malformed.
    #[error("bad IPv4 header: {0}")]
    Ipv4(String),
    /// The IP protocol is not TCP.
    #[error("IP protocol {0} is not TCP")]
    NotTcp(u8),
    /// A fragment other than the first (no TCP header to read).
    #[error("non-initial IPv4 fragment")]
    Fragment,
    /// The TCP header is missing, truncated or malformed.
    #[error("bad TCP header: {0}")]
    Tcp(String),
    /// The IPv4 total length is shorter than the headers it carries.
    #[error("IPv4 total length {total} shorter than headers {headers}")]
    Length {
        /// IPv4 total length field.
        total: usize,
        /// IPv4 + TCP header bytes.
        headers: usize,
    },
}

/// Errors writing headers (payload too long for IPv4).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("segment of {0} bytes does not fit an IPv4 packet")]
pub struct EmitError(pub usize);

impl Segment {
    /// IPv4 + TCP header bytes; lengths and checksum count the payload.
    pub fn emit_ipv4(&self, meta: &Ipv4Meta) -> Result<Vec<u8>, EmitError> {
        let tcp = self.tcp_header(meta)?;
        let ip = self.ip_header(meta, tcp.header_len())?;
        let mut out = Vec::with_capacity(ip.header_len() + tcp.header_len());
        // Writing into a Vec cannot fail.
        ip.write_raw(&mut out)
            .and_then(|()| tcp.write(&mut out))
            .map_err(|_| EmitError(self.ip_len()))?;
        Ok(out)
    }

    /// A complete datagram: the headers followed by `payload_len` zero bytes.
    pub fn emit_ipv4_with_payload(&self, meta: &Ipv4Meta) -> Result<Vec<u8>, EmitError> {
        let mut out = self.emit_ipv4(meta)?;
        out.resize(out.len() + self.payload_len as usize, 0);
        Ok(out)
    }

    fn ip_header(&self, meta: &Ipv4Meta, tcp_len: usize) -> Result<Ipv4Header, EmitError> {
        let total = self.ip_len();
        let payload =
            u16::try_from(tcp_len + self.payload_len as usize).map_err(|_| EmitError(total))?;
        let mut ip = Ipv4Header::new(
            payload,
            meta.ttl,
            IpNumber::TCP,
            meta.src.octets(),
            meta.dst.octets(),
        )
        .map_err(|_| EmitError(total))?;
        ip.dscp = Ipv4Dscp::try_new(meta.tos >> 2).unwrap_or(Ipv4Dscp::ZERO);
        ip.ecn = Ipv4Ecn::try_new(self.ecn.bits()).unwrap_or(Ipv4Ecn::ZERO);
        ip.identification = meta.id;
        ip.dont_fragment = true;
        ip.header_checksum = ip.calc_header_checksum();
        Ok(ip)
    }

    fn tcp_header(&self, meta: &Ipv4Meta) -> Result<TcpHeader, EmitError> {
        let mut tcp = TcpHeader::new(self.src_port, self.dst_port, self.seq, self.window);
        tcp.acknowledgment_number = self.ack;
        let f = self.flags;
        tcp.fin = f.contains(Flags::FIN);
        tcp.syn = f.contains(Flags::SYN);
        tcp.rst = f.contains(Flags::RST);
        tcp.psh = f.contains(Flags::PSH);
        tcp.ack = f.contains(Flags::ACK);
        tcp.urg = f.contains(Flags::URG);
        tcp.ece = f.contains(Flags::ECE);
        tcp.cwr = f.contains(Flags::CWR);
        tcp.set_options_raw(&self.options.encode())
            .map_err(|_| EmitError(self.ip_len()))?;
        tcp.checksum = checksum_with_zero_payload(&tcp, meta, self.payload_len)?;
        Ok(tcp)
    }

    /// Read a segment from IPv4 bytes (headers alone or a whole datagram).
    ///
    /// Reads through etherparse's zero-copy header slices: a receiver looks
    /// at every field once, so copying the headers into owned structs first
    /// would only cost time.
    pub fn parse_ipv4(bytes: &[u8]) -> Result<(Ipv4Meta, Segment), ParseError> {
        let ip = Ipv4HeaderSlice::from_slice(bytes).map_err(|e| ParseError::Ipv4(e.to_string()))?;
        if ip.protocol() != IpNumber::TCP {
            return Err(ParseError::NotTcp(ip.protocol().0));
        }
        if ip.fragments_offset().value() != 0 {
            return Err(ParseError::Fragment);
        }
        let ip_len = ip.slice().len();
        let tcp = TcpHeaderSlice::from_slice(&bytes[ip_len..])
            .map_err(|e| ParseError::Tcp(e.to_string()))?;
        let headers = ip_len + tcp.slice().len();
        let total = usize::from(ip.total_len());
        let payload_len = total
            .checked_sub(headers)
            .ok_or(ParseError::Length { total, headers })?;
        let ecn = ip.ecn().value();
        let meta = Ipv4Meta {
            src: ip.source_addr(),
            dst: ip.destination_addr(),
            tos: (ip.dcp().value() << 2) | ecn,
            ttl: ip.ttl(),
            id: ip.identification(),
        };
        let seg = Segment {
            src_port: tcp.source_port(),
            dst_port: tcp.destination_port(),
            seq: tcp.sequence_number(),
            ack: tcp.acknowledgment_number(),
            // The flags byte (offset 13) has the same bit layout as `Flags`.
            flags: Flags(tcp.slice()[13]),
            window: tcp.window_size(),
            options: TcpOptions::decode(tcp.options()),
            payload_len: payload_len as u32,
            ecn: Ecn::from_bits(ecn),
        };
        Ok((meta, seg))
    }
}

/// The TCP checksum over the header and `payload_len` zero bytes.
///
/// Zero bytes add nothing to a ones'-complement sum; only the pseudo-header
/// length changes. So checksum the header alone, then add the payload length
/// into the (complemented) sum.
fn checksum_with_zero_payload(
    tcp: &TcpHeader,
    meta: &Ipv4Meta,
    payload_len: u32,
) -> Result<u16, EmitError> {
    let base = tcp
        .calc_checksum_ipv4_raw(meta.src.octets(), meta.dst.octets(), &[])
        .map_err(|_| EmitError(payload_len as usize))?;
    let mut sum = u32::from(!base) + (payload_len & 0xffff) + (payload_len >> 16);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    Ok(!(sum as u16))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Ipv4Meta {
        Ipv4Meta::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
    }

    fn data_segment(len: u32) -> Segment {
        let mut s = Segment {
            src_port: 40000,
            dst_port: 5001,
            seq: 0xfffffff0,
            ack: 77,
            flags: Flags::ACK | Flags::PSH,
            window: 1234,
            payload_len: len,
            ecn: Ecn::Ect0,
            ..Default::default()
        };
        s.options.timestamp = Some((100, 200));
        s
    }

    #[test]
    fn checksum_matches_materialized_payload() {
        for len in [0u32, 1, 7, 1448, 65000] {
            let s = data_segment(len);
            let tcp = s.tcp_header(&meta()).unwrap();
            let zeros = vec![0u8; len as usize];
            let want = tcp
                .calc_checksum_ipv4_raw(meta().src.octets(), meta().dst.octets(), &zeros)
                .unwrap();
            assert_eq!(tcp.checksum, want, "len {len}");
        }
    }

    #[test]
    fn round_trip_headers_only_and_full() {
        let s = data_segment(1448);
        let hdr = s.emit_ipv4(&meta()).unwrap();
        assert_eq!(hdr.len(), 52);
        let (m, back) = Segment::parse_ipv4(&hdr).unwrap();
        assert_eq!(back, s);
        assert_eq!(m.tos & 3, 2);
        let full = s.emit_ipv4_with_payload(&meta()).unwrap();
        assert_eq!(full.len(), 1500);
        assert_eq!(Segment::parse_ipv4(&full).unwrap().1, s);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Segment::parse_ipv4(&[]).is_err());
        assert!(Segment::parse_ipv4(&[0x45, 0, 0, 20]).is_err());
        let mut udp = data_segment(0).emit_ipv4(&meta()).unwrap();
        udp[9] = 17;
        assert_eq!(Segment::parse_ipv4(&udp), Err(ParseError::NotTcp(17)));
    }
}
