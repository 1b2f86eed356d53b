//! The flow dissector and the perturbed flow hash (`skb_get_hash_perturb`).
//!
//! Modelled on net/core/flow_dissector.c: a packet is dissected into flow
//! keys — network protocol, transport protocol, source and destination
//! addresses, ports (or the IPsec SPI), the ICMP type, code and echo id, and
//! the IPv6 flow label — and the keys are hashed with a key (the
//! "perturbation"). As in `__flow_hash_from_keys`, the keys are first put in
//! a canonical order (the smaller address and the smaller port first), so both
//! directions of a connection hash alike, and a hash of 0 becomes 1.
//!
//! Dissection follows the kernel's `flow_keys_dissector` with
//! `FLOW_DISSECTOR_F_STOP_AT_FLOW_LABEL`, which is what `skb_get_hash*` use:
//! - IPv4: a fragment (first or not) hashes without ports;
//! - IPv6: hop-by-hop, routing, destination-options and fragment headers are
//!   skipped to reach the transport header; a non-zero flow label ends the
//!   dissection, so such flows hash on addresses + label, without ports;
//! - ports are read for TCP, UDP, UDP-Lite, DCCP and SCTP; ESP contributes its
//!   SPI and AH the SPI at offset 4; ICMP/ICMPv6 contribute type and code, and
//!   the identifier of echo requests and replies;
//! - anything else (ARP, a truncated header) hashes on what was found.
//!
//! Deviation: since Linux 4.13 the kernel hashes the keys with SipHash and a
//! 128-bit key; we hash the same keys with Bob Jenkins' lookup3 (`jhash2`,
//! which the kernel used before and still provides in include/linux/jhash.h)
//! and a 32-bit key. Which flows collide therefore differs from a given
//! kernel run — as it does between two kernel runs, whose keys are random.

use crate::packet::{Packet, ETH_P_IP, ETH_P_IPV6};

/// lookup3's arbitrary initial value (`JHASH_INITVAL`).
pub const JHASH_INITVAL: u32 = 0xdead_beef;

#[inline(always)]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

#[inline(always)]
fn finish(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// `jhash`: lookup3 over bytes (Jenkins' `hashlittle`).
pub fn jhash(key: &[u8], initval: u32) -> u32 {
    let mut a = JHASH_INITVAL
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let (mut b, mut c) = (a, a);
    let word = |s: &[u8]| {
        let mut w = [0u8; 4];
        w[..s.len()].copy_from_slice(s);
        u32::from_le_bytes(w)
    };
    let mut k = key;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        mix(&mut a, &mut b, &mut c);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    a = a.wrapping_add(word(&k[..k.len().min(4)]));
    if k.len() > 4 {
        b = b.wrapping_add(word(&k[4..k.len().min(8)]));
    }
    if k.len() > 8 {
        c = c.wrapping_add(word(&k[8..]));
    }
    finish(&mut a, &mut b, &mut c);
    c
}

/// `jhash2`: lookup3 over 32-bit words (Jenkins' `hashword`). Inlined, so
/// a caller hashing a fixed number of words gets the rounds unrolled.
#[inline]
pub fn jhash2(key: &[u32], initval: u32) -> u32 {
    let mut a = JHASH_INITVAL
        .wrapping_add((key.len() as u32).wrapping_shl(2))
        .wrapping_add(initval);
    let (mut b, mut c) = (a, a);
    let mut k = key;
    while k.len() > 3 {
        a = a.wrapping_add(k[0]);
        b = b.wrapping_add(k[1]);
        c = c.wrapping_add(k[2]);
        mix(&mut a, &mut b, &mut c);
        k = &k[3..];
    }
    if k.is_empty() {
        return c;
    }
    a = a.wrapping_add(k[0]);
    if k.len() > 1 {
        b = b.wrapping_add(k[1]);
    }
    if k.len() > 2 {
        c = c.wrapping_add(k[2]);
    }
    finish(&mut a, &mut b, &mut c);
    c
}

/// `jhash_3words`.
pub fn jhash_3words(a: u32, b: u32, c: u32, initval: u32) -> u32 {
    let iv = initval.wrapping_add(JHASH_INITVAL).wrapping_add(3 << 2);
    let (mut a, mut b, mut c) = (a.wrapping_add(iv), b.wrapping_add(iv), c.wrapping_add(iv));
    finish(&mut a, &mut b, &mut c);
    c
}

/// The addresses of a flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlowAddrs {
    /// Not IP, or the header is truncated.
    #[default]
    None,
    /// IPv4 source and destination, in network order as numbers.
    V4 {
        /// Source address.
        src: u32,
        /// Destination address.
        dst: u32,
    },
    /// IPv6 source and destination.
    V6 {
        /// Source address.
        src: [u8; 16],
        /// Destination address.
        dst: [u8; 16],
    },
}

