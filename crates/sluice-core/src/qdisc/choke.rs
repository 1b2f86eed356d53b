//! choke: CHOose and Keep responsive flows, CHOose and Kill unresponsive ones.
//!
//! Modelled on net/sched/sch_choke.c (Linux 6.18), after Pan, Prabhakar
//! and Psounis (INFOCOM 2000). CHOKe is RED ([`super::red_law`]) on the
//! queue length in packets with one extra step: once the average exceeds
//! `min`, each arriving packet is compared with a packet drawn at random
//! from the queue, and if both belong to the same flow *both* are dropped
//! (`matched`). A flow that holds a large share of the queue is drawn often
//! and so loses packets in proportion to its share, without any per-flow
//! state. Otherwise RED decides as usual: above `max` the packet is dropped
//! (or CE-marked with `ecn`, unless `harddrop`), between the thresholds it
//! is marked or dropped with RED's probability. Packets RED lets through are
//! queued if fewer than `limit` are queued, else dropped (`pdrop`).
//!
//! The queue is the kernel's ring of slots: a victim drawn from the middle
//! leaves a hole, holes at either end are trimmed, and the random draw is
//! over all slots, holes included — it retries twice on a hole and then
//! takes the head packet. Two packets are of the same flow when their
//! protocol and the kernel's flow-key digest agree: network and transport
//! protocol, ports, and the first eight bytes of the addresses field (for
//! IPv4 both addresses, for IPv6 the first half of the source address).
//!
//! `change` rebuilds the ring when `limit` changes its size (a power of two
//! above `limit`), keeping as many packets as the new ring holds and
//! dropping the rest, and restarts the average. choke is classless; its
//! `tc -s` extras are `marked`, `early`, `pdrop`, `other` (always 0) and
//! `matched`.
//!
//! Deviations: the random draws come from a generator seeded from
//! `DevInfo::seed`; IPv6 packets with a flow label are compared without
//! their ports (the shared dissector stops at the label, which choke's
//! does not); packets `change` drops are reported as shed at the next
//! enqueue or dequeue; an idle period `change` starts is dated from the
//! last call seen.

use super::flow_hash::{FlowAddrs, FlowKeys};
use super::red_law::{self, red_check_params, RedParams, RedVars, RED_STAB_SIZE};
use super::red_law::{TC_RED_ECN, TC_RED_HARDDROP};
use super::{wrong_kind, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts, XStats};
use crate::error::{Errno, TcError, TcResult};
use crate::packet::Packet;
use crate::stats::DropReason;
use crate::time::Time;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Most packets the ring may be sized for (`CHOKE_MAX_QUEUE`).
pub const CHOKE_MAX_QUEUE: u32 = 128 * 1024 - 1;

/// What tc sends (`TCA_CHOKE_PARMS`, `TCA_CHOKE_STAB`, `TCA_CHOKE_MAX_P`)
/// and the kernel dumps (without the table). Thresholds are in packets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChokeOpts {
    /// Packets queued at most.
    pub limit: u32,
    /// Minimum threshold, packets.
    pub qth_min: u32,
    /// Maximum threshold, packets.
    pub qth_max: u32,
    /// log2(1/W).
    pub wlog: u8,
    /// log2 of the probability denominator.
    pub plog: u8,
    /// log2 of the idle-time cell, µs.
    pub scell_log: u8,
    /// `TC_RED_ECN` | `TC_RED_HARDDROP`.
    pub flags: u8,
    /// The idle-damping table (256 entries; absent in dumps).
    pub stab: Option<Vec<u8>>,
    /// Marking probability at `max`, Q0.32 (0: derived from `plog`).
    pub max_p: Option<u32>,
}

/// `struct tc_choke_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChokeXstats {
    /// Early and forced drops.
    pub early: u32,
    /// Drops at the queue limit.
    pub pdrop: u32,
    /// Other drops (always 0).
    pub other: u32,
    /// Early and forced ECN marks.
    pub marked: u32,
    /// Drops of matched pairs (each pair counts once).
    pub matched: u32,
}

#[derive(Clone, Copy, Debug, Default)]
struct ChokeCounters {
    prob_drop: u32,
    prob_mark: u32,
    forced_drop: u32,
    forced_mark: u32,
    pdrop: u32,
    matched: u32,
}

