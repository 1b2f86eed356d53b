//! flow: compute a class id from packet keys, by mapping one key or hashing several.
//!
//! Modelled on net/sched/cls_flow.c. An instance holds a list of filters,
//! each with a handle (required), an optional ematch tree, actions, and:
//!
//! - `keys`: a bit mask of keys (`src`, `dst`, `proto`, `proto-src`,
//!   `proto-dst`, `iif`, `priority`, `mark`, `nfct*`, `rt-classid`, `sk-uid`,
//!   `sk-gid`, `vlan-tag`, `rxhash`), read in bit order;
//! - `mode`: *map* takes the one key and computes
//!   `((key & mask) ^ xor) >> rshift) + addend`; *hash* takes
//!   `jhash2(keys, hashrnd)` — Bob Jenkins' hash of the key words under a
//!   random key, redrawn every `perturb` seconds;
//! - `divisor`: the result is taken modulo it (when non-zero);
//! - `baseclass`: the class id is `major(baseclass):(minor(baseclass) + result)`
//!   (the minor wraps at 16 bits). It defaults to `QDISC_MAJOR:1`.
//!
//! So `hash keys src divisor 8 baseclass 1:10` spreads source hosts over the
//! eight classes 1:10 .. 1:17 — the per-host-fairness example.
//!
//! Classification walks the filters in the order they were added; a filter
//! whose ematches do not match, or whose actions answer `continue`, passes
//! the packet to the next one. Every packet that reaches a filter with
//! matching ematches gets a class id: flow never "misses".
//!
//! Keys and what sluice knows of them. Addresses and ports come from the
//! shared flow dissector ([`crate::qdisc::flow_hash::FlowKeys`]), without
//! stopping at an IPv6 flow label (the kernel calls it with no flags here):
//! - `src`/`dst`: the IPv4 address, or the four words of an IPv6 address
//!   XORed (`ipv6_addr_hash`); without an address, `src` falls back to the
//!   socket pointer (0: forwarded packets have none) and `dst` to the route
//!   pointer XOR the EtherType as a little-endian host reads it. sluice has no
//!   route pointer, so `dst` falls back to the EtherType alone (deviation);
//! - `proto-src`/`proto-dst`: the ports when the packet has any, else the
//!   same fallbacks;
//! - `nfct`, `nfct-src`, ...: without a conntrack entry the kernel reads 0 for
//!   `nfct` and falls back to `src`, `dst`, `proto-src`, `proto-dst`; sluice
//!   has no connection tracking, so these are always the fallbacks;
//! - `iif`, `rt-classid`, `sk-uid`, `sk-gid`, `vlan-tag`: 0 (packets carry no
//!   input interface, route realm, socket or VLAN tag);
//! - `rxhash`: `skb_get_hash`, the flow hash with key 0, kept in `Packet::hash`.
//!
//! Deviation: the kernel draws `hashrnd` from `get_random_bytes`; here each
//! filter has its own generator seeded from the device seed and the order
//! filters were created in, so runs repeat. The perturbation timer is lazy:
//! the key is redrawn by the first packet at or after the deadline.