/// What the flow dissector extracts (`struct flow_keys`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKeys {
    /// EtherType (`basic.n_proto`).
    pub n_proto: u16,
    /// Transport protocol (`basic.ip_proto`), 0 if unknown.
    pub ip_proto: u8,
    /// The packet is an IP fragment (`FLOW_DIS_IS_FRAGMENT`).
    pub is_fragment: bool,
    /// IPv6 flow label (20 bits), 0 if none.
    pub flow_label: u32,
    /// Source and destination ports (or the SPI split in halves).
    pub ports: (u16, u16),
    /// ICMP type, code and echo identifier.
    pub icmp: (u8, u8, u16),
    /// Addresses.
    pub addrs: FlowAddrs,
}

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_DCCP: u8 = 33;
const IPPROTO_ESP: u8 = 50;
const IPPROTO_AH: u8 = 51;
const IPPROTO_ICMPV6: u8 = 58;
const IPPROTO_SCTP: u8 = 132;
const IPPROTO_UDPLITE: u8 = 136;

impl FlowKeys {
    /// Dissect `pkt` (whose `data` starts at the network header).
    pub fn dissect(pkt: &Packet) -> FlowKeys {
        Self::dissect_with(pkt, true)
    }

    /// Dissect `pkt` without stopping at an IPv6 flow label (the kernel's
    /// `skb_flow_dissect_flow_keys(skb, keys, 0)`, which cls_flow uses).
    pub fn dissect_all(pkt: &Packet) -> FlowKeys {
        Self::dissect_with(pkt, false)
    }

    fn dissect_with(pkt: &Packet, stop_at_flow_label: bool) -> FlowKeys {
        let mut k = FlowKeys {
            n_proto: pkt.protocol,
            ..Default::default()
        };
        let d = &pkt.data;
        let l4 = match pkt.protocol {
            ETH_P_IP => k.dissect_v4(d),
            ETH_P_IPV6 => k.dissect_v6(d, stop_at_flow_label),
            _ => None,
        };
        if let Some(off) = l4 {
            k.dissect_l4(d, off);
        }
        k
    }

