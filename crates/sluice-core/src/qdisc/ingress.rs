//! ingress and clsact: filter hooks that queue nothing.
//!
//! Modelled on net/sched/sch_ingress.c and the hooks in net/core/dev.c
//! (`sch_handle_ingress`, `sch_handle_egress`, `tc_run`). Both qdiscs sit at
//! the device's `ffff:fff1` slot and own filter blocks: `ingress` one block,
//! run on every received packet; `clsact` two, an ingress block (filters
//! added with `parent ffff:fff2`, alias `ingress`) and an egress block
//! (`parent ffff:fff3`, alias `egress`) run on every transmitted packet before
//! the root qdisc sees it. Nothing is queued: the filters' verdict decides at
//! once whether the packet goes on (policing, e.g. the Ultimate Traffic
//! Conditioner's `police rate 800kbit burst 10k drop` on `parent ffff:`), is
//! dropped, or was taken by an action (mirred redirect, stolen).
//!
//! How a front end uses it: call [`Ingress::run`] with the hook and the packet
//! before delivering a received packet (ingress hook) or before enqueueing a
//! transmitted one into the root qdisc (egress hook), and act on the
//! [`IngressVerdict`]. Through the generic [`Qdisc`] interface, `enqueue` runs
//! the ingress hook and answers `Ok(())` for "pass" (the packet is then
//! handed straight back by the next `dequeue`) or `Err` with
//! [`DropReason::Action`] for a drop and [`DropReason::Stolen`] for a packet
//! an action consumed.
//!
//! Counters (`tc -s qdisc show dev X ingress`), as `tc_run` keeps them and as
//! measured on Linux 6.18 with a veth pair:
//! - with no filter in a hook's block nothing is counted at all (the kernel
//!   skips the block);
//! - otherwise every packet that reaches the hook counts in "Sent", whatever
//!   the verdict and whether or not a filter matched (a filter for
//!   `protocol ip` still counts ARP packets);
//! - a drop (`TC_ACT_SHOT`) also counts in "dropped";
//! - at ingress the length counted, and seen by policers, is the network
//!   layer length (`skb->len` after the MAC header was pulled): `Packet::len`
//!   minus the device's `hard_header_len`; at egress it is the full length.
//!   (Measured: three 33-byte IPv4 UDP packets counted `Sent 99 bytes 3 pkt`.)
//!
//! These kernel counters are [`Ingress::counters`]. A [`QdiscNode`] wrapping
//! the qdisc keeps its own, which differ (it counts only passed packets, at
//! full length); front ends should report `counters()`.
//!
//! A packet a filter passes (`ok`, or `reclassify` run out) takes the class
//! minor as its `tc_index`, as `tc_run` sets `skb->tc_index`; gred reads it.
//!
//! A hook may instead be bound to a shared block (`ingress_block N`, and
//! for clsact `egress_block N`; see `cls/shared.rs`): its filters are then
//! the shared block's, run under its lock, and the qdisc's own block for
//! that hook stays unused.
//!
//! Not modelled: tcx/BPF links.
//!
//! [`QdiscNode`]: super::QdiscNode

use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts,
};
use crate::cls::shared::{self, SharedBlockRef};
use crate::cls::{Block, Verdict};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::{DropReason, Stats};
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// ingress and clsact take no options; what a dump reports besides are the
/// shared blocks they are bound to (`TCA_INGRESS_BLOCK`/`TCA_EGRESS_BLOCK`,
/// 0 for none), which are bound when the qdisc is created and never change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngressOpts {
    /// The shared block of the ingress hook, 0 for none.
    #[serde(default)]
    pub ingress_block: u32,
    /// The shared block of the egress hook (clsact), 0 for none.
    #[serde(default)]
    pub egress_block: u32,
}

/// Which of the two qdiscs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngressKind {
    /// `ingress`: one block, run on received packets.
    Ingress,
    /// `clsact`: an ingress block and an egress block.
    Clsact,
}

/// Where a packet meets the filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// Received packets (`sch_handle_ingress`).
    Ingress = 0,
    /// Transmitted packets, before the root qdisc (`sch_handle_egress`, clsact only).
    Egress = 1,
}