/// A choke qdisc.
#[derive(Debug)]
pub struct Choke {
    limit: u32,
    flags: u8,
    params: RedParams,
    vars: RedVars,
    stats: ChokeCounters,
    /// The ring: slots from head to tail, `None` a hole; never a hole at
    /// either end.
    ring: VecDeque<Option<Packet>>,
    /// Ring size - 1 (`tab_mask`).
    mask: u32,
    /// Packets queued (holes excluded).
    qlen: u32,
    rng: Xoshiro256PlusPlus,
    overlimits: u64,
    now: Time,
    /// Lengths of packets `change` dropped, not yet reported.
    purged: Vec<u32>,
}

/// `make_flow_keys_digest` of a packet: what choke compares.
fn digest(pkt: &Packet) -> (u16, u8, (u16, u16), [u8; 8]) {
    let k = FlowKeys::dissect(pkt);
    let mut addrs = [0u8; 8];
    match k.addrs {
        FlowAddrs::V4 { src, dst } => {
            addrs[..4].copy_from_slice(&src.to_be_bytes());
            addrs[4..].copy_from_slice(&dst.to_be_bytes());
        }
        FlowAddrs::V6 { src, .. } => addrs.copy_from_slice(&src[..8]),
        FlowAddrs::None => {}
    }
    (k.n_proto, k.ip_proto, k.ports, addrs)
}

/// `choke_match_flow`.
fn same_flow(a: &Packet, b: &Packet) -> bool {
    a.protocol == b.protocol && digest(a) == digest(b)
}

/// `roundup_pow_of_two(limit + 1) - 1`.
fn ring_mask(limit: u32) -> u32 {
    ((limit as u64 + 1).next_power_of_two() - 1) as u32
}

impl Choke {
    /// `choke_init`: the options as `change` applies them.
    pub fn new(o: &ChokeOpts, dev: &DevInfo) -> TcResult<Self> {
        let mut q = Choke {
            limit: 0,
            flags: 0,
            params: RedParams::new(0, 0, 0, 0, 0, None, 0),
            vars: RedVars::default(),
            stats: ChokeCounters::default(),
            ring: VecDeque::new(),
            mask: 0,
            qlen: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(dev.seed ^ 0x63686f6b_65000000),
            overlimits: 0,
            now: Time::ZERO,
            purged: Vec::new(),
        };
        q.apply(o)?;
        Ok(q)
    }

    /// `choke_change`.
    fn apply(&mut self, o: &ChokeOpts) -> TcResult<()> {
        let s = o.stab.as_ref().ok_or(TcError::errno(Errno::EINVAL))?;
        if s.len() < RED_STAB_SIZE {
            return Err(TcError::errno(Errno::EINVAL));
        }
        let mut stab = [0u8; RED_STAB_SIZE];
        stab.copy_from_slice(&s[..RED_STAB_SIZE]);
        if !red_check_params(o.qth_min, o.qth_max, o.wlog, o.scell_log, Some(&stab)) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        if o.limit > CHOKE_MAX_QUEUE {
            return Err(TcError::errno(Errno::EINVAL));
        }
        let mask = ring_mask(o.limit);
        if mask != self.mask {
            // A new ring: packets move over in order, holes left behind,
            // as many as `mask` slots hold.
            let old = std::mem::take(&mut self.ring);
            for p in old.into_iter().flatten() {
                if (self.ring.len() as u32) < mask {
                    self.ring.push_back(Some(p));
                } else {
                    self.qlen -= 1;
                    self.purged.push(p.len);
                }
            }
            self.mask = mask;
        }
        self.flags = o.flags;
        self.limit = o.limit;
        self.params = RedParams::new(
            o.qth_min,
            o.qth_max,
            o.wlog,
            o.plog,
            o.scell_log,
            Some(&stab),
            o.max_p.unwrap_or(0),
        );
        self.vars.set_vars();
        if self.ring.is_empty() {
            // The kernel ends (not starts) the idle period here.
            self.vars.end_idle();
        }
        Ok(())
    }

    /// Trim holes at both ends of the ring.
    fn trim(&mut self) {
        while matches!(self.ring.front(), Some(None)) {
            self.ring.pop_front();
        }
        while matches!(self.ring.back(), Some(None)) {
            self.ring.pop_back();
        }
    }