    /// IPv4 header; returns the transport header offset if ports may be read.
    fn dissect_v4(&mut self, d: &[u8]) -> Option<usize> {
        if d.len() < 20 || d[0] >> 4 != 4 {
            return None;
        }
        let ihl = (d[0] & 0x0f) as usize * 4;
        if ihl < 20 {
            return None;
        }
        self.ip_proto = d[9];
        let word = |o: usize| u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]);
        self.addrs = FlowAddrs::V4 {
            src: word(12),
            dst: word(16),
        };
        let frag = u16::from_be_bytes([d[6], d[7]]);
        if frag & 0x3fff != 0 {
            // More-fragments set or a non-zero offset.
            self.is_fragment = true;
            return None;
        }
        Some(ihl)
    }

    /// IPv6 header and extension headers.
    fn dissect_v6(&mut self, d: &[u8], stop_at_flow_label: bool) -> Option<usize> {
        if d.len() < 40 || d[0] >> 4 != 6 {
            return None;
        }
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&d[8..24]);
        dst.copy_from_slice(&d[24..40]);
        self.addrs = FlowAddrs::V6 { src, dst };
        self.ip_proto = d[6];
        let label = u32::from_be_bytes([0, d[1] & 0x0f, d[2], d[3]]);
        if label != 0 {
            self.flow_label = label;
            if stop_at_flow_label {
                return None;
            }
        }
        let (mut next, mut off) = (d[6], 40usize);
        loop {
            match next {
                0 | 43 | 60 => {
                    let h = d.get(off..off + 2)?;
                    next = h[0];
                    off += (h[1] as usize + 1) * 8;
                }
                44 => {
                    let h = d.get(off..off + 8)?;
                    next = h[0];
                    off += 8;
                    if u16::from_be_bytes([h[2], h[3]]) & 0xfff9 != 0 {
                        self.is_fragment = true;
                        self.ip_proto = next;
                        return None;
                    }
                }
                _ => break,
            }
        }
        self.ip_proto = next;
        Some(off)
    }

    fn dissect_l4(&mut self, d: &[u8], off: usize) {
        let at = |o: usize| d.get(off + o..off + o + 4);
        match self.ip_proto {
            IPPROTO_TCP | IPPROTO_UDP | IPPROTO_UDPLITE | IPPROTO_DCCP | IPPROTO_SCTP
            | IPPROTO_ESP => {
                if let Some(p) = at(0) {
                    self.ports = (
                        u16::from_be_bytes([p[0], p[1]]),
                        u16::from_be_bytes([p[2], p[3]]),
                    );
                }
            }
            IPPROTO_AH => {
                if let Some(p) = at(4) {
                    self.ports = (
                        u16::from_be_bytes([p[0], p[1]]),
                        u16::from_be_bytes([p[2], p[3]]),
                    );
                }
            }
            IPPROTO_ICMP | IPPROTO_ICMPV6 => {
                if let Some(h) = d.get(off..off + 2) {
                    let (ty, code) = (h[0], h[1]);
                    let echo = match self.ip_proto {
                        IPPROTO_ICMP => ty == 0 || ty == 8,
                        _ => ty == 128 || ty == 129,
                    };
                    let id = match (echo, d.get(off + 4..off + 6)) {
                        (true, Some(i)) => u16::from_be_bytes([i[0], i[1]]),
                        _ => 0,
                    };
                    self.icmp = (ty, code, id);
                }
            }
            _ => {}
        }
    }

    /// `__flow_hash_consistentify`: smaller address first, smaller port first.
    pub fn canonical(mut self) -> FlowKeys {
        match &mut self.addrs {
            FlowAddrs::V4 { src, dst } if *dst < *src => std::mem::swap(src, dst),
            FlowAddrs::V6 { src, dst } if *dst < *src => std::mem::swap(src, dst),
            _ => {}
        }
        if self.ports.1 < self.ports.0 {
            self.ports = (self.ports.1, self.ports.0);
        }
        self
    }

    /// The four words every flow hashes, before its addresses.
    fn head_words(&self) -> [u32; 4] {
        [
            (self.n_proto as u32) << 16 | (self.ip_proto as u32) << 8,
            self.flow_label,
            (self.ports.0 as u32) << 16 | self.ports.1 as u32,
            (self.icmp.0 as u32) << 24 | (self.icmp.1 as u32) << 16 | self.icmp.2 as u32,
        ]
    }

    /// `__flow_hash_from_keys`: the hash of the canonical keys under `key`;
    /// never 0. The words hashed are the head words, then the addresses (4,
    /// 6 or 12 words in all); each length hashes a fixed-size array, so the
    /// rounds unroll.
    pub fn hash(&self, key: u32) -> u32 {
        if let FlowAddrs::V4 { src, dst } = self.addrs {
            // The common case, made canonical in registers rather than by
            // copying the keys (the same words as below).
            let (src, dst) = if dst < src { (dst, src) } else { (src, dst) };
            let (p0, p1) = self.ports;
            let ports = if p1 < p0 { (p1, p0) } else { (p0, p1) };
            let [w0, w1, w2, w3] = FlowKeys { ports, ..*self }.head_words();
            return match jhash2(&[w0, w1, w2, w3, src, dst], key) {
                0 => 1,
                h => h,
            };
        }
        let k = self.canonical();
        let [w0, w1, w2, w3] = k.head_words();
        let h = match k.addrs {
            FlowAddrs::None => jhash2(&[w0, w1, w2, w3], key),
            FlowAddrs::V4 { src, dst } => jhash2(&[w0, w1, w2, w3, src, dst], key),
            FlowAddrs::V6 { src, dst } => {
                let mut w = [w0, w1, w2, w3, 0, 0, 0, 0, 0, 0, 0, 0];
                let words = src.chunks_exact(4).chain(dst.chunks_exact(4));
                for (slot, c) in w[4..].iter_mut().zip(words) {
                    *slot = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
                }
                jhash2(&w, key)
            }
        };
        match h {
            0 => 1,
            h => h,
        }
    }
}