/// What becomes of a packet that went through a hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngressVerdict {
    /// Carry on: deliver it (ingress) or enqueue it into the root qdisc (egress).
    Pass,
    /// `TC_ACT_SHOT`: free it; counted as a drop.
    Drop,
    /// `stolen`, `queued` or `trap`: an action took it; not a drop.
    Consumed,
    /// `TC_ACT_REDIRECT`: a mirred action redirected it elsewhere.
    Redirect,
}

/// An ingress or clsact qdisc.
#[derive(Debug)]
pub struct Ingress {
    kind: IngressKind,
    /// The ingress block (the only one of `ingress`).
    ingress: Block,
    /// The egress block (clsact only).
    egress: Block,
    /// The shared blocks the ingress and egress hooks are bound to instead.
    shared: [Option<SharedBlockRef>; 2],
    /// The counters the kernel keeps for the qdisc (both hooks together).
    counters: Stats,
    /// Bytes of link-layer header not counted at ingress.
    hard_header_len: u32,
    /// Packets accepted through `Qdisc::enqueue`, handed back by `dequeue`.
    passed: VecDeque<Packet>,
}

impl Ingress {
    /// `ingress_init` / `clsact_init`.
    pub fn new(kind: IngressKind, _opts: &IngressOpts, dev: &DevInfo) -> TcResult<Self> {
        Ok(Ingress {
            kind,
            ingress: Block::default(),
            egress: Block::default(),
            shared: [None, None],
            counters: Stats::default(),
            hard_header_len: dev.hard_header_len,
            passed: VecDeque::new(),
        })
    }

    /// Which qdisc this is.
    pub fn kind(&self) -> IngressKind {
        self.kind
    }

    /// The qdisc's own block of a hook (`None` for the egress hook of
    /// `ingress`, and for a hook bound to a shared block).
    pub fn hook_block(&self, hook: Hook) -> Option<&Block> {
        if self.shared[hook as usize].is_some() {
            return None;
        }
        match (hook, self.kind) {
            (Hook::Ingress, _) => Some(&self.ingress),
            (Hook::Egress, IngressKind::Clsact) => Some(&self.egress),
            (Hook::Egress, IngressKind::Ingress) => None,
        }
    }

    /// The qdisc's own block of a hook, for adding and removing filters.
    pub fn hook_block_mut(&mut self, hook: Hook) -> Option<&mut Block> {
        if self.shared[hook as usize].is_some() {
            return None;
        }
        match (hook, self.kind) {
            (Hook::Ingress, _) => Some(&mut self.ingress),
            (Hook::Egress, IngressKind::Clsact) => Some(&mut self.egress),
            (Hook::Egress, IngressKind::Ingress) => None,
        }
    }

    /// The hook a filter `parent` names (`cl_ops->find` + `tcf_block`):
    /// any class of `ingress` (`ffff:`, `ffff:fff2`, ...) is its one block;
    /// clsact knows only `ffff:fff2` (ingress) and `ffff:fff3` (egress).
    pub fn hook_for_parent(&self, parent: Handle) -> Option<Hook> {
        match self.kind {
            IngressKind::Ingress => Some(Hook::Ingress),
            IngressKind::Clsact => match parent.minor() {
                Handle::MIN_INGRESS => Some(Hook::Ingress),
                Handle::MIN_EGRESS => Some(Hook::Egress),
                _ => None,
            },
        }
    }

    /// The counters the kernel reports for this qdisc (`tc -s qdisc show`).
    pub fn counters(&self) -> Stats {
        self.counters
    }