    /// `choke_peek_random`: a slot drawn at random, retried twice on a
    /// hole, else the head.
    fn peek_random(&mut self) -> usize {
        let n = self.ring.len() as u64;
        for _ in 0..3 {
            let idx = ((self.rng.next_u32() as u64 * n) >> 32) as usize;
            if self.ring[idx].is_some() {
                return idx;
            }
        }
        0
    }

    #[inline]
    fn flush_purged(&mut self, cx: &mut Cx) {
        self.now = cx.now;
        if self.purged.is_empty() {
            return;
        }
        for len in self.purged.drain(..) {
            cx.shed(len, DropReason::QueueFull);
        }
    }

    /// Packets queued (holes excluded).
    pub fn qlen(&self) -> u32 {
        self.qlen
    }
}

impl Qdisc for Choke {
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.flush_purged(cx);
        self.vars.qavg = red_law::calc_qavg(&self.params, &self.vars, self.qlen as u64, cx.now);
        if self.vars.is_idling() {
            self.vars.end_idle();
        }
        let qavg = self.vars.qavg;
        if qavg <= self.params.qth_min {
            self.vars.qcount = -1;
        } else {
            if !self.ring.is_empty() {
                let idx = self.peek_random();
                let matched = self.ring[idx].as_ref().is_some_and(|o| same_flow(o, &pkt));
                if matched {
                    self.stats.matched += 1;
                    if let Some(victim) = self.ring[idx].take() {
                        self.qlen -= 1;
                        self.trim();
                        cx.shed(victim.len, DropReason::Aqm);
                    }
                    return Err((pkt, DropReason::Aqm));
                }
            }
            let ecn = self.flags & TC_RED_ECN != 0;
            let p = &self.params;
            if qavg > p.qth_max {
                self.vars.qcount = -1;
                self.overlimits += 1;
                if self.flags & TC_RED_HARDDROP != 0 || !ecn || !pkt.set_ce() {
                    self.stats.forced_drop += 1;
                    return Err((pkt, DropReason::Aqm));
                }
                self.stats.forced_mark += 1;
            } else {
                self.vars.qcount = self.vars.qcount.wrapping_add(1);
                if self.vars.qcount != 0 {
                    if red_law::mark_probability(p, &self.vars, qavg) {
                        self.vars.qcount = 0;
                        self.vars.q_r = red_law::red_random(p, &mut self.rng);
                        self.overlimits += 1;
                        if !ecn || !pkt.set_ce() {
                            self.stats.prob_drop += 1;
                            return Err((pkt, DropReason::Aqm));
                        }
                        self.stats.prob_mark += 1;
                    }
                } else {
                    self.vars.q_r = red_law::red_random(p, &mut self.rng);
                }
            }
        }
        if self.qlen < self.limit {
            self.ring.push_back(Some(pkt));
            self.qlen += 1;
            return Ok(());
        }
        self.stats.pdrop += 1;
        Err((pkt, DropReason::QueueFull))
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.flush_purged(cx);
        let Some(Some(pkt)) = self.ring.pop_front() else {
            if !self.vars.is_idling() {
                self.vars.start_idle(cx.now);
            }
            return Dequeue::Empty;
        };
        self.qlen -= 1;
        self.trim();
        Dequeue::Packet(pkt)
    }

    /// `choke_reset`.
    fn reset(&mut self) {
        self.ring.clear();
        self.qlen = 0;
        self.purged.clear();
        self.vars.restart();
    }

    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Choke(o) = opts else {
            return Err(wrong_kind("choke", opts));
        };
        self.apply(o)
    }

    /// `choke_dump`.
    fn dump(&self) -> QdiscOpts {
        let p = &self.params;
        QdiscOpts::Choke(ChokeOpts {
            limit: self.limit,
            qth_min: p.min_threshold(),
            qth_max: p.max_threshold(),
            wlog: p.wlog,
            plog: p.plog,
            scell_log: p.scell_log,
            flags: self.flags,
            stab: None,
            max_p: Some(p.max_p),
        })
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    /// `choke_dump_stats`.
    fn xstats(&self) -> XStats {
        let s = &self.stats;
        XStats::Choke(ChokeXstats {
            early: s.prob_drop.wrapping_add(s.forced_drop),
            pdrop: s.pdrop,
            other: 0,
            marked: s.prob_mark.wrapping_add(s.forced_mark),
            matched: s.matched,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::qdisc::codel_law::testing::pkt;
    use crate::qdisc::QdiscNode;
    use proptest::prelude::*;

    fn opts(limit: u32, min: u32, max: u32, wlog: u8, flags: u8) -> ChokeOpts {
        ChokeOpts {
            limit,
            qth_min: min,
            qth_max: max,
            wlog,
            plog: 10,
            scell_log: 10,
            flags,
            stab: Some(vec![0; 256]),
            max_p: Some((0.02 * 4294967296.0) as u32),
        }
    }

    fn node(o: &ChokeOpts, seed: u64) -> QdiscNode {
        let dev = DevInfo {
            seed,
            ..Default::default()
        };
        QdiscNode::new(
            Handle::new(1, 0),
            Handle::ROOT,
            Box::new(Choke::new(o, &dev).unwrap()),
        )
    }

    fn xstats(n: &QdiscNode) -> ChokeXstats {
        match n.qdisc.xstats() {
            XStats::Choke(x) => x,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn dumps_and_validation_as_the_kernel() {
        let n = node(&opts(1000, 83, 250, 10, TC_RED_ECN), 0);
        let QdiscOpts::Choke(d) = n.qdisc.dump() else {
            unreachable!()
        };
        assert_eq!((d.limit, d.qth_min, d.qth_max, d.flags), (1000, 83, 250, 1));
        assert_eq!(d.max_p, Some(85_899_345));
        let dev = DevInfo::default();
        let e = |o: ChokeOpts| Choke::new(&o, &dev).unwrap_err().errno;
        assert_eq!(e(opts(CHOKE_MAX_QUEUE + 1, 1, 2, 1, 0)), Errno::EINVAL);
        assert_eq!(e(opts(100, 20, 10, 1, 0)), Errno::EINVAL);
        assert_eq!(
            e(ChokeOpts {
                stab: None,
                ..opts(100, 1, 2, 1, 0)
            }),
            Errno::EINVAL
        );
        assert!(Choke::new(&opts(CHOKE_MAX_QUEUE, 1, 2, 1, 0), &dev).is_ok());
        assert_eq!(ring_mask(1000), 1023);
        assert_eq!(ring_mask(1023), 1023);
        assert_eq!(ring_mask(1024), 2047);
    }

    /// Below min the queue is a fifo with a limit: no draws, no drops
    /// until the limit.
    #[test]
    fn below_min_nothing_is_drawn() {
        let mut n = node(&opts(20, 100, 200, 0, 0), 1);
        let mut cx = Cx::new(Time(0));
        for i in 0..25 {
            let r = n.enqueue(pkt(0, i, 100, 0), &mut cx);
            assert_eq!(r.is_ok(), i < 20);
        }
        let x = xstats(&n);
        assert_eq!((x.matched, x.pdrop, x.early), (0, 5, 0));
    }

    /// Above min, a packet of the only flow in the queue always matches the
    /// packet drawn: both are dropped, the queue shrinks by one and two
    /// drops are counted per match.
    #[test]
    fn a_matched_pair_is_dropped_together() {
        let mut n = node(&opts(1000, 5, 900, 0, 0), 2);
        let mut cx = Cx::new(Time(0));
        for i in 0..6 {
            n.enqueue(pkt(0, i, 100, 0), &mut cx).unwrap();
        }
        // Average (Wlog 0) = 6 > min 5: every arrival of flow 0 matches.
        for i in 6..16 {
            assert_eq!(n.enqueue(pkt(0, i, 100, 0), &mut cx), Err(DropReason::Aqm));
            // Below min again after the victims: refill one.
            while n.stats().qlen < 6 {
                n.enqueue(pkt(0, 100 + i, 100, 0), &mut cx).unwrap();
            }
        }
        let x = xstats(&n);
        assert_eq!(x.matched, 10);
        assert_eq!(n.stats().drops, 20, "victim and arrival, per match");
        // Another flow is drawn against flow 0's packets and never matches.
        let before = x.matched;
        let r = n.enqueue(pkt(1, 0, 100, 0), &mut cx);
        assert!(r.is_ok());
        assert_eq!(xstats(&n).matched, before);
    }

    /// CHOKe's point: an unresponsive flow sending 4x the rate of each of
    /// four others gets far less than its 50 % of arrivals through, because
    /// it is drawn against itself in proportion to its share of the queue.
    #[test]
    fn a_heavy_flow_is_penalised_in_proportion_to_its_share() {
        let mut n = node(&opts(300, 20, 200, 3, 0), 3);
        let mut sent = [0u32; 5];
        let mut t = 0u64;
        let mut seq = 0;
        for round in 0..20_000u32 {
            // Each round: 4 packets of flow 0, one of each flow 1..=4; the
            // link drains 6 packets per 2 rounds (below the 8 offered).
            let mut cx = Cx::new(Time(t));
            for f in [0, 1, 0, 2, 0, 3, 0, 4] {
                seq += 1;
                let _ = n.enqueue(pkt(f, seq, 1000, 0), &mut cx);
            }
            for _ in 0..(3 + round % 2) {
                if let Dequeue::Packet(p) = n.dequeue(&mut cx) {
                    sent[(p.id / 1_000_000) as usize] += 1;
                }
            }
            t += 1_000_000;
        }
        let total: u32 = sent.iter().sum();
        let heavy = sent[0] as f64 / total as f64;
        let light = sent[1..].iter().map(|&s| s as f64 / total as f64);
        assert!(heavy < 0.40, "heavy flow share {heavy}");
        for l in light {
            assert!(l > 0.13, "light flow share {l}");
        }
        assert!(xstats(&n).matched > 1000);
    }

    #[test]
    fn ecn_above_max_marks_instead_of_dropping() {
        let mut n = node(&opts(1000, 2, 4, 0, TC_RED_ECN), 4);
        let mut cx = Cx::new(Time(0));
        // Different flows so that no draw matches.
        for f in 0..10 {
            n.enqueue(pkt(f, 0, 100, 0x02), &mut cx).unwrap();
        }
        let x = xstats(&n);
        assert!(x.marked >= 5, "{x:?}");
        assert_eq!(n.stats().drops, 0);
        let mut n = node(&opts(1000, 2, 4, 0, TC_RED_ECN | TC_RED_HARDDROP), 4);
        for f in 0..10 {
            let _ = n.enqueue(pkt(f, 0, 100, 0x02), &mut cx);
        }
        assert!(n.stats().drops >= 5);
    }

    #[test]
    fn flows_match_by_the_kernel_digest() {
        let a = pkt(0, 1, 100, 0);
        let b = pkt(0, 2, 500, 0);
        let c = pkt(1, 1, 100, 0);
        assert!(same_flow(&a, &b));
        assert!(!same_flow(&a, &c));
        let mut d = a.clone();
        d.protocol = 0x86dd;
        assert!(!same_flow(&a, &d), "protocol differs");
    }

    #[test]
    fn a_smaller_ring_keeps_the_oldest_packets() {
        let mut n = node(&opts(100, 90, 95, 0, 0), 5);
        let mut cx = Cx::new(Time(0));
        for i in 0..10 {
            n.enqueue(pkt(0, i, 100, 0), &mut cx).unwrap();
        }
        // limit 4: ring of 8 slots, mask 7: seven packets stay.
        let o = QdiscOpts::Choke(opts(4, 1, 3, 0, 0));
        n.qdisc.change(&o, &DevInfo::default()).unwrap();
        let mut out = vec![];
        while let Dequeue::Packet(p) = n.dequeue(&mut cx) {
            out.push(p.id);
        }
        assert_eq!(out, (0..7).collect::<Vec<u64>>());
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (0, 0, 3));
    }

    proptest! {
        #[test]
        fn packets_are_conserved(
            ops in proptest::collection::vec((0..3u8, 0..4u32, 40..1600u32), 1..400),
            seed in any::<u64>(),
        ) {
            let mut n = node(&opts(30, 3, 12, 1, TC_RED_ECN), seed);
            let mut offered = 0u64;
            let mut cx = Cx::new(Time(0));
            for (i, &(op, flow, len)) in ops.iter().enumerate() {
                if op < 2 {
                    offered += 1;
                    let _ = n.enqueue(pkt(flow, i as u32, len, (i % 3) as u8), &mut cx);
                } else {
                    n.dequeue(&mut cx);
                }
                let s = n.stats();
                prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                prop_assert!(s.qlen <= 30);
            }
        }
    }
}
