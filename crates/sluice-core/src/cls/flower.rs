//! flower: match fields of the packet's headers, each under a mask.
//!
//! Modelled on net/sched/cls_flower.c. A filter is a set of keys — the
//! EtherType (from the filter's protocol), the IP protocol, source and
//! destination addresses under a prefix, ports (a value or a range), the IP
//! TOS and TTL, TCP flags, ICMP type and code, and the fragment flags — each
//! with a mask. The flow dissector fills the same keys from a packet, and a
//! filter matches when every masked key is equal (a port range when the
//! port lies in it).
//!
//! The kernel groups filters by their *mask* (which fields, under which
//! masks, ranges or not): each group is a hash table of masked keys, so two
//! filters with the same mask and the same masked key cannot coexist
//! (EEXIST), and classification tries the groups in the order their masks
//! first appeared, taking the first filter that matches in the first group
//! that has one — not the order the filters were added. A group goes with
//! its last filter. Handles are the lowest free number from 1 unless given;
//! `tc filter show` lists filters by handle.
//!
//! A matching filter gives its class id and its actions' verdict; `continue`
//! hands the packet to the next instance (flower looks no further).
//! `skip_sw` asks for a hardware-only filter; sluice's devices have no
//! offload, so such a filter is refused with EOPNOTSUPP, as the kernel
//! refuses it on a device that cannot offload.
//!
//! VLAN keys: the outer tag's id, priority, TPID and the type it carries
//! (`vlan_*`), the same of the second tag (`cvlan_*`), and the number of
//! tags (`num_of_vlans`). tc sends them as attributes whose meaning depends
//! on the filter's protocol and on each other (`fl_set_key`): the outer tag
//! is matched only under an 802.1Q/802.1ad protocol or a `num_of_vlans` of
//! one or more, the second only when `vlan_ethtype` names a VLAN type or
//! `num_of_vlans` is two or more, and the innermost EtherType given becomes
//! the filter's EtherType (`basic.n_proto`, which decides whether IP fields
//! are kept). The dump rebuilds the attributes from that ([`FlowerVlan`]).
//! A packet's tags are its accelerated tag, then those in the packet.
//!
//! MPLS keys (under an MPLS EtherType only, `fl_set_key_mpls`): label, TC,
//! bottom-of-stack bit and TTL of label stack entries at depths 1 to 7,
//! sent either as the old single-entry attributes (`mpls_label` ...: depth
//! 1, the outermost) or as a list of entries each naming its depth (`mpls
//! lse depth D ...`), never both (EBADMSG). A filter matches a packet whose
//! stack has an entry at every depth the filter names — read down to the
//! bottom-of-stack entry, at most seven — with the fields it gives. The
//! dump gives the old attributes when only depth 1 is named and has a
//! field, else the list ([`FlowerMpls`]).
//!
//! Ethernet addresses (`dst_mac`, `src_mac`, each under a mask) are the
//! packet's Ethernet header's; a packet without one (a TUN device's) gives
//! what the kernel's dissector reads there, the first 12 bytes of its
//! network header.
//!
//! Deviations: only the keys above; ARP, PPPoE, tunnel (`enc_*`) and
//! conntrack keys are refused by the tc front end. `indev` is validated and
//! dumped but always matches, as fw's.

use super::act::{ActionDump, ActionSpec, Exts, InitCtx};
use super::{
    check_indev, tc_flags_valid, ChangeReq, Classifier, ClassifyResult, ClsEnv, FilterElemOpts,
    FilterElement, FilterOpts, Verdict, TCA_CLS_FLAGS_NOT_IN_HW, TCA_CLS_FLAGS_SKIP_HW,
    TCA_CLS_FLAGS_SKIP_SW,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::{is_mpls_type, is_vlan_type, EthAddrs, Packet, ETH_P_IP, ETH_P_IPV6};
use crate::qdisc::flow_hash::{FlowAddrs, FlowKeys};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `TCA_FLOWER_KEY_FLAGS_IS_FRAGMENT`.
pub const FLAG_FRAG: u32 = 1;
/// `TCA_FLOWER_KEY_FLAGS_FRAG_IS_FIRST`.
pub const FLAG_FIRSTFRAG: u32 = 2;

/// A port key: a value under a mask, or an inclusive range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PortKey {
    /// `PORT` (`TCA_FLOWER_KEY_*_SRC/DST` with its mask).
    Value(u16, u16),
    /// `MIN-MAX` (`TCA_FLOWER_KEY_PORT_*_MIN/MAX`).
    Range(u16, u16),
}

/// flower's VLAN attributes (`TCA_FLOWER_KEY_NUM_OF_VLANS`,
/// `TCA_FLOWER_KEY_[C]VLAN_ID/PRIO/ETH_TYPE`) as tc sends them and the
/// kernel dumps them; what they match is [`FlowerKeys`]' `vlan` and `cvlan`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlowerVlan {
    /// `num_of_vlans`: the packet has exactly this many tags.
    pub num_of_vlans: Option<u8>,
    /// `vlan_id`.
    pub vlan_id: Option<u16>,
    /// `vlan_prio`.
    pub vlan_prio: Option<u8>,
    /// `vlan_ethtype`: what the outer tag carries.
    pub vlan_ethtype: Option<u16>,
    /// `cvlan_id`.
    pub cvlan_id: Option<u16>,
    /// `cvlan_prio`.
    pub cvlan_prio: Option<u8>,
    /// `cvlan_ethtype`: what the second tag carries.
    pub cvlan_ethtype: Option<u16>,
}

/// flower's MPLS attributes as tc sends them and the kernel dumps them:
/// the old single-entry keys (`TCA_FLOWER_KEY_MPLS_LABEL/TC/BOS/TTL`) or
/// the entry list (`TCA_FLOWER_KEY_MPLS_OPTS`); what they match is
/// [`FlowerKeys`]' `mpls`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlowerMpls {
    /// `mpls_label`.
    pub label: Option<u32>,
    /// `mpls_tc`.
    pub tc: Option<u8>,
    /// `mpls_bos`.
    pub bos: Option<u8>,
    /// `mpls_ttl`.
    pub ttl: Option<u8>,
    /// `mpls lse ...`: the entries (the last list sent; `Some` and empty
    /// when an empty list was sent).
    pub lses: Option<Vec<MplsLseAttr>>,
}

/// One `lse` of `mpls` (`TCA_FLOWER_KEY_MPLS_OPT_LSE_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MplsLseAttr {
    /// `depth` (1 is the outermost entry; required).
    pub depth: Option<u8>,
    /// `label`.
    pub label: Option<u32>,
    /// `tc`.
    pub tc: Option<u8>,
    /// `bos`.
    pub bos: Option<u8>,
    /// `ttl`.
    pub ttl: Option<u8>,
}

/// How many label stack entries flower (the flow dissector) reads
/// (`FLOW_DIS_MPLS_MAX`).
pub const FLOW_DIS_MPLS_MAX: usize = 7;

/// One label stack entry's fields as flower matches them, each fully
/// masked when set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct MplsLseKey {
    /// The label (20 bits).
    pub label: Option<u32>,
    /// The traffic class (3 bits).
    pub tc: Option<u8>,
    /// The bottom-of-stack bit.
    pub bos: Option<u8>,
    /// The TTL.
    pub ttl: Option<u8>,
}

impl MplsLseKey {
    fn mask(&self) -> [bool; 4] {
        [
            self.label.is_some(),
            self.tc.is_some(),
            self.bos.is_some(),
            self.ttl.is_some(),
        ]
    }

    fn matches(&self, p: &MplsLseKey) -> bool {
        let eq = |k: Option<u32>, v: Option<u32>| k.is_none_or(|k| Some(k) == v);
        let b = |x: Option<u8>| x.map(u32::from);
        eq(self.label, p.label)
            && eq(b(self.tc), b(p.tc))
            && eq(b(self.bos), b(p.bos))
            && eq(b(self.ttl), b(p.ttl))
    }
}

