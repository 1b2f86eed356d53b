//! csum: recompute checksums a packet editor (or a NAT) left stale — the
//! IPv4 header's and those of ICMP, IGMP, TCP, UDP, UDP-Lite and SCTP.
//!
//! Modelled on net/sched/act_csum.c. Each checksum is recomputed only when
//! its target was asked for (`update_flags`) and the packet carries that
//! protocol:
//!
//! - IPv4: the transport checksum first (none for a fragment other than
//!   the first), then, with `iph`, the header checksum (fragments too);
//! - IPv6: the extension headers are walked (hop-by-hop, routing,
//!   destination options; a jumbo payload option sets the length) up to the
//!   transport header; a fragment header ends the walk with nothing done;
//!   IPv6 has no header checksum;
//! - TCP, UDP, UDP-Lite and ICMPv6 over the pseudo-header; ICMP and IGMP
//!   without; SCTP with CRC32c over the rest of the packet. An IPv4 UDP
//!   checksum of 0 ("none") is left alone; a UDP length that disagrees with
//!   the IP length leaves the checksum cleared (the kernel's quirk); a
//!   computed 0 is sent as 0xffff. TCP GSO packets are left to
//!   segmentation, which computes each segment's checksum.
//!
//! A packet whose headers are broken (shorter than they say, or than the
//! transport header) is dropped and counted; so is every packet when the
//! configured verdict is `drop`. Every packet counts in bytes/packets, and
//! the verdict is otherwise the configured one (`pass` by default).
//!
//! Deviation: the simulator's packets carry their headers but not always
//! their payload (`Packet::len` counts it); a transport checksum needs the
//! whole segment, so one whose payload is not there is left as it is
//! rather than dropped. The IPv4 header checksum needs only the header.

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::TcResult;
use crate::gso::{fold, sum};
use crate::packet::{GsoKind, Packet, ETH_P_IP, ETH_P_IPV6};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `TCA_CSUM_UPDATE_FLAG_*`: which checksums to recompute.
pub mod flag {
    /// The IPv4 header.
    pub const IPV4HDR: u32 = 1;
    /// ICMP (and ICMPv6).
    pub const ICMP: u32 = 2;
    /// IGMP.
    pub const IGMP: u32 = 4;
    /// TCP.
    pub const TCP: u32 = 8;
    /// UDP.
    pub const UDP: u32 = 16;
    /// UDP-Lite.
    pub const UDPLITE: u32 = 32;
    /// SCTP.
    pub const SCTP: u32 = 64;
}

/// `struct tc_csum`: the options tc sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CsumOpts {
    /// The control action (`pass` by default).
    pub action: Verdict,
    /// [`flag`] bits; the kernel stores any value, unknown bits included.
    pub update_flags: u32,
}

/// Validated parameters.
#[derive(Clone, Debug)]
pub struct CsumParams(CsumOpts);

impl CsumParams {
    pub(crate) fn validate(o: &CsumOpts, in_filter: bool) -> TcResult<Self> {
        check_ctrlact(o.action, in_filter)?;
        Ok(CsumParams(o.clone()))
    }
}

/// A csum action.
#[derive(Debug)]
pub struct Csum {
    p: CsumParams,
    drops: u64,
}

impl Csum {
    pub(crate) fn new(p: CsumParams) -> Self {
        Csum { p, drops: 0 }
    }

    pub(crate) fn change(&mut self, p: CsumParams) {
        self.p = p;
    }
}

/// Why a packet is dropped: its headers do not hold together.
struct Broken;

const PROTO_ICMP: u8 = 1;
const PROTO_IGMP: u8 = 2;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;
const PROTO_SCTP: u8 = 132;
const PROTO_UDPLITE: u8 = 136;

/// The transport protocols a flag covers, with their header sizes and
/// where their checksum field is.
fn handler(proto: u8, v6: bool, flags: u32) -> Option<(usize, usize)> {
    let (bit, hdr, at) = match proto {
        PROTO_ICMP if !v6 => (flag::ICMP, 8, 2),
        PROTO_ICMPV6 if v6 => (flag::ICMP, 8, 2),
        PROTO_IGMP if !v6 => (flag::IGMP, 8, 2),
        PROTO_TCP => (flag::TCP, 20, 16),
        PROTO_UDP => (flag::UDP, 8, 6),
        PROTO_UDPLITE => (flag::UDPLITE, 8, 6),
        PROTO_SCTP => (flag::SCTP, 12, 8),
        _ => return None,
    };
    (flags & bit != 0).then_some((hdr, at))
}

