//! sfq: Stochastic Fairness Queueing — hashed flows served by deficit round robin.
//!
//! Modelled on net/sched/sch_sfq.c as it is since the 2012 rewrite, with the
//! 2024-2025 changes (32-bit allot without scaling, `limit 1` refused,
//! perturb period checked). Each packet's flow hash (addresses, ports,
//! protocol — see [`flow_hash`]) perturbed by a secret, modulo `divisor`,
//! picks a hash bucket; an occupied bucket points at a flow slot, an empty one
//! takes a free slot (`flows` slots exist, 128 by default). Active slots form
//! a ring served by deficit round robin: a slot whose credit (`allot`, in
//! bytes) is used up gets `quantum` more and the turn passes; otherwise its
//! head packet leaves and its length is charged. A new flow joins the ring
//! behind the slot just served, with a full quantum.
//!
//! Limits: a slot holds at most `depth` packets (127 by default); beyond
//! that the arriving packet is dropped, or with `headdrop` the slot's oldest.
//! When the whole qdisc exceeds `limit` packets (127 by default) a packet is
//! dropped from the longest slot (its tail, or head with `headdrop`). Slots
//! are kept in lists by length (`dep[]`) so the longest is found at once;
//! among equally long slots the one that most recently reached that length
//! loses. With a filter attached, the filter's class id minor (1..=divisor)
//! names the bucket instead of the hash, and unclassified packets are dropped.
//! A `skb->priority` of `major:minor` with our major picks bucket minor too.
//!
//! `perturb SECS` draws a new secret every SECS seconds and re-sorts the
//! queued packets into the new buckets (`sfq_rehash`), keeping each flow's
//! order. With `min`/`max`/`probability`/`ecn` each flow also runs RED on its
//! own backlog in bytes (`red.h`), marking ECN-capable packets or dropping.
//!
//! The kernel has no `change` operation for sfq: options are given once, at
//! creation. `tc class show` lists one class per occupied bucket
//! (`major:bucket+1`) with that flow's packets, bytes and `allot`; classes can
//! be neither created, deleted nor grafted.
//!
//! Invariants: every slot in the ring holds at least one packet; the sum of
//! slot lengths is the qdisc's queue length and never exceeds `limit` after an
//! enqueue returns; a bucket maps to a slot iff the slot is non-empty.
//!
//! Deviations: the perturbation timer is lazy — it starts at the first packet
//! after creation and fires at the first call at or after each due time (a
//! long idle gap gives one new secret, not one per period); the secret comes
//! from a generator seeded from `DevInfo::seed` (and the handle) and the hash
//! is lookup3, not SipHash. Packets a rehash cannot place are counted as drops
//! here too (the kernel counts them only in the parents). A quantum of 0
//! (an MTU of 0) is treated as 1 byte. `HZ` is taken as 1000 for the perturb
//! period bound.

use super::flow_hash;
use super::red_law::{self, RedAction, RedParams, RedVars};

use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts,
    XStats,
};
use crate::cls::{Block, Verdict};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::{DropReason, Stats};
use crate::time::{Duration, Time};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Most packets per flow (`SFQ_MAX_DEPTH`).
pub const SFQ_MAX_DEPTH: u32 = 127;
/// Flow slots by default (`SFQ_DEFAULT_FLOWS`).
pub const SFQ_DEFAULT_FLOWS: u32 = 128;
/// Most flow slots (`SFQ_MAX_FLOWS`).
pub const SFQ_MAX_FLOWS: u32 = 0x10000 - SFQ_MAX_DEPTH - 1;
/// Hash buckets by default (`SFQ_DEFAULT_HASH_DIVISOR`).
pub const SFQ_DEFAULT_HASH_DIVISOR: u32 = 1024;
pub use super::red_law::{TC_RED_ECN, TC_RED_HARDDROP};
/// Jiffies per second assumed for the perturb-period bound.
const HZ: i32 = 1000;

/// An empty bucket.
const EMPTY: u32 = u32::MAX;

/// `struct tc_sfqred_stats`: RED counters, dumped with the options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfqRedStats {
    /// Early drops.
    pub prob_drop: u32,
    /// Drops above `max`.
    pub forced_drop: u32,
    /// Early ECN marks of the arriving packet.
    pub prob_mark: u32,
    /// ECN marks above `max` of the arriving packet.
    pub forced_mark: u32,
    /// Early ECN marks of the flow's head packet (`headdrop`).
    pub prob_mark_head: u32,
    /// ECN marks above `max` of the flow's head packet (`headdrop`).
    pub forced_mark_head: u32,
}

/// `struct tc_sfq_qopt_v1`: what tc sends and the kernel dumps. Zero means
/// "keep the default" for `quantum`, `limit`, `divisor`, `flows`, `depth`;
/// `qth_min` 0 means no RED.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfqOpts {
    /// Bytes a flow may send per round (default: MTU + link header).
    pub quantum: u32,
    /// Seconds between perturbations, 0 = never.
    pub perturb_period: i32,
    /// Packets in the whole qdisc.
    pub limit: u32,
    /// Hash buckets, a power of two up to 65536.
    pub divisor: u32,
    /// Flow slots.
    pub flows: u32,
    /// Packets per flow, at most 127.
    pub depth: u32,
    /// Drop from the head of a flow instead of the tail.
    pub headdrop: bool,
    /// `redflowlimit`: iproute2 derives defaults from it; the kernel ignores
    /// it and dumps 0.
    pub red_limit: u32,
    /// RED minimum threshold, bytes (0 = RED off).
    pub qth_min: u32,
    /// RED maximum threshold, bytes.
    pub qth_max: u32,
    /// RED EWMA weight, log2.
    pub wlog: u8,
    /// RED probability denominator, log2.
    pub plog: u8,
    /// RED idle-time cell size, log2 (unused by sfq).
    pub scell_log: u8,
    /// `TC_RED_ECN` | `TC_RED_HARDDROP`.
    pub flags: u8,
    /// RED maximum marking probability, as a fraction of 2^32.
    pub max_p: u32,
    /// RED counters (dump only; ignored on input).
    pub stats: SfqRedStats,
}

/// `struct tc_sfq_xstats`: a flow's remaining credit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfqClassXstats {
    /// Bytes the flow may still send this round (may be negative).
    pub allot: i32,
}

/// Validated parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SfqParams {
    limit: u32,
    divisor: u32,
    headdrop: bool,
    maxdepth: u32,
    maxflows: u32,
    perturb_secs: i32,
    quantum: u32,
    flags: u8,
    red: Option<RedParams>,
}

impl SfqParams {
    /// `sfq_init`'s defaults.
    fn defaults(dev: &DevInfo) -> Self {
        SfqParams {
            limit: SFQ_MAX_DEPTH,
            divisor: SFQ_DEFAULT_HASH_DIVISOR,
            headdrop: false,
            maxdepth: SFQ_MAX_DEPTH,
            maxflows: SFQ_DEFAULT_FLOWS,
            perturb_secs: 0,
            quantum: dev.mtu.saturating_add(dev.hard_header_len),
            flags: 0,
            red: None,
        }
    }