/// The label stack as flower matches it (`flow_dissector_key_mpls`): the
/// entries at depths 1..=7 and which of them are matched (`used_lses`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct MplsKey {
    /// Bit d - 1: the entry at depth d is matched (a filter) or present (a
    /// packet).
    pub used: u8,
    /// The entries, outermost first.
    pub lse: [MplsLseKey; FLOW_DIS_MPLS_MAX],
}

impl MplsKey {
    fn mask(&self) -> (u8, [[bool; 4]; FLOW_DIS_MPLS_MAX]) {
        (self.used, self.lse.map(|l| l.mask()))
    }

    fn matches(&self, p: &MplsKey) -> bool {
        (0..FLOW_DIS_MPLS_MAX)
            .filter(|i| self.used & 1 << i != 0)
            .all(|i| p.used & 1 << i != 0 && self.lse[i].matches(&p.lse[i]))
    }

    /// `fl_set_key_mpls`: the keys from tc's attributes, or the kernel's
    /// refusal.
    fn from_attrs(m: &FlowerMpls) -> TcResult<MplsKey> {
        let mut key = MplsKey::default();
        let old = m.label.is_some() || m.tc.is_some() || m.bos.is_some() || m.ttl.is_some();
        let entry = |label: Option<u32>, tc: Option<u8>, bos: Option<u8>, ttl: Option<u8>| {
            if bos.is_some_and(|b| b > 1) {
                return Err(TcError::inval("Bottom Of Stack (BOS) must be 0 or 1"));
            }
            if tc.is_some_and(|t| t > 7) {
                return Err(TcError::inval("Traffic Class (TC) must be between 0 and 7"));
            }
            if label.is_some_and(|l| l > 0xfffff) {
                return Err(TcError::inval("Label must be between 0 and 1048575"));
            }
            Ok(MplsLseKey {
                label,
                tc,
                bos,
                ttl,
            })
        };
        match &m.lses {
            Some(_) if old => {
                return Err(TcError::msg(
                    Errno::EBADMSG,
                    "MPLS label, Traffic Class, Bottom Of Stack and Time To Live must be \
                     encapsulated in the MPLS options attribute",
                ))
            }
            Some(lses) => {
                for l in lses {
                    let depth = l
                        .depth
                        .ok_or_else(|| TcError::inval("Missing MPLS option \"depth\""))?;
                    if depth == 0 || depth as usize > FLOW_DIS_MPLS_MAX {
                        return Err(TcError::inval("Invalid MPLS depth"));
                    }
                    let i = depth as usize - 1;
                    let e = entry(l.label, l.tc, l.bos, l.ttl)?;
                    // A depth named twice: the later fields over the earlier.
                    let k = &mut key.lse[i];
                    *k = MplsLseKey {
                        label: e.label.or(k.label),
                        tc: e.tc.or(k.tc),
                        bos: e.bos.or(k.bos),
                        ttl: e.ttl.or(k.ttl),
                    };
                    key.used |= 1 << i;
                }
            }
            None if old => {
                key.lse[0] = entry(m.label, m.tc, m.bos, m.ttl)?;
                key.used = 1;
            }
            None => {}
        }
        Ok(key)
    }

    /// `fl_dump_key_mpls`: the old attributes when only depth 1 is matched
    /// and with a field, else the entry list (nothing when none is).
    fn attrs(&self) -> FlowerMpls {
        let first = self.lse[0];
        if self.used == 0 {
            return FlowerMpls::default();
        }
        if self.used == 1 && first.mask().contains(&true) {
            return FlowerMpls {
                label: first.label,
                tc: first.tc,
                bos: first.bos,
                ttl: first.ttl,
                lses: None,
            };
        }
        let lses = (0..FLOW_DIS_MPLS_MAX)
            .filter(|i| self.used & 1 << i != 0)
            .map(|i| {
                let l = self.lse[i];
                MplsLseAttr {
                    depth: Some(i as u8 + 1),
                    label: l.label,
                    tc: l.tc,
                    bos: l.bos,
                    ttl: l.ttl,
                }
            })
            .collect();
        FlowerMpls {
            lses: Some(lses),
            ..Default::default()
        }
    }

    /// The flow dissector's walk of a packet's stack: entries from the
    /// network header down to the bottom-of-stack one, at most seven; a
    /// truncated entry ends the walk.
    fn dissect(pkt: &Packet) -> MplsKey {
        let mut key = MplsKey::default();
        if !is_mpls_type(pkt.protocol) {
            return key;
        }
        for i in 0..FLOW_DIS_MPLS_MAX {
            let Some(b) = pkt.bytes_at::<4>(i * 4) else {
                break;
            };
            let lse = u32::from_be_bytes(b);
            key.lse[i] = MplsLseKey {
                label: Some(lse >> 12),
                tc: Some((lse >> 9 & 7) as u8),
                bos: Some((lse >> 8 & 1) as u8),
                ttl: Some(lse as u8),
            };
            key.used |= 1 << i;
            if lse & 0x100 != 0 {
                break;
            }
        }
        key
    }
}

/// One tag's fields as flower matches them (`flow_dissector_key_vlan`),
/// each fully masked when set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct VlanKey {
    /// The VLAN id (12 bits).
    pub id: Option<u16>,
    /// The priority (3 bits).
    pub prio: Option<u8>,
    /// The tag's TPID.
    pub tpid: Option<u16>,
    /// The EtherType after the tag.
    pub eth_type: Option<u16>,
}

impl VlanKey {
    /// Which fields are matched (part of the filter's mask).
    fn mask(&self) -> [bool; 4] {
        [
            self.id.is_some(),
            self.prio.is_some(),
            self.tpid.is_some(),
            self.eth_type.is_some(),
        ]
    }

    fn matches(&self, p: &VlanKey) -> bool {
        let eq = |k: Option<u16>, v: Option<u16>| k.is_none_or(|k| Some(k) == v.or(Some(0)));
        eq(self.id, p.id)
            && eq(self.prio.map(u16::from), p.prio.map(u16::from))
            && eq(self.tpid, p.tpid)
            && eq(self.eth_type, p.eth_type)
    }
}

/// The keys of a filter, each a value and a mask (`None`: not matched).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct FlowerKeys {
    /// `TCA_FLOWER_KEY_ETH_TYPE` as tc sends it (the filter's protocol); as
    /// the kernel keeps it, the innermost EtherType (`basic.n_proto`),
    /// which under a VLAN protocol comes from `vlan_ethtype` or
    /// `cvlan_ethtype`. Always fully masked.
    pub eth_type: Option<u16>,
    /// `num_of_vlans` (kept form).
    pub num_of_vlans: Option<u8>,
    /// The outer tag (kept form).
    pub vlan: VlanKey,
    /// The second tag (kept form).
    pub cvlan: VlanKey,
    /// `TCA_FLOWER_KEY_IP_PROTO` (fully masked).
    pub ip_proto: Option<u8>,
    /// Source address (v4 as `::ffff:a.b.c.d`-free 32-bit values in the low
    /// bits of the u128, v6 as is) and its mask.
    pub src_ip: Option<(u128, u128)>,
    /// Destination address and mask.
    pub dst_ip: Option<(u128, u128)>,
    /// Source port.
    pub src_port: Option<PortKey>,
    /// Destination port.
    pub dst_port: Option<PortKey>,
    /// `TCA_FLOWER_KEY_IP_TOS` and mask.
    pub ip_tos: Option<(u8, u8)>,
    /// `TCA_FLOWER_KEY_IP_TTL` and mask.
    pub ip_ttl: Option<(u8, u8)>,
    /// `TCA_FLOWER_KEY_TCP_FLAGS` and mask.
    pub tcp_flags: Option<(u16, u16)>,
    /// ICMP (or ICMPv6) type and mask.
    pub icmp_type: Option<(u8, u8)>,
    /// ICMP (or ICMPv6) code and mask.
    pub icmp_code: Option<(u8, u8)>,
    /// `TCA_FLOWER_KEY_FLAGS` ([`FLAG_FRAG`], [`FLAG_FIRSTFRAG`]) and mask.
    pub ip_flags: Option<(u32, u32)>,
    /// The label stack (kept form).
    pub mpls: MplsKey,
    /// `TCA_FLOWER_KEY_ETH_DST` and its mask.
    pub dst_mac: Option<([u8; 6], [u8; 6])>,
    /// `TCA_FLOWER_KEY_ETH_SRC` and its mask.
    pub src_mac: Option<([u8; 6], [u8; 6])>,
}