use super::act::police::PoliceSpec;
use super::act::{ActionDump, ActionSpec, Exts, InitCtx};
use super::ematch::EmatchTree;
use super::{
    ChangeReq, Classifier, ClassifyResult, ClsEnv, FilterElemOpts, FilterElement, FilterOpts,
    Verdict,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::{Packet, ETH_P_IP, ETH_P_IPV6};
use crate::qdisc::flow_hash::{flow_hash, jhash2, FlowAddrs, FlowKeys};
use crate::time::{Duration, Time};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// The keys (`FLOW_KEY_*` bit numbers), in the order iproute2 names them.
pub const KEY_NAMES: [&str; 18] = [
    "src",
    "dst",
    "proto",
    "proto-src",
    "proto-dst",
    "iif",
    "priority",
    "mark",
    "nfct",
    "nfct-src",
    "nfct-dst",
    "nfct-proto-src",
    "nfct-proto-dst",
    "rt-classid",
    "sk-uid",
    "sk-gid",
    "vlan-tag",
    "rxhash",
];

/// `FLOW_KEY_MAX`.
pub const FLOW_KEY_MAX: u32 = 17;
/// `FLOW_MODE_MAP`.
pub const FLOW_MODE_MAP: u32 = 0;
/// `FLOW_MODE_HASH`.
pub const FLOW_MODE_HASH: u32 = 1;

const KEY_SRC: u32 = 0;
const KEY_DST: u32 = 1;
const KEY_PROTO: u32 = 2;
const KEY_PROTO_SRC: u32 = 3;
const KEY_PROTO_DST: u32 = 4;
const KEY_PRIORITY: u32 = 6;
const KEY_MARK: u32 = 7;
const KEY_NFCT_SRC: u32 = 9;
const KEY_NFCT_DST: u32 = 10;
const KEY_NFCT_PROTO_SRC: u32 = 11;
const KEY_NFCT_PROTO_DST: u32 = 12;
const KEY_RXHASH: u32 = 17;

/// Keys that need the flow dissector (`FLOW_KEYS_NEEDED`).
const KEYS_NEEDING_DISSECTION: u32 = 1 << KEY_SRC
    | 1 << KEY_DST
    | 1 << KEY_PROTO
    | 1 << KEY_PROTO_SRC
    | 1 << KEY_PROTO_DST
    | 1 << KEY_NFCT_SRC
    | 1 << KEY_NFCT_DST
    | 1 << KEY_NFCT_PROTO_SRC
    | 1 << KEY_NFCT_PROTO_DST;

/// The flow options tc sends (`TCA_FLOW_*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowOpts {
    /// `TCA_FLOW_KEYS`: bit mask of `FLOW_KEY_*`.
    #[serde(default)]
    pub keys: Option<u32>,
    /// `TCA_FLOW_MODE`.
    #[serde(default)]
    pub mode: Option<u32>,
    /// `TCA_FLOW_BASECLASS`.
    #[serde(default)]
    pub baseclass: Option<Handle>,
    /// `TCA_FLOW_RSHIFT`.
    #[serde(default)]
    pub rshift: Option<u32>,
    /// `TCA_FLOW_ADDEND`.
    #[serde(default)]
    pub addend: Option<u32>,
    /// `TCA_FLOW_MASK`.
    #[serde(default)]
    pub mask: Option<u32>,
    /// `TCA_FLOW_XOR`.
    #[serde(default)]
    pub xor: Option<u32>,
    /// `TCA_FLOW_DIVISOR`.
    #[serde(default)]
    pub divisor: Option<u32>,
    /// `TCA_FLOW_PERTURB`, seconds.
    #[serde(default)]
    pub perturb: Option<u32>,
    /// `TCA_FLOW_EMATCHES`.
    #[serde(default)]
    pub ematches: Option<EmatchTree>,
    /// `TCA_FLOW_ACT`.
    #[serde(default)]
    pub actions: Vec<ActionSpec>,
    /// `TCA_FLOW_POLICE`.
    #[serde(default)]
    pub police: Option<PoliceSpec>,
}

/// A flow filter as the kernel dumps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowDump {
    /// `TCA_FLOW_KEYS`.
    pub keys: u32,
    /// `TCA_FLOW_MODE`.
    pub mode: u32,
    /// `TCA_FLOW_MASK` and `TCA_FLOW_XOR`, sent when not `~0` and 0.
    pub mask_xor: Option<(u32, u32)>,
    /// `TCA_FLOW_RSHIFT`, when non-zero.
    pub rshift: Option<u32>,
    /// `TCA_FLOW_ADDEND`, when non-zero.
    pub addend: Option<u32>,
    /// `TCA_FLOW_DIVISOR`, when non-zero.
    pub divisor: Option<u32>,
    /// `TCA_FLOW_BASECLASS`, when non-zero.
    pub baseclass: Option<Handle>,
    /// `TCA_FLOW_PERTURB` in seconds, when non-zero.
    pub perturb: Option<u32>,
    /// `TCA_FLOW_EMATCHES`, when the tree has matches.
    pub ematches: Option<EmatchTree>,
    /// `TCA_FLOW_ACT`.
    pub actions: Vec<ActionDump>,
    /// `TCA_FLOW_POLICE`.
    pub police: Option<ActionDump>,
}