    /// `sfq_change`: validate `o` and apply it on top of `self`, in a copy.
    fn with(&self, o: &SfqOpts) -> TcResult<Self> {
        if o.divisor != 0 && (!o.divisor.is_power_of_two() || o.divisor > 65536) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        if (o.quantum as i32) < 0 {
            return Err(TcError::inval("sch_sfq: invalid quantum"));
        }
        if o.perturb_period < 0 || o.perturb_period > i32::MAX / HZ {
            return Err(TcError::inval("sch_sfq: invalid perturb period"));
        }
        if !red_law::red_check_params(o.qth_min, o.qth_max, o.wlog, o.scell_log, None) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        let mut p = *self;
        if o.quantum != 0 {
            p.quantum = o.quantum;
        }
        p.perturb_secs = o.perturb_period;
        if o.flows != 0 {
            p.maxflows = o.flows.min(SFQ_MAX_FLOWS);
        }
        if o.divisor != 0 {
            p.divisor = o.divisor;
            p.maxflows = p.maxflows.min(p.divisor);
        }
        if o.depth != 0 {
            p.maxdepth = o.depth.min(SFQ_MAX_DEPTH);
        }
        if o.qth_min != 0 {
            p.red = Some(RedParams::new(
                o.qth_min,
                o.qth_max,
                o.wlog,
                o.plog,
                o.scell_log,
                None,
                o.max_p,
            ));
        }
        p.flags = o.flags;
        p.headdrop = o.headdrop;
        if o.limit != 0 {
            p.limit = o.limit.min(p.maxdepth * p.maxflows);
            p.maxflows = p.maxflows.min(p.limit);
        }
        if p.limit == 1 {
            return Err(TcError::inval("sch_sfq: invalid limit"));
        }
        Ok(p)
    }

    fn perturb_period(&self) -> Duration {
        Duration::from_secs(self.perturb_secs.max(0) as u64)
    }
}

/// A link in the by-length lists (`struct sfq_head`).
#[derive(Clone, Copy, Debug, Default)]
struct Link {
    next: u32,
    prev: u32,
}

/// One flow slot (`struct sfq_slot`).
#[derive(Debug, Default)]
struct Slot {
    queue: VecDeque<Packet>,
    /// Packets queued (kept apart from `queue.len()` as the kernel does, so
    /// the length lists can be updated around queue operations).
    qlen: u32,
    /// Next slot in the round-robin ring.
    next: u32,
    /// The bucket pointing at this slot.
    hash: u32,
    /// Credit in bytes.
    allot: i64,
    /// Bytes queued.
    backlog: u64,
    red: RedVars,
}

/// An sfq qdisc.
#[derive(Debug)]
pub struct Sfq {
    p: SfqParams,
    handle: Option<Handle>,
    block: Block,
    seed: u64,
    rng: Xoshiro256PlusPlus,
    /// The hash secret.
    perturbation: u32,
    /// When the next perturbation is due (`None`: not started yet).
    next_perturb: Option<Time>,
    /// Bucket -> slot index or `EMPTY` (`divisor` entries).
    ht: Vec<u32>,
    /// `maxflows` slots.
    slots: Vec<Slot>,
    /// The by-length lists, in one table so that a link names a slot or a
    /// list head alike: entry `x < maxflows` links slot `x` into the list
    /// of slots as long as it is; entry `maxflows + d` is the head of
    /// `dep[d]`, the slots holding `d` packets (`dep[0]`: the free slots).
    links: Vec<Link>,
    /// Length of the longest slot.
    cur_depth: u32,
    /// The slot served last; its `next` is served next.
    tail: Option<u32>,
    /// Packets queued in all slots.
    qlen: u32,
    overlimits: u64,
    red_stats: SfqRedStats,
    #[cfg(test)]
    naive_rounds: bool,
}

impl Sfq {
    /// `sfq_init`: defaults, then the options, then the tables.
    pub fn new(opts: &SfqOpts, dev: &DevInfo) -> TcResult<Self> {
        let p = SfqParams::defaults(dev).with(opts)?;
        let seed = dev.seed ^ 0x5f51_0000_5f51_0000;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut perturbation = rng.next_u32();
        if p.perturb_secs != 0 {
            perturbation = rng.next_u32();
        }
        let mut q = Sfq {
            p,
            handle: None,
            block: Block::default(),
            seed,
            rng,
            perturbation,
            next_perturb: None,
            ht: vec![EMPTY; p.divisor as usize],
            slots: (0..p.maxflows).map(|_| Slot::default()).collect(),
            links: (0..p.maxflows + SFQ_MAX_DEPTH + 1)
                .map(|v| Link { next: v, prev: v })
                .collect(),
            cur_depth: 0,
            tail: None,
            qlen: 0,
            overlimits: 0,
            red_stats: SfqRedStats::default(),
            #[cfg(test)]
            naive_rounds: false,
        };
        for x in 0..p.maxflows {
            q.link(x);
        }
        Ok(q)
    }

    /// The current hash secret.
    pub fn perturbation(&self) -> u32 {
        self.perturbation
    }

    /// The bucket (0-based) the hash puts `pkt` in (`sfq_hash`).
    pub fn bucket_of(&self, pkt: &Packet) -> u32 {
        flow_hash::flow_hash(pkt, self.perturbation) & (self.p.divisor - 1)
    }

    // ---- the by-length lists (sfq_link, sfq_unlink, sfq_inc, sfq_dec) ----

    /// The link entry heading `dep[d]`.
    fn dep_head(&self, d: u32) -> u32 {
        self.p.maxflows + d
    }

    /// The first slot of `dep[d]`, if any.
    fn dep_first(&self, d: u32) -> Option<u32> {
        let x = self.links[self.dep_head(d) as usize].next;
        (x < self.p.maxflows).then_some(x)
    }

    /// Put slot `x` at the front of the list for its length.
    #[inline]
    fn link(&mut self, x: u32) {
        let h = self.dep_head(self.slots[x as usize].qlen);
        let n = self.links[h as usize].next;
        self.links[x as usize] = Link { next: n, prev: h };
        self.links[h as usize].next = x;
        self.links[n as usize].prev = x;
    }

    /// Unlink slot `x`; returns its (next, prev).
    #[inline]
    fn unlink(&mut self, x: u32) -> (u32, u32) {
        let Link { next, prev } = self.links[x as usize];
        self.links[prev as usize].next = next;
        self.links[next as usize].prev = prev;
        (next, prev)
    }

    #[inline(always)]
    fn dec(&mut self, x: u32) {
        let (n, p) = self.unlink(x);
        let d = self.slots[x as usize].qlen;
        self.slots[x as usize].qlen = d.saturating_sub(1);
        if n == p && self.cur_depth == d {
            self.cur_depth = self.cur_depth.saturating_sub(1);
        }
        self.link(x);
    }

    #[inline]
    fn inc(&mut self, x: u32) {
        self.unlink(x);
        let d = self.slots[x as usize].qlen + 1;
        self.slots[x as usize].qlen = d;
        self.cur_depth = self.cur_depth.max(d);
        self.link(x);
    }

