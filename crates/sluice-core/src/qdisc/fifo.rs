//! pfifo, bfifo and pfifo_head_drop: one first-in first-out queue with a limit.
//!
//! Modelled on net/sched/sch_fifo.c. `pfifo` counts its limit in packets,
//! `bfifo` in bytes; both drop the arriving packet when it would exceed the
//! limit (tail drop). `pfifo_head_drop` instead drops the oldest packet to
//! make room, so the queue holds the newest data. Without a `limit` the
//! device's `txqueuelen` is used (see `DevInfo::default_qlen`) (times the MTU plus link header for bfifo).
//! Lowering the limit with `change` drops nothing already queued, as in the
//! kernel; the next arrivals see the new limit. A change without a limit
//! changes nothing.
//!
//! Invariant: `len(queue) <= limit` (pfifo) / `bytes <= limit` (bfifo) after
//! every enqueue that was accepted while the limit was in force.

use super::{wrong_kind, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts};
use crate::error::TcResult;
use crate::packet::Packet;
use crate::stats::DropReason;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `struct tc_fifo_qopt`: the only option, the limit (packets or bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FifoOpts {
    /// Packets (pfifo, pfifo_head_drop) or bytes (bfifo); `None` = from the device.
    pub limit: Option<u32>,
}

/// Which of the three fifos.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FifoKind {
    /// pfifo: tail drop, limit in packets.
    Packets,
    /// bfifo: tail drop, limit in bytes.
    Bytes,
    /// pfifo_head_drop: head drop, limit in packets.
    HeadDrop,
}

/// A fifo qdisc.
#[derive(Debug)]
pub struct Fifo {
    kind: FifoKind,
    limit: u32,
    queue: VecDeque<Packet>,
    bytes: u64,
}

impl Fifo {
    /// `fifo_init`.
    pub fn new(kind: FifoKind, opts: &FifoOpts, dev: &DevInfo) -> TcResult<Self> {
        let mut f = Fifo {
            kind,
            limit: 0,
            queue: VecDeque::new(),
            bytes: 0,
        };
        f.limit = f.limit_for(opts, dev);
        Ok(f)
    }

    /// A pfifo of `limit` packets, as classful qdiscs create for their default leaves.
    pub fn pfifo(limit: u32) -> Self {
        Fifo {
            kind: FifoKind::Packets,
            limit,
            queue: VecDeque::new(),
            bytes: 0,
        }
    }

    fn limit_for(&self, opts: &FifoOpts, dev: &DevInfo) -> u32 {
        opts.limit.unwrap_or_else(|| {
            let pkts = dev.default_qlen();
            match self.kind {
                FifoKind::Bytes => pkts.saturating_mul(dev.mtu + dev.hard_header_len),
                _ => pkts,
            }
        })
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

impl Fifo {
    /// pfifo_head_drop's room-making: drop the oldest packet; false if
    /// there is none. Out of line, so the common enqueue stays small.
    #[cold]
    #[inline(never)]
    fn drop_head(&mut self, cx: &mut Cx) -> bool {
        match self.queue.pop_front() {
            Some(old) => {
                self.bytes -= old.len as u64;
                cx.shed(old.len, DropReason::QueueFull);
                true
            }
            None => false,
        }
    }
}

impl Qdisc for Fifo {
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        let fits = match self.kind {
            FifoKind::Bytes => self.bytes + pkt.len as u64 <= self.limit as u64,
            _ => (self.queue.len() as u64) < self.limit as u64,
        };
        if !fits {
            if self.kind != FifoKind::HeadDrop {
                return Err((pkt, DropReason::QueueFull));
            }
            if !self.drop_head(cx) {
                return Err((pkt, DropReason::QueueFull));
            }
        }
        self.bytes += pkt.len as u64;
        self.queue.push_back(pkt);
        Ok(())
    }

    /// pfifo and bfifo read their head in place (`qdisc_peek_head`).
    /// pfifo_head_drop answers `None`: under tbf its head is peeked by
    /// dequeueing, so an overflow drops the packet behind it (see tbf's
    /// deviations), as before this shortcut existed.
    fn peek_len(&self) -> Option<Option<u32>> {
        match self.kind {
            FifoKind::HeadDrop => None,
            _ => Some(self.queue.front().map(|p| p.len)),
        }
    }

    fn dequeue(&mut self, _cx: &mut Cx) -> Dequeue {
        match self.queue.pop_front() {
            Some(p) => {
                self.bytes -= p.len as u64;
                Dequeue::Packet(p)
            }
            None => Dequeue::Empty,
        }
    }

    fn reset(&mut self) {
        self.queue.clear();
        self.bytes = 0;
    }

    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()> {
        let o = match (self.kind, opts) {
            (FifoKind::Packets, QdiscOpts::Pfifo(o))
            | (FifoKind::Bytes, QdiscOpts::Bfifo(o))
            | (FifoKind::HeadDrop, QdiscOpts::PfifoHeadDrop(o)) => o,
            _ => return Err(wrong_kind(self.dump().kind(), opts)),
        };
        // A change without options (`tc qdisc change ... pfifo`) carries no
        // TCA_OPTIONS, and the kernel then changes nothing.
        if o.limit.is_some() {
            self.limit = self.limit_for(o, dev);
        }
        Ok(())
    }

    fn dump(&self) -> QdiscOpts {
        let o = FifoOpts {
            limit: Some(self.limit),
        };
        match self.kind {
            FifoKind::Packets => QdiscOpts::Pfifo(o),
            FifoKind::Bytes => QdiscOpts::Bfifo(o),
            FifoKind::HeadDrop => QdiscOpts::PfifoHeadDrop(o),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::packet::Skb;
    use crate::qdisc::QdiscNode;
    use crate::time::Time;

    fn node(kind: FifoKind, limit: u32) -> QdiscNode {
        let q = Fifo::new(kind, &FifoOpts { limit: Some(limit) }, &DevInfo::default()).unwrap();
        QdiscNode::new(Handle::new(1, 0), Handle::ROOT, Box::new(q))
    }

    fn pkt(id: u64, len: u32) -> Packet {
        Packet::from(Skb {
            id,
            len,
            ..Default::default()
        })
    }

    #[test]
    fn pfifo_tail_drops_beyond_limit_and_keeps_order() {
        let mut n = node(FifoKind::Packets, 3);
        let mut cx = Cx::new(Time(0));
        for i in 0..5 {
            let r = n.enqueue(pkt(i, 100), &mut cx);
            assert_eq!(r.is_ok(), i < 3);
        }
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (3, 300, 2));
        let ids: Vec<u64> = std::iter::from_fn(|| match n.dequeue(&mut cx) {
            Dequeue::Packet(p) => Some(p.id),
            _ => None,
        })
        .collect();
        assert_eq!(ids, vec![0, 1, 2]);
        let s = n.stats();
        assert_eq!((s.packets, s.bytes, s.qlen, s.backlog), (3, 300, 0, 0));
    }

    #[test]
    fn bfifo_counts_bytes() {
        let mut n = node(FifoKind::Bytes, 1000);
        let mut cx = Cx::new(Time(0));
        assert!(n.enqueue(pkt(0, 600), &mut cx).is_ok());
        assert!(n.enqueue(pkt(1, 401), &mut cx).is_err());
        assert!(n.enqueue(pkt(2, 400), &mut cx).is_ok());
        assert_eq!(n.stats().backlog, 1000);
    }

    #[test]
    fn head_drop_keeps_the_newest() {
        let mut n = node(FifoKind::HeadDrop, 2);
        let mut cx = Cx::new(Time(0));
        for i in 0..4 {
            assert!(n.enqueue(pkt(i, 10), &mut cx).is_ok());
        }
        let s = n.stats();
        assert_eq!((s.qlen, s.drops, s.backlog), (2, 2, 20));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 2));
    }