/// The flower options tc sends (`TCA_FLOWER_*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowerOpts {
    /// `TCA_FLOWER_CLASSID`.
    #[serde(default)]
    pub classid: Option<Handle>,
    /// `TCA_FLOWER_INDEV`.
    #[serde(default)]
    pub indev: Option<String>,
    /// `TCA_FLOWER_FLAGS` (`skip_hw`, `skip_sw`).
    #[serde(default)]
    pub flags: Option<u32>,
    /// The keys (their `num_of_vlans`, `vlan` and `cvlan` unused: tc's
    /// VLAN attributes are `vlan`).
    #[serde(default)]
    pub keys: FlowerKeys,
    /// The VLAN attributes.
    #[serde(default)]
    pub vlan: FlowerVlan,
    /// The MPLS attributes.
    #[serde(default)]
    pub mpls: FlowerMpls,
    /// `TCA_FLOWER_ACT`.
    #[serde(default)]
    pub actions: Vec<ActionSpec>,
}

/// A filter as the kernel dumps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowerDump {
    /// `TCA_FLOWER_CLASSID`, if set.
    pub classid: Option<Handle>,
    /// `TCA_FLOWER_INDEV`.
    pub indev: Option<String>,
    /// The keys the kernel kept, values as given (not masked).
    pub keys: FlowerKeys,
    /// The VLAN attributes the kernel dumps for them.
    pub vlan: FlowerVlan,
    /// The MPLS attributes the kernel dumps for them.
    #[serde(default)]
    pub mpls: FlowerMpls,
    /// `TCA_FLOWER_FLAGS`: user flags plus `not_in_hw`.
    pub flags: u32,
    /// `TCA_FLOWER_ACT`.
    pub actions: Vec<ActionDump>,
}

/// Which fields a filter matches, under which masks: the kernel's
/// `fl_flow_mask`, the identity of a group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Mask {
    eth_type: bool,
    num_of_vlans: bool,
    vlan: [bool; 4],
    cvlan: [bool; 4],
    ip_proto: bool,
    src_ip: Option<u128>,
    dst_ip: Option<u128>,
    src_port: Option<Option<u16>>,
    dst_port: Option<Option<u16>>,
    ip_tos: Option<u8>,
    ip_ttl: Option<u8>,
    tcp_flags: Option<u16>,
    icmp_type: Option<u8>,
    icmp_code: Option<u8>,
    ip_flags: Option<u32>,
    mpls: (u8, [[bool; 4]; FLOW_DIS_MPLS_MAX]),
    dst_mac: Option<[u8; 6]>,
    src_mac: Option<[u8; 6]>,
}

fn port_mask(p: &Option<PortKey>) -> Option<Option<u16>> {
    p.map(|p| match p {
        PortKey::Value(_, m) => Some(m),
        PortKey::Range(..) => None,
    })
}

impl FlowerKeys {
    fn mask(&self) -> Mask {
        Mask {
            eth_type: self.eth_type.is_some(),
            num_of_vlans: self.num_of_vlans.is_some(),
            vlan: self.vlan.mask(),
            cvlan: self.cvlan.mask(),
            ip_proto: self.ip_proto.is_some(),
            src_ip: self.src_ip.map(|k| k.1),
            dst_ip: self.dst_ip.map(|k| k.1),
            src_port: port_mask(&self.src_port),
            dst_port: port_mask(&self.dst_port),
            ip_tos: self.ip_tos.map(|k| k.1),
            ip_ttl: self.ip_ttl.map(|k| k.1),
            tcp_flags: self.tcp_flags.map(|k| k.1),
            icmp_type: self.icmp_type.map(|k| k.1),
            icmp_code: self.icmp_code.map(|k| k.1),
            ip_flags: self.ip_flags.map(|k| k.1),
            mpls: self.mpls.mask(),
            dst_mac: self.dst_mac.map(|k| k.1),
            src_mac: self.src_mac.map(|k| k.1),
        }
    }

    /// The keys with each value under its mask (what the kernel stores and dumps).
    fn masked(&self) -> FlowerKeys {
        fn m8(k: Option<(u8, u8)>) -> Option<(u8, u8)> {
            k.map(|(v, m)| (v & m, m))
        }
        let port = |p: Option<PortKey>| {
            p.map(|p| match p {
                PortKey::Value(v, m) => PortKey::Value(v & m, m),
                r => r,
            })
        };
        FlowerKeys {
            eth_type: self.eth_type,
            num_of_vlans: self.num_of_vlans,
            vlan: self.vlan,
            cvlan: self.cvlan,
            ip_proto: self.ip_proto,
            src_ip: self.src_ip.map(|(v, m)| (v & m, m)),
            dst_ip: self.dst_ip.map(|(v, m)| (v & m, m)),
            src_port: port(self.src_port),
            dst_port: port(self.dst_port),
            ip_tos: m8(self.ip_tos),
            ip_ttl: m8(self.ip_ttl),
            tcp_flags: self.tcp_flags.map(|(v, m)| (v & m, m)),
            icmp_type: m8(self.icmp_type),
            icmp_code: m8(self.icmp_code),
            ip_flags: self.ip_flags.map(|(v, m)| (v & m, m)),
            mpls: self.mpls,
            dst_mac: self.dst_mac.map(|(v, m)| (mac_and(v, m), m)),
            src_mac: self.src_mac.map(|(v, m)| (mac_and(v, m), m)),
        }
    }

    /// What the kernel keeps of what tc sent (`fl_set_key`): the VLAN
    /// attributes `v` as the module essay says; a field under a zero mask
    /// is no field; the IP fields only under an IP EtherType; ports, TCP
    /// flags and ICMP fields only under the IP protocol they belong to. The
    /// rest is dropped silently, as the kernel drops it.
    fn kept(&self, v: &FlowerVlan, m: &FlowerMpls) -> TcResult<FlowerKeys> {
        fn nz<T: Copy + Default + PartialEq>(k: Option<(T, T)>) -> Option<(T, T)> {
            k.filter(|(_, m)| *m != T::default())
        }
        // `is_vlan_key`: a tag is matched at depth `d` if the type before
        // it is a VLAN type or at least d + 1 tags are asked for.
        let nv = v.num_of_vlans.unwrap_or(0);
        let tagged = |t: Option<u16>, d: u8| nv > d || t.is_some_and(is_vlan_type);
        // A zero EtherType sets no TPID (`if (ethertype)`).
        let tag = |tpid: Option<u16>, id: Option<u16>, prio: Option<u8>, next| VlanKey {
            id: id.map(|i| i & 0xfff),
            prio: prio.map(|p| p & 7),
            tpid: tpid.filter(|t| *t != 0),
            eth_type: next,
        };
        let (mut vlan, mut cvlan) = (VlanKey::default(), VlanKey::default());
        let n_proto = if tagged(self.eth_type, 0) {
            vlan = tag(self.eth_type, v.vlan_id, v.vlan_prio, v.vlan_ethtype);
            if tagged(v.vlan_ethtype, 1) {
                cvlan = tag(v.vlan_ethtype, v.cvlan_id, v.cvlan_prio, v.cvlan_ethtype);
                v.cvlan_ethtype
            } else {
                v.vlan_ethtype
            }
        } else {
            self.eth_type
        };
        let ip = matches!(n_proto, Some(ETH_P_IP) | Some(ETH_P_IPV6));
        let proto = self.ip_proto.filter(|_| ip);
        let l4 = matches!(proto, Some(6) | Some(17) | Some(132));
        let icmp = matches!(
            (n_proto, proto),
            (Some(ETH_P_IP), Some(1)) | (Some(ETH_P_IPV6), Some(58))
        );
        let port = |p: Option<PortKey>| p.filter(|p| l4 && !matches!(p, PortKey::Value(_, 0)));
        let mpls = match n_proto {
            Some(t) if is_mpls_type(t) => MplsKey::from_attrs(m)?,
            _ => MplsKey::default(),
        };
        Ok(FlowerKeys {
            eth_type: n_proto,
            num_of_vlans: v.num_of_vlans,
            vlan,
            cvlan,
            ip_proto: proto,
            src_ip: nz(self.src_ip),
            dst_ip: nz(self.dst_ip),
            src_port: port(self.src_port),
            dst_port: port(self.dst_port),
            ip_tos: nz(self.ip_tos).filter(|_| ip),
            ip_ttl: nz(self.ip_ttl).filter(|_| ip),
            tcp_flags: nz(self.tcp_flags).filter(|_| proto == Some(6)),
            icmp_type: nz(self.icmp_type).filter(|_| icmp),
            icmp_code: nz(self.icmp_code).filter(|_| icmp),
            ip_flags: nz(self.ip_flags),
            mpls,
            dst_mac: nz(self.dst_mac),
            src_mac: nz(self.src_mac),
        })
    }