    /// Put slot `x`, just become non-empty, in the ring behind the tail.
    fn activate(&mut self, x: u32) {
        match self.tail {
            None => self.slots[x as usize].next = x,
            Some(t) => {
                self.slots[x as usize].next = self.slots[t as usize].next;
                self.slots[t as usize].next = x;
            }
        }
        self.tail = Some(x);
        self.slots[x as usize].allot = self.quantum();
    }

    fn quantum(&self) -> i64 {
        self.p.quantum.max(1) as i64
    }

    /// Queue `pkt` at the tail of slot `x`.
    // Inlined so that the packet is moved once, straight into the slot.
    #[inline(always)]
    fn push(&mut self, x: u32, pkt: Packet) {
        let s = &mut self.slots[x as usize];
        s.backlog += pkt.len as u64;
        s.queue.push_back(pkt);
        self.inc(x);
        if self.slots[x as usize].qlen == 1 {
            self.activate(x);
        }
    }

    /// `sfq_drop`: drop one packet from the longest slot; returns the slot
    /// and the packet.
    fn drop_longest(&mut self) -> Option<(u32, Packet)> {
        let d = self.cur_depth;
        let x = if d > 1 {
            self.dep_first(d)?
        } else if d == 1 {
            // Every slot holds one packet: take the next in the ring out of it.
            let t = self.tail?;
            let x = self.slots[t as usize].next;
            if x == t {
                self.tail = None;
            } else {
                self.slots[t as usize].next = self.slots[x as usize].next;
            }
            let h = self.slots[x as usize].hash;
            self.ht[h as usize] = EMPTY;
            x
        } else {
            return None;
        };
        let s = &mut self.slots[x as usize];
        let pkt = if self.p.headdrop {
            s.queue.pop_front()
        } else {
            s.queue.pop_back()
        }?;
        s.backlog -= pkt.len as u64;
        self.dec(x);
        self.qlen -= 1;
        Some((x, pkt))
    }

    /// `sfq_classify`: the bucket (0-based), or why the packet is refused.
    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Result<u32, DropReason> {
        if let Some(h) = self.handle {
            let minor = pkt.priority & 0xffff;
            if pkt.priority & 0xffff_0000 == h.0 && minor > 0 && minor <= self.p.divisor {
                return Ok(minor - 1);
            }
        }
        if self.block.is_empty() {
            return Ok(self.bucket_of(pkt));
        }
        match self.block.classify(pkt, now) {
            Some(r) => match r.verdict {
                Verdict::Shot => Err(DropReason::Action),
                Verdict::Stolen | Verdict::Queued | Verdict::Trap => Err(DropReason::Stolen),
                Verdict::Continue => Err(DropReason::Unclassified),
                _ => {
                    let minor = r.classid.minor() as u32;
                    if minor > 0 && minor <= self.p.divisor {
                        Ok(minor - 1)
                    } else {
                        Err(DropReason::Unclassified)
                    }
                }
            },
            None => Err(DropReason::Unclassified),
        }
    }

    /// RED on slot `x` before queueing `pkt`: `Err` = drop it (congestion).
    fn red(&mut self, x: u32, pkt: &mut Packet) -> Result<(), ()> {
        let Some(rp) = self.p.red.as_ref() else {
            return Ok(());
        };
        let s = &mut self.slots[x as usize];
        s.red.qavg = red_law::calc_qavg_no_idle_time(rp, &s.red, s.backlog);
        let qavg = s.red.qavg;
        let action = red_law::red_action(rp, &mut s.red, qavg, &mut self.rng);
        let (ecn, headdrop) = (self.p.flags & TC_RED_ECN != 0, self.p.headdrop);
        let (mark, head_stat, pkt_stat, drop_stat) = match action {
            RedAction::DontMark => return Ok(()),
            RedAction::ProbMark => (
                ecn,
                &mut self.red_stats.prob_mark_head,
                &mut self.red_stats.prob_mark,
                &mut self.red_stats.prob_drop,
            ),
            RedAction::HardMark => (
                self.p.flags & (TC_RED_ECN | TC_RED_HARDDROP) == TC_RED_ECN,
                &mut self.red_stats.forced_mark_head,
                &mut self.red_stats.forced_mark,
                &mut self.red_stats.forced_drop,
            ),
        };
        self.overlimits += 1;
        if mark {
            if headdrop && s.queue.front_mut().is_some_and(|p| p.set_ce()) {
                *head_stat += 1;
                return Ok(());
            }
            if pkt.set_ce() {
                *pkt_stat += 1;
                return Ok(());
            }
        }
        *drop_stat += 1;
        Err(())
    }

    /// The kernel's `perturb_timer`, run lazily. The common case, no
    /// perturbation or none due yet, is checked inline on every packet.
    #[inline]
    fn maybe_perturb(&mut self, cx: &mut Cx) {
        if self.p.perturb_secs <= 0 || self.next_perturb.is_some_and(|due| cx.now < due) {
            return;
        }
        self.perturb_now(cx);
    }

    #[inline(never)]
    fn perturb_now(&mut self, cx: &mut Cx) {
        let period = self.p.perturb_period();
        if period.0 == 0 {
            return;
        }
        match self.next_perturb {
            None => self.next_perturb = Some(Time(cx.now.0.saturating_add(period.0))),
            Some(due) if cx.now >= due => {
                self.perturbation = self.rng.next_u32();
                if self.block.is_empty() && self.tail.is_some() {
                    self.rehash(cx);
                }
                let missed = (cx.now.0 - due.0) / period.0;
                self.next_perturb = Some(Time(
                    due.0.saturating_add((missed + 1).saturating_mul(period.0)),
                ));
            }
            Some(_) => {}
        }
    }

    /// `sfq_rehash`: re-sort every queued packet under the new secret.
    fn rehash(&mut self, cx: &mut Cx) {
        let mut list = VecDeque::new();
        for i in 0..self.p.maxflows {
            if self.slots[i as usize].qlen == 0 {
                continue;
            }
            while self.slots[i as usize].qlen > 0 {
                let Some(pkt) = self.slots[i as usize].queue.pop_front() else {
                    break;
                };
                self.dec(i);
                list.push_back(pkt);
            }
            let s = &mut self.slots[i as usize];
            s.backlog = 0;
            s.red = RedVars::default();
            let h = s.hash;
            self.ht[h as usize] = EMPTY;
        }
        self.tail = None;
        while let Some(pkt) = list.pop_front() {
            let hash = self.bucket_of(&pkt);
            let mut x = self.ht[hash as usize];
            if x == EMPTY {
                let Some(free) = self.dep_first(0) else {
                    self.qlen -= 1;
                    cx.shed(pkt.len, DropReason::QueueFull);
                    continue;
                };
                x = free;
                self.ht[hash as usize] = x;
                self.slots[x as usize].hash = hash;
            }
            if self.slots[x as usize].qlen >= self.p.maxdepth {
                self.qlen -= 1;
                cx.shed(pkt.len, DropReason::QueueFull);
                continue;
            }
            if let Some(rp) = self.p.red.as_ref() {
                let s = &mut self.slots[x as usize];
                s.red.qavg = red_law::calc_qavg_no_idle_time(rp, &s.red, s.backlog);
            }
            self.push(x, pkt);
        }
    }

