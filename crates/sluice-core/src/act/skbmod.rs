//! skbmod: rewrite a frame's Ethernet addresses or type, swap its
//! addresses, or mark it Congestion Experienced.
//!
//! Modelled on net/sched/act_skbmod.c (notes: docs/research/skbmod.md).
//! One action does one kind of edit, decided at creation from what tc sent
//! (`tcf_skbmod_init`): the Ethernet fields whose values are present
//! (destination, source, type, in any combination), or `swap mac`, which
//! overrides them, or `ecn`, which overrides everything; the flag bits tc
//! sends for the fields are not read. An action with nothing to do is
//! refused (EINVAL) — after an existing index is bound to by a filter, which
//! reads no options, and before an existing index is refused to `add`.
//!
//! Per packet: a configured `drop` counts an overlimit and drops, before
//! anything is looked at. `ecn` sets an ECN-capable IPv4 or IPv6 packet's
//! ECN field to CE (a not-ECT or CE packet is left alone), fixing the IPv4
//! header checksum the kernel's way; other protocols pass untouched. A
//! packet too short for the header it edits is dropped with an overlimit.
//! The verdict is the configured one; `drops` never counts.
//!
//! The address edits and the swap rewrite the packet's Ethernet header
//! ([`Packet::eth`]).
//!
//! Deviations: the type edit changes nothing (the kernel edits only the
//! header's field, which sluice keeps as the packet's protocol, and the
//! packet's protocol stays); a packet without an Ethernet header (a TUN
//! device's) is left alone, where the kernel would write over its network
//! header. The length the kernel makes writable depends on the hook (at
//! ingress 14 bytes from the network header, at egress the MAC plus the IP
//! header); sluice asks for the IP header, the egress rule, and for the
//! Ethernet edits for nothing, as an Ethernet frame always has its header.

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::{Errno, TcError, TcResult};
use crate::packet::{Packet, ETH_P_IP, ETH_P_IPV6};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `SKBMOD_F_DMAC`: set the destination address.
pub const SKBMOD_F_DMAC: u64 = 0x1;
/// `SKBMOD_F_SMAC`: set the source address.
pub const SKBMOD_F_SMAC: u64 = 0x2;
/// `SKBMOD_F_ETYPE`: set the EtherType.
pub const SKBMOD_F_ETYPE: u64 = 0x4;
/// `SKBMOD_F_SWAPMAC`: swap the addresses.
pub const SKBMOD_F_SWAPMAC: u64 = 0x8;
/// `SKBMOD_F_ECN`: mark ECN-capable packets CE.
pub const SKBMOD_F_ECN: u64 = 0x10;

/// `TCA_SKBMOD_PARMS` (`struct tc_skbmod`'s verdict and flags) and the
/// `TCA_SKBMOD_DMAC`/`SMAC`/`ETYPE` attributes, as tc sends them and as the
/// kernel dumps them (then `flags` are the effective ones and the values
/// those the flags use).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkbmodOpts {
    /// The control action.
    pub action: Verdict,
    /// `parm.flags` (`SKBMOD_F_*`).
    pub flags: u64,
    /// The destination address, when sent.
    pub dmac: Option<[u8; 6]>,
    /// The source address, when sent.
    pub smac: Option<[u8; 6]>,
    /// The EtherType, when sent (tc sends none for 0).
    pub etype: Option<u16>,
}

impl SkbmodOpts {
    /// What the action will do (`tcf_skbmod_init`): the fields present,
    /// unless `swap mac` or `ecn` (which wins) is asked for.
    fn effective(&self) -> SkbmodOpts {
        let flags = if self.flags & SKBMOD_F_ECN != 0 {
            SKBMOD_F_ECN
        } else if self.flags & SKBMOD_F_SWAPMAC != 0 {
            SKBMOD_F_SWAPMAC
        } else {
            [
                (self.dmac.is_some(), SKBMOD_F_DMAC),
                (self.smac.is_some(), SKBMOD_F_SMAC),
                (self.etype.is_some(), SKBMOD_F_ETYPE),
            ]
            .iter()
            .filter(|(present, _)| *present)
            .fold(0, |f, (_, bit)| f | bit)
        };
        SkbmodOpts {
            action: self.action,
            flags,
            dmac: self.dmac.filter(|_| flags & SKBMOD_F_DMAC != 0),
            smac: self.smac.filter(|_| flags & SKBMOD_F_SMAC != 0),
            etype: self.etype.filter(|_| flags & SKBMOD_F_ETYPE != 0),
        }
    }
}

/// The check made before an existing index is refused or replaced: there
/// must be something to do.
pub(crate) fn check_edit(o: &SkbmodOpts) -> TcResult<()> {
    match o.effective().flags {
        0 => Err(TcError::errno(Errno::EINVAL)),
        _ => Ok(()),
    }
}

/// Validated parameters: the effective edit.
#[derive(Clone, Debug)]
pub struct SkbmodParams(SkbmodOpts);