    /// The VLAN attributes the kernel dumps for these keys (`fl_dump_key`):
    /// the second tag's TPID is the outer `vlan_ethtype`; the innermost
    /// EtherType, when matched, is `cvlan_ethtype` if the second tag's is
    /// matched, else `vlan_ethtype` if the outer tag's is.
    fn vlan_attrs(&self) -> FlowerVlan {
        let mut v = FlowerVlan {
            num_of_vlans: self.num_of_vlans,
            vlan_id: self.vlan.id,
            vlan_prio: self.vlan.prio,
            vlan_ethtype: self.cvlan.tpid,
            cvlan_id: self.cvlan.id,
            cvlan_prio: self.cvlan.prio,
            cvlan_ethtype: None,
        };
        if let Some(n) = self.eth_type {
            if self.cvlan.eth_type.is_some() {
                v.cvlan_ethtype = Some(n);
            } else if let Some(e) = self.vlan.eth_type {
                v.vlan_ethtype = Some(e);
            }
        }
        v
    }

    /// Do the packet's keys match (every masked key equal, ports in range)?
    fn matches(&self, p: &PacketKeys) -> bool {
        fn eq<T: Copy + PartialEq + std::ops::BitAnd<Output = T>>(k: Option<(T, T)>, v: T) -> bool {
            k.is_none_or(|(k, m)| v & m == k & m)
        }
        let port = |k: Option<PortKey>, v: u16| match k {
            None => true,
            Some(PortKey::Value(k, m)) => v & m == k & m,
            Some(PortKey::Range(lo, hi)) => (lo..=hi).contains(&v),
        };
        self.eth_type.is_none_or(|e| e == p.eth_type)
            && self.num_of_vlans.is_none_or(|n| n == p.num_of_vlans)
            && self.vlan.matches(&p.vlan)
            && self.cvlan.matches(&p.cvlan)
            && self.ip_proto.is_none_or(|x| x == p.ip_proto)
            && eq(self.src_ip, p.src)
            && eq(self.dst_ip, p.dst)
            && port(self.src_port, p.ports.0)
            && port(self.dst_port, p.ports.1)
            && eq(self.ip_tos, p.tos)
            && eq(self.ip_ttl, p.ttl)
            && eq(self.tcp_flags, p.tcp_flags)
            && eq(self.icmp_type, p.icmp.0)
            && eq(self.icmp_code, p.icmp.1)
            && eq(self.ip_flags, p.ip_flags)
            && self.mpls.matches(&p.mpls)
            && mac_eq(self.dst_mac, p.eth.dst)
            && mac_eq(self.src_mac, p.eth.src)
    }
}

fn mac_and(v: [u8; 6], m: [u8; 6]) -> [u8; 6] {
    std::array::from_fn(|i| v[i] & m[i])
}

/// Is the address `p` the key's under its mask (or is there no key)?
fn mac_eq(k: Option<([u8; 6], [u8; 6])>, p: [u8; 6]) -> bool {
    k.is_none_or(|(v, m)| mac_and(v, m) == mac_and(p, m))
}

/// What the flow dissector gives flower (`fl_classify`'s `skb_key`).
#[derive(Debug, Default)]
struct PacketKeys {
    eth_type: u16,
    num_of_vlans: u8,
    /// The first two tags (`None` fields: no such tag, matched as zero).
    vlan: VlanKey,
    cvlan: VlanKey,
    ip_proto: u8,
    src: u128,
    dst: u128,
    ports: (u16, u16),
    tos: u8,
    ttl: u8,
    tcp_flags: u16,
    icmp: (u8, u8),
    ip_flags: u32,
    mpls: MplsKey,
    eth: EthAddrs,
}

impl PacketKeys {
    fn dissect(pkt: &Packet) -> PacketKeys {
        let f = FlowKeys::dissect_all(pkt);
        let d = &pkt.data;
        let mut k = PacketKeys {
            eth_type: pkt.protocol,
            ip_proto: f.ip_proto,
            mpls: MplsKey::dissect(pkt),
            eth: pkt.eth_addrs(),
            ..Default::default()
        };
        // The dissector walks the tags outermost first: each gives its id,
        // priority, TPID and the type that follows it (the next tag's TPID,
        // or the network protocol after the last); it counts them all and
        // records the first two.
        let tags: Vec<_> = pkt.vlan.iter().chain(&pkt.vlan_inband).collect();
        k.num_of_vlans = tags.len().min(u8::MAX as usize) as u8;
        for (i, slot) in [&mut k.vlan, &mut k.cvlan].into_iter().enumerate() {
            if let Some(t) = tags.get(i) {
                *slot = VlanKey {
                    id: Some(t.tci & 0xfff),
                    prio: Some((t.tci >> 13) as u8),
                    tpid: Some(t.proto),
                    eth_type: Some(tags.get(i + 1).map_or(pkt.protocol, |n| n.proto)),
                };
            }
        }
        match f.addrs {
            FlowAddrs::V4 { src, dst } => (k.src, k.dst) = (src as u128, dst as u128),
            FlowAddrs::V6 { src, dst } => {
                (k.src, k.dst) = (u128::from_be_bytes(src), u128::from_be_bytes(dst))
            }
            _ => {}
        }
        let l4 = match pkt.protocol {
            ETH_P_IP if d.len() >= 20 => {
                k.tos = d[1];
                k.ttl = d[8];
                let frag = u16::from_be_bytes([d[6], d[7]]);
                if frag & 0x3fff != 0 {
                    k.ip_flags = FLAG_FRAG
                        | if frag & 0x1fff == 0 {
                            FLAG_FIRSTFRAG
                        } else {
                            0
                        };
                }
                Some((d[0] & 0x0f) as usize * 4)
            }
            ETH_P_IPV6 if d.len() >= 40 => {
                k.tos = (d[0] << 4) | (d[1] >> 4);
                k.ttl = d[7];
                if f.is_fragment {
                    k.ip_flags = FLAG_FRAG;
                }
                crate::gso::transport_offset(d).map(|(off, _)| off)
            }
            _ => None,
        };
        if !f.is_fragment {
            k.ports = f.ports;
            k.icmp = (f.icmp.0, f.icmp.1);
            if f.ip_proto == 6 {
                if let Some(w) = l4.and_then(|o| d.get(o + 12..o + 14)) {
                    k.tcp_flags = u16::from_be_bytes([w[0], w[1]]) & 0x0fff;
                }
            }
        }
        k
    }
}

