//! A TCP segment as the model sends and receives it.
//!
//! A [`Segment`] holds every header field the model reads or writes, the
//! options Linux puts on the wire, the payload *length* (payload bytes are
//! never materialized: the simulator only needs counts), and the ECN codepoint
//! of the IP header that carries it (RFC 3168), because a qdisc may mark CE.
//!
//! Option layout follows Linux's `tcp_options_write()` byte for byte, so header
//! lengths — and therefore packet sizes and u32 offsets — are Linux's:
//!
//! | segment | options | TCP header | IPv4 total |
//! |---|---|---|---|
//! | SYN (MSS, SACK-permitted, timestamps, wscale) | `MSS` `SACKOK TS` `NOP WS` | 40 | 60 |
//! | pure ACK with timestamps | `NOP NOP TS` | 32 | 52 |
//! | ACK + n SACK blocks with timestamps (n ≤ 3) | `NOP NOP TS` `NOP NOP SACK` | 36 + 8n | 56 + 8n |
//! | full data segment, MSS 1448 | `NOP NOP TS` | 32 | 1500 |
//!
//! With timestamps on, at most 3 SACK blocks fit in the 40 option bytes;
//! without them, 4. A segment that asks for more sends only those that fit.

use std::fmt;
use std::ops::BitOr;

/// TCP header flags: the bits of byte 13 of the TCP header.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags(pub u8);

impl Flags {
    /// No more data from sender.
    pub const FIN: Flags = Flags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: Flags = Flags(0x02);
    /// Reset the connection.
    pub const RST: Flags = Flags(0x04);
    /// Push function.
    pub const PSH: Flags = Flags(0x08);
    /// Acknowledgment field significant.
    pub const ACK: Flags = Flags(0x10);
    /// Urgent pointer significant (never sent by the model).
    pub const URG: Flags = Flags(0x20);
    /// ECN-Echo (RFC 3168).
    pub const ECE: Flags = Flags(0x40);
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: Flags = Flags(0x80);

    /// True if every bit of `other` is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Set the bits of `other`.
    pub fn insert(&mut self, other: Flags) {
        self.0 |= other.0;
    }
}

impl BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        let set: Vec<&str> = (0..8)
            .filter(|b| self.0 & (1 << b) != 0)
            .map(|b| NAMES[b])
            .collect();
        write!(f, "[{}]", set.join("|"))
    }
}

/// The ECN field of the IP header carrying a segment (RFC 3168).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// Not ECN-capable transport (00).
    #[default]
    NotEct,
    /// ECT(1) (01).
    Ect1,
    /// ECT(0) (10): what Linux sets on new data of an ECN connection.
    Ect0,
    /// Congestion Experienced (11): set by an AQM instead of dropping.
    Ce,
}

impl Ecn {
    /// The two-bit codepoint.
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
    /// From the low two bits of the TOS byte.
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
}

/// Most SACK blocks a TCP header can carry (no timestamps).
pub const MAX_SACK_BLOCKS: usize = 4;

/// SACK blocks `(left edge, right edge)` in wire sequence numbers, first
/// block first (RFC 2018: the most recently changed block, or a D-SACK).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SackBlocks {
    len: u8,
    blocks: [(u32, u32); MAX_SACK_BLOCKS],
}

impl SackBlocks {
    /// Append a block; false (and nothing changes) when already full.
    pub fn push(&mut self, left: u32, right: u32) -> bool {
        let i = usize::from(self.len);
        if i >= MAX_SACK_BLOCKS {
            return false;
        }
        self.blocks[i] = (left, right);
        self.len += 1;
        true
    }
    /// The blocks, first first.
    pub fn as_slice(&self) -> &[(u32, u32)] {
        &self.blocks[..usize::from(self.len).min(MAX_SACK_BLOCKS)]
    }
    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }
    /// True when there is no block.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The TCP options a segment carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TcpOptions {
    /// Maximum segment size (SYN only).
    pub mss: Option<u16>,
    /// Window scale shift (SYN only, RFC 7323).
    pub window_scale: Option<u8>,
    /// SACK permitted (SYN only, RFC 2018).
    pub sack_permitted: bool,
    /// SACK blocks.
    pub sack: SackBlocks,
    /// Timestamps `(TSval, TSecr)` (RFC 7323).
    pub timestamp: Option<(u32, u32)>,
}

/// Bytes of the longest TCP option space.
pub const MAX_OPTION_LEN: usize = 40;

