//! Extended matches ("ematches"): small match modules combined by a boolean
//! expression, used by the basic and flow classifiers (`match EXPR`).
//!
//! Modelled on net/sched/ematch.c and the modules em_cmp.c, em_u32.c,
//! em_nbyte.c, em_meta.c and em_canid.c.
//!
//! # The tree
//!
//! The kernel receives an expression as a flat list (`TCA_EMATCH_TREE_LIST`).
//! Each element has a relation to the next one — AND, OR, or END (the last
//! of its sequence) — and may be inverted. A parenthesised sub-expression is
//! a *container* element holding the index where its own sequence starts;
//! references may only point forward (`ref > index`), so there are no loops.
//! iproute2 flattens the written expression into that list: first the
//! top-level sequence, then, for each container in order, its sequence
//! (recursively, depth first).
//!
//! # Evaluation (`__tcf_em_tree_match`)
//!
//! A sequence is evaluated left to right with short-circuit and no
//! precedence: after each element the running result is the element's
//! (inverted if asked); an AND relation stops the sequence when the result is
//! false, an OR when it is true, END always. The sequence's result is the last
//! result computed. A container's result is its sequence's, inverted if the
//! container is. So `a and b or c` is `a and (b or c)`, read right-leaning,
//! as the kernel does.
//!
//! # Where the bytes are
//!
//! cmp, nbyte and u32 read the packet at an offset from a *layer*: link (the
//! MAC header), network or transport. sluice's packets start at the network
//! header; the link layer is modelled as a 14-byte Ethernet header with zero
//! MAC addresses followed by the EtherType, so offsets into the IP header
//! from the link layer (14 + n) and the EtherType (12) read as in the
//! kernel, and MAC addresses read as zero (deviation). The transport header
//! is the network header plus the IPv4 header length, or plus 40 for IPv6 (as
//! `ip_rcv`/`ipv6_rcv` set it). A read outside the modelled bytes does not
//! match (`tcf_valid_offset`).
//!
//! `meta` compares packet metadata; the ids sluice has data for are listed at
//! [`MetaId`]. Socket ids (`sk_*`) never match: forwarded packets have no
//! socket, and the kernel's `meta` fails the match when a socket is missing.
//! `canid` matches only CAN frames (EtherType `ETH_P_CAN`), which sluice never
//! carries, so it is parsed, stored and dumped but never matches.

use crate::error::{Errno, TcError, TcResult};
use crate::packet::{Packet, ETH_P_IP, ETH_P_IPV6};
use serde::{Deserialize, Serialize};

/// `TCF_EM_REL_END`: the last element of its sequence.
pub const TCF_EM_REL_END: u16 = 0;
/// `TCF_EM_REL_AND`.
pub const TCF_EM_REL_AND: u16 = 1;
/// `TCF_EM_REL_OR`.
pub const TCF_EM_REL_OR: u16 = 2;
/// `TCF_EM_INVERT`.
pub const TCF_EM_INVERT: u16 = 4;
/// `TCF_EM_REL_MASK`.
pub const TCF_EM_REL_MASK: u16 = 3;

/// `TCF_LAYER_LINK`, `_NETWORK`, `_TRANSPORT`.
pub const TCF_LAYER_LINK: u8 = 0;
/// The network layer.
pub const TCF_LAYER_NETWORK: u8 = 1;
/// The transport layer (`TCF_LAYER_MAX`).
pub const TCF_LAYER_TRANSPORT: u8 = 2;

/// `TCF_EM_ALIGN_U8` (1), `_U16` (2), `_U32` (4).
pub const TCF_EM_ALIGN_U8: u8 = 1;
/// 16 bits.
pub const TCF_EM_ALIGN_U16: u8 = 2;
/// 32 bits.
pub const TCF_EM_ALIGN_U32: u8 = 4;
/// `TCF_EM_OPND_EQ`, `_GT`, `_LT`.
pub const TCF_EM_OPND_EQ: u8 = 0;
/// Greater than.
pub const TCF_EM_OPND_GT: u8 = 1;
/// Less than.
pub const TCF_EM_OPND_LT: u8 = 2;
/// `TCF_EM_CMP_TRANS`: byte-swap the value read (a little-endian host's `be_to_cpu` twice).
pub const TCF_EM_CMP_TRANS: u8 = 1;

