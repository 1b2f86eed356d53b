//! vlan: push, pop or modify a packet's 802.1Q/802.1ad tag, and answer a
//! verdict (`pipe` by default).
//!
//! Modelled on net/sched/act_vlan.c and the skb VLAN helpers. A packet's
//! outermost tag travels beside it ([`Packet::vlan`], the kernel's
//! accelerated tag); a tag pushed over another writes the older one into
//! the packet ([`Packet::vlan_inband`], 4 more bytes). Per packet:
//!
//! - `pop` removes the outermost tag, and brings the next one (if any) out
//!   beside the packet; an untagged packet is left alone (no error);
//! - `push` puts a new outermost tag (TPID 802.1Q unless told, TCI = id |
//!   priority << 13, DEI 0);
//! - `modify` replaces the outermost tag's id (and priority, when one was
//!   configured; DEI and the other bits kept) and always its TPID (802.1Q
//!   unless told); an untagged packet is left alone;
//! - `pop_eth` takes an untagged packet's Ethernet header away (14 bytes
//!   less) and drops a tagged packet or one without a header; `push_eth`
//!   gives a packet without one (a TUN device's) the configured addresses
//!   (14 bytes more) and drops one that has a header or a tag beside it.
//!
//! While a packet carries a tag, filters see its TPID as the packet's
//! protocol (a `protocol ip` filter no longer matches it). Every packet
//! counts in bytes/packets; an error is a drop; the verdict is otherwise
//! the configured one.
//!
//! Creation checks, before whether the index exists: a known verb; `push`
//! and `modify` need an id below 4095 (ERANGE otherwise) and a TPID of
//! 802.1Q or 802.1ad (EPROTONOSUPPORT); `push_eth` needs both addresses.
//! As stored (and dumped): `push` always has a TPID and a priority (0),
//! `modify` a TPID and a priority only when one was given; a change
//! replaces every parameter.

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::{Errno, TcError, TcResult};
use crate::packet::{is_vlan_type, EthAddrs, Packet, VlanTag, ETH_P_8021Q};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `TCA_VLAN_ACT_*`: what the action does.
pub mod verb {
    /// Remove the outermost tag.
    pub const POP: i32 = 1;
    /// Add a tag.
    pub const PUSH: i32 = 2;
    /// Change the outermost tag.
    pub const MODIFY: i32 = 3;
    /// Remove the Ethernet header.
    pub const POP_ETH: i32 = 4;
    /// Add an Ethernet header.
    pub const PUSH_ETH: i32 = 5;
}

/// Largest VLAN id plus one (`VLAN_VID_MASK`): ids 0..=4094.
pub const VLAN_VID_MASK: u16 = 0x0fff;

/// What tc sends (`TCA_VLAN_PARMS` and the optional attributes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VlanOpts {
    /// The control action (`pipe` by default).
    pub action: Verdict,
    /// One of [`verb`] (0 when tc was given none).
    pub v_action: i32,
    /// `TCA_VLAN_PUSH_VLAN_ID`.
    pub id: Option<u16>,
    /// `TCA_VLAN_PUSH_VLAN_PROTOCOL`: the TPID.
    pub protocol: Option<u16>,
    /// `TCA_VLAN_PUSH_VLAN_PRIORITY`.
    pub priority: Option<u8>,
    /// `TCA_VLAN_PUSH_ETH_DST`.
    pub dst_mac: Option<[u8; 6]>,
    /// `TCA_VLAN_PUSH_ETH_SRC`.
    pub src_mac: Option<[u8; 6]>,
}

/// The checks `tcf_vlan_init` makes of the parameters, before it looks
/// at whether the index exists; the parameters as the kernel stores them.
pub(crate) fn check(o: &VlanOpts) -> TcResult<VlanOpts> {
    let mut kept = VlanOpts {
        action: o.action,
        v_action: o.v_action,
        id: None,
        protocol: None,
        priority: None,
        dst_mac: None,
        src_mac: None,
    };
    match o.v_action {
        verb::POP | verb::POP_ETH => {}
        verb::PUSH | verb::MODIFY => {
            let id = o.id.ok_or(TcError::errno(Errno::EINVAL))?;
            if id >= VLAN_VID_MASK {
                return Err(TcError::errno(Errno::ERANGE));
            }
            let proto = o.protocol.unwrap_or(ETH_P_8021Q);
            if !is_vlan_type(proto) {
                return Err(TcError::errno(Errno::EPROTONOSUPPORT));
            }
            kept.id = Some(id);
            kept.protocol = Some(proto);
            kept.priority = match o.v_action {
                verb::PUSH => Some(o.priority.unwrap_or(0)),
                _ => o.priority,
            };
        }
        verb::PUSH_ETH => {
            if o.dst_mac.is_none() || o.src_mac.is_none() {
                return Err(TcError::errno(Errno::EINVAL));
            }
            kept.dst_mac = o.dst_mac;
            kept.src_mac = o.src_mac;
        }
        _ => return Err(TcError::errno(Errno::EINVAL)),
    }
    Ok(kept)
}