impl TcpOptions {
    /// Bytes of everything but SACK blocks, in Linux's layout.
    fn fixed_len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.timestamp.is_some() {
            n += 12; // NOP NOP TS, or SACKOK TS on a SYN
        } else if self.sack_permitted {
            n += 4; // NOP NOP SACKOK
        }
        if self.window_scale.is_some() {
            n += 4; // NOP WS
        }
        n
    }

    /// How many of the SACK blocks fit beside the other options.
    pub fn sack_blocks_that_fit(&self) -> usize {
        let room = MAX_OPTION_LEN.saturating_sub(self.fixed_len() + 4);
        self.sack.len().min(room / 8)
    }

    /// Length of the encoded options (a multiple of 4).
    pub fn encoded_len(&self) -> usize {
        let n = self.sack_blocks_that_fit();
        self.fixed_len() + if n > 0 { 4 + 8 * n } else { 0 }
    }

    /// Encode in Linux's order and padding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// [`TcpOptions::encode`], appended to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut b = [0u8; MAX_OPTION_LEN];
        let n = self.encode_to(&mut b);
        out.extend_from_slice(&b[..n]);
    }

    /// [`TcpOptions::encode`] into the front of `buf` (at least
    /// [`TcpOptions::encoded_len`] bytes long); returns the length written.
    pub fn encode_to(&self, buf: &mut [u8]) -> usize {
        // `NOP NOP TS` alone, the common case (see `decode`), at once.
        if let (None, None, false, true, Some((val, ecr))) = (
            self.mss,
            self.window_scale,
            self.sack_permitted,
            self.sack.is_empty(),
            self.timestamp,
        ) {
            buf[..4].copy_from_slice(&[1, 1, 8, 10]);
            buf[4..8].copy_from_slice(&val.to_be_bytes());
            buf[8..12].copy_from_slice(&ecr.to_be_bytes());
            return 12;
        }
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            buf[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        if let Some(mss) = self.mss {
            put(&[2, 4]);
            put(&mss.to_be_bytes());
        }
        match (self.timestamp, self.sack_permitted) {
            (Some((val, ecr)), sack_ok) => {
                put(if sack_ok { &[4, 2] } else { &[1, 1] });
                put(&[8, 10]);
                put(&val.to_be_bytes());
                put(&ecr.to_be_bytes());
            }
            (None, true) => put(&[1, 1, 4, 2]),
            (None, false) => {}
        }
        if let Some(ws) = self.window_scale {
            put(&[1, 3, 3, ws]);
        }
        let n = self.sack_blocks_that_fit();
        if n > 0 {
            put(&[1, 1, 5, (2 + 8 * n) as u8]);
            for &(l, r) in &self.sack.as_slice()[..n] {
                put(&l.to_be_bytes());
                put(&r.to_be_bytes());
            }
        }
        at
    }

    /// Decode options, skipping unknown kinds as Linux's
    /// `tcp_parse_options()` does; malformed lengths end the parse.
    pub fn decode(mut bytes: &[u8]) -> TcpOptions {
        // What every segment but the handshake's carries, alone when it
        // has no SACK blocks: `NOP NOP TS`, read at once.
        if let [1, 1, 8, 10, v0, v1, v2, v3, e0, e1, e2, e3] = *bytes {
            return TcpOptions {
                timestamp: Some((
                    u32::from_be_bytes([v0, v1, v2, v3]),
                    u32::from_be_bytes([e0, e1, e2, e3]),
                )),
                ..TcpOptions::default()
            };
        }
        let mut opts = TcpOptions::default();
        while let Some((&kind, rest)) = bytes.split_first() {
            match kind {
                0 => break,
                1 => {
                    bytes = rest;
                    continue;
                }
                _ => {}
            }
            let Some(&len) = rest.first() else { break };
            let len = usize::from(len);
            if len < 2 || len > bytes.len() {
                break;
            }
            opts.apply(kind, &bytes[2..len]);
            bytes = &bytes[len..];
        }
        opts
    }

    fn apply(&mut self, kind: u8, body: &[u8]) {
        match (kind, body.len()) {
            (2, 2) => self.mss = Some(u16::from_be_bytes([body[0], body[1]])),
            (3, 1) => self.window_scale = Some(body[0]),
            (4, 0) => self.sack_permitted = true,
            (5, n) if n % 8 == 0 => {
                for b in body.chunks_exact(8) {
                    let l = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                    let r = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
                    self.sack.push(l, r);
                }
            }
            (8, 8) => {
                let val = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
                let ecr = u32::from_be_bytes([body[4], body[5], body[6], body[7]]);
                self.timestamp = Some((val, ecr));
            }
            _ => {}
        }
    }
}