/// The validated parameters of one filter (`struct flow_filter` without its state).
#[derive(Clone, Debug, PartialEq, Eq)]
struct FlowParams {
    keymask: u32,
    mode: u32,
    mask: u32,
    xor: u32,
    rshift: u32,
    addend: u32,
    divisor: u32,
    baseclass: u32,
    /// Seconds between new hash keys; 0 = never.
    perturb_secs: u32,
}

#[derive(Debug)]
struct FlowFilter {
    handle: u32,
    params: FlowParams,
    ematches: EmatchTree,
    exts: Exts,
    /// The hash key (`hashrnd`).
    hashrnd: u32,
    rng: Xoshiro256PlusPlus,
    /// When the next perturbation is due.
    next_perturb: Option<Time>,
}

/// A flow instance: its filters in the order they were added.
#[derive(Debug, Default)]
pub struct Flow {
    filters: Vec<FlowFilter>,
}

/// The key of one packet (`flow_key_get`).
fn key_value(key: u32, pkt: &mut Packet, fk: &FlowKeys) -> u32 {
    // Without a socket or a route, the kernel's pointer fallbacks are 0 and
    // the EtherType as a little-endian host reads a __be16.
    let no_sk = 0u32;
    let no_dst = pkt.protocol.swap_bytes() as u32;
    let src = || match fk.addrs {
        FlowAddrs::V4 { src, .. } if src != 0 => src,
        FlowAddrs::V6 { src, .. } => v6_fold(&src).unwrap_or(no_sk),
        _ => no_sk,
    };
    let dst = || match fk.addrs {
        FlowAddrs::V4 { dst, .. } if dst != 0 => dst,
        FlowAddrs::V6 { dst, .. } => v6_fold(&dst).unwrap_or(no_dst),
        _ => no_dst,
    };
    let has_ports = fk.ports != (0, 0);
    match key {
        KEY_SRC | KEY_NFCT_SRC => src(),
        KEY_DST | KEY_NFCT_DST => dst(),
        KEY_PROTO => fk.ip_proto as u32,
        KEY_PROTO_SRC | KEY_NFCT_PROTO_SRC if has_ports => fk.ports.0 as u32,
        KEY_PROTO_SRC | KEY_NFCT_PROTO_SRC => no_sk,
        KEY_PROTO_DST | KEY_NFCT_PROTO_DST if has_ports => fk.ports.1 as u32,
        KEY_PROTO_DST | KEY_NFCT_PROTO_DST => no_dst,
        KEY_PRIORITY => pkt.priority,
        KEY_MARK => pkt.mark,
        KEY_RXHASH => {
            if pkt.hash == 0 {
                pkt.hash = flow_hash(pkt, 0);
            }
            pkt.hash
        }
        // iif, nfct (no conntrack entry), rt-classid, sk-uid, sk-gid, vlan-tag.
        _ => 0,
    }
}

/// `ipv6_addr_hash`: the address's four words XORed; `None` for `::`.
fn v6_fold(a: &[u8; 16]) -> Option<u32> {
    let x = a
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .fold(0, |x, w| x ^ w);
    (x != 0).then_some(x)
}