/// Validated parameters.
#[derive(Clone, Debug)]
pub struct VlanParams(VlanOpts);

impl VlanParams {
    pub(crate) fn validate(o: &VlanOpts, in_filter: bool) -> TcResult<Self> {
        let kept = check(o)?;
        check_ctrlact(o.action, in_filter)?;
        Ok(VlanParams(kept))
    }
}

/// A vlan action.
#[derive(Debug)]
pub struct Vlan {
    p: VlanParams,
    drops: u64,
}

/// An edit that failed (the kernel's `goto drop`).
struct Failed;

impl Vlan {
    pub(crate) fn new(p: VlanParams) -> Self {
        Vlan { p, drops: 0 }
    }

    pub(crate) fn change(&mut self, p: VlanParams) {
        self.p = p;
    }

    /// Take the outermost tag: beside the packet, else the first in it.
    fn take_outer(pkt: &mut Packet) -> Option<VlanTag> {
        if let Some(t) = pkt.vlan.take() {
            return Some(t);
        }
        if pkt.vlan_inband.is_empty() {
            return None;
        }
        pkt.len = pkt.len.saturating_sub(4);
        Some(pkt.vlan_inband.remove(0))
    }

    fn edit(&self, pkt: &mut Packet) -> Result<(), Failed> {
        let o = &self.p.0;
        let tagged = pkt.vlan.is_some() || !pkt.vlan_inband.is_empty();
        let proto = o.protocol.unwrap_or(ETH_P_8021Q);
        let vid = o.id.unwrap_or(0);
        // The TCI is 16 bits: only the priority's low 3 bits count.
        let pcp = |p: u8| ((p as u32) << 13) as u16;
        match o.v_action {
            verb::POP => {
                let popped = Self::take_outer(pkt).is_some();
                if popped && !pkt.vlan_inband.is_empty() {
                    // The next tag comes out beside the packet.
                    pkt.vlan = Some(pkt.vlan_inband.remove(0));
                    pkt.len = pkt.len.saturating_sub(4);
                }
            }
            verb::PUSH => {
                if let Some(old) = pkt.vlan.take() {
                    pkt.vlan_inband.insert(0, old);
                    pkt.len = pkt.len.saturating_add(4);
                }
                let tci = vid | pcp(o.priority.unwrap_or(0));
                pkt.vlan = Some(VlanTag { proto, tci });
            }
            verb::MODIFY => {
                if let Some(old) = Self::take_outer(pkt) {
                    let mut tci = (old.tci & 0xf000) | vid;
                    if let Some(p) = o.priority {
                        tci = (tci & 0x1fff) | pcp(p);
                    }
                    pkt.vlan = Some(VlanTag { proto, tci });
                }
            }
            // `skb_eth_pop`: an untagged frame loses its Ethernet header;
            // a tagged one, or one without a header, is refused.
            verb::POP_ETH => {
                if tagged || pkt.eth.take().is_none() {
                    return Err(Failed);
                }
                pkt.len = pkt.len.saturating_sub(14);
            }
            // `skb_eth_push`: only a packet without a MAC header or a tag
            // beside it gets one.
            verb::PUSH_ETH => {
                if pkt.eth.is_some() || pkt.vlan.is_some() {
                    return Err(Failed);
                }
                pkt.eth = Some(EthAddrs {
                    dst: o.dst_mac.unwrap_or_default(),
                    src: o.src_mac.unwrap_or_default(),
                });
                pkt.len = pkt.len.saturating_add(14);
            }
            _ => {}
        }
        Ok(())
    }
}