/// `skb_get_hash_perturb`: dissect `pkt` and hash its flow keys under `perturbation`.
#[inline]
pub fn flow_hash(pkt: &Packet, perturbation: u32) -> u32 {
    match tcp_udp_v4_words(pkt) {
        Some(words) => nonzero(jhash2(&words, perturbation)),
        None => dissected_hash(pkt, perturbation),
    }
}

/// [`flow_hash`] of any other packet, through the full dissector: out of
/// line, so that the common case needs no stack frame.
#[inline(never)]
fn dissected_hash(pkt: &Packet, perturbation: u32) -> u32 {
    FlowKeys::dissect(pkt).hash(perturbation)
}

fn nonzero(h: u32) -> u32 {
    match h {
        0 => 1,
        h => h,
    }
}

/// The words [`FlowKeys::hash`] hashes for the commonest packet, an
/// unfragmented IPv4 TCP or UDP packet with its ports in `data`, read
/// straight from the header; `None` for any other packet, which takes the
/// full dissector. The flow-keyed qdiscs (sfq, fq_codel, fq) hash every
/// packet, and building the keys cost as much as hashing them.
#[inline]
fn tcp_udp_v4_words(pkt: &Packet) -> Option<[u32; 6]> {
    let d = &pkt.data;
    if pkt.protocol != ETH_P_IP || d.len() < 20 || d[0] >> 4 != 4 {
        return None;
    }
    let ihl = (d[0] & 0x0f) as usize * 4;
    let proto = d[9];
    let frag = u16::from_be_bytes([d[6], d[7]]);
    if ihl < 20 || frag & 0x3fff != 0 || !(proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
        return None;
    }
    let p = d.get(ihl..ihl + 4)?;
    let word = |o: usize| u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]);
    let (src, dst) = (word(12), word(16));
    let (sport, dport) = (
        u16::from_be_bytes([p[0], p[1]]),
        u16::from_be_bytes([p[2], p[3]]),
    );
    // `__flow_hash_consistentify`, then the head words and the addresses.
    let (lo, hi) = if dst < src { (dst, src) } else { (src, dst) };
    let (p0, p1) = if dport < sport {
        (dport, sport)
    } else {
        (sport, dport)
    };
    Some([
        (ETH_P_IP as u32) << 16 | (proto as u32) << 8,
        0,
        (p0 as u32) << 16 | p1 as u32,
        0,
        lo,
        hi,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An IPv4 packet: `proto` from `src:sport` to `dst:dport`, `frag` = flags+offset.
    pub(crate) fn v4(
        src: [u8; 4],
        dst: [u8; 4],
        proto: u8,
        sport: u16,
        dport: u16,
        frag: u16,
    ) -> Packet {
        let mut d = vec![0u8; 28];
        d[0] = 0x45;
        d[6..8].copy_from_slice(&frag.to_be_bytes());
        d[9] = proto;
        d[12..16].copy_from_slice(&src);
        d[16..20].copy_from_slice(&dst);
        d[20..22].copy_from_slice(&sport.to_be_bytes());
        d[22..24].copy_from_slice(&dport.to_be_bytes());
        Packet::new(d, 82, ETH_P_IP)
    }

    fn v6(label: u32, next: u8, ext: &[u8], sport: u16, dport: u16) -> Packet {
        let mut d = vec![0u8; 40];
        d[0] = 0x60;
        d[1] = ((label >> 16) & 0x0f) as u8;
        d[2] = (label >> 8) as u8;
        d[3] = label as u8;
        d[6] = next;
        d[8] = 0x20;
        d[23] = 1;
        d[24] = 0x20;
        d[39] = 2;
        d.extend_from_slice(ext);
        d.extend_from_slice(&sport.to_be_bytes());
        d.extend_from_slice(&dport.to_be_bytes());
        d.extend_from_slice(&[0; 4]);
        Packet::new(d, 100, ETH_P_IPV6)
    }

    #[test]
    fn jhash_matches_lookup3_published_values() {
        // From Bob Jenkins' lookup3.c driver5 (hashlittle).
        let s = b"Four score and seven years ago";
        assert_eq!(jhash(s, 0), 0x1777_0551);
        assert_eq!(jhash(s, 1), 0xcd62_8161);
        assert_eq!(jhash(b"", 0), 0xdead_beef);
        // hashword and hashlittle agree on whole little-endian words.
        let words: Vec<u32> = s[..28]
            .chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(jhash2(&words, 7), jhash(&s[..28], 7));
        assert_eq!(
            jhash2(&words[..3], 7),
            jhash_3words(words[0], words[1], words[2], 7)
        );
    }

    #[test]
    fn ipv4_tcp_keys() {
        let k = FlowKeys::dissect(&v4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            IPPROTO_TCP,
            40000,
            80,
            0x4000,
        ));
        assert_eq!(k.ip_proto, IPPROTO_TCP);
        assert_eq!(k.ports, (40000, 80));
        assert_eq!(
            k.addrs,
            FlowAddrs::V4 {
                src: 0x0a00_0001,
                dst: 0x0a00_0002
            }
        );
        assert!(!k.is_fragment, "DF alone is not a fragment");
    }

    #[test]
    fn fragments_hash_without_ports() {
        for frag in [0x2000, 0x0010, 0x2010] {
            let k = FlowKeys::dissect(&v4([1, 1, 1, 1], [2, 2, 2, 2], IPPROTO_UDP, 5, 6, frag));
            assert!(k.is_fragment);
            assert_eq!(k.ports, (0, 0));
        }
    }

    #[test]
    fn both_directions_hash_alike_and_flows_differ() {
        let ab = v4([10, 0, 0, 1], [10, 0, 0, 2], IPPROTO_TCP, 40000, 80, 0);
        let ba = v4([10, 0, 0, 2], [10, 0, 0, 1], IPPROTO_TCP, 80, 40000, 0);
        let other = v4([10, 0, 0, 1], [10, 0, 0, 2], IPPROTO_TCP, 40001, 80, 0);
        assert_eq!(flow_hash(&ab, 42), flow_hash(&ba, 42));
        assert_ne!(flow_hash(&ab, 42), flow_hash(&other, 42));
        assert_ne!(
            flow_hash(&ab, 42),
            flow_hash(&ab, 43),
            "the perturbation changes the hash"
        );
    }

    #[test]
    fn ipv6_skips_extension_headers_and_stops_at_a_flow_label() {
        // A hop-by-hop options header (8 bytes) before UDP.
        let hbh = [IPPROTO_UDP, 0, 0, 0, 0, 0, 0, 0];
        let k = FlowKeys::dissect(&v6(0, 0, &hbh, 1234, 53));
        assert_eq!((k.ip_proto, k.ports), (IPPROTO_UDP, (1234, 53)));
        let k = FlowKeys::dissect(&v6(0xabcde, IPPROTO_UDP, &[], 1234, 53));
        assert_eq!((k.flow_label, k.ports), (0xabcde, (0, 0)));
        // A non-first fragment.
        let frag = [IPPROTO_UDP, 0, 0x01, 0x00, 0, 0, 0, 1];
        let k = FlowKeys::dissect(&v6(0, 44, &frag, 1, 2));
        assert!(k.is_fragment && k.ports == (0, 0));
    }

    #[test]
    fn icmp_echo_hashes_on_its_identifier() {
        let mut p = v4([1, 1, 1, 1], [2, 2, 2, 2], IPPROTO_ICMP, 0, 0, 0);
        p.data[20] = 8; // echo request
        p.data[24..26].copy_from_slice(&0x1234u16.to_be_bytes());
        p.data[26..28].copy_from_slice(&7u16.to_be_bytes()); // sequence: not a key
        let k = FlowKeys::dissect(&p);
        assert_eq!(k.icmp, (8, 0, 0x1234));
        let mut q = p.clone();
        q.data[26..28].copy_from_slice(&8u16.to_be_bytes());
        assert_eq!(flow_hash(&p, 1), flow_hash(&q, 1));
    }

    proptest! {
        #[test]
        fn dissecting_any_bytes_never_panics_and_hash_is_nonzero(
            data in proptest::collection::vec(any::<u8>(), 0..80),
            proto in prop_oneof![Just(ETH_P_IP), Just(ETH_P_IPV6), any::<u16>()],
            key in any::<u32>(),
        ) {
            let p = Packet::new(data, 100, proto);
            prop_assert_ne!(flow_hash(&p, key), 0);
        }

        /// `flow_hash`'s IPv4 TCP/UDP shortcut gives what the dissector
        /// and `FlowKeys::hash` give, for headers near and off its case.
        #[test]
        fn the_tcp_udp_v4_shortcut_matches_the_dissector(
            mut data in proptest::collection::vec(any::<u8>(), 16..64),
            vihl in prop_oneof![Just(0x45u8), Just(0x46u8), Just(0x44u8), Just(0x65u8), any::<u8>()],
            proto in prop_oneof![Just(6u8), Just(17u8), Just(1u8), Just(132u8), any::<u8>()],
            frag in prop_oneof![Just(0u16), Just(0x4000u16), Just(0x2000u16), Just(1u16), any::<u16>()],
            ether in prop_oneof![Just(ETH_P_IP), Just(ETH_P_IPV6), any::<u16>()],
            key in any::<u32>(),
        ) {
            data[0] = vihl;
            if data.len() > 9 {
                data[9] = proto;
            }
            if data.len() > 7 {
                data[6..8].copy_from_slice(&frag.to_be_bytes());
            }
            let p = Packet::new(data, 100, ether);
            prop_assert_eq!(flow_hash(&p, key), FlowKeys::dissect(&p).hash(key));
        }

        /// `hash`'s IPv4 shortcut gives what hashing the canonical keys'
        /// words, written out plainly, gives.
        #[test]
        fn the_ipv4_shortcut_hashes_the_canonical_keys(
            src in any::<u32>(), dst in any::<u32>(),
            sport in any::<u16>(), dport in any::<u16>(),
            proto in any::<u8>(), key in any::<u32>(),
        ) {
            let k = FlowKeys {
                n_proto: ETH_P_IP,
                ip_proto: proto,
                ports: (sport, dport),
                addrs: FlowAddrs::V4 { src, dst },
                ..Default::default()
            };
            let c = k.canonical();
            let FlowAddrs::V4 { src: s, dst: d } = c.addrs else { unreachable!() };
            let [w0, w1, w2, w3] = c.head_words();
            let want = match jhash2(&[w0, w1, w2, w3, s, d], key) {
                0 => 1,
                h => h,
            };
            prop_assert_eq!(k.hash(key), want);
        }
    }
}