    /// `sfq_dequeue` without the lazy timer.
    // Inlined into `dequeue`, so that the packet is moved once.
    #[inline(always)]
    fn dequeue_one(&mut self) -> Option<Packet> {
        let mut tail = self.tail?;
        let start = tail;
        let mut fast_forwarded = false;
        let a = loop {
            let a = self.slots[tail as usize].next;
            if self.slots[a as usize].allot > 0 {
                break a;
            }
            tail = a;
            self.slots[a as usize].allot += self.quantum();
            if a == start && !fast_forwarded {
                // A whole round gave nobody a positive credit: skip the
                // rounds the kernel would spend topping every slot up.
                self.skip_empty_rounds(start);
                fast_forwarded = true;
            }
        };
        self.tail = Some(tail);
        // The packet stays in `pkt` up to the return (it is large to move).
        let pkt = self.slots[a as usize].queue.pop_front();
        let len = pkt.as_ref()?.len;
        self.dec(a);
        self.qlen -= 1;
        let s = &mut self.slots[a as usize];
        s.backlog -= len as u64;
        if s.qlen == 0 {
            let (h, next_a) = (s.hash, s.next);
            self.ht[h as usize] = EMPTY;
            if a == next_a {
                self.tail = None;
            } else {
                self.slots[tail as usize].next = next_a;
            }
        } else {
            s.allot -= len as i64;
        }
        pkt
    }

    /// Add `(r - 1) * quantum` to every slot of the ring, where `r` is the
    /// fewest further top-ups any slot needs to get a positive credit: the
    /// same credits the kernel's loop reaches after `r - 1` more rounds.
    fn skip_empty_rounds(&mut self, start: u32) {
        #[cfg(test)]
        if self.naive_rounds {
            return;
        }
        let q = self.quantum();
        let mut rounds = i64::MAX;
        let mut x = start;
        loop {
            let allot = self.slots[x as usize].allot;
            rounds = rounds.min(if allot > 0 { 0 } else { -allot / q + 1 });
            x = self.slots[x as usize].next;
            if x == start {
                break;
            }
        }
        if rounds <= 1 {
            return;
        }
        loop {
            self.slots[x as usize].allot += (rounds - 1) * q;
            x = self.slots[x as usize].next;
            if x == start {
                break;
            }
        }
    }

