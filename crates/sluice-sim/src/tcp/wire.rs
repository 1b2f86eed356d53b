//! Real IPv4 + TCP header bytes for a [`Segment`], and back.
//!
//! Packets in the simulator carry the bytes of their network and transport
//! headers so that classifiers (u32 at byte offsets, flow hashing, iptables
//! matches) read exactly what they would read in the kernel. The fixed
//! headers are written field by field (checked against `etherparse`'s
//! builders in the tests) and read field by field when the IPv4 header has
//! no options, with `etherparse`'s zero-copy slices otherwise; TCP options
//! use the model's own encoder so the layout is Linux's (see `segment.rs`).
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

use super::segment::{
    Ecn, Flags, Segment, TcpOptions, IPV4_HEADER_LEN, MAX_OPTION_LEN, TCP_HEADER_LEN,
};
use etherparse::{IpNumber, Ipv4HeaderSlice, TcpHeaderSlice};
use std::net::Ipv4Addr;

/// The longest headers a segment has: IPv4 without options, TCP with the
/// 40 bytes of options it may carry.
const MAX_HEADERS_LEN: usize = IPV4_HEADER_LEN + TCP_HEADER_LEN + MAX_OPTION_LEN;

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
        let mut out = Vec::new();
        self.emit_ipv4_into(meta, &mut out)?;
        Ok(out)
    }

    /// [`Segment::emit_ipv4`] into `out` (cleared first), so that a
    /// packet's buffer can be reused.
    ///
    /// Written field by field into an array on the stack, then copied out
    /// once, rather than through etherparse's header builders: the
    /// simulator emits one segment per packet, and building, option-copying
    /// and `io::Write`-ing etherparse's structs cost about 1 000
    /// instructions a segment, a tenth of a whole simulated hop. The tests
    /// hold these bytes equal to etherparse's (see `reference_emit`).
    pub fn emit_ipv4_into(&self, meta: &Ipv4Meta, out: &mut Vec<u8>) -> Result<(), EmitError> {
        const TCP_AT: usize = IPV4_HEADER_LEN;
        let mut b = [0u8; MAX_HEADERS_LEN];
        let tcp_len = TCP_HEADER_LEN + self.options.encode_to(&mut b[TCP_AT + TCP_HEADER_LEN..]);
        let total = IPV4_HEADER_LEN + tcp_len + self.payload_len as usize;
        let total16 = u16::try_from(total).map_err(|_| EmitError(total))?;
        // IPv4: version 4, IHL 5; DS field from the TOS, ECN from the segment;
        // DF set, never fragmented; checksum filled in below.
        b[0] = 0x45;
        b[1] = (meta.tos & !3) | self.ecn.bits();
        b[2..4].copy_from_slice(&total16.to_be_bytes());
        b[4..6].copy_from_slice(&meta.id.to_be_bytes());
        b[6] = 0x40;
        b[8] = meta.ttl;
        b[9] = IpNumber::TCP.0;
        b[12..16].copy_from_slice(&meta.src.octets());
        b[16..20].copy_from_slice(&meta.dst.octets());
        let ip_sum = !fold(sum_words(&b[..IPV4_HEADER_LEN], 0));
        b[10..12].copy_from_slice(&ip_sum.to_be_bytes());
        // TCP: data offset in 32-bit words, the flags byte as `Flags` holds
        // it; checksum and urgent pointer 0 until the checksum is known.
        let t = &mut b[TCP_AT..TCP_AT + tcp_len];
        t[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        t[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        t[4..8].copy_from_slice(&self.seq.to_be_bytes());
        t[8..12].copy_from_slice(&self.ack.to_be_bytes());
        t[12] = ((tcp_len / 4) as u8) << 4;
        t[13] = self.flags.0;
        t[14..16].copy_from_slice(&self.window.to_be_bytes());
        // Pseudo-header (addresses, protocol, TCP length) plus the header;
        // the payload's zero bytes add nothing to a ones'-complement sum.
        let tcp_total = (tcp_len + self.payload_len as usize) as u32;
        let pseudo = sum_words(&b[12..20], 0)
            + u32::from(IpNumber::TCP.0)
            + (tcp_total >> 16)
            + (tcp_total & 0xffff);
        let tcp_sum = !fold(sum_words(&b[TCP_AT..TCP_AT + tcp_len], pseudo));
        b[TCP_AT + 16..TCP_AT + 18].copy_from_slice(&tcp_sum.to_be_bytes());
        out.clear();
        out.extend_from_slice(&b[..TCP_AT + tcp_len]);
        Ok(())
    }

    /// A complete datagram: the headers followed by `payload_len` zero bytes.
    pub fn emit_ipv4_with_payload(&self, meta: &Ipv4Meta) -> Result<Vec<u8>, EmitError> {
        let mut out = self.emit_ipv4(meta)?;
        out.resize(out.len() + self.payload_len as usize, 0);
        Ok(out)
    }

    /// Read a segment from IPv4 bytes (headers alone or a whole datagram).
    ///
    /// What the model sends (an IPv4 header without options, a whole TCP
    /// header, a total length that covers both) is read field by field;
    /// anything else goes through etherparse's zero-copy header slices,
    /// which accept the same and say what is wrong with the rest.
    pub fn parse_ipv4(bytes: &[u8]) -> Result<(Ipv4Meta, Segment), ParseError> {
        match Self::parse_plain_ipv4(bytes) {
            Some(parsed) => Ok(parsed),
            None => Self::parse_ipv4_slices(bytes),
        }
    }

    /// [`Segment::parse_ipv4`] of a packet without IP options, if it is a
    /// first fragment carrying a whole TCP header; `None` otherwise.
    fn parse_plain_ipv4(b: &[u8]) -> Option<(Ipv4Meta, Segment)> {
        // Version 4 and IHL 5; protocol TCP; fragment offset 0.
        if b.len() < IPV4_HEADER_LEN + TCP_HEADER_LEN
            || b[0] != 0x45
            || b[9] != IpNumber::TCP.0
            || u16::from_be_bytes([b[6], b[7]]) & 0x1fff != 0
        {
            return None;
        }
        let t = &b[IPV4_HEADER_LEN..];
        let tcp_len = usize::from(t[12] >> 4) * 4;
        if tcp_len < TCP_HEADER_LEN || t.len() < tcp_len {
            return None;
        }
        let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
        let payload_len = total.checked_sub(IPV4_HEADER_LEN + tcp_len)?;
        let be16 = |i: usize| u16::from_be_bytes([t[i], t[i + 1]]);
        let be32 = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
        let meta = Ipv4Meta {
            src: Ipv4Addr::new(b[12], b[13], b[14], b[15]),
            dst: Ipv4Addr::new(b[16], b[17], b[18], b[19]),
            tos: b[1],
            ttl: b[8],
            id: u16::from_be_bytes([b[4], b[5]]),
        };
        let seg = Segment {
            src_port: be16(0),
            dst_port: be16(2),
            seq: be32(4),
            ack: be32(8),
            flags: Flags(t[13]),
            window: be16(14),
            options: TcpOptions::decode(&t[TCP_HEADER_LEN..tcp_len]),
            payload_len: payload_len as u32,
            ecn: Ecn::from_bits(b[1] & 3),
        };
        Some((meta, seg))
    }

    /// [`Segment::parse_ipv4`] through etherparse, with its errors.
    fn parse_ipv4_slices(bytes: &[u8]) -> Result<(Ipv4Meta, Segment), ParseError> {
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

/// Ones'-complement sum of big-endian 16-bit words (RFC 1071), unfolded.
fn sum_words(bytes: &[u8], start: u32) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    let mut sum = start;
    for w in &mut chunks {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

/// Fold the carries of a ones'-complement sum into 16 bits.
fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{Ipv4Dscp, Ipv4Ecn, Ipv4Header, TcpHeader};

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

    /// The headers as etherparse builds them, over a materialized zero
    /// payload: the reference `emit_ipv4` must match byte for byte.
    fn reference_emit(s: &Segment, m: &Ipv4Meta) -> Vec<u8> {
        let mut tcp = TcpHeader::new(s.src_port, s.dst_port, s.seq, s.window);
        tcp.acknowledgment_number = s.ack;
        let f = s.flags;
        tcp.fin = f.contains(Flags::FIN);
        tcp.syn = f.contains(Flags::SYN);
        tcp.rst = f.contains(Flags::RST);
        tcp.psh = f.contains(Flags::PSH);
        tcp.ack = f.contains(Flags::ACK);
        tcp.urg = f.contains(Flags::URG);
        tcp.ece = f.contains(Flags::ECE);
        tcp.cwr = f.contains(Flags::CWR);
        tcp.set_options_raw(&s.options.encode()).unwrap();
        let zeros = vec![0u8; s.payload_len as usize];
        tcp.checksum = tcp
            .calc_checksum_ipv4_raw(m.src.octets(), m.dst.octets(), &zeros)
            .unwrap();
        let payload = (tcp.header_len() + zeros.len()) as u16;
        let mut ip = Ipv4Header::new(
            payload,
            m.ttl,
            IpNumber::TCP,
            m.src.octets(),
            m.dst.octets(),
        )
        .unwrap();
        ip.dscp = Ipv4Dscp::try_new(m.tos >> 2).unwrap();
        ip.ecn = Ipv4Ecn::try_new(s.ecn.bits()).unwrap();
        ip.identification = m.id;
        ip.dont_fragment = true;
        let mut out = vec![];
        ip.write(&mut out).unwrap();
        tcp.write(&mut out).unwrap();
        out
    }

    proptest::proptest! {
        #[test]
        fn emits_what_etherparse_builds(
            ports in (0u16.., 0u16..), seq in 0u32.., ack in 0u32.., flags in 0u8..,
            window in 0u16.., payload_len in 0u32..65_000, ecn in 0u8..4,
            tos in 0u8.., ttl in 0u8.., id in 0u16.., addrs in (0u32.., 0u32..),
            mss in proptest::option::of(0u16..), ws in proptest::option::of(0u8..15),
            sack_permitted in proptest::bool::ANY,
            ts in proptest::option::of((0u32.., 0u32..)),
            sack in proptest::collection::vec((0u32.., 0u32..), 0..4),
        ) {
            let mut s = Segment {
                src_port: ports.0,
                dst_port: ports.1,
                seq,
                ack,
                flags: Flags(flags),
                window,
                payload_len,
                ecn: Ecn::from_bits(ecn),
                ..Default::default()
            };
            s.options.mss = mss;
            s.options.window_scale = ws;
            s.options.sack_permitted = sack_permitted;
            s.options.timestamp = ts;
            for (l, r) in sack {
                s.options.sack.push(l, r);
            }
            let m = Ipv4Meta {
                src: Ipv4Addr::from(addrs.0),
                dst: Ipv4Addr::from(addrs.1),
                tos,
                ttl,
                id,
            };
            proptest::prop_assert_eq!(s.emit_ipv4(&m).unwrap(), reference_emit(&s, &m));
        }

        #[test]
        fn reads_as_etherparse_reads(
            bytes in proptest::collection::vec(0u8.., 0..80),
            head in proptest::sample::select(vec![0x45u8, 0x46, 0x44, 0x55]),
            proto in proptest::sample::select(vec![6u8, 17]),
        ) {
            // Mostly plausible headers, some not: the field-by-field read
            // takes what it can and must then agree with etherparse.
            let mut b = bytes;
            if b.len() > 9 {
                b[0] = head;
                b[9] = proto;
                b[6] &= 0xe0; // flags kept, fragment offset 0
                b[7] = 0;
            }
            if let Some(plain) = Segment::parse_plain_ipv4(&b) {
                proptest::prop_assert_eq!(Ok(plain), Segment::parse_ipv4_slices(&b));
            }
        }
    }

    #[test]
    fn too_long_for_ipv4_is_an_error() {
        let s = data_segment(65_535 - 40);
        assert_eq!(s.emit_ipv4(&meta()), Err(EmitError(65_535 - 40 + 52)));
        assert!(data_segment(65_535 - 52).emit_ipv4(&meta()).is_ok());
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