/// `ETH_P_CAN`.
pub const ETH_P_CAN: u16 = 0x000c;
/// `CAN_EFF_FLAG`: an extended-frame identifier.
pub const CAN_EFF_FLAG: u32 = 0x8000_0000;
/// `CAN_SFF_MASK`: 11 identifier bits.
pub const CAN_SFF_MASK: u32 = 0x7ff;
/// `CAN_EFF_MASK`: 29 identifier bits.
pub const CAN_EFF_MASK: u32 = 0x1fff_ffff;

/// The ematch kind numbers (`TCF_EM_*`, /etc/iproute2/ematch_map).
pub mod kind {
    /// A container (a parenthesised sub-expression).
    pub const CONTAINER: u16 = 0;
    /// cmp.
    pub const CMP: u16 = 1;
    /// nbyte.
    pub const NBYTE: u16 = 2;
    /// u32.
    pub const U32: u16 = 3;
    /// meta.
    pub const META: u16 = 4;
    /// canid.
    pub const CANID: u16 = 7;
}

/// `struct tcf_em_cmp`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmCmp {
    /// The value compared with.
    pub val: u32,
    /// Mask applied to the value read (0: none).
    pub mask: u32,
    /// Offset from the layer's start.
    pub off: u16,
    /// Bytes read: 1, 2 or 4.
    pub align: u8,
    /// `TCF_EM_CMP_TRANS`.
    pub flags: u8,
    /// Layer (0..=2).
    pub layer: u8,
    /// Operand: eq, gt, lt.
    pub opnd: u8,
}

/// `struct tc_u32_key` as em_u32 uses it (values in host order of the
/// big-endian word).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmU32 {
    /// Mask of the 32-bit word.
    pub mask: u32,
    /// Value (already masked).
    pub val: u32,
    /// Offset from the network header (may be negative), aligned to 4.
    pub off: i32,
    /// `nexthdr+`: -1 (the u32 classifier's next-header offset; 0 outside u32).
    pub offmask: i32,
}

/// `struct tcf_em_nbyte` and its needle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmNbyte {
    /// Offset from the layer's start.
    pub off: u16,
    /// Layer (0..=2).
    pub layer: u8,
    /// The bytes to find at the offset.
    pub needle: Vec<u8>,
}

/// One side of a meta comparison (`struct tcf_meta_val` + its value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaVal {
    /// `TCF_META_TYPE << 12 | id`.
    pub kind: u16,
    /// Right shift applied to the left value.
    pub shift: u8,
    /// The comparison (in the left value only): eq, gt, lt.
    pub op: u8,
    /// A mask (left int) or constant (right int value), `TCA_EM_META_*VALUE`.
    pub int: Option<u32>,
    /// A string constant (right var value).
    pub var: Option<Vec<u8>>,
}

/// `meta`: two values compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmMeta {
    /// The packet's value.
    pub left: MetaVal,
    /// What it is compared with.
    pub right: MetaVal,
}

/// A meta type: integer or variable-length.
pub const TCF_META_TYPE_VAR: u16 = 0;
/// An integer.
pub const TCF_META_TYPE_INT: u16 = 1;

/// Meta ids (`TCF_META_ID_*`) sluice evaluates; others are accepted by the
/// parser's table in sluice-tc only if listed here.
#[allow(missing_docs)]
pub mod meta_id {
    pub const VALUE: u16 = 0;
    pub const RANDOM: u16 = 1;
    pub const LOADAVG_0: u16 = 2;
    pub const LOADAVG_1: u16 = 3;
    pub const LOADAVG_2: u16 = 4;
    pub const DEV: u16 = 5;
    pub const PRIORITY: u16 = 6;
    pub const PROTOCOL: u16 = 7;
    pub const PKTTYPE: u16 = 8;
    pub const PKTLEN: u16 = 9;
    pub const DATALEN: u16 = 10;
    pub const MACLEN: u16 = 11;
    pub const NFMARK: u16 = 12;
    pub const TCINDEX: u16 = 13;
    pub const RTCLASSID: u16 = 14;
    pub const RTIIF: u16 = 15;
    pub const SK_FAMILY: u16 = 16;
    pub const SK_WRITE_PENDING: u16 = 45;
    pub const VLAN_TAG: u16 = 46;
    pub const RXHASH: u16 = 47;
    pub const MAX: u16 = 47;
}

/// The meta ids as this module knows them: see [`meta_id`].
pub type MetaId = u16;

/// `struct can_filter` rules of em_canid, EFF rules first (as the kernel keeps them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmCanid {
    /// `(can_id, can_mask)` pairs; `can_id` carries `CAN_EFF_FLAG` for EFF rules.
    pub rules: Vec<(u32, u32)>,
}