impl FlowFilter {
    /// The class id this filter gives `pkt` (`flow_classify` after the ematches).
    fn classid(&mut self, pkt: &mut Packet) -> Handle {
        let p = &self.params;
        let fk = if p.keymask & KEYS_NEEDING_DISSECTION != 0
            && matches!(pkt.protocol, ETH_P_IP | ETH_P_IPV6)
        {
            FlowKeys::dissect_all(pkt)
        } else {
            FlowKeys {
                n_proto: pkt.protocol,
                ..Default::default()
            }
        };
        let mut keys = [0u32; FLOW_KEY_MAX as usize + 1];
        let mut n = 0;
        for k in 0..=FLOW_KEY_MAX {
            if p.keymask & (1 << k) != 0 {
                keys[n] = key_value(k, pkt, &fk);
                n += 1;
            }
        }
        let mut v = if p.mode == FLOW_MODE_HASH {
            jhash2(&keys[..n], self.hashrnd)
        } else {
            ((keys[0] & p.mask) ^ p.xor)
                .checked_shr(p.rshift)
                .unwrap_or(0)
                .wrapping_add(p.addend)
        };
        if p.divisor != 0 {
            v %= p.divisor;
        }
        let minor = p.baseclass.wrapping_add(v) & 0xffff;
        Handle((p.baseclass & 0xffff_0000) | minor)
    }

    /// Redraw the hash key if the perturbation period has passed.
    fn perturb(&mut self, now: Time) {
        if let Some(due) = self.next_perturb {
            if now >= due {
                self.hashrnd = self.rng.next_u32();
                self.next_perturb =
                    Some(now + Duration::from_secs(self.params.perturb_secs as u64));
            }
        }
    }

    fn element(&self) -> FilterElement {
        let p = &self.params;
        let old = self.exts.is_old_police();
        let acts = self.exts.dump();
        let (actions, police) = if old {
            (Vec::new(), acts.into_iter().next())
        } else {
            (acts, None)
        };
        let d = FlowDump {
            keys: p.keymask,
            mode: p.mode,
            mask_xor: (p.mask != u32::MAX || p.xor != 0).then_some((p.mask, p.xor)),
            rshift: (p.rshift != 0).then_some(p.rshift),
            addend: (p.addend != 0).then_some(p.addend),
            divisor: (p.divisor != 0).then_some(p.divisor),
            baseclass: (p.baseclass != 0).then_some(Handle(p.baseclass)),
            perturb: (p.perturb_secs != 0).then_some(p.perturb_secs),
            ematches: (!self.ematches.matches.is_empty()).then(|| self.ematches.clone()),
            actions,
            police,
        };
        FilterElement {
            handle: self.handle,
            opts: Some(FilterElemOpts::Flow(d)),
            stats: self.exts.compat_stats(),
        }
    }
}

/// `flow_change`'s checks of the options alone; answers the key count.
fn check_opts(o: &FlowOpts) -> TcResult<u32> {
    if let Some(b) = o.baseclass {
        if b.minor() == 0 {
            return Err(TcError::errno(Errno::EINVAL));
        }
    }
    let Some(keys) = o.keys else { return Ok(0) };
    let nkeys = keys.count_ones();
    if nkeys == 0 {
        return Err(TcError::errno(Errno::EINVAL));
    }
    if 31 - keys.leading_zeros() > FLOW_KEY_MAX {
        return Err(TcError::errno(Errno::EOPNOTSUPP));
    }
    Ok(nkeys)
}