impl SkbmodParams {
    pub(crate) fn validate(o: &SkbmodOpts, in_filter: bool) -> TcResult<Self> {
        check_edit(o)?;
        check_ctrlact(o.action, in_filter)?;
        Ok(SkbmodParams(o.effective()))
    }
}

/// An skbmod action.
#[derive(Debug)]
pub struct Skbmod {
    p: SkbmodParams,
    overlimits: u64,
}

impl Skbmod {
    pub(crate) fn new(p: SkbmodParams) -> Self {
        Skbmod { p, overlimits: 0 }
    }

    /// A replace sets a whole new edit: fields not given are gone.
    pub(crate) fn change(&mut self, p: SkbmodParams) {
        self.p = p;
    }
}

/// `INET_ECN_set_ce` on the network header: ECT(0) or ECT(1) becomes CE.
/// The IPv4 checksum is adjusted as the kernel adjusts it on x86: the
/// stored field read as a little-endian number plus `htons(0xFFFB + ecn)`,
/// the carry folded once (a sum of exactly 0xFFFF becomes 0).
fn set_ce(pkt: &mut Packet) {
    let protocol = pkt.protocol;
    let d = &mut pkt.data;
    match protocol {
        ETH_P_IP if d.len() >= 20 => {
            // TOS + 1, in its two ECN bits: not-ECT 01, ECT(1) 10, ECT(0) 11, CE 00.
            let ecn = (d[1].wrapping_add(1) & 3) as u32;
            if ecn & 2 == 0 {
                return;
            }
            let mut check = u16::from_le_bytes([d[10], d[11]]) as u32;
            check += 0xFBFF + (ecn << 8);
            check += (check >= 0xFFFF) as u32;
            d[10..12].copy_from_slice(&(check as u16).to_le_bytes());
            d[1] |= 3;
        }
        // An ECN-capable IPv6 traffic class (ECN bits 0x30 of byte 1).
        ETH_P_IPV6 if d.len() >= 40 && d[1] & 0x30 != 0 => d[1] |= 0x30,
        _ => {}
    }
}