    /// `tc_run`: pass `pkt` through the hook's filters at `now`.
    pub fn run(&mut self, hook: Hook, pkt: &mut Packet, now: Time) -> IngressVerdict {
        let strip = match hook {
            Hook::Ingress => self.hard_header_len,
            Hook::Egress => 0,
        };
        let mut guard;
        let Some(block) = (match (hook, self.kind, &self.shared[hook as usize]) {
            (_, _, Some(s)) => {
                guard = shared::lock(s);
                Some(&mut guard.block)
            }
            (Hook::Ingress, _, None) => Some(&mut self.ingress),
            (Hook::Egress, IngressKind::Clsact, None) => Some(&mut self.egress),
            (Hook::Egress, IngressKind::Ingress, None) => None,
        }) else {
            return IngressVerdict::Pass;
        };
        if block.is_empty() {
            return IngressVerdict::Pass;
        }
        // The kernel's length here excludes the MAC header at ingress; show
        // the filters (policers) that length, then restore ours.
        let full_len = pkt.len;
        pkt.len = full_len.saturating_sub(strip);
        self.counters.bytes += pkt.len as u64;
        self.counters.packets += pkt.segs() as u64;
        let res = block.classify(pkt, now);
        pkt.len = full_len;
        let verdict = res.map(|r| r.verdict);
        if let Some(r) = res.filter(|r| matches!(r.verdict, Verdict::Ok | Verdict::Reclassify)) {
            // `skb->tc_index = TC_H_MIN(res.classid)`, what gred reads.
            pkt.tc_index = r.classid.minor();
        }
        match verdict {
            Some(Verdict::Shot) => {
                self.counters.drops += 1;
                IngressVerdict::Drop
            }
            Some(Verdict::Stolen | Verdict::Queued | Verdict::Trap) => IngressVerdict::Consumed,
            Some(Verdict::Redirect) => IngressVerdict::Redirect,
            _ => IngressVerdict::Pass,
        }
    }
}

impl Qdisc for Ingress {
    fn own_stats(&self) -> Option<Stats> {
        Some(self.counters)
    }