/// CRC32c (Castagnoli, reflected), as SCTP computes it (RFC 9260 App. A).
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0x82F6_3B78 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// Recompute the transport checksum of the segment at `ihl` of an IP packet
/// `ipl` bytes long, protocol `proto`, whose pseudo-header addresses sum to
/// `addrs`.
fn transport(
    pkt: &mut Packet,
    proto: u8,
    ihl: usize,
    ipl: usize,
    addrs: u64,
    v6: bool,
    flags: u32,
) -> Result<(), Broken> {
    let Some((hdr, at)) = handler(proto, v6, flags) else {
        return Ok(());
    };
    if ipl < ihl + hdr {
        return Err(Broken);
    }
    // The kernel leaves TCP GSO packets to segmentation (and UFO, which
    // sluice does not make; UDP_L4 ones it computes as any other).
    let gso_skips = proto == PROTO_TCP
        && matches!(
            pkt.gso.map(|g| g.kind),
            Some(GsoKind::TcpV4 | GsoKind::TcpV6)
        );
    if gso_skips || pkt.data.len() < ipl {
        // Segmentation checksums each piece; a payload not carried cannot be summed.
        return Ok(());
    }
    pkt.csum_partial = None;
    let d = &mut pkt.data;
    let (seg, l4len) = (ihl, ipl - ihl);
    let field = seg + at;
    match proto {
        PROTO_ICMP | PROTO_IGMP => {
            d[field..field + 2].fill(0);
            let c = !fold(sum(&d[seg..ipl], 0));
            d[field..field + 2].copy_from_slice(&c.to_be_bytes());
        }
        PROTO_SCTP => {
            // Over everything from the SCTP header to the packet's end
            // (the skb's, not the IP length's).
            d[field..field + 4].fill(0);
            let c = crc32c(&d[seg..]);
            d[field..field + 4].copy_from_slice(&c.to_le_bytes());
        }
        PROTO_UDP | PROTO_UDPLITE => {
            if proto == PROTO_UDP && !v6 && d[field..field + 2] == [0, 0] {
                return Ok(()); // no checksum, in IPv4
            }
            d[field..field + 2].fill(0);
            let ulen = u16::from_be_bytes([d[seg + 4], d[seg + 5]]) as usize;
            let covered = if proto == PROTO_UDP {
                (ulen == l4len).then_some(ulen)
            } else {
                match ulen {
                    0 => Some(l4len),
                    8.. if ulen <= l4len => Some(ulen),
                    _ => None,
                }
            };
            // A length that does not fit leaves the checksum cleared.
            let Some(cov) = covered else { return Ok(()) };
            let pseudo_len = if proto == PROTO_UDPLITE { ulen } else { cov };
            let s = sum(&d[seg..seg + cov], addrs + proto as u64 + pseudo_len as u64);
            let c = match !fold(s) {
                0 => 0xffff,
                c => c,
            };
            d[field..field + 2].copy_from_slice(&c.to_be_bytes());
        }
        _ => {
            // TCP, ICMPv6: over the whole segment and the pseudo-header.
            d[field..field + 2].fill(0);
            let c = !fold(sum(&d[seg..ipl], addrs + proto as u64 + l4len as u64));
            d[field..field + 2].copy_from_slice(&c.to_be_bytes());
        }
    }
    Ok(())
}

fn ipv4(pkt: &mut Packet, flags: u32) -> Result<(), Broken> {
    let d = &pkt.data;
    if d.len() < 20 {
        return Err(Broken);
    }
    let ihl = 4 * (d[0] & 0x0f) as usize;
    let ipl = u16::from_be_bytes([d[2], d[3]]) as usize;
    let later_fragment = u16::from_be_bytes([d[6], d[7]]) & 0x1fff != 0;
    let addrs = sum(&d[12..20], 0);
    if !later_fragment {
        let proto = d[9];
        transport(pkt, proto, ihl, ipl, addrs, false, flags)?;
    }
    if flags & flag::IPV4HDR != 0 {
        let d = &mut pkt.data;
        if ihl < 20 || d.len() < ihl {
            return Err(Broken);
        }
        d[10..12].fill(0);
        let c = !fold(sum(&d[..ihl], 0));
        d[10..12].copy_from_slice(&c.to_be_bytes());
    }
    Ok(())
}