impl Action for Vlan {
    fn kind(&self) -> &'static str {
        "vlan"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        if self.edit(pkt).is_err() {
            self.drops += 1;
            return Verdict::Shot;
        }
        self.p.0.action
    }

    fn drops(&self) -> u64 {
        self.drops
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Vlan(self.p.0.clone())
    }

    fn control(&self) -> Verdict {
        self.p.0.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{ETH_P_8021AD, ETH_P_IP};

    fn opts(v_action: i32) -> VlanOpts {
        VlanOpts {
            action: Verdict::Pipe,
            v_action,
            id: None,
            protocol: None,
            priority: None,
            dst_mac: None,
            src_mac: None,
        }
    }

    fn vlan(o: VlanOpts) -> Vlan {
        Vlan::new(VlanParams::validate(&o, true).unwrap())
    }

    fn push(id: u16, protocol: Option<u16>, priority: Option<u8>) -> Vlan {
        vlan(VlanOpts {
            id: Some(id),
            protocol,
            priority,
            ..opts(verb::PUSH)
        })
    }

    fn modify(id: u16, protocol: Option<u16>, priority: Option<u8>) -> Vlan {
        vlan(VlanOpts {
            id: Some(id),
            protocol,
            priority,
            ..opts(verb::MODIFY)
        })
    }

    fn tag(proto: u16, tci: u16) -> Option<VlanTag> {
        Some(VlanTag { proto, tci })
    }

    /// The sequence of docs/research/vlan.md §4.5.
    #[test]
    fn push_pop_and_modify_as_the_kernel_stacks_tags() {
        let mut p = Packet::new(vec![0x45; 20], 100, ETH_P_IP);
        let now = Time(0);
        assert_eq!(push(100, None, Some(3)).act(&mut p, now), Verdict::Pipe);
        assert_eq!(
            (p.vlan, p.len, p.tc_protocol()),
            (tag(0x8100, 0x6064), 100, 0x8100)
        );
        assert_eq!(p.protocol, ETH_P_IP);
        // A second push writes the first tag into the packet.
        push(200, Some(ETH_P_8021AD), None).act(&mut p, now);
        assert_eq!((p.vlan, p.len), (tag(0x88a8, 0x00c8), 104));
        assert_eq!(
            p.vlan_inband,
            vec![VlanTag {
                proto: 0x8100,
                tci: 0x6064
            }]
        );
        // Pop: the inner tag comes back out beside the packet.
        let mut pop = vlan(opts(verb::POP));
        pop.act(&mut p, now);
        assert_eq!(
            (p.vlan, p.len, p.vlan_inband.len()),
            (tag(0x8100, 0x6064), 100, 0)
        );
        // Modify keeps the priority unless given one; the TPID is replaced.
        modify(7, None, None).act(&mut p, now);
        assert_eq!(p.vlan, tag(0x8100, 0x6007));
        modify(7, Some(ETH_P_8021AD), Some(0)).act(&mut p, now);
        assert_eq!(p.vlan, tag(0x88a8, 0x0007));
        pop.act(&mut p, now);
        assert_eq!((p.vlan, p.tc_protocol()), (None, ETH_P_IP));
        // Untagged: pop and modify change nothing and drop nothing.
        assert_eq!(pop.act(&mut p, now), Verdict::Pipe);
        let mut m = modify(9, None, Some(1));
        assert_eq!(m.act(&mut p, now), Verdict::Pipe);
        assert_eq!((p.vlan, pop.drops(), m.drops()), (None, 0, 0));
    }

    #[test]
    fn ethernet_header_verbs_as_skb_eth_pop_and_push() {
        let now = Time(0);
        let mut pop_eth = vlan(opts(verb::POP_ETH));
        let mut push_eth = vlan(VlanOpts {
            dst_mac: Some([2, 0, 0, 0, 0, 1]),
            src_mac: Some([2, 0, 0, 0, 0, 2]),
            ..opts(verb::PUSH_ETH)
        });
        // A frame with a header: pop takes it (14 bytes), push then puts
        // the configured one back.
        let mut p = Packet::new(vec![0x45; 20], 100, ETH_P_IP);
        p.eth = Some(EthAddrs::default());
        assert_eq!(push_eth.act(&mut p, now), Verdict::Shot);
        assert_eq!(pop_eth.act(&mut p, now), Verdict::Pipe);
        assert_eq!((p.eth, p.len), (None, 86));
        assert_eq!(pop_eth.act(&mut p, now), Verdict::Shot);
        assert_eq!(push_eth.act(&mut p, now), Verdict::Pipe);
        assert_eq!(
            p.eth.map(|e| (e.dst[5], e.src[5], p.len)),
            Some((1, 2, 100))
        );
        // A tag refuses both.
        push(5, None, None).act(&mut p, now);
        assert_eq!(pop_eth.act(&mut p, now), Verdict::Shot);
        p.eth = None;
        assert_eq!(push_eth.act(&mut p, now), Verdict::Shot);
        assert_eq!((pop_eth.drops(), push_eth.drops()), (2, 2));
    }

    #[test]
    fn creation_checks_and_what_is_stored() {
        let err = |o: VlanOpts| VlanParams::validate(&o, true).unwrap_err().errno;
        assert_eq!(err(opts(0)), Errno::EINVAL);
        assert_eq!(err(opts(verb::PUSH)), Errno::EINVAL);
        let id = |id| VlanOpts {
            id: Some(id),
            ..opts(verb::PUSH)
        };
        assert_eq!(err(id(4095)), Errno::ERANGE);
        let ip = VlanOpts {
            protocol: Some(0x0800),
            ..id(5)
        };
        assert_eq!(err(ip), Errno::EPROTONOSUPPORT);
        assert_eq!(err(opts(verb::PUSH_ETH)), Errno::EINVAL);
        // push stores a TPID and a priority; modify a priority only if given.
        let d = push(4094, None, None).dump();
        let ActionOpts::Vlan(d) = d else { panic!() };
        assert_eq!((d.protocol, d.priority), (Some(0x8100), Some(0)));
        let ActionOpts::Vlan(d) = modify(5, None, None).dump() else {
            panic!()
        };
        assert_eq!((d.protocol, d.priority), (Some(0x8100), None));
    }
}