/// What one element of the list is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EmatchKind {
    /// A sub-expression starting at this index.
    Container {
        /// Index of its first element.
        start: u32,
    },
    /// cmp.
    Cmp(EmCmp),
    /// nbyte.
    Nbyte(EmNbyte),
    /// u32.
    U32(EmU32),
    /// meta.
    Meta(EmMeta),
    /// canid.
    Canid(EmCanid),
}

impl EmatchKind {
    /// The kind number (`tcf_ematch_hdr.kind`).
    pub fn number(&self) -> u16 {
        match self {
            EmatchKind::Container { .. } => kind::CONTAINER,
            EmatchKind::Cmp(_) => kind::CMP,
            EmatchKind::Nbyte(_) => kind::NBYTE,
            EmatchKind::U32(_) => kind::U32,
            EmatchKind::Meta(_) => kind::META,
            EmatchKind::Canid(_) => kind::CANID,
        }
    }
}

/// One element: `tcf_ematch_hdr.flags` (relation, invert) and the match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ematch {
    /// Relation to the next element and `TCF_EM_INVERT`.
    pub flags: u16,
    /// The match.
    pub kind: EmatchKind,
}

/// A validated tree (`struct tcf_ematch_tree`), in list order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmatchTree {
    /// The flattened list.
    pub matches: Vec<Ematch>,
}

/// The packet as the ematches see it, with the modelled link-layer header.
struct View<'a> {
    pkt: &'a Packet,
}

/// Bytes of the modelled Ethernet header.
const MAC_LEN: i64 = 14;

impl View<'_> {
    /// Offset of a layer's start in the view (link = 0).
    fn base(&self, layer: u8) -> i64 {
        match layer {
            TCF_LAYER_LINK => 0,
            TCF_LAYER_NETWORK => MAC_LEN,
            _ => MAC_LEN + transport_offset(self.pkt) as i64,
        }
    }

    /// `len` bytes at `at` of the view, if all of them exist.
    fn bytes(&self, at: i64, len: usize) -> Option<Vec<u8>> {
        let end = at.checked_add(len as i64)?;
        if at < 0 || end > MAC_LEN + self.pkt.data.len() as i64 {
            return None;
        }
        let mac = {
            let mut m = [0u8; 14];
            m[12..14].copy_from_slice(&self.pkt.protocol.to_be_bytes());
            m
        };
        Some(
            (at..end)
                .map(|i| {
                    if i < MAC_LEN {
                        mac[i as usize]
                    } else {
                        self.pkt.data[(i - MAC_LEN) as usize]
                    }
                })
                .collect(),
        )
    }
}

/// Where the transport header starts, from the network header.
fn transport_offset(pkt: &Packet) -> usize {
    match pkt.protocol {
        ETH_P_IP if !pkt.data.is_empty() => (pkt.data[0] & 0x0f) as usize * 4,
        ETH_P_IPV6 => 40,
        _ => 0,
    }
}

impl EmCmp {
    fn matches(&self, v: &View<'_>) -> bool {
        let n = match self.align {
            TCF_EM_ALIGN_U8 | TCF_EM_ALIGN_U16 | TCF_EM_ALIGN_U32 => self.align as usize,
            _ => return false,
        };
        let Some(b) = v.bytes(v.base(self.layer) + self.off as i64, n) else {
            return false;
        };
        let trans = self.flags & TCF_EM_CMP_TRANS != 0;
        let mut val = match n {
            1 => b[0] as u32,
            2 => {
                let x = u16::from_be_bytes([b[0], b[1]]);
                (if trans { x.swap_bytes() } else { x }) as u32
            }
            _ => {
                let x = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                if trans {
                    x.swap_bytes()
                } else {
                    x
                }
            }
        };
        if self.mask != 0 {
            val &= self.mask;
        }
        match self.opnd {
            TCF_EM_OPND_EQ => val == self.val,
            TCF_EM_OPND_LT => val < self.val,
            TCF_EM_OPND_GT => val > self.val,
            _ => false,
        }
    }
}

impl EmU32 {
    fn matches(&self, v: &View<'_>) -> bool {
        // Outside the u32 classifier there is no next-header offset.
        let Some(b) = v.bytes(MAC_LEN + self.off as i64, 4) else {
            return false;
        };
        (u32::from_be_bytes([b[0], b[1], b[2], b[3]]) ^ self.val) & self.mask == 0
    }
}