fn ipv6(pkt: &mut Packet, flags: u32) -> Result<(), Broken> {
    let Some((proto, hl, payload)) = ipv6_transport(&pkt.data)? else {
        return Ok(());
    };
    let addrs = sum(&pkt.data[8..40], 0);
    transport(pkt, proto, hl, payload + 40, addrs, true, flags)
}

/// Walk an IPv6 packet's extension headers: the transport protocol, its
/// offset and the payload length (a jumbo option's, if any); `None` when
/// nothing is to be computed (a fragment, or the headers run out).
fn ipv6_transport(d: &[u8]) -> Result<Option<(u8, usize, usize)>, Broken> {
    if d.len() < 40 {
        return Err(Broken);
    }
    let mut payload = u16::from_be_bytes([d[4], d[5]]) as usize;
    let (mut next, mut hl) = (d[6], 40usize);
    loop {
        match next {
            44 => return Ok(None), // a fragment: nothing is computed
            0 | 43 | 60 => {
                let Some(&[nh, len]) = d.get(hl..hl + 2) else {
                    return Err(Broken);
                };
                let ext = 8 * (len as usize + 1);
                let opts = d.get(hl..hl + ext).ok_or(Broken)?;
                if next == 0 {
                    if let Some(jumbo) = jumbo_length(opts, hl)? {
                        payload = jumbo;
                    }
                }
                (next, hl) = (nh, hl + ext);
            }
            proto => return Ok(Some((proto, hl, payload))),
        }
        if hl >= d.len() {
            return Ok(None);
        }
    }
}

/// A hop-by-hop header's jumbo payload length (RFC 2675), if it has one; a
/// malformed jumbo option breaks the packet. `at` is the header's offset.
fn jumbo_length(opts: &[u8], at: usize) -> Result<Option<usize>, Broken> {
    let mut off = 2;
    while off < opts.len() {
        match opts[off] {
            0 => off += 1, // Pad1
            0xc2 => {
                let ok =
                    opts.get(off + 1) == Some(&4) && off + 6 <= opts.len() && (at + off) & 3 == 2;
                if !ok {
                    return Err(Broken);
                }
                let v = u32::from_be_bytes(opts[off + 2..off + 6].try_into().expect("4"));
                return Ok(Some(v as usize));
            }
            _ => {
                let Some(&len) = opts.get(off + 1) else { break };
                off += len as usize + 2;
            }
        }
    }
    Ok(None)
}