/// The new parameters: the old ones (or the defaults of a new filter) with
/// the given options applied, after the mode and perturb checks.
fn new_params(
    o: &FlowOpts,
    old: Option<&FlowParams>,
    nkeys: u32,
    qdisc: Handle,
) -> TcResult<FlowParams> {
    let mut p = match old {
        Some(p) => p.clone(),
        None => {
            if o.keys.is_none() {
                return Err(TcError::errno(Errno::EINVAL));
            }
            FlowParams {
                keymask: 0,
                mode: FLOW_MODE_MAP,
                mask: u32::MAX,
                xor: 0,
                rshift: 0,
                addend: 0,
                divisor: 0,
                baseclass: 0,
                perturb_secs: 0,
            }
        }
    };
    let mode = o.mode.unwrap_or(p.mode);
    if mode != FLOW_MODE_HASH && nkeys > 1 {
        return Err(TcError::errno(Errno::EINVAL));
    }
    let mut perturb = if old.is_some() && mode == FLOW_MODE_HASH {
        p.perturb_secs
    } else {
        0
    };
    if let Some(s) = o.perturb {
        if mode != FLOW_MODE_HASH {
            return Err(TcError::errno(Errno::EINVAL));
        }
        perturb = s;
    }
    let mut baseclass = o.baseclass.map_or(0, |b| b.0);
    if old.is_none() {
        if baseclass & 0xffff_0000 == 0 {
            baseclass |= qdisc.0 & 0xffff_0000;
        }
        if baseclass & 0xffff == 0 {
            baseclass |= 1;
        }
    }
    if let Some(k) = o.keys {
        p.keymask = k;
    }
    p.mode = mode;
    p.mask = o.mask.unwrap_or(p.mask);
    p.xor = o.xor.unwrap_or(p.xor);
    p.rshift = o.rshift.unwrap_or(p.rshift);
    p.addend = o.addend.unwrap_or(p.addend);
    p.divisor = o.divisor.unwrap_or(p.divisor);
    if baseclass != 0 {
        p.baseclass = baseclass;
    }
    p.perturb_secs = perturb;
    Ok(p)
}