#[derive(Debug)]
struct Filter {
    handle: u32,
    classid: Handle,
    indev: Option<String>,
    flags: u32,
    keys: FlowerKeys,
    /// `keys.mask()`: the group the filter is in.
    mask: Mask,
    exts: Exts,
}

/// A flower instance.
#[derive(Debug, Default)]
pub struct Flower {
    /// Filters by handle.
    filters: Vec<Filter>,
    /// Mask groups in the order they appeared.
    masks: Vec<Mask>,
}

impl Flower {
    fn find(&self, handle: u32) -> Option<usize> {
        self.filters.iter().position(|f| f.handle == handle)
    }

    fn element(f: &Filter) -> FilterElement {
        FilterElement {
            handle: f.handle,
            opts: Some(FilterElemOpts::Flower(FlowerDump {
                classid: (!f.classid.is_unspec()).then_some(f.classid),
                indev: f.indev.clone(),
                keys: f.keys.clone(),
                vlan: f.keys.vlan_attrs(),
                mpls: f.keys.mpls.attrs(),
                flags: f.flags,
                actions: f.exts.dump(),
            })),
            stats: None,
        }
    }

    /// Forget mask groups no filter uses.
    fn prune_masks(&mut self) {
        let filters = &self.filters;
        self.masks.retain(|m| filters.iter().any(|f| f.mask == *m));
    }
}