impl Action for Csum {
    fn kind(&self) -> &'static str {
        "csum"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        let o = &self.p.0;
        if o.action == Verdict::Shot {
            self.drops += 1;
            return Verdict::Shot;
        }
        let done = match pkt.protocol {
            ETH_P_IP => ipv4(pkt, o.update_flags),
            ETH_P_IPV6 => ipv6(pkt, o.update_flags),
            _ => Ok(()),
        };
        match done {
            Ok(()) => o.action,
            Err(Broken) => {
                self.drops += 1;
                Verdict::Shot
            }
        }
    }

    fn drops(&self) -> u64 {
        self.drops
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Csum(self.p.0.clone())
    }

    fn control(&self) -> Verdict {
        self.p.0.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn csum(flags: u32) -> Csum {
        let o = CsumOpts {
            action: Verdict::Ok,
            update_flags: flags,
        };
        Csum::new(CsumParams::validate(&o, true).unwrap())
    }

    /// A packet etherparse built with correct checksums, then `spoil`ed.
    fn built(bytes: Vec<u8>, protocol: u16, spoil: &[usize]) -> (Packet, Vec<u8>) {
        let mut d = bytes.clone();
        for &i in spoil {
            d[i] ^= 0x5a;
        }
        (Packet::new(d, bytes.len() as u32, protocol), bytes)
    }

    fn v4() -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
    }

    fn v6() -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
        let (a, b) = (
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        );
        PacketBuilder::ipv6(a, b, 64)
    }

    fn write(b: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut v = vec![];
        b(&mut v);
        v
    }

    #[test]
    fn checksums_come_back_as_etherparse_computes_them() {
        let payload = [7u8; 37];
        let tcp4 = write(|v| v4().tcp(1000, 80, 1, 100).write(v, &payload).unwrap());
        let udp4 = write(|v| v4().udp(1000, 53).write(v, &payload).unwrap());
        let icmp4 = write(|v| v4().icmpv4_echo_request(1, 2).write(v, &payload).unwrap());
        let tcp6 = write(|v| v6().tcp(1000, 80, 1, 100).write(v, &payload).unwrap());
        let udp6 = write(|v| v6().udp(1000, 53).write(v, &payload).unwrap());
        let icmp6 = write(|v| v6().icmpv6_echo_request(1, 2).write(v, &payload).unwrap());
        let all = flag::IPV4HDR | flag::ICMP | flag::TCP | flag::UDP;
        // IPv4 header checksum at 10, TCP's at 36, UDP's at 26, ICMP's at 22;
        // IPv6: TCP's at 56, UDP's at 46, ICMPv6's at 42.
        for (bytes, proto, spoil) in [
            (tcp4, ETH_P_IP, vec![10, 36]),
            (udp4, ETH_P_IP, vec![11, 26]),
            (icmp4, ETH_P_IP, vec![10, 23]),
            (tcp6, ETH_P_IPV6, vec![57]),
            (udp6, ETH_P_IPV6, vec![46]),
            (icmp6, ETH_P_IPV6, vec![42]),
        ] {
            let (mut p, want) = built(bytes, proto, &spoil);
            assert_ne!(p.data, want);
            assert_eq!(csum(all).act(&mut p, Time(0)), Verdict::Ok);
            assert_eq!(p.data, want, "{spoil:?}");
        }
    }

    #[test]
    fn only_what_was_asked_and_ipv4_udp_without_checksum() {
        let tcp = write(|v| v4().tcp(1000, 80, 1, 100).write(v, &[1, 2, 3]).unwrap());
        // Asked for the IP header only: the TCP checksum stays spoiled.
        let (mut p, want) = built(tcp, ETH_P_IP, &[10, 36]);
        csum(flag::IPV4HDR).act(&mut p, Time(0));
        assert_eq!(p.data[10..12], want[10..12]);
        assert_ne!(p.data[36], want[36]);
        // An IPv4 UDP checksum of 0 means none: left alone.
        let mut udp = write(|v| v4().udp(1, 2).write(v, &[9; 10]).unwrap());
        udp[26..28].fill(0);
        let (mut p, want) = built(udp, ETH_P_IP, &[]);
        csum(flag::UDP).act(&mut p, Time(0));
        assert_eq!(p.data, want);
    }

    #[test]
    fn sctp_gets_its_crc32c() {
        // The standard check value.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let mut d = vec![
            0x45, 0, 0, 32, 0, 0, 0, 0, 64, PROTO_SCTP, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        d.extend_from_slice(&[0, 1, 0, 2, 0, 0, 0, 7, 0xde, 0xad, 0xbe, 0xef]);
        let mut p = Packet::new(d, 32, ETH_P_IP);
        csum(flag::SCTP).act(&mut p, Time(0));
        let mut zeroed = p.data[20..].to_vec();
        zeroed[8..12].fill(0);
        assert_eq!(p.data[28..32], crc32c(&zeroed).to_le_bytes());
    }

    #[test]
    fn broken_headers_and_drop_verdicts_are_drops() {
        let mut a = csum(flag::TCP);
        // tot_len says 40, but no room for a TCP header within it.
        let mut d = vec![
            0x45, 0, 0, 30, 0, 0, 0, 0, 64, PROTO_TCP, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        d.resize(30, 0);
        let mut p = Packet::new(d, 30, ETH_P_IP);
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Shot);
        let mut short = Packet::new(vec![0x45; 10], 10, ETH_P_IP);
        assert_eq!(a.act(&mut short, Time(0)), Verdict::Shot);
        assert_eq!(a.drops(), 2);
        // A payload the packet does not carry: left as it is, not dropped.
        let tcp = write(|v| v4().tcp(1000, 80, 1, 100).write(v, &[5; 100]).unwrap());
        let mut p = Packet::new(tcp[..40].to_vec(), 140, ETH_P_IP);
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Ok);
        assert_eq!(p.data[..], tcp[..40]);
        let mut d = csum(flag::TCP);
        d.p.0.action = Verdict::Shot;
        assert_eq!(d.act(&mut p, Time(0)), Verdict::Shot);
        assert_eq!(d.drops(), 1);
    }
}