impl Classifier for Flow {
    fn kind(&self) -> &'static str {
        "flow"
    }

    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult> {
        for f in &mut self.filters {
            // `meta(random ...)` draws from the filter's own generator.
            let FlowFilter { ematches, rng, .. } = f;
            if !ematches.matches(pkt, &mut || rng.next_u32()) {
                continue;
            }
            f.perturb(now);
            let classid = f.classid(pkt);
            match f.exts.exec(pkt, now) {
                Verdict::Continue => continue,
                v => {
                    return Some(ClassifyResult {
                        classid,
                        verdict: v,
                    })
                }
            }
        }
        None
    }

    fn get(&self, handle: u32) -> bool {
        self.filters.iter().any(|f| f.handle == handle)
    }

    fn change(&mut self, req: &ChangeReq<'_>, env: &mut ClsEnv<'_>) -> TcResult<()> {
        let o = match req.opts {
            Some(FilterOpts::Flow(o)) => o,
            _ => return Err(TcError::errno(Errno::EINVAL)),
        };
        let nkeys = check_opts(o)?;
        let mut ematches = o.ematches.clone().unwrap_or_default();
        ematches.validate()?;
        ematches.kernel_order();
        let ctx = InitCtx {
            bind: true,
            replace: !req.create,
            estimator: req.estimator,
            offload: 0,
        };
        let acts = env
            .actions
            .prepare(&o.actions, o.police.as_ref(), ctx, true)?;
        let pos = self.filters.iter().position(|f| f.handle == req.handle);
        if pos.is_none() && req.handle == 0 {
            return Err(TcError::errno(Errno::EINVAL));
        }
        let params = new_params(o, pos.map(|i| &self.filters[i].params), nkeys, env.qdisc)?;
        let exts = env.actions.commit(acts, false, env.now)?;
        let due = |secs: u32| (secs != 0).then(|| env.now + Duration::from_secs(secs as u64));
        match pos {
            Some(i) => {
                let f = &mut self.filters[i];
                f.next_perturb = due(params.perturb_secs);
                f.params = params;
                f.ematches = ematches;
                f.exts = exts;
            }
            None => {
                env.shared.flow_filters_created += 1;
                let seed =
                    env.shared.seed ^ 0xf10f_0000_0000_0000 ^ env.shared.flow_filters_created;
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                let hashrnd = rng.next_u32();
                self.filters.push(FlowFilter {
                    handle: req.handle,
                    next_perturb: due(params.perturb_secs),
                    params,
                    ematches,
                    exts,
                    hashrnd,
                    rng,
                });
            }
        }
        Ok(())
    }

    fn delete(&mut self, handle: u32) -> TcResult<bool> {
        let i = self
            .filters
            .iter()
            .position(|f| f.handle == handle)
            .ok_or(TcError::errno(Errno::EINVAL))?;
        self.filters.remove(i);
        Ok(self.filters.is_empty())
    }

    fn walk(&self) -> Vec<FilterElement> {
        self.filters.iter().map(FlowFilter::element).collect()
    }

    fn dump_one(&self, handle: u32) -> Option<FilterElement> {
        self.filters
            .iter()
            .find(|f| f.handle == handle)
            .map(FlowFilter::element)
    }

    fn goto_chains(&self) -> Vec<u32> {
        self.filters
            .iter()
            .flat_map(|f| f.exts.goto_chains())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{Block, FilterCmd, FilterMsg};
    use super::*;
    use crate::packet::ETH_P_IP;

    fn flow(handle: u32, o: FlowOpts) -> FilterMsg {
        FilterMsg {
            prio: 1,
            protocol: ETH_P_IP,
            handle,
            kind: Some("flow".into()),
            opts: Some(FilterOpts::Flow(o)),
            ..Default::default()
        }
    }

    fn key(name: &str) -> u32 {
        1 << KEY_NAMES.iter().position(|k| *k == name).unwrap()
    }

    fn class_of(b: &mut Block, mut p: Packet) -> Handle {
        b.classify(&mut p, Time(0)).unwrap().classid
    }

    #[test]
    fn map_mode_computes_and_xor_shift_addend_divisor() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        // map key dst and 0xff addend 0x10: 10.0.0.2 -> 1:(1 + 2 + 0x10).
        let o = FlowOpts {
            keys: Some(key("dst")),
            mask: Some(0xff),
            xor: Some(0),
            addend: Some(0x10),
            ..Default::default()
        };
        b.change_filter(&flow(1, o), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        assert_eq!(
            class_of(&mut b, udp([10, 0, 0, 1], [10, 0, 0, 2], 5, 6)),
            h(1, 0x13)
        );
        assert_eq!(
            class_of(&mut b, udp([10, 0, 0, 1], [10, 0, 9, 0x21], 5, 6)),
            h(1, 0x32)
        );
        // A change keeps what it does not name: rshift 4 now applies to 0x21.
        let o = FlowOpts {
            rshift: Some(4),
            divisor: Some(3),
            baseclass: Some(h(2, 0x100)),
            ..Default::default()
        };
        b.change_filter(&flow(1, o), FilterCmd::Change, &mut net.env(q))
            .unwrap();
        // ((0x21 & 0xff) >> 4) + 0x10 = 0x12; % 3 = 0; 2:0x100.
        assert_eq!(
            class_of(&mut b, udp([10, 0, 0, 1], [10, 0, 9, 0x21], 5, 6)),
            h(2, 0x100)
        );
        // proto-dst and mark, priority.
        let mut p = udp([10, 0, 0, 1], [10, 0, 0, 2], 5, 6);
        let mut fk_keys = |name: &str| {
            let fk = FlowKeys::dissect_all(&p);
            key_value(key(name).trailing_zeros(), &mut p, &fk)
        };
        assert_eq!(fk_keys("proto-dst"), 6);
        assert_eq!(fk_keys("proto-src"), 5);
        assert_eq!(fk_keys("proto"), 17);
        assert_eq!(fk_keys("nfct-src"), 0x0a00_0001);
        assert_eq!(fk_keys("sk-uid"), 0);
        // ICMP has no ports: proto-dst falls back to the EtherType as read on a little-endian host.
        let mut ping = icmp_echo([10, 0, 0, 1], [10, 0, 0, 2]);
        let fk = FlowKeys::dissect_all(&ping);
        assert_eq!(key_value(KEY_PROTO_DST, &mut ping, &fk), 0x0008);
    }

    #[test]
    fn hash_mode_spreads_hosts_and_keeps_a_host_in_one_class() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let o = FlowOpts {
            keys: Some(key("src")),
            mode: Some(FLOW_MODE_HASH),
            divisor: Some(8),
            baseclass: Some(h(1, 0x10)),
            ..Default::default()
        };
        b.change_filter(&flow(7, o), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for host in 1..=64u8 {
            let c1 = class_of(&mut b, udp([192, 168, 1, host], [8, 8, 8, 8], 1000, 53));
            let c2 = class_of(&mut b, udp([192, 168, 1, host], [1, 1, 1, 1], 2000, 443));
            // Only the source counts.
            assert_eq!(c1, c2);
            assert!(
                (0x10..0x18).contains(&c1.minor()) && c1.major() == 1,
                "{c1}"
            );
            seen.insert(c1);
        }
        // 64 hosts over 8 buckets: every bucket is used (a miss has
        // probability 8 * (7/8)^64 < 0.02 for a uniform hash).
        assert_eq!(seen.len(), 8);
        // The class is jhash2([src], hashrnd) % 8.
        let d = b.dump(None, 0, 0);
        assert_eq!(d[1].handle, 7);
    }

    #[test]
    fn perturb_redraws_the_key() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let o = FlowOpts {
            keys: Some(key("src") | key("dst") | key("proto-src") | key("proto-dst")),
            mode: Some(FLOW_MODE_HASH),
            divisor: Some(1024),
            perturb: Some(10),
            ..Default::default()
        };
        b.change_filter(&flow(1, o), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        let classes = |b: &mut Block, t: Time| -> Vec<Handle> {
            (1..20u16)
                .map(|port| {
                    let mut p = udp([10, 0, 0, 1], [10, 0, 0, 2], port, 80);
                    b.classify(&mut p, t).unwrap().classid
                })
                .collect()
        };
        let before = classes(&mut b, Time(0));
        assert_eq!(before, classes(&mut b, Time(9_000_000_000)));
        let after = classes(&mut b, Time(10_000_000_000));
        assert_ne!(before, after);
        // Without perturbation, time changes nothing.
        let d = b.dump(None, 0, 0);
        let Some(FilterElemOpts::Flow(f)) = &d[1].opts else {
            panic!()
        };
        assert_eq!((f.perturb, f.baseclass), (Some(10), Some(h(1, 1))));
    }

    #[test]
    fn validation_follows_flow_change() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(0xffff, 0);
        let einval = Err(TcError::errno(Errno::EINVAL));
        let two = FlowOpts {
            keys: Some(key("src") | key("dst")),
            ..Default::default()
        };
        // Two keys need hash mode; keys and a handle are required.
        assert_eq!(
            b.change_filter(&flow(1, two), FilterCmd::Add, &mut net.env(q)),
            einval
        );
        assert_eq!(
            b.change_filter(
                &flow(1, FlowOpts::default()),
                FilterCmd::Add,
                &mut net.env(q)
            ),
            einval
        );
        let one = FlowOpts {
            keys: Some(key("mark")),
            ..Default::default()
        };
        assert_eq!(
            b.change_filter(&flow(0, one.clone()), FilterCmd::Add, &mut net.env(q)),
            einval
        );
        let perturb_in_map = FlowOpts {
            perturb: Some(5),
            ..one.clone()
        };
        assert_eq!(
            b.change_filter(&flow(1, perturb_in_map), FilterCmd::Add, &mut net.env(q)),
            einval
        );
        let bad_key = FlowOpts {
            keys: Some(1 << 18),
            ..Default::default()
        };
        assert_eq!(
            b.change_filter(&flow(1, bad_key), FilterCmd::Add, &mut net.env(q)),
            Err(TcError::errno(Errno::EOPNOTSUPP))
        );
        let bad_base = FlowOpts {
            baseclass: Some(h(1, 0)),
            ..one.clone()
        };
        assert_eq!(
            b.change_filter(&flow(1, bad_base), FilterCmd::Add, &mut net.env(q)),
            einval
        );
        assert!(b.is_empty());
        // The default baseclass is QDISC:1; map of mark.
        b.change_filter(&flow(1, one), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        let mut p = udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
        p.mark = 0x41;
        assert_eq!(class_of(&mut b, p), h(0xffff, 0x42));
        b.delete_filter(&FilterMsg {
            prio: 1,
            handle: 1,
            ..Default::default()
        })
        .unwrap();
        assert!(b.is_empty());
    }
}