/// One TCP segment: header fields, options, payload length and IP ECN field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Segment {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number (wire value).
    pub seq: u32,
    /// Acknowledgment number (wire value; meaningful when ACK is set).
    pub ack: u32,
    /// Header flags.
    pub flags: Flags,
    /// Window field as on the wire (scaled by the sender's shift, except on SYNs).
    pub window: u16,
    /// Options.
    pub options: TcpOptions,
    /// Payload bytes (not materialized).
    pub payload_len: u32,
    /// ECN codepoint of the carrying IP header.
    pub ecn: Ecn,
}

/// Bytes of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Bytes of a TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;

impl Segment {
    /// TCP header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        TCP_HEADER_LEN + self.options.encoded_len()
    }
    /// Total length of the IPv4 packet carrying this segment.
    pub fn ip_len(&self) -> usize {
        IPV4_HEADER_LEN + self.header_len() + self.payload_len as usize
    }
    /// Sequence space consumed: payload plus one for SYN and one for FIN.
    pub fn seq_len(&self) -> u32 {
        let syn = u32::from(self.flags.contains(Flags::SYN));
        let fin = u32::from(self.flags.contains(Flags::FIN));
        self.payload_len.saturating_add(syn + fin)
    }
    /// Whether `next` can follow this segment in one GSO packet, as the
    /// kernel's TCP builds them: its data starts where this segment's
    /// full-sized (`mss`) payload ends, and everything but the sequence
    /// number and the flags the segmentation sets (PSH and FIN on the last
    /// segment, CWR on the first) is the same.
    pub fn continued_by(&self, next: &Segment, mss: u32) -> bool {
        let own = Flags(Flags::PSH.0 | Flags::FIN.0 | Flags::SYN.0 | Flags::RST.0);
        let set_by_gso = Flags(Flags::PSH.0 | Flags::FIN.0);
        self.payload_len == mss
            && next.payload_len > 0
            && self.flags.0 & own.0 == 0
            && next.flags.0 & !set_by_gso.0 == self.flags.0 & !Flags::CWR.0
            && next.seq == self.seq.wrapping_add(mss)
            && (
                next.src_port,
                next.dst_port,
                next.ack,
                next.window,
                next.ecn,
            ) == (
                self.src_port,
                self.dst_port,
                self.ack,
                self.window,
                self.ecn,
            )
            && next.options == self.options
    }

    /// True for a segment that only acknowledges: no payload, no SYN/FIN/RST.
    pub fn is_pure_ack(&self) -> bool {
        self.payload_len == 0
            && self.flags.contains(Flags::ACK)
            && self.flags.0 & (Flags::SYN.0 | Flags::FIN.0 | Flags::RST.0) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syn_options() -> TcpOptions {
        TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamp: Some((1, 0)),
            ..Default::default()
        }
    }

    #[test]
    fn linux_header_lengths() {
        let syn = Segment {
            options: syn_options(),
            flags: Flags::SYN,
            ..Default::default()
        };
        assert_eq!(syn.ip_len(), 60);
        let mut ack = Segment {
            flags: Flags::ACK,
            ..Default::default()
        };
        ack.options.timestamp = Some((5, 6));
        assert_eq!(ack.ip_len(), 52);
        ack.payload_len = 1448;
        assert_eq!(ack.ip_len(), 1500);
    }

    #[test]
    fn sack_blocks_limited_by_option_space() {
        let mut o = TcpOptions {
            timestamp: Some((1, 2)),
            ..Default::default()
        };
        for i in 0..4 {
            o.sack.push(i * 10, i * 10 + 5);
        }
        assert_eq!(o.sack_blocks_that_fit(), 3);
        assert_eq!(o.encoded_len(), 40);
        o.timestamp = None;
        assert_eq!(o.sack_blocks_that_fit(), 4);
        assert_eq!(o.encoded_len(), 36);
    }

    #[test]
    fn options_round_trip() {
        let o = syn_options();
        let bytes = o.encode();
        assert_eq!(bytes.len(), 20);
        assert_eq!(&bytes[..4], &[2, 4, 0x05, 0xb4]);
        assert_eq!(&bytes[4..8], &[4, 2, 8, 10]);
        assert_eq!(TcpOptions::decode(&bytes), o);
    }

    #[test]
    fn decode_survives_garbage() {
        for bytes in [&[5u8, 0][..], &[2, 200], &[8, 3, 1], &[3], &[1, 1, 1, 0, 9]] {
            let _ = TcpOptions::decode(bytes);
        }
    }
}