impl EmNbyte {
    fn matches(&self, v: &View<'_>) -> bool {
        let at = v.base(self.layer) + self.off as i64;
        v.bytes(at, self.needle.len())
            .is_some_and(|b| b == self.needle)
    }
}

/// The packet's value of an integer meta id, `None` when it cannot be
/// obtained (the kernel's `*err = -1`, which fails the match).
fn meta_int(id: u16, pkt: &Packet, rnd: &mut dyn FnMut() -> u32) -> Option<u64> {
    use meta_id::*;
    Some(match id {
        RANDOM => rnd() as u64,
        // sluice has no CPU load; the kernel's figure is fixed-point 1/2048.
        LOADAVG_0 | LOADAVG_1 | LOADAVG_2 => 0,
        PRIORITY => pkt.priority as u64,
        // `skb->protocol` as the kernel reads it: the __be16 in host (little-endian) order.
        PROTOCOL => pkt.protocol.swap_bytes() as u64,
        // PACKET_OUTGOING (4) on egress, unless skbedit set another.
        PKTTYPE => pkt.pkt_type.map_or(4, u64::from),
        PKTLEN => pkt.len as u64,
        DATALEN => pkt.data.len() as u64,
        MACLEN => MAC_LEN as u64,
        NFMARK => pkt.mark as u64,
        TCINDEX => pkt.tc_index as u64,
        // No route class or VLAN in sluice's packets.
        RTCLASSID | VLAN_TAG => 0,
        RXHASH => pkt.hash as u64,
        _ => return None,
    })
}

impl EmMeta {
    fn matches(&self, pkt: &Packet, rnd: &mut dyn FnMut() -> u32) -> bool {
        let lt = self.left.kind >> 12;
        let lid = self.left.kind & 0x7ff;
        if lt != TCF_META_TYPE_INT {
            // Variable-length left values (devices, security contexts) are
            // not modelled: the packet carries no device.
            return false;
        }
        let Some(mut l) = meta_int(lid, pkt, rnd) else {
            return false;
        };
        let rid = self.right.kind & 0x7ff;
        let r = if rid == meta_id::VALUE {
            self.right.int.unwrap_or(0) as u64
        } else {
            match meta_int(rid, pkt, rnd) {
                Some(r) => r,
                None => return false,
            }
        };
        // meta_int_apply_extras: shift, then mask, on the left value.
        if self.left.shift != 0 {
            l >>= self.left.shift.min(63);
        }
        if let Some(m) = self.left.int {
            l &= m as u64;
        }
        match self.left.op {
            TCF_EM_OPND_EQ => l == r,
            TCF_EM_OPND_LT => l < r,
            TCF_EM_OPND_GT => l > r,
            _ => false,
        }
    }
}

impl EmatchTree {
    /// `tcf_em_tree_validate`: relations valid, containers pointing forward
    /// and inside the list, modules' data sane.
    pub fn validate(&self) -> TcResult<()> {
        let n = self.matches.len();
        for (i, m) in self.matches.iter().enumerate() {
            if m.flags & TCF_EM_REL_MASK == TCF_EM_REL_MASK {
                return Err(TcError::errno(Errno::EINVAL));
            }
            match &m.kind {
                EmatchKind::Container { start } => {
                    if (*start as usize) <= i || (*start as usize) >= n {
                        return Err(TcError::errno(Errno::EINVAL));
                    }
                }
                EmatchKind::Cmp(c) => {
                    if c.layer > TCF_LAYER_TRANSPORT {
                        return Err(TcError::errno(Errno::EINVAL));
                    }
                }
                EmatchKind::Nbyte(b) => {
                    if b.layer > TCF_LAYER_TRANSPORT {
                        return Err(TcError::errno(Errno::EINVAL));
                    }
                }
                EmatchKind::Meta(mt) => {
                    let lid = mt.left.kind & 0x7ff;
                    let rid = mt.right.kind & 0x7ff;
                    // meta_change: both ids known and of one type.
                    if lid == meta_id::VALUE
                        || lid > meta_id::MAX
                        || rid > meta_id::MAX
                        || (mt.left.kind >> 12) != (mt.right.kind >> 12)
                    {
                        return Err(TcError::errno(Errno::EINVAL));
                    }
                }
                EmatchKind::U32(_) | EmatchKind::Canid(_) => {}
            }
        }
        Ok(())
    }