    #[test]
    fn default_limits_come_from_the_device() {
        let dev = DevInfo {
            txqueuelen: 100,
            mtu: 1500,
            ..Default::default()
        };
        let p = Fifo::new(FifoKind::Packets, &FifoOpts::default(), &dev).unwrap();
        assert_eq!(p.dump(), QdiscOpts::Pfifo(FifoOpts { limit: Some(100) }));
        let b = Fifo::new(FifoKind::Bytes, &FifoOpts::default(), &dev).unwrap();
        assert_eq!(
            b.dump(),
            QdiscOpts::Bfifo(FifoOpts {
                limit: Some(151_400)
            })
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// A fifo's node answers `Empty` itself when it counts no
            /// packet, and reads the head in place for `peek_len`: what it
            /// hands out, when, and its counters are those of the fifo
            /// asked directly every time.
            #[test]
            fn a_fifo_node_agrees_with_its_fifo(
                kind in prop_oneof![Just(FifoKind::Packets), Just(FifoKind::Bytes), Just(FifoKind::HeadDrop)],
                ops in proptest::collection::vec((0u8..4, 1u32..700), 0..200),
            ) {
                let limit = if kind == FifoKind::Bytes { 2000 } else { 4 };
                let mut n = node(kind, limit);
                let mut model = Fifo::new(kind, &FifoOpts { limit: Some(limit) }, &DevInfo::default()).unwrap();
                let mut cx = Cx::new(Time(0));
                let mut mcx = Cx::new(Time(0));
                let (mut queued, mut id) = (0u32, 0u64);
                for (op, len) in ops {
                    match op {
                        0 | 1 => {
                            id += 1;
                            let shed = mcx.drops.len();
                            let want = model.enqueue(pkt(id, len), &mut mcx).is_ok();
                            queued = queued + want as u32 - (mcx.drops.len() - shed) as u32;
                            prop_assert_eq!(n.enqueue(pkt(id, len), &mut cx).is_ok(), want);
                        }
                        2 => {
                            let want = match model.dequeue(&mut mcx) {
                                Dequeue::Packet(p) => { queued -= 1; Some(p.id) }
                                _ => None,
                            };
                            let got = match n.dequeue(&mut cx) {
                                Dequeue::Packet(p) => Some(p.id),
                                Dequeue::Empty => None,
                                Dequeue::Wait(_) => panic!("a fifo never waits"),
                            };
                            prop_assert_eq!(got, want);
                        }
                        // pfifo_head_drop is peeked by dequeueing (out of
                        // its queue), which changes which packet it drops.
                        _ if kind == FifoKind::HeadDrop => {}
                        _ => {
                            let want = model.queue.front().map(|p| p.len);
                            prop_assert_eq!(n.peek_len(&mut cx), want);
                        }
                    }
                    prop_assert_eq!(n.stats().qlen, queued);
                }
            }
        }
    }
}
