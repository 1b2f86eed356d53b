//! skbprio: 64 FIFOs by `skb->priority`; when full, the lowest priority loses.
//!
//! Modelled on net/sched/sch_skbprio.c (SKB Priority Queue, built as a
//! denial-of-service defence). A packet goes to queue `min(priority, 63)`;
//! dequeue always serves the highest non-empty queue (63 is the highest
//! priority, 0 the lowest). The qdisc holds at most `limit` packets
//! (default 64). When it is full, an arriving packet whose priority is no
//! higher than the lowest queued priority is dropped; otherwise it is queued
//! and the packet at the *tail* of the lowest-priority queue is dropped to
//! make room — so under overload the high priorities keep the queue.
//!
//! The kernel tracks the highest and lowest non-empty priorities
//! incrementally (`highest_prio`, `lowest_prio`, 0 and 63 when empty), and
//! so does this file, with the same update rules.
//!
//! The 64 queues are listed as classes `major:1` .. `major:64` (class `i`
//! is priority `i - 1`) with parent `major:`; they cannot be changed,
//! deleted or grafted (`skbprio_find` finds nothing). Their statistics are
//! per-priority queue counters only — backlog, drops and overlimits (each
//! drop counts as both), and a qlen the kernel never updates (always 0) —
//! with no byte or packet counters, so `tc -s class show` prints no
//! "Sent" part ([`XStats::QueueOnly`]).

use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts,
    XStats,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::{DropReason, Stats};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Number of priority queues (`SKBPRIO_MAX_PRIORITY`).
pub const SKBPRIO_MAX_PRIORITY: usize = 64;
/// The default limit in packets (`skbprio_init`).
pub const DEFAULT_LIMIT: u32 = 64;

/// `struct tc_skbprio_qopt`; `None` when tc sends no options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkbprioOpts {
    /// Most packets queued.
    pub limit: Option<u32>,
}

/// Per-priority counters (`q->qstats[prio]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PrioStats {
    backlog: u64,
    drops: u64,
    overlimits: u64,
}

/// An skbprio qdisc.
#[derive(Debug)]
pub struct Skbprio {
    limit: u32,
    handle: Handle,
    queues: Vec<VecDeque<Packet>>,
    stats: [PrioStats; SKBPRIO_MAX_PRIORITY],
    qlen: u32,
    highest: usize,
    lowest: usize,
}

impl Skbprio {
    /// `skbprio_init`.
    pub fn new(opts: &SkbprioOpts, _dev: &DevInfo) -> TcResult<Self> {
        Ok(Skbprio {
            limit: opts.limit.unwrap_or(DEFAULT_LIMIT),
            handle: Handle::UNSPEC,
            queues: (0..SKBPRIO_MAX_PRIORITY).map(|_| VecDeque::new()).collect(),
            stats: [PrioStats::default(); SKBPRIO_MAX_PRIORITY],
            qlen: 0,
            highest: 0,
            lowest: SKBPRIO_MAX_PRIORITY - 1,
        })
    }

    /// `calc_new_high_prio`: the next non-empty queue below `highest`.
    fn new_high(&self) -> usize {
        (self.lowest..self.highest)
            .rev()
            .find(|&p| !self.queues[p].is_empty())
            .unwrap_or(0)
    }

    /// `calc_new_low_prio`: the next non-empty queue above `lowest`.
    fn new_low(&self) -> usize {
        (self.lowest + 1..=self.highest)
            .find(|&p| !self.queues[p].is_empty())
            .unwrap_or(SKBPRIO_MAX_PRIORITY - 1)
    }
}