impl Classifier for Flower {
    fn kind(&self) -> &'static str {
        "flower"
    }

    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult> {
        if self.filters.is_empty() {
            return None;
        }
        let keys = PacketKeys::dissect(pkt);
        for mask in &self.masks {
            let hit = self.filters.iter().find(|f| {
                f.flags & TCA_CLS_FLAGS_SKIP_SW == 0 && f.mask == *mask && f.keys.matches(&keys)
            });
            if let Some(f) = hit {
                return match f.exts.exec(pkt, now) {
                    Verdict::Continue => None,
                    v => Some(ClassifyResult {
                        classid: f.classid,
                        verdict: v,
                    }),
                };
            }
        }
        None
    }

    fn get(&self, handle: u32) -> bool {
        self.find(handle).is_some()
    }

    fn change(&mut self, req: &ChangeReq<'_>, env: &mut ClsEnv<'_>) -> TcResult<()> {
        let o = match req.opts {
            Some(FilterOpts::Flower(o)) => o,
            _ => return Err(TcError::errno(Errno::EINVAL)),
        };
        let flags = o.flags.unwrap_or(0);
        if !tc_flags_valid(flags) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        if let Some(dev) = &o.indev {
            check_indev(dev, env)?;
        }
        if let Some(PortKey::Range(lo, hi)) = o.keys.src_port.or(o.keys.dst_port) {
            if lo >= hi {
                return Err(TcError::inval(
                    "Invalid destination port range (min must be strictly smaller than max)",
                ));
            }
        }
        // Kept as given (the dump shows the values unmasked); compared masked.
        let keys = o.keys.kept(&o.vlan, &o.mpls)?;
        let mask = keys.mask();
        let existing = req.exists.then(|| self.find(req.handle)).flatten();
        if let Some(i) = existing {
            // A replaced filter keeps its mask (`fl_check_assign_mask`).
            if self.filters[i].mask != mask {
                return Err(TcError::errno(Errno::EINVAL));
            }
        }
        let masked = keys.masked();
        if self
            .filters
            .iter()
            .enumerate()
            .any(|(i, f)| Some(i) != existing && f.keys.masked() == masked)
        {
            return Err(TcError::errno(Errno::EEXIST));
        }
        let ctx = InitCtx {
            bind: true,
            replace: !req.create,
            estimator: req.estimator,
            offload: flags & (TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW),
        };
        let acts = env.actions.prepare(&o.actions, None, ctx, true)?;
        if flags & TCA_CLS_FLAGS_SKIP_SW != 0 {
            return Err(TcError::errno(Errno::EOPNOTSUPP));
        }
        let handle = match (existing, req.handle) {
            (Some(i), _) => self.filters[i].handle,
            (None, 0) => (1..=i32::MAX as u32)
                .find(|h| self.find(*h).is_none())
                .ok_or(TcError::errno(Errno::ENOSPC))?,
            (None, h) => h,
        };
        let exts = env.actions.commit(acts, false, env.now)?;
        let f = Filter {
            handle,
            classid: o.classid.unwrap_or(Handle::UNSPEC),
            indev: o.indev.clone(),
            flags: flags | TCA_CLS_FLAGS_NOT_IN_HW,
            keys,
            mask: mask.clone(),
            exts,
        };
        match existing {
            Some(i) => self.filters[i] = f,
            None => {
                let at = self.filters.partition_point(|x| x.handle < handle);
                self.filters.insert(at, f);
            }
        }
        if !self.masks.contains(&mask) {
            self.masks.push(mask);
        }
        self.prune_masks();
        Ok(())
    }

    fn delete(&mut self, handle: u32) -> TcResult<bool> {
        let i = self.find(handle).ok_or(TcError::errno(Errno::ENOENT))?;
        self.filters.remove(i);
        self.prune_masks();
        Ok(self.filters.is_empty())
    }

    fn walk(&self) -> Vec<FilterElement> {
        self.filters.iter().map(Self::element).collect()
    }

    fn dump_one(&self, handle: u32) -> Option<FilterElement> {
        self.find(handle).map(|i| Self::element(&self.filters[i]))
    }

    fn goto_chains(&self) -> Vec<u32> {
        self.filters
            .iter()
            .flat_map(|f| f.exts.goto_chains())
            .collect()
    }

    fn count_bound(&self, classid: Handle) -> usize {
        self.filters.iter().filter(|f| f.classid == classid).count()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{Block, FilterCmd, FilterMsg};
    use super::*;
    use crate::act::gact::GactOpts;
    use crate::act::ActionOpts;

    fn flower(handle: u32, keys: FlowerKeys, classid: Handle) -> FilterMsg {
        FilterMsg {
            prio: 1,
            protocol: ETH_P_IP,
            handle,
            kind: Some("flower".into()),
            opts: Some(FilterOpts::Flower(FlowerOpts {
                classid: Some(classid),
                keys: FlowerKeys {
                    eth_type: Some(ETH_P_IP),
                    ..keys
                },
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn v4(a: [u8; 4]) -> u128 {
        u32::from_be_bytes(a) as u128
    }

    fn class_of(b: &mut Block, mut p: Packet) -> Option<Handle> {
        b.classify(&mut p, Time(0)).map(|r| r.classid)
    }

    #[test]
    fn masked_keys_ports_and_ranges_classify() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let tcp80 = FlowerKeys {
            ip_proto: Some(6),
            dst_port: Some(PortKey::Value(80, 0xffff)),
            ..Default::default()
        };
        let net10 = FlowerKeys {
            dst_ip: Some((v4([10, 1, 2, 3]), 0xff00_0000)),
            ..Default::default()
        };
        let udp_range = FlowerKeys {
            ip_proto: Some(17),
            dst_port: Some(PortKey::Range(5000, 5010)),
            ..Default::default()
        };
        for (keys, minor) in [(tcp80, 10), (net10, 20), (udp_range, 30)] {
            b.change_filter(
                &flower(0, keys, h(1, minor)),
                FilterCmd::Add,
                &mut net.env(q),
            )
            .unwrap();
        }
        let ip = [192, 168, 0, 1];
        assert_eq!(
            class_of(&mut b, tcp(ip, [8, 8, 8, 8], 1234, 80, 0, false, b"x")),
            Some(h(1, 10))
        );
        assert_eq!(
            class_of(&mut b, tcp(ip, [8, 8, 8, 8], 1234, 81, 0, false, b"x")),
            None
        );
        // 10.1.2.3/8 matches all of 10.0.0.0/8.
        assert_eq!(
            class_of(&mut b, udp(ip, [10, 9, 9, 9], 1, 2)),
            Some(h(1, 20))
        );
        assert_eq!(
            class_of(&mut b, udp(ip, [11, 0, 0, 1], 1, 5010)),
            Some(h(1, 30))
        );
        assert_eq!(class_of(&mut b, udp(ip, [11, 0, 0, 1], 1, 5011)), None);
        // Handles are the lowest free from 1; the dump is by handle.
        let d = b.dump(None, 0, 0);
        let handles: Vec<u32> = d.iter().skip(1).map(|e| e.handle).collect();
        assert_eq!(handles, vec![1, 2, 3]);
        let Some(FilterElemOpts::Flower(f)) = &d[2].opts else {
            panic!()
        };
        // Dumped as given, unmasked (iproute2 prints 10.1.2.3/8 back).
        assert_eq!(f.keys.dst_ip, Some((v4([10, 1, 2, 3]), 0xff00_0000)));
        assert_eq!(f.flags, TCA_CLS_FLAGS_NOT_IN_HW);
    }

    #[test]
    fn mask_groups_decide_the_order_not_the_filters() {
        // Filter 1 (dst_port) and filter 3 (dst_port again) share a mask
        // group that appeared before filter 2's (dst_ip); a packet matching
        // filters 2 and 3 gets filter 3's class, as in the kernel.
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let port = |p| FlowerKeys {
            ip_proto: Some(17),
            dst_port: Some(PortKey::Value(p, 0xffff)),
            ..Default::default()
        };
        let dst = FlowerKeys {
            dst_ip: Some((v4([10, 0, 0, 1]), u32::MAX as u128)),
            ..Default::default()
        };
        for (keys, minor) in [(port(53), 1), (dst, 2), (port(9), 3)] {
            b.change_filter(
                &flower(0, keys, h(1, minor)),
                FilterCmd::Add,
                &mut net.env(q),
            )
            .unwrap();
        }
        let p = udp([1, 1, 1, 1], [10, 0, 0, 1], 1, 9);
        assert_eq!(class_of(&mut b, p), Some(h(1, 3)));
        // The same mask and key twice is refused, and so is a replace that
        // would change a filter's mask.
        let e = b.change_filter(
            &flower(7, port(9), h(1, 7)),
            FilterCmd::Add,
            &mut net.env(q),
        );
        assert_eq!(e.map_err(|e| e.errno), Err(Errno::EEXIST));
        let e = b.change_filter(
            &flower(2, port(7), h(1, 7)),
            FilterCmd::Replace,
            &mut net.env(q),
        );
        assert_eq!(e.map_err(|e| e.errno), Err(Errno::EINVAL));
        // When the port group's last filters go, the address group comes first.
        for handle in [1, 3] {
            b.delete_filter(&FilterMsg {
                prio: 1,
                handle,
                ..Default::default()
            })
            .unwrap();
        }
        let p = udp([1, 1, 1, 1], [10, 0, 0, 1], 1, 9);
        assert_eq!(class_of(&mut b, p), Some(h(1, 2)));
    }

    #[test]
    fn fragments_tcp_flags_tos_and_ttl() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let syn_only = FlowerKeys {
            ip_proto: Some(6),
            tcp_flags: Some((0x02, 0x12)),
            ..Default::default()
        };
        let tos = FlowerKeys {
            ip_tos: Some((0x10, 0xfc)),
            ip_ttl: Some((64, 0xff)),
            ..Default::default()
        };
        let frag = FlowerKeys {
            ip_flags: Some((FLAG_FRAG, FLAG_FRAG | FLAG_FIRSTFRAG)),
            ..Default::default()
        };
        for (keys, minor) in [(syn_only, 1), (tos, 2), (frag, 3)] {
            b.change_filter(
                &flower(0, keys, h(1, minor)),
                FilterCmd::Add,
                &mut net.env(q),
            )
            .unwrap();
        }
        // The test packets are ACKs: not "SYN without ACK".
        let ack = tcp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 0x10, false, b"x");
        assert_eq!(class_of(&mut b, ack), Some(h(1, 2)));
        let mut syn = tcp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 0, false, b"");
        syn.data[20 + 13] = 0x02;
        assert_eq!(class_of(&mut b, syn), Some(h(1, 1)));
        // A later fragment (offset 8, MF clear) but not a first one.
        let mut later = udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
        later.data[6] = 0x00;
        later.data[7] = 0x01;
        assert_eq!(class_of(&mut b, later), Some(h(1, 3)));
        let mut first = udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
        first.data[6] = 0x20;
        assert_eq!(class_of(&mut b, first), None);
    }

    #[test]
    fn the_kernel_keeps_only_fields_that_fit_the_protocols() {
        // Ports under ICMP, ICMP under TCP and a zero mask are dropped
        // silently; the filter then matches on what is left.
        let keys = FlowerKeys {
            eth_type: Some(ETH_P_IP),
            ip_proto: Some(1),
            dst_port: Some(PortKey::Value(80, 0xffff)),
            tcp_flags: Some((2, 0xfff)),
            icmp_type: Some((8, 0xff)),
            dst_ip: Some((v4([10, 0, 0, 1]), 0)),
            ..Default::default()
        };
        let k = keys
            .kept(&FlowerVlan::default(), &FlowerMpls::default())
            .unwrap();
        assert_eq!((k.dst_port, k.tcp_flags, k.dst_ip), (None, None, None));
        assert_eq!((k.ip_proto, k.icmp_type), (Some(1), Some((8, 0xff))));
        let (mut net, mut b) = (Net::default(), Block::default());
        b.change_filter(
            &flower(0, keys, h(1, 1)),
            FilterCmd::Add,
            &mut net.env(h(1, 0)),
        )
        .unwrap();
        assert_eq!(
            class_of(&mut b, icmp_echo([1, 1, 1, 1], [2, 2, 2, 2])),
            Some(h(1, 1))
        );
        // Without an IP EtherType nothing IP is kept.
        let all = FlowerKeys {
            ip_proto: Some(6),
            ip_ttl: Some((64, 0xff)),
            ..Default::default()
        };
        assert_eq!(
            all.kept(&FlowerVlan::default(), &FlowerMpls::default())
                .unwrap(),
            FlowerKeys::default()
        );
    }

    #[test]
    fn skip_sw_is_refused_and_continue_passes_on() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(0xffff, 0);
        let mut m = flower(0, FlowerKeys::default(), h(1, 1));
        if let Some(FilterOpts::Flower(o)) = &mut m.opts {
            o.flags = Some(TCA_CLS_FLAGS_SKIP_SW);
        }
        let e = b.change_filter(&m, FilterCmd::Add, &mut net.env(q));
        assert_eq!(e.map_err(|e| e.errno), Err(Errno::EOPNOTSUPP));
        let mut m = flower(0, FlowerKeys::default(), h(1, 1));
        if let Some(FilterOpts::Flower(o)) = &mut m.opts {
            o.actions = vec![ActionSpec {
                index: 0,
                opts: ActionOpts::Gact(GactOpts {
                    action: Verdict::Continue,
                    random: None,
                }),
                cookie: None,
                no_percpu: false,
                offload: 0,
            }];
        }
        b.change_filter(&m, FilterCmd::Add, &mut net.env(q))
            .unwrap();
        assert_eq!(
            class_of(&mut b, udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2)),
            None
        );
    }

    /// A filter of protocol `protocol` with VLAN attributes `vlan` (and
    /// `keys`), in a block of its own.
    fn vlan_block(protocol: u16, vlan: FlowerVlan, keys: FlowerKeys) -> Block {
        let (mut net, mut b) = (Net::default(), Block::default());
        let m = FilterMsg {
            prio: 1,
            protocol,
            kind: Some("flower".into()),
            opts: Some(FilterOpts::Flower(FlowerOpts {
                classid: Some(h(1, 1)),
                keys: FlowerKeys {
                    eth_type: (protocol != crate::packet::ETH_P_ALL).then_some(protocol),
                    ..keys
                },
                vlan,
                ..Default::default()
            })),
            ..Default::default()
        };
        b.change_filter(&m, FilterCmd::Add, &mut net.env(h(0xffff, 0)))
            .unwrap();
        b
    }

    /// A UDP packet to 10.0.0.1:`dport` carrying `tags` (TPID, VLAN id,
    /// priority), outermost first: the first as the accelerated tag, the
    /// others in the packet, as a tagged frame received by a device that
    /// strips the outer tag.
    fn tagged(tags: &[(u16, u16, u16)], dport: u16) -> Packet {
        let mut p = udp([192, 168, 0, 1], [10, 0, 0, 1], 1000, dport);
        let mut tags = tags
            .iter()
            .map(|&(proto, id, prio)| crate::packet::VlanTag {
                proto,
                tci: (prio << 13) | id,
            });
        p.vlan = tags.next();
        p.vlan_inband = tags.collect();
        p
    }

    const Q: u16 = crate::packet::ETH_P_8021Q;
    const AD: u16 = crate::packet::ETH_P_8021AD;

    #[test]
    fn vlan_keys_match_the_outer_and_second_tag() {
        let one = Some(h(1, 1));
        // protocol 802.1Q flower vlan_id 100 vlan_prio 3
        let mut b = vlan_block(
            Q,
            FlowerVlan {
                vlan_id: Some(100),
                vlan_prio: Some(3),
                ..Default::default()
            },
            FlowerKeys::default(),
        );
        assert_eq!(class_of(&mut b, tagged(&[(Q, 100, 3)], 53)), one);
        assert_eq!(class_of(&mut b, tagged(&[(Q, 101, 3)], 53)), None);
        assert_eq!(class_of(&mut b, tagged(&[(Q, 100, 4)], 53)), None);
        // Not tagged, or tagged 802.1ad: the protocol gate keeps it out.
        assert_eq!(class_of(&mut b, tagged(&[], 53)), None);
        assert_eq!(class_of(&mut b, tagged(&[(AD, 100, 3)], 53)), None);
        // The outer tag in the packet (not stripped) is the same tag.
        let mut p = tagged(&[(Q, 100, 3)], 53);
        p.vlan_inband = vec![p.vlan.take().unwrap()];
        assert_eq!(class_of(&mut b, p), one);

        // protocol 802.1ad flower vlan_id 10 vlan_ethtype 802.1Q cvlan_id 20
        //   cvlan_ethtype ip ip_proto udp dst_port 53
        let mut b = vlan_block(
            AD,
            FlowerVlan {
                vlan_id: Some(10),
                vlan_ethtype: Some(Q),
                cvlan_id: Some(20),
                cvlan_ethtype: Some(ETH_P_IP),
                ..Default::default()
            },
            FlowerKeys {
                ip_proto: Some(17),
                dst_port: Some(PortKey::Value(53, 0xffff)),
                ..Default::default()
            },
        );
        assert_eq!(
            class_of(&mut b, tagged(&[(AD, 10, 0), (Q, 20, 0)], 53)),
            one
        );
        assert_eq!(
            class_of(&mut b, tagged(&[(AD, 10, 0), (Q, 21, 0)], 53)),
            None
        );
        assert_eq!(
            class_of(&mut b, tagged(&[(AD, 10, 0), (Q, 20, 0)], 54)),
            None
        );
        // The second tag must be 802.1Q (the outer one's vlan_ethtype).
        assert_eq!(
            class_of(&mut b, tagged(&[(AD, 10, 0), (AD, 20, 0)], 53)),
            None
        );
        assert_eq!(class_of(&mut b, tagged(&[(AD, 10, 0)], 53)), None);
        // A third tag is not looked at, but then IP is not what the second carries.
        let three = tagged(&[(AD, 10, 0), (Q, 20, 0), (Q, 30, 0)], 53);
        assert_eq!(class_of(&mut b, three), None);
    }

    #[test]
    fn num_of_vlans_counts_every_tag_and_needs_no_vlan_protocol() {
        // protocol all flower num_of_vlans 1 vlan_id 10: any TPID, one tag.
        let mut b = vlan_block(
            crate::packet::ETH_P_ALL,
            FlowerVlan {
                num_of_vlans: Some(1),
                vlan_id: Some(10),
                ..Default::default()
            },
            FlowerKeys::default(),
        );
        let one = Some(h(1, 1));
        assert_eq!(class_of(&mut b, tagged(&[(Q, 10, 0)], 53)), one);
        assert_eq!(class_of(&mut b, tagged(&[(AD, 10, 7)], 53)), one);
        assert_eq!(
            class_of(&mut b, tagged(&[(Q, 10, 0), (Q, 10, 0)], 53)),
            None
        );
        assert_eq!(class_of(&mut b, tagged(&[], 53)), None);
        // num_of_vlans 0 matches untagged packets only.
        let mut b = vlan_block(
            crate::packet::ETH_P_ALL,
            FlowerVlan {
                num_of_vlans: Some(0),
                ..Default::default()
            },
            FlowerKeys::default(),
        );
        assert_eq!(class_of(&mut b, tagged(&[], 53)), one);
        assert_eq!(class_of(&mut b, tagged(&[(Q, 1, 0)], 53)), None);
    }

    #[test]
    fn the_kernel_reads_vlan_attributes_by_the_protocol_and_dumps_them_back() {
        let kept = |protocol: u16, v: FlowerVlan| {
            FlowerKeys {
                eth_type: (protocol != crate::packet::ETH_P_ALL).then_some(protocol),
                ip_proto: Some(17),
                ..Default::default()
            }
            .kept(&v, &FlowerMpls::default())
            .unwrap()
        };
        // Under protocol ip the VLAN attributes mean nothing.
        let v = FlowerVlan {
            vlan_id: Some(10),
            vlan_ethtype: Some(ETH_P_IPV6),
            ..Default::default()
        };
        let k = kept(ETH_P_IP, v);
        assert_eq!(
            (k.vlan, k.eth_type, k.ip_proto),
            (VlanKey::default(), Some(ETH_P_IP), Some(17))
        );
        assert_eq!(k.vlan_attrs(), FlowerVlan::default());
        // Under 802.1Q the innermost EtherType is vlan_ethtype's, and IP
        // keys are kept only when it is IP; the ids are cut to 12 bits.
        let k = kept(Q, v);
        assert_eq!(k.eth_type, Some(ETH_P_IPV6));
        assert_eq!(
            k.vlan,
            VlanKey {
                id: Some(10),
                prio: None,
                tpid: Some(Q),
                eth_type: Some(ETH_P_IPV6)
            }
        );
        assert_eq!(k.vlan_attrs(), v);
        let k = kept(
            Q,
            FlowerVlan {
                vlan_id: Some(10),
                ..Default::default()
            },
        );
        assert_eq!((k.eth_type, k.ip_proto), (None, None));
        // QinQ: the dump names the second tag's TPID as vlan_ethtype and the
        // innermost type as cvlan_ethtype (fl_dump_key).
        let qinq = FlowerVlan {
            vlan_id: Some(10),
            vlan_ethtype: Some(Q),
            cvlan_id: Some(20),
            cvlan_prio: Some(5),
            cvlan_ethtype: Some(ETH_P_IP),
            ..Default::default()
        };
        let k = kept(AD, qinq);
        assert_eq!(
            k.cvlan,
            VlanKey {
                id: Some(20),
                prio: Some(5),
                tpid: Some(Q),
                eth_type: Some(ETH_P_IP)
            }
        );
        assert_eq!((k.eth_type, k.vlan_attrs()), (Some(ETH_P_IP), qinq));
        // num_of_vlans 2 opens the second tag whatever vlan_ethtype is.
        let v = FlowerVlan {
            num_of_vlans: Some(2),
            vlan_id: Some(10),
            vlan_ethtype: Some(ETH_P_IP),
            cvlan_id: Some(20),
            ..Default::default()
        };
        let k = kept(crate::packet::ETH_P_ALL, v);
        assert_eq!((k.vlan.tpid, k.cvlan.tpid), (None, Some(ETH_P_IP)));
        assert_eq!((k.eth_type, k.vlan_attrs()), (None, v));
    }

    /// A filter of protocol mpls_uc with MPLS attributes `m`, in a block of
    /// its own (or the kernel's refusal).
    fn mpls_block(m: FlowerMpls) -> TcResult<Block> {
        let (mut net, mut b) = (Net::default(), Block::default());
        let uc = crate::packet::ETH_P_MPLS_UC;
        let msg = FilterMsg {
            prio: 1,
            protocol: uc,
            kind: Some("flower".into()),
            opts: Some(FilterOpts::Flower(FlowerOpts {
                classid: Some(h(1, 1)),
                keys: FlowerKeys {
                    eth_type: Some(uc),
                    ..Default::default()
                },
                mpls: m,
                ..Default::default()
            })),
            ..Default::default()
        };
        b.change_filter(&msg, FilterCmd::Add, &mut net.env(h(0xffff, 0)))?;
        Ok(b)
    }

    /// An MPLS packet with the entries (label, tc, bos, ttl), outermost first.
    fn labelled(stack: &[(u32, u32, u32, u32)]) -> Packet {
        let mut d = vec![];
        for &(label, tc, bos, ttl) in stack {
            d.extend((label << 12 | tc << 9 | bos << 8 | ttl).to_be_bytes());
        }
        d.extend([0x45; 20]);
        Packet::new(d, 100, crate::packet::ETH_P_MPLS_UC)
    }

    fn lse(depth: u8, label: Option<u32>, bos: Option<u8>) -> MplsLseAttr {
        MplsLseAttr {
            depth: Some(depth),
            label,
            bos,
            ..Default::default()
        }
    }

    #[test]
    fn mpls_keys_match_entries_down_to_the_bottom_of_stack() {
        let two = [(100, 0, 0, 64), (200, 3, 1, 63)];
        let matched = |m: FlowerMpls, p: Packet| class_of(&mut mpls_block(m).unwrap(), p).is_some();
        // The old keys are depth 1, the outermost entry.
        let old = |label| FlowerMpls {
            label: Some(label),
            ..Default::default()
        };
        assert!(matched(old(100), labelled(&two)));
        assert!(!matched(old(200), labelled(&two)));
        let ttl = FlowerMpls {
            ttl: Some(63),
            ..Default::default()
        };
        assert!(!matched(ttl, labelled(&two)));
        // Depth 2 needs a second entry; an entry after the bottom of stack
        // is never read.
        let second = |label, bos| FlowerMpls {
            lses: Some(vec![lse(2, Some(label), bos)]),
            ..Default::default()
        };
        assert!(matched(second(200, Some(1)), labelled(&two)));
        assert!(!matched(second(200, Some(0)), labelled(&two)));
        assert!(!matched(second(200, None), labelled(&[(200, 0, 1, 64)])));
        assert!(!matched(
            second(200, None),
            labelled(&[(100, 0, 1, 64), (200, 0, 1, 64)])
        ));
        // A depth without fields: the packet has such an entry.
        let has3 = FlowerMpls {
            lses: Some(vec![lse(3, None, None)]),
            ..Default::default()
        };
        assert!(!matched(has3.clone(), labelled(&two)));
        assert!(matched(
            has3,
            labelled(&[(1, 0, 0, 1), (2, 0, 0, 1), (3, 0, 1, 1)])
        ));
        // An empty list looks at no entry; an IP packet is not MPLS at all.
        let empty = FlowerMpls {
            lses: Some(vec![]),
            ..Default::default()
        };
        assert!(matched(empty.clone(), labelled(&[])));
        assert!(!matched(empty, udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2)));
        // At most seven entries are read.
        let eight: Vec<_> = (1..=8).map(|l| (l, 0, (l == 8) as u32, 9)).collect();
        let deep = FlowerMpls {
            lses: Some(vec![lse(7, Some(7), Some(0))]),
            ..Default::default()
        };
        assert!(matched(deep, labelled(&eight)));
    }

    #[test]
    fn the_kernel_checks_mpls_attributes_and_dumps_them_back() {
        let err = |m: FlowerMpls| {
            let e = mpls_block(m).expect_err("refused");
            (e.errno, e.extack.unwrap_or_default())
        };
        let both = FlowerMpls {
            label: Some(5),
            lses: Some(vec![lse(1, None, None)]),
            ..Default::default()
        };
        assert_eq!(err(both).0, Errno::EBADMSG);
        let depth = |d| FlowerMpls {
            lses: Some(vec![lse(d, None, None)]),
            ..Default::default()
        };
        assert_eq!(err(depth(8)), (Errno::EINVAL, "Invalid MPLS depth".into()));
        let no_depth = FlowerMpls {
            lses: Some(vec![MplsLseAttr::default()]),
            ..Default::default()
        };
        assert_eq!(err(no_depth).1, "Missing MPLS option \"depth\"");
        let dump = |m: FlowerMpls| MplsKey::from_attrs(&m).unwrap().attrs();
        // Depth 1 alone with a field comes back as the old keys.
        let one = FlowerMpls {
            lses: Some(vec![lse(1, Some(5), None)]),
            ..Default::default()
        };
        assert_eq!(
            dump(one),
            FlowerMpls {
                label: Some(5),
                ..Default::default()
            }
        );
        // Without a field, or with another depth, as the list, by depth;
        // a depth given twice merges.
        assert_eq!(dump(depth(1)), depth(1));
        let twice = FlowerMpls {
            lses: Some(vec![
                lse(2, Some(9), None),
                lse(1, None, Some(0)),
                lse(2, None, Some(1)),
            ]),
            ..Default::default()
        };
        assert_eq!(
            dump(twice).lses,
            Some(vec![lse(1, None, Some(0)), lse(2, Some(9), Some(1))])
        );
        // Under a non-MPLS protocol the attributes are ignored, even bad ones.
        let ip = FlowerKeys {
            eth_type: Some(ETH_P_IP),
            ..Default::default()
        };
        let k = ip.kept(&FlowerVlan::default(), &depth(9)).unwrap();
        assert_eq!(k.mpls, MplsKey::default());
    }

    /// The addresses are the Ethernet header's; a packet without one (a
    /// TUN device's) shows its first IP header bytes there, as the
    /// kernel's dissector reads them.
    #[test]
    fn ethernet_addresses_match_under_their_masks() {
        let keys = FlowerKeys {
            dst_mac: Some(([0x45, 0, 0, 0, 0, 0], [0xff, 0, 0, 0, 0, 0])),
            ..Default::default()
        };
        let mut b = vlan_block(ETH_P_IP, FlowerVlan::default(), keys);
        let p = udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
        assert!(class_of(&mut b, p.clone()).is_some());
        let mut framed = p;
        framed.eth = Some(EthAddrs {
            dst: [2, 0, 0, 0, 0, 1],
            src: [2, 0, 0, 0, 0, 2],
        });
        assert!(class_of(&mut b, framed.clone()).is_none());
        let keys = FlowerKeys {
            src_mac: Some(([2, 0, 0, 0, 0, 2], [0xff; 6])),
            dst_mac: Some(([2, 0, 0, 0, 0, 0x11], [0xff, 0xff, 0xff, 0xff, 0xff, 0x0f])),
            ..Default::default()
        };
        let mut b = vlan_block(ETH_P_IP, FlowerVlan::default(), keys);
        assert!(class_of(&mut b, framed).is_some());
    }
}