impl Action for Skbmod {
    fn kind(&self) -> &'static str {
        "skbmod"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        let o = &self.p.0;
        if o.action == Verdict::Shot {
            self.overlimits += 1;
            return Verdict::Shot;
        }
        if o.flags == SKBMOD_F_ECN {
            let header = match pkt.protocol {
                ETH_P_IP => pkt.data.first().map_or(20, |b| (b & 0x0f) as usize * 4),
                ETH_P_IPV6 => 40,
                _ => return o.action,
            };
            // `skb_ensure_writable`: the header must be there.
            if pkt.data.len() < header {
                self.overlimits += 1;
                return Verdict::Shot;
            }
            set_ce(pkt);
        } else if let Some(e) = pkt.eth.as_mut() {
            // The Ethernet edits (the type edit changes only the header's
            // field, which sluice's packets keep as their protocol).
            if o.flags & SKBMOD_F_DMAC != 0 {
                e.dst = o.dmac.unwrap_or_default();
            }
            if o.flags & SKBMOD_F_SMAC != 0 {
                e.src = o.smac.unwrap_or_default();
            }
            if o.flags & SKBMOD_F_SWAPMAC != 0 {
                std::mem::swap(&mut e.dst, &mut e.src);
            }
        }
        o.action
    }

    fn drops(&self) -> u64 {
        0
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Skbmod(self.p.0.clone())
    }

    fn control(&self) -> Verdict {
        self.p.0.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(flags: u64, dmac: bool, etype: Option<u16>) -> SkbmodOpts {
        SkbmodOpts {
            action: Verdict::Pipe,
            flags,
            dmac: dmac.then_some([2, 0, 0, 0, 0, 1]),
            smac: None,
            etype,
        }
    }

    /// The one's-complement sum of a header (0xffff when its checksum is right).
    fn header_sum(d: &[u8]) -> u16 {
        crate::gso::fold(crate::gso::sum(d, 0))
    }

    /// An IPv4 header with TOS `tos` and a valid header checksum.
    fn ipv4(tos: u8) -> Packet {
        let mut d = vec![
            0x45, tos, 0, 20, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = header_sum(&d);
        d[10..12].copy_from_slice(&(!c).to_be_bytes());
        Packet::new(d, 34, ETH_P_IP)
    }

    #[test]
    fn the_edit_is_what_was_sent_with_swap_and_ecn_overriding() {
        // (flags sent, dmac sent, etype sent) -> effective flags (docs/research/skbmod.md §3.3).
        for (sent, eff) in [
            (opts(0x7, true, Some(0x800)), SKBMOD_F_DMAC | SKBMOD_F_ETYPE),
            (opts(0x5, true, None), SKBMOD_F_DMAC),
            (opts(0x4, false, None), 0),
            (opts(0x9, true, None), SKBMOD_F_SWAPMAC),
            (opts(0x1c, false, Some(0x86dd)), SKBMOD_F_ECN),
            (opts(0, true, None), SKBMOD_F_DMAC),
        ] {
            let e = sent.effective();
            assert_eq!(e.flags, eff, "{sent:?}");
            assert_eq!(e.dmac.is_some(), eff & SKBMOD_F_DMAC != 0);
            assert_eq!(e.etype.is_some(), eff & SKBMOD_F_ETYPE != 0);
        }
        assert_eq!(
            SkbmodParams::validate(&opts(0x4, false, None), false).map(|_| ()),
            Err(TcError::errno(Errno::EINVAL))
        );
    }

    #[test]
    fn ecn_marks_ect_packets_ce_with_a_valid_checksum() {
        let mut a =
            Skbmod::new(SkbmodParams::validate(&opts(SKBMOD_F_ECN, false, None), false).unwrap());
        // ECT(0), ECT(1) -> CE, checksum still valid; not-ECT and CE untouched.
        for (tos, want) in [
            (0x02, 0x03),
            (0x01, 0x03),
            (0xb8 | 2, 0xbb),
            (0x00, 0x00),
            (0x03, 0x03),
            (0xfc, 0xfc),
        ] {
            let mut p = ipv4(tos);
            let before = p.data.clone();
            assert_eq!(a.act(&mut p, Time(0)), Verdict::Pipe);
            assert_eq!(p.data[1], want, "tos {tos:#x}");
            assert_eq!(header_sum(&p.data), 0xffff, "tos {tos:#x}");
            if want == tos {
                assert_eq!(p.data, before);
            }
        }
        // IPv6: the traffic class's ECN bits (byte 1, 0x30).
        for (b1, want) in [(0x20, 0x30), (0x10, 0x30), (0x00, 0x00), (0x3f, 0x3f)] {
            let mut d = vec![0u8; 40];
            d[0] = 0x60;
            d[1] = b1;
            let mut p = Packet::new(d, 54, ETH_P_IPV6);
            a.act(&mut p, Time(0));
            assert_eq!(p.data[1], want);
        }
        // Not IP: untouched; a truncated IPv4 header: dropped as an overlimit.
        let mut arp = Packet::new(vec![0x45, 2, 0, 0], 60, 0x0806);
        assert_eq!(a.act(&mut arp, Time(0)), Verdict::Pipe);
        assert_eq!(arp.data[1], 2);
        let mut short = Packet::new(
            vec![
                0x46, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
            34,
            ETH_P_IP,
        );
        assert_eq!(a.act(&mut short, Time(0)), Verdict::Shot);
        assert_eq!((a.overlimits(), a.drops()), (1, 0));
    }

    #[test]
    fn the_checksum_is_adjusted_as_the_kernel_adjusts_it() {
        // The kernel's fold gives 0x0000 where RFC 1624 would give 0xffff:
        // ECT(0) adds 0xfffe (as htons on x86): a stored 0x0001 becomes 0.
        let mut p = ipv4(0x02);
        p.data[10..12].copy_from_slice(&[0x00, 0x01]);
        set_ce(&mut p);
        assert_eq!(&p.data[10..12], &[0x00, 0x00]);
        // And an ordinary value moves by one (ECT(0)) or two (ECT(1)).
        let mut p = ipv4(0x01);
        p.data[10..12].copy_from_slice(&[0x12, 0x34]);
        set_ce(&mut p);
        assert_eq!(&p.data[10..12], &[0x12, 0x32]);
    }

    #[test]
    fn a_configured_drop_counts_an_overlimit_and_touches_nothing() {
        let mut o = opts(SKBMOD_F_ECN, false, None);
        o.action = Verdict::Shot;
        let mut a = Skbmod::new(SkbmodParams::validate(&o, false).unwrap());
        let mut p = ipv4(0x02);
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Shot);
        assert_eq!(p.data[1], 0x02);
        assert_eq!((a.overlimits(), a.drops()), (1, 0));
    }

    #[test]
    fn address_edits_rewrite_the_ethernet_header() {
        use crate::packet::EthAddrs;
        let eth = EthAddrs {
            dst: [2, 0, 0, 0, 0, 9],
            src: [2, 0, 0, 0, 0, 8],
        };
        let mut set = Skbmod::new(SkbmodParams::validate(&opts(0x1, true, None), false).unwrap());
        let mut p = ipv4(0);
        p.eth = Some(eth);
        set.act(&mut p, Time(0));
        assert_eq!(
            p.eth.map(|e| (e.dst, e.src)),
            Some(([2, 0, 0, 0, 0, 1], eth.src))
        );
        let mut swap = Skbmod::new(
            SkbmodParams::validate(&opts(SKBMOD_F_SWAPMAC, false, None), false).unwrap(),
        );
        swap.act(&mut p, Time(0));
        assert_eq!(
            p.eth.map(|e| (e.dst, e.src)),
            Some((eth.src, [2, 0, 0, 0, 0, 1]))
        );
        // Without a header (a TUN device's packet) nothing changes.
        let mut q = ipv4(0);
        swap.act(&mut q, Time(0));
        assert_eq!((q.eth, &q.data), (None, &ipv4(0).data));
    }
}