    /// What the modules keep of their options: em_canid stores the EFF
    /// rules first, then the SFF ones, and dumps them in that order.
    pub fn kernel_order(&mut self) {
        for m in &mut self.matches {
            if let EmatchKind::Canid(c) = &mut m.kind {
                let eff =
                    |&(id, mask): &(u32, u32)| id & CAN_EFF_FLAG != 0 && mask & CAN_EFF_FLAG != 0;
                let (mut e, s): (Vec<_>, Vec<_>) = c.rules.iter().partition(|r| eff(r));
                e.extend(s);
                c.rules = e;
            }
        }
    }

    /// `__tcf_em_tree_match`: an empty tree matches everything.
    pub fn matches(&self, pkt: &Packet, rnd: &mut dyn FnMut() -> u32) -> bool {
        if self.matches.is_empty() {
            return true;
        }
        self.sequence(0, pkt, rnd, 0)
    }

    fn sequence(
        &self,
        start: usize,
        pkt: &Packet,
        rnd: &mut dyn FnMut() -> u32,
        depth: usize,
    ) -> bool {
        let mut res = false;
        let mut i = start;
        // Containers only point forward, so the depth is bounded by the list.
        while i < self.matches.len() && depth <= self.matches.len() {
            let m = &self.matches[i];
            res = match &m.kind {
                EmatchKind::Container { start } => {
                    self.sequence(*start as usize, pkt, rnd, depth + 1)
                }
                k => one(k, pkt, rnd),
            };
            if m.flags & TCF_EM_INVERT != 0 {
                res = !res;
            }
            match m.flags & TCF_EM_REL_MASK {
                TCF_EM_REL_AND if !res => break,
                TCF_EM_REL_OR if res => break,
                TCF_EM_REL_AND | TCF_EM_REL_OR => i += 1,
                _ => break,
            }
        }
        res
    }
}