impl Qdisc for Skbprio {
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        let prio = pkt.priority.min(SKBPRIO_MAX_PRIORITY as u32 - 1) as usize;
        let len = pkt.len as u64;
        if self.qlen < self.limit {
            self.queues[prio].push_back(pkt);
            self.stats[prio].backlog += len;
            self.highest = self.highest.max(prio);
            self.lowest = self.lowest.min(prio);
            self.qlen += 1;
            return Ok(());
        }
        let lp = self.lowest;
        if prio <= lp {
            self.stats[prio].drops += 1;
            self.stats[prio].overlimits += 1;
            return Err((pkt, DropReason::QueueFull));
        }
        self.queues[prio].push_back(pkt);
        self.stats[prio].backlog += len;
        // Make room: the tail of the lowest-priority queue goes.
        if let Some(victim) = self.queues[lp].pop_back() {
            self.stats[lp].backlog -= victim.len as u64;
            self.stats[lp].drops += 1;
            self.stats[lp].overlimits += 1;
            cx.shed(victim.len, DropReason::QueueFull);
        }
        if self.queues[lp].is_empty() {
            if self.lowest == self.highest {
                self.lowest = prio;
                self.highest = prio;
            } else {
                self.lowest = self.new_low();
            }
        }
        self.highest = self.highest.max(prio);
        Ok(())
    }

    fn dequeue(&mut self, _cx: &mut Cx) -> Dequeue {
        let hp = self.highest;
        let Some(p) = self.queues[hp].pop_front() else {
            return Dequeue::Empty;
        };
        self.qlen -= 1;
        self.stats[hp].backlog -= p.len as u64;
        if self.queues[hp].is_empty() {
            if self.lowest == self.highest {
                self.highest = 0;
                self.lowest = SKBPRIO_MAX_PRIORITY - 1;
            } else {
                self.highest = self.new_high();
            }
        }
        Dequeue::Packet(p)
    }

    /// `skbprio_reset`: the per-priority counters are cleared too.
    fn reset(&mut self) {
        self.queues.iter_mut().for_each(VecDeque::clear);
        self.stats = [PrioStats::default(); SKBPRIO_MAX_PRIORITY];
        self.qlen = 0;
        self.highest = 0;
        self.lowest = SKBPRIO_MAX_PRIORITY - 1;
    }

    /// `skbprio_change`: a new limit (packets beyond it stay queued).
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Skbprio(o) = opts else {
            return Err(wrong_kind("skbprio", opts));
        };
        if let Some(l) = o.limit {
            self.limit = l;
        }
        Ok(())
    }

    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Skbprio(SkbprioOpts {
            limit: Some(self.limit),
        })
    }

    fn set_handle(&mut self, handle: Handle) {
        self.handle = handle.qdisc();
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Skbprio {
    /// skbprio has no class `change`.
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: Option<&ClassOpts>,
        _dev: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    fn delete_class(&mut self, _classid: Handle) -> TcResult<()> {
        Err(TcError::errno(Errno::ENOENT))
    }

    /// `skbprio_walk` + `skbprio_dump_class` + `skbprio_dump_class_stats`.
    fn list(&self) -> Vec<ClassInfo> {
        (0..SKBPRIO_MAX_PRIORITY)
            .map(|i| {
                let s = &self.stats[i];
                ClassInfo {
                    classid: Handle::new(self.handle.major(), i as u16 + 1),
                    parent: self.handle,
                    leaf: None,
                    opts: ClassOpts::Plain,
                    stats: Stats {
                        drops: s.drops,
                        overlimits: s.overlimits,
                        backlog: s.backlog,
                        ..Stats::default()
                    },
                    xstats: XStats::QueueOnly,
                }
            })
            .collect()
    }

    /// `skbprio_find` finds nothing: the queues are listed, not addressable.
    fn contains(&self, _classid: Handle) -> bool {
        false
    }

    fn graft(
        &mut self,
        _classid: Handle,
        _new: Option<QdiscNode>,
        _dev: &DevInfo,
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
    use crate::packet::Skb;
    use crate::time::Time;

    fn node(limit: Option<u32>) -> QdiscNode {
        let mut q = Skbprio::new(&SkbprioOpts { limit }, &DevInfo::default()).unwrap();
        q.set_handle(Handle::new(1, 0));
        QdiscNode::new(Handle::new(1, 0), Handle::ROOT, Box::new(q))
    }

    fn pkt(id: u64, priority: u32) -> Packet {
        Packet::from(Skb {
            id,
            len: 100 + id as u32,
            priority,
            ..Default::default()
        })
    }

    fn drain(n: &mut QdiscNode, cx: &mut Cx) -> Vec<u64> {
        std::iter::from_fn(|| match n.dequeue(cx) {
            Dequeue::Packet(p) => Some(p.id),
            _ => None,
        })
        .collect()
    }

    #[test]
    fn highest_priority_first_fifo_within_a_priority() {
        let mut n = node(None);
        let mut cx = Cx::new(Time(0));
        for (id, prio) in [(1, 3), (2, 10), (3, 3), (4, 63), (5, 1000), (6, 0)] {
            n.enqueue(pkt(id, prio), &mut cx).unwrap();
        }
        // 1000 is clamped to 63 and queued behind 4.
        assert_eq!(drain(&mut n, &mut cx), vec![4, 5, 2, 1, 3, 6]);
        assert_eq!(n.stats().qlen, 0);
    }

    #[test]
    fn when_full_the_lowest_priority_is_dropped() {
        let mut n = node(Some(4));
        let mut cx = Cx::new(Time(0));
        for (id, prio) in [(1, 5), (2, 5), (3, 9), (4, 7)] {
            n.enqueue(pkt(id, prio), &mut cx).unwrap();
        }
        // Full. Priority 5 is the lowest: an arrival at 5 or below is refused.
        assert_eq!(n.enqueue(pkt(5, 5), &mut cx), Err(DropReason::QueueFull));
        assert_eq!(n.enqueue(pkt(6, 2), &mut cx), Err(DropReason::QueueFull));
        // A higher arrival evicts the tail of the lowest queue (packet 2).
        n.enqueue(pkt(7, 8), &mut cx).unwrap();
        // And again: packet 1, the last at priority 5; now 7 is the lowest.
        n.enqueue(pkt(8, 20), &mut cx).unwrap();
        assert_eq!(cx.drops.len(), 2);
        let s = n.stats();
        assert_eq!((s.qlen, s.drops), (4, 4));
        assert_eq!(s.backlog, (100 + 3) + (100 + 4) + (100 + 7) + (100 + 8));
        let c = n.qdisc.classes_ref().unwrap().list();
        // Class 1:6 is priority 5: one refused and two evicted there.
        assert_eq!(
            (c[5].stats.drops, c[5].stats.overlimits, c[5].stats.backlog),
            (3, 3, 0)
        );
        assert_eq!((c[2].stats.drops, c[8].stats.backlog), (1, 107));
        assert_eq!(drain(&mut n, &mut cx), vec![8, 3, 7, 4]);
    }

    #[test]
    fn classes_are_the_64_priorities() {
        let n = node(None);
        let l = n.qdisc.classes_ref().unwrap().list();
        assert_eq!(l.len(), 64);
        assert_eq!(l[0].classid, Handle::new(1, 1));
        assert_eq!(l[63].classid, Handle::new(1, 64));
        assert!(l.iter().all(|c| c.parent == Handle::new(1, 0)));
        assert!(!n.qdisc.classes_ref().unwrap().contains(Handle::new(1, 1)));
    }
}