    /// Run the ingress hook; a passed packet comes back from the next `dequeue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        match self.run(Hook::Ingress, &mut pkt, cx.now) {
            IngressVerdict::Pass => {
                self.passed.push_back(pkt);
                Ok(())
            }
            IngressVerdict::Drop => Err((pkt, DropReason::Action)),
            IngressVerdict::Consumed | IngressVerdict::Redirect => Err((pkt, DropReason::Stolen)),
        }
    }

    fn egress_hook(&mut self, pkt: &mut Packet, now: Time) -> Option<IngressVerdict> {
        Some(self.run(Hook::Egress, pkt, now))
    }

    fn dequeue(&mut self, _cx: &mut Cx) -> Dequeue {
        self.passed
            .pop_front()
            .map_or(Dequeue::Empty, Dequeue::Packet)
    }

    fn reset(&mut self) {
        self.passed.clear();
    }

    /// Neither qdisc has options; a change without options succeeds.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        match (self.kind, opts) {
            (IngressKind::Ingress, QdiscOpts::Ingress(_))
            | (IngressKind::Clsact, QdiscOpts::Clsact(_)) => Ok(()),
            _ => Err(wrong_kind(self.dump().kind(), opts)),
        }
    }

    fn set_handle(&mut self, handle: Handle) {
        self.ingress.set_qdisc(handle.qdisc());
        self.egress.set_qdisc(handle.qdisc());
    }

    /// `ingress_tcf_block` (any class: the one block) / `clsact_tcf_block`
    /// (`ffff:fff2` ingress, `ffff:fff3` egress, nothing else).
    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        let hook = self.hook_for_parent(classid)?;
        self.hook_block_mut(hook)
    }

    fn block(&self, classid: Handle) -> Option<&Block> {
        self.hook_block(self.hook_for_parent(classid)?)
    }

    fn shared_block(&self, classid: Handle) -> Option<SharedBlockRef> {
        self.shared[self.hook_for_parent(classid)? as usize].clone()
    }

    /// `ingress_ingress_block_set` / `clsact_*_block_set`: the indexes were
    /// checked against the kind ([`super::check_block_sharing`]).
    fn bind_shared_blocks(
        &mut self,
        ingress: Option<SharedBlockRef>,
        egress: Option<SharedBlockRef>,
    ) {
        self.shared = [ingress, egress];
    }

    fn dump(&self) -> QdiscOpts {
        let index = |hook: Hook| {
            self.shared[hook as usize]
                .as_ref()
                .map_or(0, |s| shared::lock(s).index)
        };
        let o = IngressOpts {
            ingress_block: index(Hook::Ingress),
            egress_block: index(Hook::Egress),
        };
        match self.kind {
            IngressKind::Ingress => QdiscOpts::Ingress(o),
            IngressKind::Clsact => QdiscOpts::Clsact(o),
        }
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

/// The class operations exist only so filters can name a hook: no class is
/// ever listed, and nothing can be created, deleted or grafted.
impl Classful for Ingress {
    fn change_class(
        &mut self,
        _: Handle,
        _: Handle,
        _: Option<&ClassOpts>,
        _: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    fn delete_class(&mut self, classid: Handle) -> TcResult<()> {
        if !self.contains(classid) {
            return Err(TcError::msg(Errno::ENOENT, "Specified class not found"));
        }
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// `ingress_walk` / `clsact_walk` list nothing.
    fn list(&self) -> Vec<ClassInfo> {
        Vec::new()
    }

    /// `ingress_find` finds every class; `clsact_find` only the two hooks.
    fn contains(&self, classid: Handle) -> bool {
        self.hook_for_parent(classid).is_some()
    }

    fn graft(
        &mut self,
        _: Handle,
        _: Option<QdiscNode>,
        _: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        Vec::new()
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cls::{Classifier, ClassifyResult, TcfProto};
    use crate::packet::Skb;
    use crate::packet::{ETH_P_ARP, ETH_P_IP};

    /// A filter giving every packet `verdict` (the block applies the protocol).
    #[derive(Debug)]
    struct Proto(Verdict);
    impl Classifier for Proto {
        fn kind(&self) -> &'static str {
            "matchall"
        }
        fn classify(&mut self, _pkt: &mut Packet, _now: Time) -> Option<ClassifyResult> {
            Some(ClassifyResult {
                classid: Handle::new(0, 1),
                verdict: self.0,
            })
        }
    }

    /// A plain token-bucket policer (no peakrate): `rate` bytes/s, `burst` bytes.
    #[derive(Debug)]
    struct Police {
        rate: u64,
        burst: u64,
        tokens_ns: u64,
        last: Time,
    }
    impl Classifier for Police {
        fn kind(&self) -> &'static str {
            "u32"
        }
        fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult> {
            let cap = self.burst * 1_000_000_000 / self.rate;
            self.tokens_ns = (self.tokens_ns + (now.0 - self.last.0)).min(cap);
            self.last = now;
            let cost = pkt.len as u64 * 1_000_000_000 / self.rate;
            let verdict = if cost <= self.tokens_ns {
                self.tokens_ns -= cost;
                Verdict::Ok
            } else {
                Verdict::Shot
            };
            Some(ClassifyResult {
                classid: Handle::new(0, 1),
                verdict,
            })
        }
    }

    fn with_filter(
        kind: IngressKind,
        hook: Hook,
        protocol: u16,
        cls: Box<dyn Classifier>,
    ) -> Ingress {
        let mut q = Ingress::new(kind, &IngressOpts::default(), &DevInfo::default()).unwrap();
        q.hook_block_mut(hook).unwrap().protos.push(TcfProto {
            chain: 0,
            prio: 50,
            protocol,
            cls,
        });
        q
    }

    fn udp(len_l3: u32) -> Packet {
        Packet::from(Skb {
            len: len_l3 + 14,
            protocol: ETH_P_IP,
            ..Default::default()
        })
    }

    /// Qdiscs bound to one shared block run its filters, with their state:
    /// a policer with a 1000-byte bucket passes 1000 bytes in all, whichever
    /// device the packets arrive on (each with a block of its own would pass
    /// 1000 bytes each), and the block lives as long as they do.
    #[test]
    fn qdiscs_bound_to_one_shared_block_share_its_filters_and_their_state() {
        let mut table = shared::BlockTable::default();
        let block = table.get_or_create(7, 0);
        shared::lock(&block).block.protos.push(TcfProto {
            chain: 0,
            prio: 1,
            protocol: ETH_P_IP,
            cls: Box::new(Police {
                rate: 1000,
                burst: 1000,
                tokens_ns: 1_000_000_000,
                last: Time(0),
            }),
        });
        let mut qs: Vec<Ingress> = (0..2)
            .map(|_| {
                let mut q = Ingress::new(
                    IngressKind::Ingress,
                    &IngressOpts::default(),
                    &DevInfo::default(),
                )
                .unwrap();
                q.bind_shared_blocks(Some(block.clone()), None);
                q
            })
            .collect();
        drop(block);
        // 100 bytes as the policer sees them (the 14-byte MAC header is not counted).
        let mut passed = [0; 2];
        for i in 0..40 {
            if qs[i % 2].run(Hook::Ingress, &mut udp(100), Time(0)) == IngressVerdict::Pass {
                passed[i % 2] += 1;
            }
        }
        assert_eq!(
            passed,
            [5, 5],
            "1000 bytes in 100-byte packets, alternating"
        );
        for q in &qs {
            assert!(
                q.hook_block(Hook::Ingress).is_none(),
                "its own block is not used"
            );
            assert_eq!(
                q.dump(),
                QdiscOpts::Ingress(IngressOpts {
                    ingress_block: 7,
                    egress_block: 0
                })
            );
        }
        qs.pop();
        assert!(table.get(7).is_some());
        qs.pop();
        assert!(
            table.get(7).is_none(),
            "gone with the last qdisc bound to it"
        );
    }

    #[test]
    fn without_filters_nothing_is_counted() {
        let mut q = Ingress::new(
            IngressKind::Ingress,
            &IngressOpts::default(),
            &DevInfo::default(),
        )
        .unwrap();
        for _ in 0..3 {
            assert_eq!(
                q.run(Hook::Ingress, &mut udp(33), Time(0)),
                IngressVerdict::Pass
            );
        }
        assert_eq!(q.counters(), Stats::default());
    }

    #[test]
    fn every_packet_is_counted_at_network_length_once_a_filter_exists() {
        // The live measurement: three 33-byte UDP datagrams -> Sent 99 bytes 3 pkt;
        // ARP packets count too although the filter is for protocol ip.
        let mut q = with_filter(
            IngressKind::Ingress,
            Hook::Ingress,
            ETH_P_IP,
            Box::new(Proto(Verdict::Ok)),
        );
        for _ in 0..3 {
            assert_eq!(
                q.run(Hook::Ingress, &mut udp(33), Time(0)),
                IngressVerdict::Pass
            );
        }
        assert_eq!((q.counters().bytes, q.counters().packets), (99, 3));
        let mut arp = Packet::from(Skb {
            len: 28 + 14,
            protocol: ETH_P_ARP,
            ..Default::default()
        });
        assert_eq!(
            q.run(Hook::Ingress, &mut arp, Time(0)),
            IngressVerdict::Pass
        );
        assert_eq!(
            (q.counters().bytes, q.counters().packets, q.counters().drops),
            (127, 4, 0)
        );
        assert_eq!(arp.len, 42, "the packet's own length is restored");
    }

    #[test]
    fn drops_count_in_sent_and_dropped_and_stolen_only_in_sent() {
        let mut q = with_filter(
            IngressKind::Ingress,
            Hook::Ingress,
            ETH_P_IP,
            Box::new(Proto(Verdict::Shot)),
        );
        assert_eq!(
            q.run(Hook::Ingress, &mut udp(100), Time(0)),
            IngressVerdict::Drop
        );
        let s = q.counters();
        assert_eq!((s.packets, s.bytes, s.drops), (1, 100, 1));
        let mut q = with_filter(
            IngressKind::Ingress,
            Hook::Ingress,
            ETH_P_IP,
            Box::new(Proto(Verdict::Stolen)),
        );
        assert_eq!(
            q.run(Hook::Ingress, &mut udp(100), Time(0)),
            IngressVerdict::Consumed
        );
        assert_eq!((q.counters().packets, q.counters().drops), (1, 0));
    }

    #[test]
    fn ingress_policing_limits_the_received_rate() {
        // The conditioner's police rate 800kbit burst 10k drop (the bucket
        // starts full), offered 1600 kbit/s of 1000-byte network-layer packets for 10 s.
        let (rate, burst) = (100_000u64, 10 * 1024u64);
        let police = Police {
            rate,
            burst,
            tokens_ns: burst * 1_000_000_000 / rate,
            last: Time(0),
        };
        let mut q = with_filter(
            IngressKind::Ingress,
            Hook::Ingress,
            ETH_P_IP,
            Box::new(police),
        );
        let step = 5_000_000; // one packet every 5 ms
        let mut passed = 0u64;
        for i in 0..2000u64 {
            if q.run(Hook::Ingress, &mut udp(1000), Time(i * step)) == IngressVerdict::Pass {
                passed += 1000;
            }
        }
        // Physics: at most burst + rate * elapsed bytes pass, and a policer
        // wastes less than one packet of credit. Had the policer been shown
        // the 1014-byte link length, fewer than 997 packets would pass.
        let bound = burst + rate * 1999 * step / 1_000_000_000;
        assert!(
            passed <= bound && passed + 1000 > bound,
            "passed {passed} of bound {bound}"
        );
        let s = q.counters();
        assert_eq!(s.packets, 2000);
        assert_eq!(s.drops, 2000 - passed / 1000);
    }

    #[test]
    fn conditioner_policer_with_the_real_police_action() {
        // `police rate 800kbit burst 10k drop flowid :1` as tc sends it: rate
        // 100000 B/s, cell_log 3 (mtu 2047), burst = 10240 B at that rate =
        // 102.4 ms = 1_600_000 psched ticks. Attached with an fw filter.
        use crate::act::police::PoliceOpts;
        use crate::act::{ActionOpts, ActionSpec, ActionTable};
        use crate::cls::fw::FwOpts;
        use crate::cls::{ClsEnv, ClsShared, FilterCmd, FilterMsg, FilterOpts};
        use crate::rate::RateSpec;
        let mut q = Ingress::new(
            IngressKind::Ingress,
            &IngressOpts::default(),
            &DevInfo::default(),
        )
        .unwrap();
        let police = PoliceOpts {
            exceed: Verdict::Shot,
            rate: Some(RateSpec {
                rate: 100_000,
                ..Default::default()
            }),
            rate_cell_log: 3,
            burst: 1_600_000,
            ..Default::default()
        };
        let fw = FwOpts {
            classid: Some(Handle::new(0, 1)),
            actions: vec![ActionSpec {
                index: 0,
                opts: ActionOpts::Police(police),
                cookie: None,
                no_percpu: false,
                offload: 0,
            }],
            ..Default::default()
        };
        let msg = FilterMsg {
            prio: 50,
            protocol: ETH_P_IP,
            handle: 1,
            kind: Some("fw".into()),
            opts: Some(FilterOpts::Fw(fw)),
            ..Default::default()
        };
        let (mut actions, mut shared) = (ActionTable::new(0), ClsShared::default());
        let qdisc = Handle::new(0xffff, 0);
        let mut env = ClsEnv {
            actions: &mut actions,
            shared: &mut shared,
            qdisc,
            dev_exists: &|_| true,
            now: Time(0),
        };
        q.block_mut(qdisc)
            .unwrap()
            .change_filter(&msg, FilterCmd::Add, &mut env)
            .unwrap();
        let step = 5_000_000; // 1000-byte network-layer packets at 1.6 Mbit/s
        let mut passed = 0u64;
        for i in 0..2000u64 {
            let mut p = Packet::from(Skb {
                mark: 1,
                ..udp(1000).into_skb()
            });
            if q.run(Hook::Ingress, &mut p, Time(i * step)) == IngressVerdict::Pass {
                passed += 1000;
            }
        }
        let bound = 10_240 + 100_000 * 1999 * step / 1_000_000_000;
        assert!(
            passed <= bound && passed + 1000 > bound,
            "passed {passed} of bound {bound}"
        );
        assert_eq!(q.counters().drops, 2000 - passed / 1000);
    }

    #[test]
    fn policers_see_the_network_length_at_ingress_and_the_full_length_at_egress() {
        let mut q = Ingress::new(
            IngressKind::Clsact,
            &IngressOpts::default(),
            &DevInfo::default(),
        )
        .unwrap();
        for hook in [Hook::Ingress, Hook::Egress] {
            q.hook_block_mut(hook).unwrap().protos.push(TcfProto {
                chain: 0,
                prio: 1,
                protocol: ETH_P_IP,
                cls: Box::new(Proto(Verdict::Ok)),
            });
        }
        q.run(Hook::Ingress, &mut udp(100), Time(0));
        q.run(Hook::Egress, &mut udp(100), Time(0));
        // clsact counts both hooks in one set of counters.
        assert_eq!((q.counters().packets, q.counters().bytes), (2, 100 + 114));
    }

    #[test]
    fn clsact_has_two_blocks_ingress_one() {
        let mut i = Ingress::new(
            IngressKind::Ingress,
            &IngressOpts::default(),
            &DevInfo::default(),
        )
        .unwrap();
        assert!(i.hook_block_mut(Hook::Egress).is_none());
        assert_eq!(
            i.hook_for_parent(Handle::new(0xffff, 0)),
            Some(Hook::Ingress)
        );
        assert_eq!(
            i.run(Hook::Egress, &mut udp(10), Time(0)),
            IngressVerdict::Pass
        );
        let c = Ingress::new(
            IngressKind::Clsact,
            &IngressOpts::default(),
            &DevInfo::default(),
        )
        .unwrap();
        assert_eq!(
            c.hook_for_parent(Handle::new(0xffff, 0xfff2)),
            Some(Hook::Ingress)
        );
        assert_eq!(
            c.hook_for_parent(Handle::new(0xffff, 0xfff3)),
            Some(Hook::Egress)
        );
        assert_eq!(c.hook_for_parent(Handle::new(0xffff, 0)), None);
        assert!(c.block(Handle::new(0xffff, 0)).is_none());
        assert!(c.block(Handle::new(0xffff, 0xfff3)).is_some());
        assert!(
            i.block(Handle::new(0xffff, 0)).is_some()
                && i.block(Handle::new(0xffff, 0xfff3)).is_some()
        );
        assert!(c.list().is_empty());
        assert_eq!(c.dump(), QdiscOpts::Clsact(IngressOpts::default()));
        assert_eq!(i.dump(), QdiscOpts::Ingress(IngressOpts::default()));
    }

    #[test]
    fn through_the_qdisc_interface_a_passed_packet_comes_straight_back() {
        let q = with_filter(
            IngressKind::Ingress,
            Hook::Ingress,
            ETH_P_IP,
            Box::new(Proto(Verdict::Ok)),
        );
        let mut n = QdiscNode::new(Handle::new(0xffff, 0), Handle::INGRESS, Box::new(q));
        let mut cx = Cx::new(Time(0));
        let p = Packet::from(Skb {
            id: 7,
            ..udp(50).into_skb()
        });
        assert!(n.enqueue(p.clone(), &mut cx).is_ok());
        // Passed with class :1, which becomes its tc_index.
        let passed = Packet::from(Skb {
            tc_index: 1,
            ..p.into_skb()
        });
        assert_eq!(n.dequeue(&mut cx), Dequeue::Packet(passed));
        assert_eq!(n.dequeue(&mut cx), Dequeue::Empty);
        let q = with_filter(
            IngressKind::Ingress,
            Hook::Ingress,
            ETH_P_IP,
            Box::new(Proto(Verdict::Shot)),
        );
        let mut n = QdiscNode::new(Handle::new(0xffff, 0), Handle::INGRESS, Box::new(q));
        assert_eq!(n.enqueue(udp(50), &mut cx), Err(DropReason::Action));
    }

    #[test]
    fn nothing_can_be_grafted_or_created() {
        let mut q = Ingress::new(
            IngressKind::Ingress,
            &IngressOpts::default(),
            &DevInfo::default(),
        )
        .unwrap();
        let dev = DevInfo::default();
        assert_eq!(
            q.graft(Handle::new(0xffff, 1), None, &dev)
                .unwrap_err()
                .errno,
            Errno::EOPNOTSUPP
        );
        assert_eq!(
            q.change_class(Handle::new(0xffff, 1), Handle::INGRESS, None, &dev)
                .unwrap_err()
                .errno,
            Errno::EOPNOTSUPP
        );
        assert!(q
            .change(&QdiscOpts::Ingress(IngressOpts::default()), &dev)
            .is_ok());
        assert!(q
            .change(&QdiscOpts::Clsact(IngressOpts::default()), &dev)
            .is_err());
    }
}