    #[inline]
    fn enqueue_classified(
        &mut self,
        hash: u32,
        mut pkt: Packet,
        cx: &mut Cx,
    ) -> Result<(), (Packet, DropReason)> {
        let mut x = self.ht[hash as usize];
        if x == EMPTY {
            let Some(free) = self.dep_first(0) else {
                return Err((pkt, DropReason::QueueFull));
            };
            x = free;
            self.ht[hash as usize] = x;
            let s = &mut self.slots[x as usize];
            s.hash = hash;
            s.backlog = 0;
            s.red = RedVars::default();
        } else {
            let congested = self.red(x, &mut pkt).is_err();
            if congested || self.slots[x as usize].qlen >= self.p.maxdepth {
                let reason = if congested {
                    DropReason::Aqm
                } else {
                    DropReason::QueueFull
                };
                if !self.p.headdrop {
                    return Err((pkt, reason));
                }
                let s = &mut self.slots[x as usize];
                let Some(head) = s.queue.pop_front() else {
                    return Err((pkt, reason));
                };
                s.backlog = s.backlog - head.len as u64 + pkt.len as u64;
                s.queue.push_back(pkt);
                cx.shed(head.len, reason);
                return Ok(());
            }
        }
        self.push(x, pkt);
        self.qlen += 1;
        if self.qlen <= self.p.limit {
            return Ok(());
        }
        match self.drop_longest() {
            // Tail drop from our own slot: the victim is the packet just queued.
            Some((y, victim))
                if y == x && (!self.p.headdrop || self.slots[x as usize].qlen == 0) =>
            {
                Err((victim, DropReason::QueueFull))
            }
            Some((_, victim)) => {
                cx.shed(victim.len, DropReason::QueueFull);
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl Qdisc for Sfq {
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.maybe_perturb(cx);
        match self.classify(&mut pkt, cx.now) {
            Ok(hash) => self.enqueue_classified(hash, pkt, cx),
            Err(reason) => Err((pkt, reason)),
        }
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.maybe_perturb(cx);
        self.dequeue_one().map_or(Dequeue::Empty, Dequeue::Packet)
    }

    /// `sfq_reset`: dequeue and free everything.
    fn reset(&mut self) {
        while self.dequeue_one().is_some() {}
    }

    /// sfq has no `change` operation: a request carrying options fails in
    /// `qdisc_change`; one without options (all fields zero) does nothing.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        match opts {
            QdiscOpts::Sfq(o) if *o == SfqOpts::default() => Ok(()),
            QdiscOpts::Sfq(_) => Err(TcError::inval(
                "Change operation not supported by specified qdisc",
            )),
            _ => Err(wrong_kind("sfq", opts)),
        }
    }

    fn dump(&self) -> QdiscOpts {
        let p = &self.p;
        let (mut qth_min, mut qth_max, mut wlog, mut plog, mut scell_log, mut max_p) =
            (0, 0, 0, 0, 0, 0);
        if let Some(r) = &p.red {
            qth_min = r.min_threshold();
            qth_max = r.max_threshold();
            (wlog, plog, scell_log, max_p) = (r.wlog, r.plog, r.scell_log, r.max_p);
        }
        QdiscOpts::Sfq(SfqOpts {
            quantum: p.quantum,
            perturb_period: p.perturb_secs,
            limit: p.limit,
            divisor: p.divisor,
            flows: p.maxflows,
            depth: p.maxdepth,
            headdrop: p.headdrop,
            red_limit: 0,
            qth_min,
            qth_max,
            wlog,
            plog,
            scell_log,
            flags: p.flags,
            max_p,
            stats: self.red_stats,
        })
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    /// `sfq_tcf_block`: filters attach to the qdisc only.
    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        (classid.minor() == 0).then_some(&mut self.block)
    }

    fn block(&self, classid: Handle) -> Option<&Block> {
        (classid.minor() == 0).then_some(&self.block)
    }

    /// `sch->handle`: names the classes, lets `priority` select a bucket,
    /// and gives each sfq of a device its own secret.
    fn set_handle(&mut self, handle: Handle) {
        let h = handle.qdisc();
        if self.handle == Some(h) {
            return;
        }
        self.handle = Some(h);
        self.block.set_qdisc(h);
        if self.qlen == 0 {
            self.rng = Xoshiro256PlusPlus::seed_from_u64(self.seed ^ ((h.0 as u64) << 8));
            self.perturbation = self.rng.next_u32();
        }
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Sfq {
    /// sfq has no class `change`.
    fn change_class(
        &mut self,
        _: Handle,
        _: Handle,
        _: Option<&ClassOpts>,
        _: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// `sfq_find` never finds a class, so there is nothing to delete.
    fn delete_class(&mut self, _: Handle) -> TcResult<()> {
        Err(TcError::msg(Errno::ENOENT, "Specified class not found"))
    }

    /// `sfq_walk` + `sfq_dump_class_stats`: one class per occupied bucket,
    /// in bucket order. The kernel sends only queue statistics (qlen,
    /// backlog) and `allot` for these classes: no byte or packet counts.
    fn list(&self) -> Vec<ClassInfo> {
        let major = self.handle.map_or(0, Handle::major);
        self.ht
            .iter()
            .enumerate()
            .filter(|(_, &x)| x != EMPTY)
            .map(|(i, &x)| {
                let s = &self.slots[x as usize];
                ClassInfo {
                    classid: Handle::new(major, i as u16 + 1),
                    parent: Handle::new(major, 0),
                    leaf: None,
                    opts: ClassOpts::Plain,
                    stats: Stats {
                        qlen: s.qlen,
                        backlog: s.backlog,
                        ..Default::default()
                    },
                    xstats: XStats::SfqClass(SfqClassXstats {
                        allot: s.allot.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                    }),
                }
            })
            .collect()
    }

    /// `sfq_find` returns no class for any id.
    fn contains(&self, _: Handle) -> bool {
        false
    }

    fn graft(
        &mut self,
        _: Handle,
        _: Option<QdiscNode>,
        _: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        Err(TcError::msg(Errno::ENOENT, "Specified class not found"))
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
    use crate::act::gact::GactOpts;
    use crate::act::{ActionOpts, ActionSpec, ActionTable};
    use crate::cls::fw::FwOpts;
    use crate::cls::{ClsEnv, ClsShared, FilterCmd, FilterMsg, FilterOpts};
    use crate::packet::Skb;
    use crate::packet::ETH_P_ALL;
    use crate::packet::ETH_P_IP;
    use proptest::prelude::*;

    const H: Handle = Handle::new(1, 0);

    /// An IPv4 UDP packet of flow `f` (source port 1000+f), `len` bytes,
    /// id `f * 1_000_000 + seq`, with a valid header checksum and TOS `tos`.
    fn pkt(f: u32, seq: u32, len: u32, tos: u8) -> Packet {
        let mut d = vec![0u8; 28];
        d[0] = 0x45;
        d[1] = tos;
        d[2..4].copy_from_slice(&(len.min(65535) as u16).to_be_bytes());
        d[8] = 64;
        d[9] = 17;
        d[12..16].copy_from_slice(&[10, 0, 0, 1]);
        d[16..20].copy_from_slice(&[10, 0, 1, 1]);
        d[20..22].copy_from_slice(&(1000 + f as u16).to_be_bytes());
        d[22..24].copy_from_slice(&5001u16.to_be_bytes());
        let c = ipv4_checksum(&d[..20]);
        d[10..12].copy_from_slice(&c.to_be_bytes());
        Packet::from(Skb {
            id: f as u64 * 1_000_000 + seq as u64,
            ..Packet::new(d, len, ETH_P_IP).into_skb()
        })
    }

    fn ipv4_checksum(h: &[u8]) -> u16 {
        let mut sum: u32 = h
            .chunks(2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
            .sum();
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    fn sfq(o: SfqOpts) -> Sfq {
        let mut q = Sfq::new(&o, &DevInfo::default()).unwrap();
        q.set_handle(H);
        q
    }

    fn node(q: Sfq) -> QdiscNode {
        QdiscNode::new(H, Handle::ROOT, Box::new(q))
    }

    fn classes(n: &QdiscNode) -> Vec<ClassInfo> {
        n.qdisc.classes_ref().unwrap().list()
    }

    fn drain(n: &mut QdiscNode, cx: &mut Cx) -> Vec<u64> {
        std::iter::from_fn(|| match n.dequeue(cx) {
            Dequeue::Packet(p) => Some(p.id),
            _ => None,
        })
        .collect()
    }

    fn dump(q: &Sfq) -> SfqOpts {
        match q.dump() {
            QdiscOpts::Sfq(o) => o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_kernels() {
        // tc-testing 7482: "limit 127p quantum 1514b depth 127 divisor 1024",
        // 128 flows (psched_mtu = 1500 + 14).
        let o = dump(&sfq(SfqOpts::default()));
        assert_eq!(
            (o.limit, o.quantum, o.depth, o.divisor, o.flows),
            (127, 1514, 127, 1024, 128)
        );
        assert_eq!(
            (o.perturb_period, o.headdrop, o.qth_min, o.flags),
            (0, false, 0, 0)
        );
    }

    #[test]
    fn options_combine_as_sfq_change_does() {
        let d = |o| dump(&sfq(o));
        // limit caps flows (tc-testing c186: limit 8).
        let o = d(SfqOpts {
            limit: 8,
            ..Default::default()
        });
        assert_eq!((o.limit, o.flows), (8, 8));
        let o = d(SfqOpts {
            perturb_period: 10,
            ..Default::default()
        });
        assert_eq!(o.perturb_period, 10);
        assert_eq!(
            d(SfqOpts {
                quantum: 9000,
                ..Default::default()
            })
            .quantum,
            9000
        );
        let o = d(SfqOpts {
            divisor: 512,
            ..Default::default()
        });
        assert_eq!((o.divisor, o.flows), (512, 128));
        let o = d(SfqOpts {
            divisor: 64,
            ..Default::default()
        });
        assert_eq!(
            (o.divisor, o.flows),
            (64, 64),
            "flows never exceed the buckets"
        );
        assert_eq!(
            d(SfqOpts {
                flows: 20,
                ..Default::default()
            })
            .flows,
            20
        );
        assert_eq!(
            d(SfqOpts {
                flows: 100_000,
                ..Default::default()
            })
            .flows,
            SFQ_MAX_FLOWS
        );
        assert_eq!(
            d(SfqOpts {
                depth: 64,
                ..Default::default()
            })
            .depth,
            64
        );
        assert_eq!(
            d(SfqOpts {
                depth: 500,
                ..Default::default()
            })
            .depth,
            127
        );
        assert!(
            d(SfqOpts {
                headdrop: true,
                ..Default::default()
            })
            .headdrop
        );
        // limit is capped at depth * flows, then flows at limit.
        let o = d(SfqOpts {
            limit: 1000,
            depth: 10,
            flows: 4,
            ..Default::default()
        });
        assert_eq!((o.limit, o.flows, o.depth), (40, 4, 10));
        // Without a limit, the default 127 stays even if depth * flows is smaller.
        assert_eq!(
            d(SfqOpts {
                depth: 2,
                flows: 2,
                ..Default::default()
            })
            .limit,
            127
        );
    }

    #[test]
    fn red_options_are_dumped_as_given() {
        // tc-testing 6472: redflowlimit 100000 min 8000 max 60000
        // probability 0.20 ecn headdrop -> ewma 6 min 8000b max 60000b probability 0.2 ecn.
        let max_p = (0.2 * 4294967296.0f64) as u32;
        let o = SfqOpts {
            headdrop: true,
            red_limit: 100_000,
            qth_min: 8000,
            qth_max: 60000,
            wlog: 6,
            plog: 18,
            flags: TC_RED_ECN,
            max_p,
            ..Default::default()
        };
        let d = dump(&sfq(o));
        assert_eq!(
            (d.qth_min, d.qth_max, d.wlog, d.plog, d.max_p, d.flags),
            (8000, 60000, 6, 18, max_p, TC_RED_ECN)
        );
        assert_eq!(d.red_limit, 0, "the kernel does not keep redflowlimit");
        assert!(d.headdrop);
    }

    #[test]
    fn validation_errors_are_the_kernels() {
        let dev = DevInfo::default();
        let err = |o: SfqOpts| Sfq::new(&o, &dev).unwrap_err();
        let e = err(SfqOpts {
            divisor: 1000,
            ..Default::default()
        });
        assert_eq!((e.errno, e.extack), (Errno::EINVAL, None));
        assert_eq!(
            err(SfqOpts {
                divisor: 131072,
                ..Default::default()
            })
            .errno,
            Errno::EINVAL
        );
        assert!(Sfq::new(
            &SfqOpts {
                divisor: 65536,
                ..Default::default()
            },
            &dev
        )
        .is_ok());
        let e = err(SfqOpts {
            quantum: 0x8000_0000,
            ..Default::default()
        });
        assert_eq!(e.to_string(), "Error: sch_sfq: invalid quantum.");
        let e = err(SfqOpts {
            perturb_period: -1,
            ..Default::default()
        });
        assert_eq!(e.to_string(), "Error: sch_sfq: invalid perturb period.");
        assert!(Sfq::new(
            &SfqOpts {
                perturb_period: 2_000_000,
                ..Default::default()
            },
            &dev
        )
        .is_ok());
        // The 2025 fix: a limit that ends up 1, directly or through flows/depth.
        let e = err(SfqOpts {
            limit: 1,
            ..Default::default()
        });
        assert_eq!(e.to_string(), "Error: sch_sfq: invalid limit.");
        let e = err(SfqOpts {
            limit: 2,
            flows: 1,
            depth: 1,
            ..Default::default()
        });
        assert_eq!(e.extack.as_deref(), Some("sch_sfq: invalid limit"));
        // red_check_params: max below min, or thresholds too large for Wlog.
        let e = err(SfqOpts {
            qth_min: 5000,
            qth_max: 4000,
            ..Default::default()
        });
        assert_eq!((e.errno, e.extack), (Errno::EINVAL, None));
        assert!(Sfq::new(
            &SfqOpts {
                qth_min: 1 << 20,
                qth_max: 1 << 21,
                wlog: 10,
                ..Default::default()
            },
            &dev
        )
        .is_err());
        assert!(Sfq::new(
            &SfqOpts {
                scell_log: 32,
                ..Default::default()
            },
            &dev
        )
        .is_err());
    }

    #[test]
    fn change_is_not_supported() {
        let mut q = sfq(SfqOpts::default());
        let dev = DevInfo::default();
        assert!(q.change(&QdiscOpts::Sfq(SfqOpts::default()), &dev).is_ok());
        let e = q
            .change(
                &QdiscOpts::Sfq(SfqOpts {
                    limit: 10,
                    ..Default::default()
                }),
                &dev,
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Error: Change operation not supported by specified qdisc."
        );
        assert_eq!(dump(&q).limit, 127);
    }

    /// Flows with different packet sizes, all kept backlogged: DRR gives each
    /// the same bytes per round, so byte shares are equal.
    #[test]
    fn backlogged_flows_get_equal_bytes_whatever_their_packet_size() {
        let sizes = [64u32, 300, 1000, 1514];
        let mut n = node(sfq(SfqOpts::default()));
        let mut cx = Cx::new(Time(0));
        let mut seq = [0u32; 4];
        for (f, &len) in sizes.iter().enumerate() {
            for _ in 0..20 {
                n.enqueue(pkt(f as u32, seq[f], len, 0), &mut cx).unwrap();
                seq[f] += 1;
            }
        }
        assert_eq!(classes(&n).len(), 4, "the four flows hash to four buckets");
        let mut bytes = [0u64; 4];
        for _ in 0..20_000 {
            let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
                panic!("ran dry")
            };
            let f = (p.id / 1_000_000) as usize;
            bytes[f] += p.len as u64;
            n.enqueue(pkt(f as u32, seq[f], sizes[f], 0), &mut cx)
                .unwrap();
            seq[f] += 1;
        }
        let total: u64 = bytes.iter().sum();
        for (f, b) in bytes.iter().enumerate() {
            let share = *b as f64 / total as f64;
            assert!(
                (share - 0.25).abs() < 0.01,
                "flow {f} got {share:.4} of the bytes"
            );
        }
        assert_eq!(n.stats().drops, 0);
    }

    #[test]
    fn a_flow_is_limited_to_depth() {
        let mut n = node(sfq(SfqOpts {
            depth: 10,
            ..Default::default()
        }));
        let mut cx = Cx::new(Time(0));
        for i in 0..20 {
            assert_eq!(n.enqueue(pkt(0, i, 100, 0), &mut cx).is_ok(), i < 10);
        }
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (10, 1000, 10));
        assert_eq!(drain(&mut n, &mut cx), (0..10).collect::<Vec<u64>>());
    }

    #[test]
    fn headdrop_keeps_the_newest_packets_of_a_full_flow() {
        let mut n = node(sfq(SfqOpts {
            depth: 10,
            headdrop: true,
            ..Default::default()
        }));
        let mut cx = Cx::new(Time(0));
        for i in 0..20 {
            assert!(n.enqueue(pkt(0, i, 100, 0), &mut cx).is_ok());
        }
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (10, 1000, 10));
        assert_eq!(drain(&mut n, &mut cx), (10..20).collect::<Vec<u64>>());
    }

    #[test]
    fn over_the_limit_the_longest_flow_loses_its_tail() {
        let mut n = node(sfq(SfqOpts {
            limit: 10,
            ..Default::default()
        }));
        let mut cx = Cx::new(Time(0));
        for i in 0..8 {
            n.enqueue(pkt(0, i, 100, 0), &mut cx).unwrap();
        }
        for i in 0..2 {
            n.enqueue(pkt(1, i, 100, 0), &mut cx).unwrap();
        }
        // The 11th packet (flow 2) is kept; flow 0's newest packet goes.
        n.enqueue(pkt(2, 0, 100, 0), &mut cx).unwrap();
        let s = n.stats();
        assert_eq!((s.qlen, s.drops), (10, 1));
        let mut qlens: Vec<u32> = classes(&n).iter().map(|c| c.stats.qlen).collect();
        qlens.sort();
        assert_eq!(qlens, vec![1, 2, 7]);
        let out = drain(&mut n, &mut cx);
        assert!(!out.contains(&7) && out.contains(&2_000_000));
        // When the longest flow is the arriving packet's own, the arriving
        // packet is the one refused.
        let mut n = node(sfq(SfqOpts {
            limit: 4,
            ..Default::default()
        }));
        for i in 0..4 {
            n.enqueue(pkt(0, i, 100, 0), &mut cx).unwrap();
        }
        assert_eq!(
            n.enqueue(pkt(0, 4, 100, 0), &mut cx),
            Err(DropReason::QueueFull)
        );
        assert_eq!(drain(&mut n, &mut cx), vec![0, 1, 2, 3]);
    }

    #[test]
    fn among_equally_long_flows_the_last_to_grow_loses() {
        let mut n = node(sfq(SfqOpts {
            limit: 4,
            ..Default::default()
        }));
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(0, 0, 100, 0), &mut cx).unwrap();
        n.enqueue(pkt(0, 1, 100, 0), &mut cx).unwrap();
        n.enqueue(pkt(1, 0, 100, 0), &mut cx).unwrap();
        n.enqueue(pkt(1, 1, 100, 0), &mut cx).unwrap();
        n.enqueue(pkt(2, 0, 100, 0), &mut cx).unwrap();
        let out = drain(&mut n, &mut cx);
        assert!(out.contains(&1) && !out.contains(&1_000_001), "{out:?}");
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn a_new_flow_waits_behind_the_active_ones() {
        // Quantum of one packet: A and B alternate. C arrives after A's
        // first packet left and joins the ring as its new tail, behind B.
        let mut n = node(sfq(SfqOpts {
            quantum: 100,
            ..Default::default()
        }));
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(0, i, 100, 0), &mut cx).unwrap();
            n.enqueue(pkt(1, i, 100, 0), &mut cx).unwrap();
        }
        let first = |n: &mut QdiscNode, cx: &mut Cx| match n.dequeue(cx) {
            Dequeue::Packet(p) => p.id,
            d => panic!("{d:?}"),
        };
        assert_eq!(first(&mut n, &mut cx), 0);
        n.enqueue(pkt(2, 0, 100, 0), &mut cx).unwrap();
        let rest = drain(&mut n, &mut cx);
        assert_eq!(rest, vec![1_000_000, 2_000_000, 1, 1_000_001, 2, 1_000_002]);
    }

    #[test]
    fn classes_list_occupied_buckets_with_their_credit() {
        let q = sfq(SfqOpts::default());
        let bucket = q.bucket_of(&pkt(0, 0, 1000, 0));
        let mut n = node(q);
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        n.dequeue(&mut cx);
        let c = classes(&n);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].classid, Handle::new(1, bucket as u16 + 1));
        assert_eq!(c[0].parent, H);
        assert_eq!(
            (c[0].stats.qlen, c[0].stats.backlog, c[0].stats.packets),
            (2, 2000, 0)
        );
        // A new flow starts with one quantum (1514) and was charged 1000.
        assert_eq!(c[0].xstats, XStats::SfqClass(SfqClassXstats { allot: 514 }));
        assert!(n.qdisc.block(H).is_some() && n.qdisc.block(c[0].classid).is_none());
        let cl = n.qdisc.classes().unwrap();
        assert!(!cl.contains(c[0].classid), "sfq_find finds no class");
        assert_eq!(
            cl.graft(c[0].classid, None, &DevInfo::default())
                .unwrap_err()
                .errno,
            Errno::ENOENT
        );
        assert_eq!(
            cl.delete_class(c[0].classid).unwrap_err().errno,
            Errno::ENOENT
        );
        assert_eq!(
            cl.change_class(c[0].classid, H, None, &DevInfo::default())
                .unwrap_err()
                .errno,
            Errno::EOPNOTSUPP
        );
        drain(&mut n, &mut cx);
        assert!(
            classes(&n).is_empty(),
            "tc-testing 8929: no class when idle"
        );
    }

    #[test]
    fn priority_naming_our_class_picks_the_bucket() {
        let mut n = node(sfq(SfqOpts::default()));
        let mut cx = Cx::new(Time(0));
        let p = Packet::from(Skb {
            priority: 0x0001_0007,
            ..pkt(0, 0, 100, 0).into_skb()
        });
        n.enqueue(p, &mut cx).unwrap();
        assert_eq!(classes(&n)[0].classid, Handle::new(1, 7));
    }

    fn add_fw(q: &mut Sfq, pref: u16, mark: u32, classid: Option<Handle>, action: Option<Verdict>) {
        let mut actions = ActionTable::new(0);
        let mut shared = ClsShared::default();
        let mut env = ClsEnv {
            actions: &mut actions,
            shared: &mut shared,
            qdisc: H,
            dev_exists: &|_| true,
            now: Time(0),
        };
        let actions = action
            .map(|a| ActionSpec {
                index: 0,
                opts: ActionOpts::Gact(GactOpts {
                    action: a,
                    random: None,
                }),
                cookie: None,
                no_percpu: false,
                offload: 0,
            })
            .into_iter()
            .collect();
        let opts = FwOpts {
            classid,
            actions,
            ..Default::default()
        };
        let msg = FilterMsg {
            prio: pref,
            protocol: ETH_P_ALL,
            handle: mark,
            kind: Some("fw".into()),
            opts: Some(FilterOpts::Fw(opts)),
            ..Default::default()
        };
        q.block_mut(H)
            .unwrap()
            .change_filter(&msg, FilterCmd::Add, &mut env)
            .unwrap();
    }

    #[test]
    fn filters_choose_the_bucket_and_unclassified_packets_are_dropped() {
        let mut q = sfq(SfqOpts::default());
        add_fw(&mut q, 1, 1, Some(Handle::new(1, 5)), None);
        add_fw(&mut q, 1, 2, Some(Handle::new(1, 0x401)), None); // beyond 1024 buckets
        add_fw(&mut q, 1, 3, Some(Handle::new(1, 6)), Some(Verdict::Shot));
        let mut n = node(q);
        let mut cx = Cx::new(Time(0));
        let m = |f, mark| {
            Packet::from(Skb {
                mark,
                ..pkt(f, 0, 100, 0).into_skb()
            })
        };
        n.enqueue(m(0, 1), &mut cx).unwrap();
        n.enqueue(m(1, 1), &mut cx).unwrap();
        assert_eq!(n.enqueue(m(2, 2), &mut cx), Err(DropReason::Unclassified));
        assert_eq!(n.enqueue(m(3, 9), &mut cx), Err(DropReason::Unclassified));
        assert_eq!(n.enqueue(m(4, 3), &mut cx), Err(DropReason::Action));
        let c = classes(&n);
        assert_eq!(c.len(), 1, "two flows, one bucket");
        assert_eq!((c[0].classid, c[0].stats.qlen), (Handle::new(1, 5), 2));
        assert_eq!(n.stats().drops, 3);
    }

    fn bucket_set(n: &QdiscNode) -> Vec<Handle> {
        classes(n).iter().map(|c| c.classid).collect()
    }

    fn perturbed_run(seed: u64) -> (Vec<Handle>, Vec<Handle>, Vec<u64>) {
        let dev = DevInfo {
            seed,
            ..Default::default()
        };
        let mut n = QdiscNode::create(
            H,
            Handle::ROOT,
            &QdiscOpts::Sfq(SfqOpts {
                perturb_period: 1,
                ..Default::default()
            }),
            &dev,
        )
        .unwrap();
        let mut cx = Cx::new(Time(0));
        for f in 0..8 {
            for i in 0..3 {
                n.enqueue(pkt(f, i, 100, 0), &mut cx).unwrap();
            }
        }
        let before = bucket_set(&n);
        // Not yet due half a second later.
        let mut cx = Cx::new(Time(500_000_000));
        n.enqueue(pkt(8, 0, 100, 0), &mut cx).unwrap();
        assert!(bucket_set(&n).len() == 9);
        let before9 = bucket_set(&n);
        // Due at 1 s: the first call then re-sorts everything.
        let mut cx = Cx::new(Time(1_000_000_000));
        n.enqueue(pkt(9, 0, 100, 0), &mut cx).unwrap();
        let after = bucket_set(&n);
        assert_eq!(after.len(), 10);
        assert!(before.iter().all(|b| before9.contains(b)));
        (before9, after, drain(&mut n, &mut cx))
    }

    #[test]
    fn perturbation_moves_flows_deterministically_and_keeps_their_order() {
        let (before, after, out) = perturbed_run(7);
        assert!(
            !before.iter().all(|b| after.contains(b)),
            "some flow moved to another bucket"
        );
        assert_eq!(out.len(), 8 * 3 + 2, "no packet lost in the rehash");
        for f in 0..8u64 {
            let seqs: Vec<u64> = out
                .iter()
                .filter(|id| *id / 1_000_000 == f)
                .map(|id| id % 1_000_000)
                .collect();
            assert_eq!(seqs, vec![0, 1, 2], "flow {f} kept its order");
        }
        // Same seed, same story; another seed, another mapping.
        assert_eq!(perturbed_run(7), (before.clone(), after.clone(), out));
        let (b2, a2, _) = perturbed_run(8);
        assert!(b2 != before || a2 != after);
    }

    #[test]
    fn ecn_capable_packets_are_marked_above_max_and_others_dropped() {
        // Wlog 0: the average is the flow's backlog before the packet. With
        // min 2000 and max 4000 bytes and 1000-byte packets, the 5th packet
        // on (backlog >= 4000) is above max; max_p = 1 makes early marks
        // practically impossible.
        let red = SfqOpts {
            qth_min: 2000,
            qth_max: 4000,
            wlog: 0,
            max_p: 1,
            flags: TC_RED_ECN,
            ..Default::default()
        };
        let mut n = node(sfq(red));
        let mut cx = Cx::new(Time(0));
        for i in 0..10 {
            n.enqueue(pkt(0, i, 1000, 0x02), &mut cx).unwrap(); // ECT(0)
        }
        let mut ce = vec![];
        while let Dequeue::Packet(p) = n.dequeue(&mut cx) {
            assert_eq!(ipv4_checksum(&p.data[..20]), 0, "checksum still valid");
            ce.push(p.data[1] & 3 == 3);
        }
        assert_eq!(ce, [[false; 4].as_slice(), [true; 6].as_slice()].concat());
        assert_eq!((n.stats().overlimits, n.stats().drops), (6, 0));
        let QdiscOpts::Sfq(o) = n.qdisc.dump() else {
            unreachable!()
        };
        assert_eq!(
            (o.stats.forced_mark, o.stats.forced_drop, o.stats.prob_mark),
            (6, 0, 0)
        );
        // Not ECN-capable: the same packets are dropped instead.
        let mut n = node(sfq(red));
        for i in 0..10 {
            let r = n.enqueue(pkt(0, i, 1000, 0x00), &mut cx);
            assert_eq!(r.is_ok(), i < 4, "packet {i}");
        }
        let QdiscOpts::Sfq(o) = n.qdisc.dump() else {
            unreachable!()
        };
        assert_eq!(
            (o.stats.forced_drop, n.stats().drops, n.stats().qlen),
            (6, 6, 4)
        );
    }

    #[derive(Clone, Debug)]
    enum Op {
        Enq { flow: u32, len: u32 },
        Deq,
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            3 => (0..12u32, 40..1600u32).prop_map(|(flow, len)| Op::Enq { flow, len }),
            2 => Just(Op::Deq),
        ];
        proptest::collection::vec(op, 1..300)
    }

    fn opts() -> impl Strategy<Value = SfqOpts> {
        (
            2..40u32,
            1..20u32,
            1..16u32,
            0..7u32,
            any::<bool>(),
            1..3000u32,
        )
            .prop_map(
                |(limit, depth, flows, div_log, headdrop, quantum)| SfqOpts {
                    limit,
                    depth,
                    flows,
                    divisor: 1 << div_log,
                    headdrop,
                    quantum,
                    ..Default::default()
                },
            )
    }

    proptest! {
        /// Packets offered = sent + dropped + queued, at every step; the
        /// classes add up to the qdisc; the limit holds; draining empties it.
        #[test]
        fn packets_are_conserved(o in opts(), ops in ops()) {
            let Ok(q) = Sfq::new(&o, &DevInfo::default()) else { return Ok(()) };
            let limit = match q.dump() { QdiscOpts::Sfq(d) => d.limit, _ => unreachable!() };
            let mut n = node(q);
            let mut cx = Cx::new(Time(0));
            let mut offered = 0u64;
            for (i, op) in ops.iter().enumerate() {
                match *op {
                    Op::Enq { flow, len } => {
                        offered += 1;
                        let _ = n.enqueue(pkt(flow, i as u32, len, 0), &mut cx);
                    }
                    Op::Deq => { n.dequeue(&mut cx); }
                }
                let s = n.stats();
                prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                prop_assert!(s.qlen <= limit);
                let c = classes(&n);
                prop_assert_eq!(c.iter().map(|c| c.stats.qlen).sum::<u32>(), s.qlen);
                prop_assert_eq!(c.iter().map(|c| c.stats.backlog).sum::<u64>(), s.backlog);
            }
            drain(&mut n, &mut cx);
            let s = n.stats();
            prop_assert_eq!((s.qlen, s.backlog), (0, 0));
            prop_assert!(classes(&n).is_empty());
        }

        /// Skipping whole rounds of top-ups gives exactly the kernel's
        /// one-slot-at-a-time order.
        #[test]
        fn skipping_empty_rounds_changes_nothing(
            quantum in 5..60u32,
            pkts in proptest::collection::vec((0..6u32, 40..400u32), 1..40),
        ) {
            let o = SfqOpts { quantum, ..Default::default() };
            let mut fast = node(sfq(o));
            let mut slow_q = sfq(o);
            slow_q.naive_rounds = true;
            let mut slow = node(slow_q);
            let mut cx = Cx::new(Time(0));
            for (i, &(f, len)) in pkts.iter().enumerate() {
                let _ = fast.enqueue(pkt(f, i as u32, len, 0), &mut cx);
                let _ = slow.enqueue(pkt(f, i as u32, len, 0), &mut cx);
            }
            prop_assert_eq!(drain(&mut fast, &mut cx), drain(&mut slow, &mut cx));
        }
    }
}