/// One module's match.
fn one(k: &EmatchKind, pkt: &Packet, rnd: &mut dyn FnMut() -> u32) -> bool {
    let v = View { pkt };
    match k {
        EmatchKind::Cmp(c) => c.matches(&v),
        EmatchKind::U32(u) => u.matches(&v),
        EmatchKind::Nbyte(b) => b.matches(&v),
        EmatchKind::Meta(m) => m.matches(pkt, rnd),
        // Only CAN frames can match, and sluice carries none.
        EmatchKind::Canid(_) => false,
        EmatchKind::Container { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(tos: u8, proto: u8, sport: u16) -> Packet {
        let mut d = vec![0u8; 28];
        d[0] = 0x45;
        d[1] = tos;
        d[8] = 64;
        d[9] = proto;
        d[12..16].copy_from_slice(&[10, 0, 0, 1]);
        d[16..20].copy_from_slice(&[10, 0, 0, 2]);
        d[20..22].copy_from_slice(&sport.to_be_bytes());
        Packet::new(d, 1000, ETH_P_IP)
    }

    fn cmp(align: u8, off: u16, layer: u8, mask: u32, opnd: u8, val: u32) -> EmatchKind {
        EmatchKind::Cmp(EmCmp {
            val,
            mask,
            off,
            align,
            flags: 0,
            layer,
            opnd,
        })
    }

    fn el(flags: u16, kind: EmatchKind) -> Ematch {
        Ematch { flags, kind }
    }

    fn run(t: &EmatchTree, p: &Packet) -> bool {
        t.matches(p, &mut || 0)
    }

    #[test]
    fn cmp_reads_each_layer() {
        let p = ip(0x10, 6, 22);
        // TOS at network offset 1; the same byte at link offset 15.
        for (layer, off) in [(TCF_LAYER_NETWORK, 1), (TCF_LAYER_LINK, 15)] {
            let t = EmatchTree {
                matches: vec![el(0, cmp(1, off, layer, 0, TCF_EM_OPND_EQ, 0x10))],
            };
            assert!(run(&t, &p));
        }
        // The EtherType at link offset 12.
        let t = EmatchTree {
            matches: vec![el(0, cmp(2, 12, TCF_LAYER_LINK, 0, TCF_EM_OPND_EQ, 0x0800))],
        };
        assert!(run(&t, &p));
        // Source port at transport offset 0: 22 > 21, not < 21.
        let gt = EmatchTree {
            matches: vec![el(0, cmp(2, 0, TCF_LAYER_TRANSPORT, 0, TCF_EM_OPND_GT, 21))],
        };
        assert!(run(&gt, &p));
        let lt = EmatchTree {
            matches: vec![el(0, cmp(2, 0, TCF_LAYER_TRANSPORT, 0, TCF_EM_OPND_LT, 21))],
        };
        assert!(!run(&lt, &p));
        // `trans` swaps the bytes: port 22 = 0x0016 reads as 0x1600.
        let mut c = EmCmp {
            val: 0x1600,
            mask: 0,
            off: 0,
            align: 2,
            flags: TCF_EM_CMP_TRANS,
            layer: TCF_LAYER_TRANSPORT,
            opnd: TCF_EM_OPND_EQ,
        };
        let t = EmatchTree {
            matches: vec![el(0, EmatchKind::Cmp(c.clone()))],
        };
        assert!(run(&t, &p));
        // Past the end of the bytes: no match.
        c.off = 500;
        c.flags = 0;
        c.opnd = TCF_EM_OPND_LT;
        let t = EmatchTree {
            matches: vec![el(0, EmatchKind::Cmp(c))],
        };
        assert!(!run(&t, &p));
    }

    #[test]
    fn relations_short_circuit_right_leaning_and_containers_invert() {
        let p = ip(0x10, 6, 22);
        let yes = || cmp(1, 9, 1, 0, TCF_EM_OPND_EQ, 6);
        let no = || cmp(1, 9, 1, 0, TCF_EM_OPND_EQ, 17);
        // yes AND no OR yes = yes AND (no OR yes) = true.
        let t = EmatchTree {
            matches: vec![
                el(TCF_EM_REL_AND, yes()),
                el(TCF_EM_REL_OR, no()),
                el(0, yes()),
            ],
        };
        assert!(run(&t, &p));
        // no AND yes OR yes: stops at the first AND -> false (no precedence).
        let t = EmatchTree {
            matches: vec![
                el(TCF_EM_REL_AND, no()),
                el(TCF_EM_REL_OR, yes()),
                el(0, yes()),
            ],
        };
        assert!(!run(&t, &p));
        // NOT (no OR no) AND yes.
        let t = EmatchTree {
            matches: vec![
                el(
                    TCF_EM_INVERT | TCF_EM_REL_AND,
                    EmatchKind::Container { start: 2 },
                ),
                el(0, yes()),
                el(TCF_EM_REL_OR, no()),
                el(0, no()),
            ],
        };
        t.validate().unwrap();
        assert!(run(&t, &p));
        // A container pointing backwards is refused.
        let bad = EmatchTree {
            matches: vec![el(0, yes()), el(0, EmatchKind::Container { start: 0 })],
        };
        assert_eq!(bad.validate(), Err(TcError::errno(Errno::EINVAL)));
    }

    #[test]
    fn u32_nbyte_meta_and_canid() {
        let p = ip(0x10, 17, 53);
        // u32(u8 0x11 0xff at 9): protocol 17 is byte 1 of the word at 8.
        let u = EmatchTree {
            matches: vec![el(
                0,
                EmatchKind::U32(EmU32 {
                    mask: 0x00ff_0000,
                    val: 0x0011_0000,
                    off: 8,
                    offmask: 0,
                }),
            )],
        };
        assert!(run(&u, &p));
        let nb = EmatchTree {
            matches: vec![el(
                0,
                EmatchKind::Nbyte(EmNbyte {
                    off: 12,
                    layer: TCF_LAYER_NETWORK,
                    needle: vec![10, 0, 0, 1],
                }),
            )],
        };
        assert!(run(&nb, &p));
        let meta = |id: u16, op: u8, v: u32| EmatchTree {
            matches: vec![el(
                0,
                EmatchKind::Meta(EmMeta {
                    left: MetaVal {
                        kind: TCF_META_TYPE_INT << 12 | id,
                        shift: 0,
                        op,
                        int: None,
                        var: None,
                    },
                    right: MetaVal {
                        kind: TCF_META_TYPE_INT << 12,
                        shift: 0,
                        op: 0,
                        int: Some(v),
                        var: None,
                    },
                }),
            )],
        };
        let mut q = p.clone();
        q.mark = 7;
        assert!(run(&meta(meta_id::NFMARK, TCF_EM_OPND_EQ, 7), &q));
        assert!(!run(&meta(meta_id::NFMARK, TCF_EM_OPND_EQ, 7), &p));
        assert!(run(&meta(meta_id::PKTLEN, TCF_EM_OPND_GT, 999), &p));
        let can = EmatchTree {
            matches: vec![el(
                0,
                EmatchKind::Canid(EmCanid {
                    rules: vec![(1, 0x7ff)],
                }),
            )],
        };
        assert!(!run(&can, &p));
    }
}
